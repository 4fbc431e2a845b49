/**
 * The service under abuse, through real sockets on 127.0.0.1: slow and oversized bodies, a
 * flood past the GPU bound, a client that leaves during the shared index build, values that
 * overflow float32, a sticky GPU error, and shutdown with requests in flight. No GPU: the GPU
 * work is a fake (`runTask`, `createSearchIndex`) that takes time and honours its signal.
 */
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TaskOptions } from '@cuda-tasks/task-runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { estimatedGpuBytes } from './request-policy.js';
import {
  createServer,
  DEFAULT_GPU_MEMORY_BUDGET,
  type GpuHealth,
  type GpuService,
  type SearchBackend,
  type ServerOptions,
} from './server.js';

const USABLE: GpuHealth = { usable: true, devices: 1 };

/** Rejects with the signal's reason once it aborts (as `task()` does). */
function untilAborted(signal: AbortSignal | undefined): Promise<never> {
  return new Promise((_, reject) => {
    if (signal === undefined) return;
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

/**
 * A stand-in for the GPU: each task "runs" for `ms`, records how many run at once, honours its
 * signal like `task()`, and answers `{ ran: name }`, or with `callWork` what the work answers
 * (the search route's work calls only the index, a stand-in too).
 */
function fakeGpu(ms: number, callWork = false, hold?: Promise<void>) {
  const state = { running: 0, most: 0, started: 0 };
  const runTask = async (work: () => Promise<unknown>, options: TaskOptions) => {
    if (options.signal?.aborted) throw options.signal.reason;
    state.running++;
    state.started++;
    state.most = Math.max(state.most, state.running);
    try {
      await Promise.race([hold ?? sleep(ms), untilAborted(options.signal)]);
      if (callWork) return await Promise.race([work(), untilAborted(options.signal)]);
      return { ran: options.name };
    } finally {
      state.running--;
    }
  };
  return { state, runTask };
}

const services: GpuService[] = [];

async function start(options: ServerOptions): Promise<{ service: GpuService; port: number }> {
  const service = createServer({ checkGpu: () => USABLE, onServerError: () => {}, ...options });
  services.push(service);
  await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
  const address = service.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { service, port: address.port };
}

afterEach(async () => {
  for (const service of services.splice(0)) {
    await service.shutdown({ graceMs: 0 });
  }
});

/** What a raw socket got back: the bytes, and when (ms after it connected) it ended. */
interface RawAnswer {
  text: string;
  status: number;
  headers: Record<string, string>;
  endedAfterMs: number | undefined;
}

/**
 * Sends `head` (and `body`, if any) on a raw socket, then stalls; collects what comes back
 * until the server closes the connection or `waitMs` pass.
 */
function rawExchange(
  port: number,
  head: string,
  body: string,
  waitMs: number,
  onSocket?: (socket: Socket) => void,
): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = connect(port, '127.0.0.1');
    let text = '';
    let endedAfterMs: number | undefined;
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      const [statusLine = '', ...lines] = text.split('\r\n\r\n')[0]!.split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ text, status: Number(statusLine.split(' ')[1] ?? 0), headers, endedAfterMs });
    };
    const timer = setTimeout(finish, waitMs);
    socket.on('data', (chunk) => {
      text += chunk.toString('latin1');
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      endedAfterMs = performance.now() - started;
      finish();
    });
    socket.write(head + body);
    onSocket?.(socket);
  });
}

function postHead(path: string, contentLength: number): string {
  return `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${contentLength}\r\n\r\n`;
}

async function post(port: number, path: string, body: unknown) {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    body: (await response.json()) as any,
  };
}

describe('a body that stalls, or is too large, holds nothing for long', () => {
  it('headers and half a body, then a stall: 503 at the route deadline, the connection closed, no bytes held', async () => {
    const { service, port } = await start({ deadlinesMs: { '/solve': 200 } });
    const answer = await rawExchange(port, postHead('/solve', 1000), '{"n": 2, "a": [', 3000);
    expect(answer.status).toBe(503);
    expect(answer.text).toContain('POST /solve ran past its deadline of 200 ms');
    expect(answer.endedAfterMs).toBeDefined();
    expect(answer.endedAfterMs!).toBeGreaterThanOrEqual(190);
    expect(answer.endedAfterMs!).toBeLessThan(1500);
    expect(service.statistics().bufferedBodyBytes).toBe(0);
  });

  it('a route without a deadline: the body timeout answers 408 and closes the connection', async () => {
    const { service, port } = await start({
      deadlinesMs: { '/solve': Number.POSITIVE_INFINITY },
      bodyTimeoutMs: 150,
    });
    const answer = await rawExchange(port, postHead('/solve', 1000), '{"n": 2', 3000);
    expect(answer.status).toBe(408);
    expect(answer.text).toContain('the request body did not arrive within 150 ms');
    expect(answer.endedAfterMs!).toBeLessThan(1500);
    expect(service.statistics().bufferedBodyBytes).toBe(0);
  });

  it('bodies buffered across requests are bounded by the bytes received: past the budget, 503 with Retry-After', async () => {
    const { service, port } = await start({
      maxBodyBytes: 800,
      maxBufferedBodyBytes: 1000,
      deadlinesMs: { '/solve': 1000 },
    });
    // The first sends 600 of its 700 bytes, then stalls: those 600 stay counted while it is read.
    const first = rawExchange(port, postHead('/solve', 700), `{"n": ${' '.repeat(594)}`, 3000);
    await sleep(100);
    expect(service.statistics().bufferedBodyBytes).toBe(600);
    const second = await rawExchange(port, postHead('/solve', 600), ' '.repeat(600), 3000);
    expect(second.status).toBe(503);
    expect(second.headers['retry-after']).toBe('1');
    expect(second.text).toMatch(/request bodies being read/);
    expect((await first).status).toBe(503); // its deadline
    expect(service.statistics().bufferedBodyBytes).toBe(0);
  });

  it('a declared Content-Length holds no budget: 4 bodies declaring 64 MiB with 1 byte sent leave room for a 12-byte POST', async () => {
    const fake = fakeGpu(0);
    const { service, port } = await start({
      runTask: fake.runTask,
      deadlinesMs: { '/solve': Number.POSITIVE_INFINITY },
    });
    const hogs = Array.from({ length: 4 }, () =>
      rawExchange(port, postHead('/solve', 64 * 2 ** 20), '[', 1500),
    );
    await sleep(150);
    expect(service.statistics().bufferedBodyBytes).toBe(4);
    const small = await post(port, '/solve-random', { n: 8, seed: 1 });
    expect(small.status).toBe(200);
    expect(small.body).toEqual({ ran: 'POST /solve-random' });
    await Promise.all(hogs);
  });

  it('a body that trickles in below the minimum rate: 408 after the first second of grace, connection closed', async () => {
    const { service, port } = await start({
      deadlinesMs: { '/solve': Number.POSITIVE_INFINITY },
      bodyTimeoutMs: 30_000,
      bodyRateGraceMs: 200,
    });
    let trickle: ReturnType<typeof setInterval> | undefined;
    const answer = await rawExchange(port, postHead('/solve', 100_000), '{', 5000, (socket) => {
      trickle = setInterval(() => socket.write(' '.repeat(10)), 50);
    });
    clearInterval(trickle);
    expect(answer.status).toBe(408);
    expect(answer.text).toMatch(/arrived at \d+ bytes\/s, below the minimum of 65536/);
    expect(answer.headers.connection).toBe('close');
    expect(answer.endedAfterMs!).toBeGreaterThanOrEqual(1100);
    expect(answer.endedAfterMs!).toBeLessThan(2500);
    expect(service.statistics().bufferedBodyBytes).toBe(0);
  }, 10_000);

  it('a body at a steady rate above the minimum is read to its end', async () => {
    const fake = fakeGpu(0);
    const { port } = await start({ runTask: fake.runTask, bodyRateGraceMs: 100 });
    const body = JSON.stringify({ n: 8, seed: 3 }).padEnd(300_000, ' ');
    let sent = 0;
    let pump: ReturnType<typeof setInterval> | undefined;
    const answer = await rawExchange(
      port,
      postHead('/solve-random', body.length),
      '',
      2500,
      (socket) => {
        // 20 KB every 100 ms: 200 KB/s, for 1.5 s.
        pump = setInterval(() => {
          socket.write(body.slice(sent, sent + 20_000));
          sent += 20_000;
          if (sent >= body.length) clearInterval(pump);
        }, 100);
      },
    );
    clearInterval(pump);
    expect(answer.status).toBe(200);
    expect(answer.text).toContain('"ran":"POST /solve-random"');
  }, 10_000);

  it('a chunked body past the size cap: 413 and the connection closed', async () => {
    const { port } = await start({ maxBodyBytes: 100 });
    const head =
      'POST /solve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
    const chunk = `c8\r\n${'x'.repeat(200)}\r\n`;
    const answer = await rawExchange(port, head, chunk, 3000);
    expect(answer.status).toBe(413);
    expect(answer.headers.connection).toBe('close');
    expect(answer.endedAfterMs!).toBeLessThan(1500);
  });

  it('bounds the connections and the time for headers', async () => {
    const { service, port } = await start({ maxConnections: 64 });
    expect(service.maxConnections).toBe(64);
    // Only a body left unread closes the connection: a GET and a body read to its end keep it.
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    expect(health.headers.get('connection')).toBe('keep-alive');
    const bad = await fetch(`http://127.0.0.1:${port}/solve`, { method: 'POST', body: '{}' });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('connection')).toBe('keep-alive');
    expect(service.headersTimeout).toBeLessThanOrEqual(10_000);
    expect(service.requestTimeout).toBeLessThanOrEqual(60_000);
    expect(service.keepAliveTimeout).toBeLessThanOrEqual(5_000);
  });
});

/** A promise the test lets go of. */
function held() {
  let letGo = () => {};
  const promise = new Promise<void>((resolve) => {
    letGo = resolve;
  });
  return { promise, letGo };
}

/**
 * Sends `count` requests at once; lets the held GPU work go once all of them arrived (answered,
 * or being read, waiting or running), so what runs and what waits does not depend on how fast
 * the requests come in; resolves with every answer.
 */
async function floodOf<T>(
  service: GpuService,
  hold: { letGo: () => void },
  count: number,
  send: (i: number) => Promise<T>,
): Promise<T[]> {
  let answered = 0;
  const pending = Array.from({ length: count }, (_, i) => send(i).finally(() => answered++));
  const started = performance.now();
  while (answered + service.statistics().inFlight < count && performance.now() - started < 15_000) {
    await sleep(10);
  }
  hold.letGo();
  return Promise.all(pending);
}

describe('every GPU route has a bound on its GPU work in flight', () => {
  it('a flood of /solve-random {"n":2048} past the default bound: some 503 with Retry-After, none 500, the rest run', async () => {
    const hold = held();
    const fake = fakeGpu(0, false, hold.promise);
    const { service, port } = await start({ runTask: fake.runTask });
    const each = estimatedGpuBytes('/solve-random', { n: 2048, seed: 0 });
    const flood = 500;
    const answers = await floodOf(service, hold, flood, (seed) =>
      post(port, '/solve-random', { n: 2048, seed }),
    );
    const byStatus = new Map<number, number>();
    for (const answer of answers)
      byStatus.set(answer.status, (byStatus.get(answer.status) ?? 0) + 1);
    console.log(
      `flood of ${flood}: ${JSON.stringify(Object.fromEntries(byStatus))}, at most ${fake.state.most} at once (${(each / 2 ** 20).toFixed(0)} MiB each, budget ${(DEFAULT_GPU_MEMORY_BUDGET / 2 ** 30).toFixed(0)} GiB)`,
    );
    expect(byStatus.get(500)).toBeUndefined();
    expect(byStatus.get(503)).toBeGreaterThan(0);
    expect(byStatus.get(200)).toBeGreaterThan(0);
    expect((byStatus.get(200) ?? 0) + (byStatus.get(503) ?? 0)).toBe(flood);
    expect(fake.state.most * each).toBeLessThanOrEqual(DEFAULT_GPU_MEMORY_BUDGET);
    for (const answer of answers.filter((a) => a.status === 503)) {
      expect(answer.retryAfter).toBe('1');
      expect(answer.body.error).toMatch(/^POST \/solve-random: the service is busy/);
    }
    expect(service.statistics().gpuBytesInFlight).toBe(0);
  }, 20_000);

  it('a small budget: at most what fits runs at once, a short line waits, the rest get 503 at once', async () => {
    const hold = held();
    const fake = fakeGpu(0, false, hold.promise);
    const each = estimatedGpuBytes('/solve-random', { n: 2048, seed: 0 });
    const { service, port } = await start({
      runTask: fake.runTask,
      gpuMemoryBudget: 3 * each,
      maxWaiting: 4,
      maxWaitMs: 10_000,
    });
    const started = performance.now();
    const answers = await floodOf(service, hold, 20, (seed) =>
      post(port, '/solve-random', { n: 2048, seed }),
    );
    const statuses = answers.map((answer) => answer.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(7); // 3 running + 4 in line
    expect(statuses.filter((s) => s === 503)).toHaveLength(13);
    expect(fake.state.most).toBe(3);
    expect(performance.now() - started).toBeLessThan(3000);
  });

  it('a request waits in line no longer than maxWaitMs', async () => {
    const fake = fakeGpu(1000);
    const each = estimatedGpuBytes('/solve-random', { n: 1024, seed: 0 });
    const { port } = await start({ runTask: fake.runTask, gpuMemoryBudget: each, maxWaitMs: 100 });
    const [first, second] = await Promise.all([
      post(port, '/solve-random', { n: 1024, seed: 1 }),
      sleep(20).then(() => post(port, '/solve-random', { n: 1024, seed: 2 })),
    ]);
    expect(first.status).toBe(200);
    expect(second.status).toBe(503);
    expect(second.retryAfter).toBe('1');
    expect(second.body.error).toMatch(/waited 100 ms/);
  });

  it('estimates the GPU bytes of each route from its sizes', () => {
    const n = 2048;
    // A, its LU copy, b, x and the residual in float64.
    expect(estimatedGpuBytes('/solve-random', { n, seed: 0 })).toBeGreaterThanOrEqual(
      8 * (2 * n * n + 3 * n),
    );
    expect(estimatedGpuBytes('/matmul', { m: 10, k: 20, n: 30 })).toBeGreaterThanOrEqual(
      8 * (10 * 20 + 20 * 30 + 10 * 30),
    );
    expect(estimatedGpuBytes('/search', { k: 10 }, { rows: 1_000_000 })).toBeGreaterThanOrEqual(
      4 * 1_000_000,
    );
  });
});

/** A fake index: a slow build, counted; a search answers the query's sum as its score. */
function fakeIndex(buildMs: number, failures = 0) {
  const state = { builds: 0, disposed: 0 };
  const createSearchIndex = async ({ rows }: { rows: number; dim: number }) => {
    state.builds++;
    await sleep(buildMs);
    if (state.builds <= failures) throw new Error('the build failed');
    const backend: SearchBackend = {
      async search(query, k) {
        const score = query.reduce((sum, value) => sum + value, 0);
        return {
          indices: Array.from({ length: Math.min(k, rows) }, (_, i) => i),
          scores: Array.from({ length: Math.min(k, rows) }, () => score),
        };
      },
      dispose() {
        state.disposed++;
      },
    };
    return backend;
  };
  return { state, createSearchIndex };
}

describe('the shared search index is built outside any one request', () => {
  it('the first client leaves during the build: the others still get 200, one build', async () => {
    const index = fakeIndex(300);
    const { port } = await start({
      runTask: fakeGpu(0, true).runTask,
      createSearchIndex: index.createSearchIndex,
      search: { rows: 10, dim: 4 },
    });
    const body = JSON.stringify({ query: [1, 2, 3, 4], k: 3 });
    // The first asks, then leaves while the index is being built.
    const leaving = rawExchange(port, postHead('/search', body.length), body, 100);
    await sleep(30);
    const others = await Promise.all([
      post(port, '/search', { query: [1, 2, 3, 4], k: 3 }),
      post(port, '/search', { query: [0.5, 0, 0, 0], k: 2 }),
    ]);
    expect((await leaving).status).toBe(0); // it left before any answer
    expect(others.map((answer) => answer.status)).toEqual([200, 200]);
    expect(others[0]!.body).toEqual({ indices: [0, 1, 2], scores: [10, 10, 10] });
    expect(others[1]!.body).toEqual({ indices: [0, 1], scores: [0.5, 0.5] });
    expect(index.state.builds).toBe(1);
  });

  it('a failed build is not kept: the next request builds again', async () => {
    const index = fakeIndex(20, 1);
    const { port } = await start({
      runTask: fakeGpu(0, true).runTask,
      createSearchIndex: index.createSearchIndex,
      search: { rows: 10, dim: 2 },
    });
    const failed = await post(port, '/search', { query: [1, 1], k: 1 });
    expect(failed.status).toBe(500);
    const retried = await post(port, '/search', { query: [1, 1], k: 1 });
    expect(retried).toMatchObject({ status: 200, body: { indices: [0], scores: [2] } });
    expect(index.state.builds).toBe(2);
  });
});

describe('float32 inputs are finite in float32', () => {
  it('a query value that overflows float32 (1e39) is a 400, before any GPU work', async () => {
    const fake = fakeGpu(0, true);
    const index = fakeIndex(0);
    const { port } = await start({
      runTask: fake.runTask,
      createSearchIndex: index.createSearchIndex,
      search: { rows: 10, dim: 2 },
    });
    const answer = await post(port, '/search', '{"query": [1, 1e39], "k": 1}');
    expect(answer.status).toBe(400);
    expect(answer.body.error).toBe(
      'POST /search: "query"[1] = 1e+39 is outside the float32 range (magnitude at most 3.4028234663852886e+38)',
    );
    expect(index.state.builds).toBe(0);
    expect(fake.state.started).toBe(0);
  });

  it('scores that overflow float32 on the GPU are a 422, never null', async () => {
    const { port } = await start({
      runTask: fakeGpu(0, true).runTask,
      createSearchIndex: async () => ({
        search: async () => ({ indices: [0], scores: [Number.POSITIVE_INFINITY] }),
        dispose() {},
      }),
      search: { rows: 10, dim: 2 },
    });
    const answer = await post(port, '/search', { query: [3e38, 3e38], k: 1 });
    expect(answer.status).toBe(422);
    expect(answer.body.error).toMatch(/scores\[0\] is not finite/);
  });
});

describe('a sticky GPU error', () => {
  it('GPU routes answer 503 without running, /health answers 503', async () => {
    const fake = fakeGpu(0);
    const reason =
      'the CUDA context is unusable since CUDA_ERROR_ILLEGAL_ADDRESS in cuStreamSynchronize; the service must restart';
    const { port } = await start({
      runTask: fake.runTask,
      checkGpu: () => ({ usable: false, reason }),
    });
    for (const [path, body] of [
      ['/solve-random', { n: 8, seed: 1 }],
      ['/solve', { n: 1, a: [2], b: [1] }],
      ['/matmul', { m: 1, k: 1, n: 1, a: [1], b: [1] }],
    ] as const) {
      const answer = await post(port, path, body);
      expect(answer.status).toBe(503);
      expect(answer.body.error).toBe(`the GPU is not usable: ${reason}`);
    }
    expect(fake.state.started).toBe(0);
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    expect(health.status).toBe(503);
    expect(await health.json()).toEqual({ status: 'unavailable', gpu: { usable: false, reason } });
  });
});

describe('shutdown', () => {
  it('answers the requests in flight that finish within the grace, then stops', async () => {
    const fake = fakeGpu(300);
    const { service, port } = await start({ runTask: fake.runTask });
    const inFlight = Array.from({ length: 5 }, (_, seed) =>
      post(port, '/solve-random', { n: 8, seed }),
    );
    await sleep(100);
    const report = await service.shutdown({ graceMs: 2000 });
    expect((await Promise.all(inFlight)).map((answer) => answer.status)).toEqual([
      200, 200, 200, 200, 200,
    ]);
    expect(report).toMatchObject({ inFlight: 5, cancelled: 0, unanswered: 0 });
    expect(service.listening).toBe(false);
    await expect(post(port, '/solve-random', { n: 8, seed: 9 })).rejects.toThrow();
  });

  it('requests that reach the server as shutdown begins all get an answer: none dropped', async () => {
    const fake = fakeGpu(200);
    const { service, port } = await start({ runTask: fake.runTask });
    // 30 connections accepted (or in the backlog), whose requests are written just before
    // shutdown() begins: none parsed yet.
    const sockets = await Promise.all(
      Array.from(
        { length: 30 },
        () =>
          new Promise<Socket>((resolve, reject) => {
            const socket = connect(port, '127.0.0.1', () => resolve(socket));
            socket.once('error', reject);
          }),
      ),
    );
    const answers = sockets.map(
      (socket, seed) =>
        new Promise<RawAnswer>((resolve) => {
          let text = '';
          socket.on('data', (chunk) => {
            text += chunk.toString('latin1');
          });
          socket.on('error', () => {});
          socket.on('close', () => {
            const [statusLine = '', ...lines] = text.split('\r\n\r\n')[0]!.split('\r\n');
            const headers: Record<string, string> = {};
            for (const line of lines) {
              const colon = line.indexOf(':');
              if (colon > 0)
                headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
            }
            resolve({
              text,
              status: Number(statusLine.split(' ')[1] ?? 0),
              headers,
              endedAfterMs: 0,
            });
          });
          const body = JSON.stringify({ n: 8, seed });
          socket.write(postHead('/solve-random', body.length) + body);
        }),
    );
    const report = await service.shutdown({ graceMs: 3000 });
    const all = await Promise.all(answers);
    const statuses: Record<string, number> = {};
    for (const answer of all) statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
    console.log(`30 requests at shutdown: ${JSON.stringify(statuses)}; ${JSON.stringify(report)}`);
    for (const answer of all) {
      expect([200, 503]).toContain(answer.status);
      if (answer.status === 503) {
        expect(answer.headers.connection).toBe('close');
        expect(answer.headers['retry-after']).toBe('1');
        expect(answer.text).toMatch(/shutting down/);
      } else expect(answer.text).toContain('"ran":"POST /solve-random"');
    }
    expect(report.unanswered).toBe(0);
    expect(service.listening).toBe(false);
  }, 15_000);

  it('at shutdown an idle connection closes once quiet, one whose request is still arriving is answered', async () => {
    const { service, port } = await start({ runTask: fakeGpu(0).runTask });
    const open = () =>
      new Promise<Socket>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => resolve(socket));
        socket.once('error', reject);
      });
    const [idle, trickling] = await Promise.all([open(), open()]);
    const closedAt = (socket: Socket) =>
      new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now())));
    let answer = '';
    trickling.on('data', (chunk) => {
      answer += chunk.toString('latin1');
    });
    trickling.on('error', () => {}); // a write after the server closed it (when it wrongly does)
    idle.resume(); // reads, so that it sees the server's end
    const idleClosed = closedAt(idle);
    const tricklingClosed = closedAt(trickling);
    const started = performance.now();
    const closing = service.shutdown({ graceMs: 6000, drainMs: 200 });
    // A request's head, 37 bytes, one every 40 ms (about 1.5 s): never quiet for 200 ms.
    const head = 'GET /health HTTP/1.1\r\nHost: 127.0.0.1';
    for (const byte of head) {
      if (trickling.destroyed) break;
      trickling.write(byte);
      await sleep(40);
    }
    if (!trickling.destroyed) trickling.write('\r\n\r\n');
    const [idleAt, tricklingAt] = await Promise.all([idleClosed, tricklingClosed]);
    await closing;
    // The one whose request kept arriving was answered; the idle one (quiet since it opened)
    // went once the drain window ended, long before.
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(answer).toMatch(/shutting down/);
    expect(idleAt - started).toBeGreaterThanOrEqual(190);
    expect(idleAt - started).toBeLessThan(1000);
    expect(tricklingAt - started).toBeGreaterThan(1000);
  });

  it("leaves Node's HTTP parser on the sockets' native reads: no 'data' listener of its own", async () => {
    const { service, port } = await start({ runTask: fakeGpu(0).runTask });
    const sockets: Socket[] = [];
    service.on('connection', (socket: Socket) => sockets.push(socket));
    const answer = await post(port, '/solve-random', { n: 8, seed: 1 });
    expect(answer.status).toBe(200);
    expect(sockets.length).toBeGreaterThan(0);
    // A 'data' listener on a server socket unconsumes the parser: every chunk then goes through
    // JavaScript. Node's own listener (socketOnData, bound) is the only one.
    for (const socket of sockets) {
      const names = socket.listeners('data').map((listener) => listener.name);
      expect(names).toHaveLength(1);
      expect(names[0]).toMatch(/socketOnData$/);
    }
  });

  it('a request on a new connection during the drain window is answered 503 with connection: close', async () => {
    const { service, port } = await start({ runTask: fakeGpu(0).runTask });
    const closing = service.shutdown({ graceMs: 2000, drainMs: 300 });
    await sleep(50);
    const answer = await rawExchange(port, 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n', '', 2000);
    expect(answer.status).toBe(503);
    expect(answer.headers.connection).toBe('close');
    expect(answer.headers['retry-after']).toBe('1');
    expect(answer.endedAfterMs!).toBeLessThan(1000);
    const report = await closing;
    expect(report.elapsedMs).toBeGreaterThanOrEqual(290);
    expect(report.elapsedMs).toBeLessThan(1500);
  });

  it('an index build that ignores its signal does not hold shutdown past cancelMs', async () => {
    const { service, port } = await start({
      // A runner that ignores the signal, and a build that never ends.
      runTask: (work) => work(),
      createSearchIndex: () => new Promise<SearchBackend>(() => undefined),
      search: { rows: 10, dim: 2 },
    });
    const searching = post(port, '/search', { query: [1, 2], k: 1 });
    await sleep(100);
    const started = performance.now();
    const report = await service.shutdown({ graceMs: 200, cancelMs: 300 });
    expect(performance.now() - started).toBeLessThan(2000);
    expect(report).toMatchObject({ inFlight: 1, cancelled: 1, unanswered: 0 });
    expect((await searching).status).toBe(503);
  });

  it('cancels what runs past the grace: those requests answer 503', async () => {
    const fake = fakeGpu(60_000);
    const { service, port } = await start({ runTask: fake.runTask });
    const inFlight = Array.from({ length: 3 }, (_, seed) =>
      post(port, '/solve-random', { n: 8, seed }),
    );
    await sleep(100);
    const started = performance.now();
    const report = await service.shutdown({ graceMs: 200 });
    const answers = await Promise.all(inFlight);
    expect(performance.now() - started).toBeLessThan(1500);
    expect(answers.map((answer) => answer.status)).toEqual([503, 503, 503]);
    expect(answers[0]!.body.error).toMatch(/the service is shutting down/);
    expect(report).toMatchObject({ inFlight: 3, cancelled: 3, unanswered: 0 });
  });
});
