import { Agent, createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { fire, measure, type Request } from './load.js';
import { percentile } from './statistics.js';

// The load script's request loop (`fire`) and its per-mode measurement (`measure`) against a
// plain HTTP stub on loopback: no GPU, no service. The stub answers each request after the
// delay its body asks for (setTimeout: never early, so the observed latency is at least that),
// and records how many requests arrived and how many were in flight at once.

interface StubBody {
  delay?: number;
  hang?: boolean;
  status?: number;
  answer?: Record<string, unknown>;
}

const stub = { received: 0, inFlight: 0, maxInFlight: 0 };
let server: Server;
let url: URL;

beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      stub.received++;
      stub.inFlight++;
      stub.maxInFlight = Math.max(stub.maxInFlight, stub.inFlight);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as StubBody;
      if (body.hang) return; // never answers
      setTimeout(() => {
        stub.inFlight--;
        const text = JSON.stringify(body.answer ?? { ok: true });
        response.writeHead(body.status ?? 200, { 'content-type': 'application/json' });
        response.end(text);
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
  stub.inFlight = 0;
  stub.maxInFlight = 0;
});

/** A request for the stub: `body` is what the stub reads; the answer must be `{ ok: true }`. */
function stubRequest(body: StubBody): Request {
  return {
    path: '/stub',
    body: Buffer.from(JSON.stringify(body)),
    check: (answer) => (answer.ok === true ? undefined : `not ok: ${JSON.stringify(answer)}`),
  };
}

async function withAgent<T>(concurrency: number, body: (agent: Agent) => Promise<T>): Promise<T> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  try {
    return await body(agent);
  } finally {
    agent.destroy();
  }
}

describe('fire', () => {
  it('sends exactly `count` requests, at most `concurrency` at a time', async () => {
    const fired = await withAgent(3, (agent) =>
      fire(url, agent, [stubRequest({ delay: 20 })], 10, performance.now() + 60_000, 3),
    );
    expect(stub.received).toBe(10);
    expect(fired.issued).toBe(10);
    expect(fired.completed).toBe(10);
    expect(fired.errors).toBe(0);
    expect(fired.latencies).toHaveLength(10);
    for (const latency of fired.latencies) expect(latency).toBeGreaterThanOrEqual(20);
    expect(stub.maxInFlight).toBeLessThanOrEqual(3);
    expect(stub.maxInFlight).toBeGreaterThanOrEqual(2);
  });

  it('starts no request after the deadline', async () => {
    const start = performance.now();
    const fired = await withAgent(2, (agent) =>
      fire(url, agent, [stubRequest({ delay: 50 })], 1_000_000, start + 300, 2),
    );
    const elapsed = performance.now() - start;
    // The last requests start before 300 ms and take 50 ms: done well before 300 + 50 + slack.
    expect(elapsed).toBeGreaterThanOrEqual(300);
    expect(elapsed).toBeLessThan(300 + 50 + 400);
    // Two workers, 50 ms each: about 2 x 6 requests fit in 300 ms, far from the count limit.
    expect(fired.issued).toBeGreaterThanOrEqual(4);
    expect(fired.issued).toBeLessThanOrEqual(2 * (300 / 50 + 1));
    expect(stub.received).toBe(fired.issued);
    expect(fired.completed).toBe(fired.issued);
    expect(fired.errors).toBe(0);
  });

  it('gives up a request in flight `graceMs` after the deadline, as an error', async () => {
    const start = performance.now();
    const fired = await withAgent(1, (agent) =>
      fire(url, agent, [stubRequest({ hang: true })], 5, start + 200, 1, 100),
    );
    const elapsed = performance.now() - start;
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(2000);
    // The one request sent hung; it was cut at deadline + grace, and no other one started.
    expect(fired.issued).toBe(1);
    expect(fired.completed).toBe(0);
    expect(fired.errors).toBe(1);
    expect(fired.latencies).toEqual([]);
    expect(fired.messages[0]).toMatch(/^no answer within 0\.[23] s$/);
  });

  it('counts non-200 answers and wrong answers as errors, not as latencies', async () => {
    const problems = [
      stubRequest({}),
      stubRequest({ status: 500, answer: { error: 'boom' } }),
      stubRequest({ answer: { ok: false } }),
    ];
    const fired = await withAgent(1, (agent) =>
      fire(url, agent, problems, 6, performance.now() + 60_000, 1),
    );
    expect(fired.completed).toBe(6);
    expect(fired.errors).toBe(4);
    expect(fired.latencies).toHaveLength(2);
    expect(fired.messages).toEqual(['HTTP 500: boom', 'wrong answer: not ok: {"ok":false}']);
  });
});

describe('measure', () => {
  it('honours the request count, after `warmup` uncounted requests', async () => {
    const result = await measure('task', url, [stubRequest({ delay: 5 })], {
      requests: 12,
      seconds: 60,
      concurrency: 4,
      warmup: 3,
    });
    expect(stub.received).toBe(15);
    expect(result.mode).toBe('task');
    expect(result.completed).toBe(12);
    expect(result.errors).toBe(0);
  });

  it('honours the time limit, the warm-up included', async () => {
    const start = performance.now();
    const result = await measure(
      'shared',
      url,
      [stubRequest({ delay: 30 })],
      { requests: 1_000_000, seconds: 0.3, concurrency: 2, warmup: 1_000_000 },
      100,
    );
    const elapsed = performance.now() - start;
    // Warm-up <= 0.3 s + one request, measured batch the same: well under 2 x (0.3 + 0.1) s.
    expect(elapsed).toBeGreaterThanOrEqual(600);
    expect(elapsed).toBeLessThan(1500);
    expect(result.seconds).toBeGreaterThanOrEqual(0.3);
    expect(result.seconds).toBeLessThan(0.3 + 0.03 + 0.4);
    expect(result.completed).toBeGreaterThanOrEqual(4);
    expect(result.completed).toBeLessThanOrEqual(2 * (300 / 30 + 1));
    // The stub saw the warm-up requests too (their count is not in the result).
    expect(stub.received).toBeGreaterThan(result.completed);
  });

  it('computes throughput, p50, p99 and max from the latencies it observed', async () => {
    // One at a time, ten requests answered after 10, 20, ..., 100 ms.
    const delays = Array.from({ length: 10 }, (_, i) => 10 * (i + 1));
    const result = await measure(
      'task',
      url,
      delays.map((delay) => stubRequest({ delay })),
      { requests: 10, seconds: 60, concurrency: 1, warmup: 0 },
    );
    expect(result.completed).toBe(10);
    expect(result.errors).toBe(0);
    // Linear interpolation between ranks over [10 .. 100]: p50 = 55, p99 = 99.1; each observed
    // latency is its delay plus loopback overhead (a few ms, more on a loaded CI machine; 40 ms
    // still tells p50 from max and p99 from p50).
    const slack = 40;
    expect(percentile(delays, 50)).toBe(55);
    expect(result.p50).toBeGreaterThanOrEqual(55);
    expect(result.p50).toBeLessThan(55 + slack);
    expect(result.p99).toBeGreaterThanOrEqual(99.1);
    expect(result.p99).toBeLessThan(99.1 + slack);
    expect(result.max).toBeGreaterThanOrEqual(100);
    expect(result.max).toBeLessThan(100 + slack);
    expect(result.p99).toBeLessThanOrEqual(result.max);
    // Serial requests: the batch lasts at least the sum of the delays, 550 ms.
    expect(result.seconds).toBeGreaterThanOrEqual(0.55);
    expect(result.seconds).toBeLessThan(0.55 + 10 * (slack / 1000));
    expect(result.requestsPerSecond).toBeCloseTo(10 / result.seconds, 9);
    expect(result.requestsPerSecond).toBeLessThanOrEqual(10 / 0.55);
  });

  it('throws when every warm-up request fails', async () => {
    await expect(
      measure('task', url, [stubRequest({ status: 503, answer: { error: 'no GPU' } })], {
        requests: 5,
        seconds: 5,
        concurrency: 2,
        warmup: 4,
      }),
    ).rejects.toThrow('every warm-up request failed (task): HTTP 503: no GPU');
  });
});
