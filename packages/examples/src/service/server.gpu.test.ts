import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { deviceCount } from '@cuda-tasks/cudadrv';
import { describeGpu, rng } from '@cuda-tasks/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createServer, STREAM_HEADER } from './server.js';

/** Random column-major matrix with entries in [-1, 1). */
function randomMatrix(rows: number, columns: number, next: () => number): number[] {
  return Array.from({ length: rows * columns }, () => next() * 2 - 1);
}

/** A random n x n matrix made well conditioned by adding n to its diagonal. */
function wellConditioned(n: number, next: () => number): number[] {
  const a = randomMatrix(n, n, next);
  for (let i = 0; i < n; i++) a[i + i * n]! += n;
  return a;
}

/** CPU float64 reference: X with A X = B by Gaussian elimination with partial pivoting. */
function solveReference(n: number, k: number, aIn: readonly number[], bIn: readonly number[]) {
  const a = Float64Array.from(aIn);
  const b = Float64Array.from(bIn);
  for (let column = 0; column < n; column++) {
    let pivot = column;
    for (let i = column + 1; i < n; i++) {
      if (Math.abs(a[i + column * n]!) > Math.abs(a[pivot + column * n]!)) pivot = i;
    }
    if (pivot !== column) {
      for (let j = 0; j < n; j++) {
        const t = a[column + j * n]!;
        a[column + j * n] = a[pivot + j * n]!;
        a[pivot + j * n] = t;
      }
      for (let j = 0; j < k; j++) {
        const t = b[column + j * n]!;
        b[column + j * n] = b[pivot + j * n]!;
        b[pivot + j * n] = t;
      }
    }
    for (let i = column + 1; i < n; i++) {
      const factor = a[i + column * n]! / a[column + column * n]!;
      if (factor === 0) continue;
      for (let j = column; j < n; j++) a[i + j * n]! -= factor * a[column + j * n]!;
      for (let j = 0; j < k; j++) b[i + j * n]! -= factor * b[column + j * n]!;
    }
  }
  for (let j = 0; j < k; j++) {
    for (let i = n - 1; i >= 0; i--) {
      let sum = b[i + j * n]!;
      for (let l = i + 1; l < n; l++) sum -= a[i + l * n]! * b[l + j * n]!;
      b[i + j * n] = sum / a[i + i * n]!;
    }
  }
  return b;
}

/** CPU float64 reference: C = A B, column-major. */
function matmulReference(m: number, k: number, n: number, a: number[], b: number[]) {
  const c = new Float64Array(m * n);
  for (let j = 0; j < n; j++) {
    for (let l = 0; l < k; l++) {
      const blj = b[l + j * k]!;
      for (let i = 0; i < m; i++) c[i + j * m]! += a[i + l * m]! * blj;
    }
  }
  return c;
}

/** max |x - y| / max(1, max |y|) */
function relativeError(x: readonly number[], y: ArrayLike<number>): number {
  let error = 0;
  let scale = 1;
  for (let i = 0; i < y.length; i++) {
    error = Math.max(error, Math.abs(x[i]! - y[i]!));
    scale = Math.max(scale, Math.abs(y[i]!));
  }
  return error / scale;
}

async function start(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function stop(server: Server): Promise<void> {
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

async function post(base: string, path: string, body: unknown) {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as any };
}

/** POSTs and also returns the `x-cuda-stream` header: the stream the request ran on. */
async function postOnStream(base: string, path: string, body: unknown) {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return {
    status: response.status,
    stream: response.headers.get(STREAM_HEADER),
    body: (await response.json()) as any,
  };
}

const MASK_64 = (1n << 64n) - 1n;

/**
 * Draws `offset`..`offset + count - 1` of `seed` as /solve-random makes them, in BigInt on the
 * CPU: SplitMix64 of seed + (index + 1) * 0x9E3779B97F4A7C15, its top 53 bits plus one over
 * 2^53 (exact in float64).
 */
function splitMixUniform(seed: number, offset: number, count: number): number[] {
  const values: number[] = [];
  for (let k = 0; k < count; k++) {
    let x = (BigInt(seed) + BigInt(offset + k + 1) * 0x9e3779b97f4a7c15n) & MASK_64;
    x = ((x ^ (x >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK_64;
    x = ((x ^ (x >> 27n)) * 0x94d049bb133111ebn) & MASK_64;
    x ^= x >> 31n;
    values.push(Number((x >> 11n) + 1n) / 2 ** 53);
  }
  return values;
}

describeGpu('the GPU HTTP service', () => {
  let server: Server;
  let base: string;
  let sharedServer: Server;
  let sharedBase: string;
  const serverErrors: unknown[] = [];

  beforeAll(async () => {
    server = createServer({ onServerError: (error) => serverErrors.push(error) });
    base = await start(server);
    sharedServer = createServer({
      sharedStream: true,
      onServerError: (error) => serverErrors.push(error),
    });
    sharedBase = await start(sharedServer);
  });

  afterAll(async () => {
    await stop(server);
    await stop(sharedServer);
  });

  it('GET /health reports a usable GPU and the device count', async () => {
    const response = await fetch(`${base}/health`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as {
      status: string;
      gpu: { usable: boolean; devices: number };
    };
    expect(body.status).toBe('ok');
    expect(body.gpu.usable).toBe(true);
    expect(body.gpu.devices).toBe(deviceCount());
    expect(body.gpu.devices).toBeGreaterThanOrEqual(1);
  });

  it('POST /solve matches a float64 CPU solve (several right-hand sides)', async () => {
    const next = rng(11);
    const n = 64;
    const k = 3;
    const a = wellConditioned(n, next);
    const b = randomMatrix(n, k, next);
    const response = await post(base, '/solve', { n, k, a, b });
    expect(response.status).toBe(200);
    expect(response.body.x).toHaveLength(n * k);
    expect(relativeError(response.body.x, solveReference(n, k, a, b))).toBeLessThan(1e-12);
  });

  it('POST /matmul matches a float64 CPU product', async () => {
    const next = rng(12);
    const [m, k, n] = [37, 53, 29];
    const a = randomMatrix(m, k, next);
    const b = randomMatrix(k, n, next);
    const response = await post(base, '/matmul', { m, k, n, a, b });
    expect(response.status).toBe(200);
    expect(response.body.c).toHaveLength(m * n);
    expect(relativeError(response.body.c, matmulReference(m, k, n, a, b))).toBeLessThan(1e-13);
  });

  it('answers 64 concurrent /solve requests, each correctly', async () => {
    const next = rng(13);
    const n = 48;
    const problems = Array.from({ length: 64 }, () => ({
      n,
      a: wellConditioned(n, next),
      b: randomMatrix(n, 1, next),
    }));
    const responses = await Promise.all(problems.map((problem) => post(base, '/solve', problem)));
    responses.forEach((response, i) => {
      expect(response.status).toBe(200);
      const { a, b } = problems[i]!;
      expect(relativeError(response.body.x, solveReference(n, 1, a, b))).toBeLessThan(1e-12);
    });
  });

  it('gives the same answers with one shared stream', async () => {
    const next = rng(14);
    const n = 32;
    const problems = Array.from({ length: 16 }, () => ({
      n,
      a: wellConditioned(n, next),
      b: randomMatrix(n, 1, next),
    }));
    const responses = await Promise.all(
      problems.map((problem) => post(sharedBase, '/solve', problem)),
    );
    responses.forEach((response, i) => {
      expect(response.status).toBe(200);
      const { a, b } = problems[i]!;
      expect(relativeError(response.body.x, solveReference(n, 1, a, b))).toBeLessThan(1e-12);
    });
  });

  it('POST /solve-random solves the system its seed draws (checked against a CPU solve)', async () => {
    const n = 64;
    const seeds = [0, 1, 2, 3, 0, 1, 2, 3, 2 ** 40 + 5];
    const responses = await Promise.all(
      seeds.map((seed, i) => post(i % 2 ? sharedBase : base, '/solve-random', { n, seed })),
    );
    for (const [i, response] of responses.entries()) {
      expect(response.status).toBe(200);
      expect(response.body.n).toBe(n);
      expect(response.body.residual).toBeLessThan(1e-12);
      // The same draws on the CPU: SplitMix64 of (seed, index), A (n x n) first, then b.
      const hostA = splitMixUniform(seeds[i]!, 0, n * n);
      const hostB = splitMixUniform(seeds[i]!, n * n, n);
      const x = solveReference(n, 1, hostA, hostB);
      expect(relativeError(response.body.x, Array.from(x).slice(0, 4))).toBeLessThan(1e-9);
    }
    // A seed gives the same answer whichever task, stream or server mode ran it.
    expect(responses[4]!.body.x).toEqual(responses[0]!.body.x);
    expect(responses[5]!.body.x).toEqual(responses[1]!.body.x);
    expect(responses[1]!.body.x).not.toEqual(responses[0]!.body.x);
    const bad = await post(base, '/solve-random', { n: 4, seed: 'x' });
    expect(bad.status).toBe(400);
    expect(serverErrors).toEqual([]);
  });

  it('runs concurrent requests on several task streams, or all on the one shared stream', async () => {
    // 32 requests at once, each a 512 x 512 LU solve on the GPU: a task holds its stream until
    // its answer is back on the host, so requests in flight together cannot share a task stream.
    const requests = Array.from({ length: 32 }, (_, i) => ({ n: 512, seed: 1000 + i }));
    const perTask = await Promise.all(
      requests.map((request) => postOnStream(base, '/solve-random', request)),
    );
    const oneStream = await Promise.all(
      requests.map((request) => postOnStream(sharedBase, '/solve-random', request)),
    );
    for (const response of [...perTask, ...oneStream]) {
      expect(response.status).toBe(200);
      expect(response.body.residual).toBeLessThan(1e-8);
      expect(response.stream).toMatch(/^\S+ 0x[0-9a-f]+$/);
    }
    const taskStreams = new Set(perTask.map((response) => response.stream));
    const sharedStreams = new Set(oneStream.map((response) => response.stream));
    expect(taskStreams.size).toBeGreaterThan(1);
    expect(sharedStreams.size).toBe(1);
    expect([...sharedStreams][0]).toMatch(/^service-shared-stream 0x/);
    // The task streams come from the runtime's pool, never the shared server stream.
    for (const stream of taskStreams) expect(stream).toMatch(/^task-stream-\d+ 0x/);
    // Whichever stream ran a seed, the answer is the same.
    for (const [i, response] of perTask.entries()) {
      expect(response.body.x).toEqual(oneStream[i]!.body.x);
    }
    expect(serverErrors).toEqual([]);
  });

  it('answers a singular matrix with 422 and the cuSOLVER message', async () => {
    // Second column zero: U(2,2) is exactly zero.
    const response = await post(base, '/solve', { n: 2, a: [1, 2, 0, 0], b: [1, 1] });
    expect(response.status).toBe(422);
    expect(response.body.error).toContain('the matrix is singular');
  });

  it('answers bad bodies with 400 and keeps serving correct answers', async () => {
    const invalid = await post(base, '/solve', '{"n": 2, "a": [');
    expect(invalid.status).toBe(400);
    expect(invalid.body.error).toMatch(/^the request body is not valid JSON/);
    const wrong = await post(base, '/matmul', { m: 2, k: 2, n: 2, a: [1, 2, 3, 4], b: [1] });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toBe(
      'POST /matmul: "b" must hold k*n = 4 numbers (column-major), got 1',
    );
    const after = await post(base, '/matmul', { m: 1, k: 2, n: 1, a: [1, 2], b: [3, 4] });
    expect(after).toEqual({ status: 200, body: { c: [11] } });
    expect(serverErrors).toEqual([]);
  });
});
