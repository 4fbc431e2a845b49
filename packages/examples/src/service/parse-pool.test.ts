/**
 * The body parse pool with real worker threads: the same results and the same refusals as
 * `parseRequestBody` inline, hostile bodies parsed without holding the event loop, timeouts
 * and crashed workers replaced, and no worker left to keep a process alive.
 */
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultParseWorkers, ParsePool } from './parse-pool.js';
import { serviceExecArgv } from './spawn-service.js';
import {
  type BodyContext,
  type BodyRoute,
  DEFAULT_LIMITS,
  type ParsedBody,
  parseRequestBody,
  RequestError,
} from './validation.js';

const context: BodyContext = {
  limits: { ...DEFAULT_LIMITS, maxDimension: 6 },
  searchDim: 3,
  searchRows: 10,
};

const pools: ParsePool[] = [];
function pool(options: ConstructorParameters<typeof ParsePool>[0]): ParsePool {
  const made = new ParsePool(options);
  pools.push(made);
  return made;
}
afterEach(async () => {
  for (const made of pools.splice(0)) await made.close();
});

/** What parsing gives: the value, or the refusal's status and message. */
type Outcome = { value: ParsedBody } | { status: number; message: string };

function inline(path: BodyRoute, text: string): Outcome {
  try {
    return { value: parseRequestBody(path, Buffer.from(text), context) };
  } catch (error) {
    expect(error).toBeInstanceOf(RequestError);
    const refusal = error as RequestError;
    return { status: refusal.status, message: refusal.message };
  }
}

async function pooled(
  parser: ParsePool,
  path: BodyRoute,
  body: Uint8Array | Uint8Array[],
): Promise<Outcome> {
  try {
    return { value: await parser.parse(path, body, context) };
  } catch (error) {
    expect(error).toBeInstanceOf(RequestError);
    const refusal = error as RequestError;
    return { status: refusal.status, message: refusal.message };
  }
}

/** `text`'s bytes cut at `cuts` into segments that each own their ArrayBuffer. */
function segments(text: string, cuts: number[]): Uint8Array[] {
  const bytes = Buffer.from(text);
  const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
  const parts: Uint8Array[] = [];
  let start = 0;
  for (const point of [...points, bytes.length]) {
    if (point <= start) continue;
    parts.push(new Uint8Array(bytes.subarray(start, point)));
    start = point;
  }
  return parts.length > 0 ? parts : [new Uint8Array(0)];
}

const finite = fc.double({ noNaN: true, noDefaultInfinity: true });
const element = fc.oneof(
  { weight: 6, arbitrary: finite },
  { weight: 1, arbitrary: fc.string({ maxLength: 30 }) },
  { weight: 1, arbitrary: fc.constantFrom(null, true, [1], { x: 1 }) },
);
const field = fc.oneof(
  fc.integer({ min: -1, max: 7 }),
  finite,
  fc.string({ maxLength: 30 }),
  fc.constant(null),
  fc.array(element, { maxLength: 40 }),
  fc.array(finite, { maxLength: 40 }),
);
/** Bodies near every route's shape: valid ones and every kind of wrong field. */
const bodyText = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .record(
        {
          n: field,
          k: field,
          m: field,
          a: field,
          b: field,
          seed: field,
          query: field,
          extra: field,
        },
        { requiredKeys: [] },
      )
      .map((record) => JSON.stringify(record)),
  },
  {
    weight: 3,
    arbitrary: fc
      .record({
        n: fc.integer({ min: 1, max: 4 }),
        k: fc.integer({ min: 1, max: 3 }),
        values: fc.array(finite, { minLength: 28, maxLength: 28 }),
      })
      .map(({ n, k, values }) =>
        JSON.stringify({ n, k, m: n, a: values.slice(0, n * n), b: values.slice(0, n * k) }),
      ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '',
      '   ',
      '{"n": 2,',
      '{"n": 1, "a": [1e999], "b": [1]}',
      '[1, 2]',
      '"text"',
      'null',
      '{"query": [1, 2, 1e39]}',
      '\u00ff{',
    ),
  },
);
const route = fc.constantFrom<BodyRoute>('/solve', '/solve-random', '/matmul', '/search');

describe('ParsePool', () => {
  it('sizes itself from the cores: 3/8 of them within [4, 8], fewer than the cores, at least 1', () => {
    expect(
      [1, 2, 3, 4, 5, 8, 12, 13, 16, 21, 22, 128].map((cores) => defaultParseWorkers(cores)),
    ).toEqual([1, 1, 2, 3, 4, 4, 4, 4, 6, 7, 8, 8]);
    expect(() => new ParsePool({ workers: -1 })).toThrow(RangeError);
    expect(() => new ParsePool({ timeoutMs: 0 })).toThrow(RangeError);
    expect(() => new ParsePool({ maxHeapMb: 8 })).toThrow(RangeError);
  });

  it('gives what parseRequestBody gives inline, values and refusals alike (fast-check)', async () => {
    const parser = pool({ workers: 2, inlineBelowBytes: 0 });
    await fc.assert(
      fc.asyncProperty(
        route,
        bodyText,
        fc.array(fc.nat(), { maxLength: 4 }),
        async (path, text, cuts) => {
          const expected = inline(path, text);
          expect(await pooled(parser, path, Buffer.from(text))).toEqual(expected);
          expect(await pooled(parser, path, segments(text, cuts))).toEqual(expected);
        },
      ),
      { seed: 37, numRuns: 300 },
    );
    const statistics = parser.statistics();
    expect(statistics.inline).toBe(0);
    expect(statistics.offloaded).toBe(600);
    expect(statistics.crashes + statistics.timeouts).toBe(0);
  });

  it('transfers the body to the worker and the Float64Arrays back', async () => {
    const parser = pool({ workers: 1, inlineBelowBytes: 0 });
    const n = 64;
    const a = Array.from({ length: n * n }, (_, i) => Math.sin(i));
    const b = Array.from({ length: n }, (_, i) => i / 3);
    const body = Buffer.from(JSON.stringify({ n, a, b }));
    const owned = new Uint8Array(body);
    const request = (await parser.parse('/solve', owned, {
      ...context,
      limits: DEFAULT_LIMITS,
    })) as {
      a: Float64Array;
      b: Float64Array;
    };
    expect(owned.byteLength).toBe(0); // moved, not copied
    expect(request.a).toBeInstanceOf(Float64Array);
    expect(request.a).toEqual(Float64Array.from(a));
    expect(request.b).toEqual(Float64Array.from(b));
  });

  it('parses small bodies inline and large ones in a worker', async () => {
    const parser = pool({ workers: 1, inlineBelowBytes: 1000 });
    await parser.parse('/solve-random', Buffer.from('{"n": 4, "seed": 1}'), context);
    const large = JSON.stringify({ n: 4, seed: 1, pad: undefined, ...{} }).padEnd(2000, ' ');
    expect(await parser.parse('/solve-random', Buffer.from(large), context)).toEqual({
      n: 4,
      seed: 1,
    });
    expect(parser.statistics()).toMatchObject({ inline: 1, offloaded: 1 });
  });

  it('hostile bodies (deep nesting, 10 MB of digits) do not hold the event loop', async () => {
    const parser = pool({ inlineBelowBytes: 0 });
    const depth = 100_000;
    const nested = `{"n":1,"a":${'['.repeat(depth)}${']'.repeat(depth)},"b":[1]}`;
    const digits = `{"n":1,"a":[${'1'.repeat(10 * 1024 * 1024)}],"b":[1]}`;
    const texts = Array.from({ length: 32 }, (_, i) => (i % 2 === 0 ? nested : digits));
    // Made before the measurement: each body its own ArrayBuffer, as the service's are.
    const bodies = texts.map((text) => new Uint8Array(Buffer.from(text)));
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    const started = performance.now();
    const outcomes = await Promise.all(
      bodies.map((body) => pooled(parser, '/solve', body as Uint8Array)),
    );
    const elapsedMs = performance.now() - started;
    delay.disable();
    const maxMs = delay.max / 1e6;
    console.log(
      `32 hostile bodies (16 nested ${depth} deep, 16 of 10 MB of digits) in ${parser.size} worker(s): ${elapsedMs.toFixed(0)} ms, largest event-loop delay ${maxMs.toFixed(2)} ms`,
    );
    expect(outcomes[0]).toEqual(inline('/solve', nested));
    expect(outcomes[1]).toEqual(inline('/solve', digits));
    expect(outcomes[1]).toEqual({
      status: 400,
      message: 'POST /solve: "a"[0] must be a finite number, got Infinity',
    });
    for (const [i, outcome] of outcomes.entries()) expect(outcome).toEqual(outcomes[i % 2]);
    expect(maxMs).toBeLessThan(availableParallelism() >= 4 ? 10 : 25);
  });

  it('a parse past timeoutMs is a 413 and its worker is replaced', async () => {
    const parser = pool({ workers: 1, inlineBelowBytes: 0, timeoutMs: 150 });
    const depth = 5 * 1024 * 1024;
    const slow = Buffer.from(`{"n":1,"a":${'['.repeat(depth)}${']'.repeat(depth)},"b":[1]}`);
    const started = performance.now();
    const outcome = await pooled(parser, '/solve', slow);
    const elapsedMs = performance.now() - started;
    expect(outcome).toEqual({
      status: 413,
      message: 'the request body took longer than 150 ms to parse, the most this service allows',
    });
    expect(elapsedMs).toBeLessThan(2000);
    expect(parser.statistics().timeouts).toBe(1);
    // The replacement parses the next body.
    const next = await parser.parse('/solve', Buffer.from('{"n":1,"a":[2],"b":[4]}'), context);
    expect(next).toEqual({ n: 1, k: 1, a: new Float64Array([2]), b: new Float64Array([4]) });
    expect(parser.statistics()).toMatchObject({ workers: 1, timeouts: 1, crashes: 0 });
  });

  it('a worker that runs out of heap fails only its own body (413); the others are parsed', async () => {
    const errors: Error[] = [];
    const parser = pool({
      workers: 2,
      inlineBelowBytes: 0,
      maxHeapMb: 16,
      onError: (error) => errors.push(error),
    });
    // Filled gradually (nested arrays), so that V8 ends the worker, not the process.
    const depth = 400_000;
    const huge = Buffer.from(`{"n":1,"a":${'['.repeat(depth)}${']'.repeat(depth)},"b":[1]}`);
    const good = (i: number) => Buffer.from(`{"n":1,"a":[${i}],"b":[1]}`);
    const outcomes = await Promise.all([
      pooled(parser, '/solve', huge),
      ...Array.from({ length: 6 }, (_, i) => pooled(parser, '/solve', good(i + 1))),
    ]);
    expect(outcomes[0]).toEqual({
      status: 413,
      message:
        'the request body needs more than 16 MiB of memory to parse, the most this service allows',
    });
    for (const [i, outcome] of outcomes.slice(1).entries()) {
      expect(outcome).toEqual({
        value: { n: 1, k: 1, a: new Float64Array([i + 1]), b: new Float64Array([1]) },
      });
    }
    expect(parser.statistics().crashes).toBe(1);
    expect(errors.map((error) => (error as Error & { code?: string }).code)).toEqual([
      'ERR_WORKER_OUT_OF_MEMORY',
    ]);
  });

  it('a body whose signal aborts while it waits is refused with the reason; the rest are parsed', async () => {
    const parser = pool({ workers: 1, inlineBelowBytes: 0 });
    const body = () => Buffer.from('{"n":1,"a":[3],"b":[1]}');
    const controller = new AbortController();
    const reason = new RequestError(499, 'the client left');
    const first = parser.parse('/solve', body(), context);
    const waiting = parser.parse('/solve', body(), context, controller.signal);
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(await first).toMatchObject({ n: 1 });
    expect(parser.statistics()).toMatchObject({ queued: 0, busy: 0 });
  });

  it('close refuses what waits (503) and later bodies, and terminates the workers', async () => {
    const parser = pool({ workers: 1, inlineBelowBytes: 0, prestart: true });
    const pending = parser.parse('/solve', Buffer.from('{"n":1,"a":[3],"b":[1]}'), context);
    const refused = expect(pending).rejects.toMatchObject({ status: 503 });
    await parser.close();
    await refused;
    await expect(
      parser.parse('/solve', Buffer.from('{"n":1,"a":[3],"b":[1]}'), context),
    ).rejects.toMatchObject({ status: 503, message: 'the service is shutting down' });
    expect(parser.statistics().workers).toBe(0);
  });

  it.each([
    ['close', 'the pool closed'],
    ['idle', 'the pool left idle'],
    ['service', 'a service shut down after a large /solve'],
  ])(
    'leaves nothing to keep the process alive: %s (%s)',
    async (mode) => {
      const fixture = fileURLToPath(new URL('./parse-pool-fixture.ts', import.meta.url));
      const child = spawn(process.execPath, [...serviceExecArgv(), fixture, mode], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      let printedAt = 0;
      child.stdout.on('data', (chunk) => {
        stdout += chunk;
        if (printedAt === 0 && stdout.includes('\n')) printedAt = performance.now();
      });
      child.stderr.on('data', (chunk) => {
        stderr += chunk;
      });
      const code = await new Promise<number | null>((resolve) => {
        const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
        child.once('exit', (exitCode) => {
          clearTimeout(timer);
          resolve(exitCode);
        });
      });
      const exitedAfterMs = performance.now() - printedAt;
      console.log(`${mode}: exited ${exitedAfterMs.toFixed(0)} ms after its last line`);
      expect(stderr).toBe('');
      expect(code).toBe(0);
      const printed = JSON.parse(stdout.trim());
      if (mode === 'service') {
        expect(printed).toMatchObject({ status: 200, offloaded: 1 });
      } else expect(printed).toEqual({ n: 64, a0: 64, offloaded: 1 });
      expect(exitedAfterMs).toBeLessThan(1500);
    },
    30_000,
  );
});
