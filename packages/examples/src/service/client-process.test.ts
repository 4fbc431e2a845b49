import { Agent, createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { fireSchedule, makeSearchRequest, type Request } from './client.js';
import {
  type ClientMessage,
  type ClientOutcome,
  kindResult,
  requestsFor,
  runClient,
  type ScheduleResult,
} from './client-process.js';
import type { ModeResult } from './load.js';

// The load client's process split against a plain HTTP stub in this process (no GPU, no
// service): the client runs in a child process, reports progress while it runs and sends its
// result back; and the open-loop schedule it fires. The stub answers each request after the
// delay its body asks for and records the order in which it answered.

interface StubBody {
  delay?: number;
  name?: string;
  status?: number;
}

const stub = { received: 0, answered: [] as string[] };
let server: Server;
let url: URL;

beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      stub.received++;
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as StubBody;
      setTimeout(() => {
        if (body.name !== undefined) stub.answered.push(body.name);
        response.writeHead(body.status ?? 200, { 'content-type': 'application/json' });
        response.end(JSON.stringify(body.status ? { error: 'stub error' } : { ok: true }));
      }, body.delay ?? 0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
});

afterAll(async () => {
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
});

beforeEach(() => {
  stub.received = 0;
  stub.answered.length = 0;
});

describe('runClient: the load client in a child process', () => {
  it('runs a closed-loop job in another process, reports progress, and returns its result', async () => {
    const progress: Extract<ClientMessage, { type: 'progress' }>[] = [];
    const outcome: ClientOutcome<ModeResult> = await runClient<ModeResult>(
      {
        kind: 'closed',
        url: url.href,
        label: 'stub run',
        requests: { route: 'fixed', path: '/stub', bodies: [{ delay: 20 }] },
        options: { requests: 24, seconds: 60, concurrency: 3, warmup: 3 },
        progressMs: 40,
      },
      { onProgress: (message) => progress.push(message) },
    );
    // Another process sent the requests: its pid is not ours, and the stub saw them all.
    expect(outcome.pid).not.toBe(process.pid);
    expect(outcome.pid).toBeGreaterThan(0);
    expect(stub.received).toBe(27);
    expect(outcome.result.mode).toBe('stub run');
    expect(outcome.result.completed).toBe(24);
    expect(outcome.result.errors).toBe(0);
    expect(outcome.result.p50).toBeGreaterThanOrEqual(20);
    // Progress: the warm-up first, then the measured phase, counts that only grow.
    expect(progress[0]!.phase).toBe('warm-up');
    const measured = progress.filter((message) => message.phase === 'measured');
    expect(measured.length).toBeGreaterThanOrEqual(2);
    const answered = measured.map((message) => message.byKind.requests!.completed);
    for (let i = 1; i < answered.length; i++) {
      expect(answered[i]).toBeGreaterThanOrEqual(answered[i - 1]!);
    }
    expect(progress.every((message) => message.label === 'stub run')).toBe(true);
    // This process's loop delay, measured over the client's measured phase.
    expect(Number.isFinite(outcome.loopDelayMaxMs)).toBe(true);
    expect(outcome.loopDelayMaxMs).toBeGreaterThanOrEqual(0);
  }, 30_000);

  it('runs a schedule job and returns the latencies per kind', async () => {
    const outcome = await runClient<ScheduleResult>({
      kind: 'schedule',
      url: url.href,
      label: 'stub schedule',
      requests: {
        small: { route: 'fixed', path: '/stub', bodies: [{ delay: 5 }] },
        large: { route: 'fixed', path: '/stub', bodies: [{ delay: 60 }] },
      },
      arrivals: [
        { at: 0, kind: 'small' },
        { at: 10, kind: 'large' },
        { at: 20, kind: 'small' },
        { at: 40, kind: 'small' },
      ],
      warmup: 2,
    });
    expect(stub.received).toBe(4 + 2 * 2); // the schedule, and 2 warm-up requests of each kind
    const { small, large } = outcome.result.byKind;
    expect(small).toMatchObject({ issued: 3, completed: 3, errors: 0, count: 3 });
    expect(large).toMatchObject({ issued: 1, completed: 1, errors: 0, count: 1 });
    expect(small!.p50).toBeGreaterThanOrEqual(5);
    expect(large!.max).toBeGreaterThanOrEqual(60);
    expect(outcome.pid).not.toBe(process.pid);
  }, 30_000);

  it("rejects with the client's error", async () => {
    await expect(
      runClient({
        kind: 'closed',
        url: url.href,
        label: 'failing',
        requests: { route: 'fixed', path: '/stub', bodies: [{ status: 503 }] },
        options: { requests: 5, seconds: 5, concurrency: 2, warmup: 2 },
      }),
    ).rejects.toThrow('every warm-up request failed (failing): HTTP 503: stub error');
  }, 30_000);
});

describe('fireSchedule: an open loop', () => {
  const named = (name: string, delay: number): Request => ({
    path: '/stub',
    body: Buffer.from(JSON.stringify({ name, delay })),
    check: (answer) => (answer.ok === true ? undefined : 'not ok'),
  });

  it('sends each request at its time, whatever is still in flight', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    try {
      const fired = await fireSchedule(url, agent, [
        { at: 0, kind: 'slow', request: named('slow', 400) },
        { at: 50, kind: 'fast', request: named('fast', 0) },
      ]);
      // The fast request went out at 50 ms, while the slow one was in flight, and came back first.
      expect(stub.answered).toEqual(['fast', 'slow']);
      expect(fired.byKind.fast!.latencies[0]!).toBeLessThan(400);
      expect(fired.byKind.slow!.latencies[0]!).toBeGreaterThanOrEqual(400);
      expect(fired.seconds).toBeGreaterThanOrEqual(0.4);
    } finally {
      agent.destroy();
    }
  });

  it('counts an arrival beyond the in-flight bound as an error, not sent', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    try {
      const fired = await fireSchedule(
        url,
        agent,
        [0, 1, 2].map((at) => ({ at, kind: 'x', request: named(`r${at}`, 100) })),
        { maxInFlight: 2 },
      );
      expect(stub.received).toBe(2);
      expect(kindResult(fired.byKind.x!)).toMatchObject({
        issued: 3,
        completed: 2,
        errors: 1,
        count: 2,
        messages: ['not sent: 2 requests were in flight'],
      });
    } finally {
      agent.destroy();
    }
  });
});

describe('requestsFor', () => {
  it('makes the requests of each spec, cycling seeds and queries', () => {
    const solve = requestsFor({ route: 'solve', n: 4, problems: 3, seed: 1 });
    expect(solve.map((request) => request.path)).toEqual(['/solve', '/solve', '/solve']);
    const random = requestsFor({ route: 'solve-random', n: 8, problems: 2, seed: 3 });
    expect(random.map((request) => JSON.parse(request.body.toString()))).toEqual([
      { n: 8, seed: 3000 },
      { n: 8, seed: 3001 },
    ]);
    const search = requestsFor({ route: 'search', dim: 4, rows: 10, k: 2, queries: 2, seed: 1 });
    const bodies = search.map((request) => JSON.parse(request.body.toString()));
    expect(bodies[0].query).toHaveLength(4);
    expect(bodies[0].k).toBe(2);
    expect(bodies[0].query).not.toEqual(bodies[1].query);
    const fixed = requestsFor({ route: 'fixed', path: '/x', bodies: [{ a: 1 }] });
    expect(fixed[0]!.body.toString()).toBe('{"a":1}');
    expect(fixed[0]!.check({}, 0)).toBeUndefined();
  });
});

describe('makeSearchRequest', () => {
  const request = makeSearchRequest(3, 100, 3, 5);

  it('sends a query of dim float32 values in [-1, 1) and k', () => {
    const body = JSON.parse(request.body.toString()) as { query: number[]; k: number };
    expect(body.k).toBe(3);
    expect(body.query).toHaveLength(3);
    for (const value of body.query) {
      expect(Math.fround(value)).toBe(value);
      expect(value).toBeGreaterThanOrEqual(-1);
      expect(value).toBeLessThan(1);
    }
  });

  it('accepts k distinct rows best first, and the same rows every time, scores to float32 rounding', () => {
    const fresh = makeSearchRequest(3, 100, 3, 6);
    expect(fresh.check({ indices: [7, 3, 99], scores: [2, 1.5, 1.5] }, 0)).toBeUndefined();
    expect(fresh.check({ indices: [7, 3, 99], scores: [2, 1.5, 1.5] }, 1)).toBeUndefined();
    // Rounding: a tie may come in the other order, a score may move in its last bits.
    expect(fresh.check({ indices: [7, 99, 3], scores: [2.0000001, 1.5, 1.5] }, 1)).toBeUndefined();
    expect(fresh.check({ indices: [7, 3, 98], scores: [2, 1.5, 1.5] }, 2)).toMatch(
      /a different answer than the first time/,
    );
    expect(fresh.check({ indices: [7, 3, 99], scores: [2, 1.5, 1.49] }, 3)).toMatch(
      /a different answer than the first time/,
    );
  });

  it('rejects wrong answers', () => {
    const check = (answer: Record<string, unknown>) =>
      makeSearchRequest(3, 100, 3, 7).check(answer, 0);
    expect(check({ indices: [1, 2], scores: [3, 2] })).toMatch(/expected 3 results/);
    expect(check({ indices: [1, 2, 2], scores: [3, 2, 1] })).toMatch(/not a new row number/);
    expect(check({ indices: [1, 2, 100], scores: [3, 2, 1] })).toMatch(/0\.\.99/);
    expect(check({ indices: [1, 2, 3], scores: [3, 2, 2.5] })).toMatch(/not best first at 2/);
    expect(check({ indices: [1, 2, 3], scores: [3, null, 1] })).toMatch(/score 1 is not finite/);
    expect(check({ error: 'x' })).toMatch(/expected indices and scores/);
  });
});
