import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CudaArgumentError, CudaError, CudaUnavailableError } from '@cuda-tasks/cudadrv';
import { SingularMatrixError } from '@cuda-tasks/cusolver';
import { probeGpu } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createServer,
  errorResponse,
  type GpuHealth,
  gpuHealth,
  pathOf,
  STREAM_HEADER,
  streamLabel,
  withoutDirectories,
} from './server.js';
import {
  DEFAULT_LIMITS,
  parseJson,
  parseMatmulRequest,
  parseSearchRequest,
  parseSolveRandomRequest,
  parseSolveRequest,
  RequestError,
} from './validation.js';

function refusal(fn: () => unknown): RequestError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(RequestError);
    return error as RequestError;
  }
  throw new Error('expected a RequestError');
}

describe('parseJson', () => {
  it('parses JSON', () => {
    expect(parseJson(Buffer.from('{"n": 2}'))).toEqual({ n: 2 });
  });

  it('refuses an empty body and invalid JSON with 400', () => {
    const empty = refusal(() => parseJson(Buffer.from('  ')));
    expect(empty.status).toBe(400);
    expect(empty.message).toBe('the request body is empty: send a JSON object');
    const invalid = refusal(() => parseJson('{"n": 2,'));
    expect(invalid.status).toBe(400);
    expect(invalid.message).toMatch(/^the request body is not valid JSON: /);
  });
});

describe('parseSolveRequest', () => {
  it('accepts a system and defaults k to 1', () => {
    const request = parseSolveRequest({ n: 2, a: [4, 1, 2, 3], b: [1, 2] });
    expect(request.n).toBe(2);
    expect(request.k).toBe(1);
    expect(request.a).toEqual(new Float64Array([4, 1, 2, 3]));
    expect(request.b).toEqual(new Float64Array([1, 2]));
  });

  it('accepts several right-hand sides', () => {
    const request = parseSolveRequest({ n: 2, k: 2, a: [4, 1, 2, 3], b: [1, 2, 3, 4] });
    expect(request.k).toBe(2);
    expect(request.b).toHaveLength(4);
  });

  it.each([
    [null, 'POST /solve: the body must be a JSON object with fields n, a, b, k; got null'],
    [
      [1, 2],
      'POST /solve: the body must be a JSON object with fields n, a, b, k; got an array of 2',
    ],
    [
      'text',
      'POST /solve: the body must be a JSON object with fields n, a, b, k; got the string "text"',
    ],
    [{ a: [1], b: [1] }, 'POST /solve: missing field "n"'],
    [{ n: 1, b: [1] }, 'POST /solve: missing field "a"'],
    [{ n: 1, a: [1] }, 'POST /solve: missing field "b"'],
    [{ n: 1.5, a: [1], b: [1] }, 'POST /solve: "n" must be a positive integer, got 1.5'],
    [{ n: 0, a: [], b: [] }, 'POST /solve: "n" must be a positive integer, got 0'],
    [{ n: '2', a: [], b: [] }, 'POST /solve: "n" must be a positive integer, got the string "2"'],
    [
      { n: 4096, a: [], b: [] },
      'POST /solve: "n" = 4096 is too large: this service accepts dimensions up to 2048',
    ],
    [
      { n: 2, a: [1, 2, 3], b: [1, 2] },
      'POST /solve: "a" must hold n*n = 4 numbers (column-major), got 3',
    ],
    [
      { n: 2, a: 'x', b: [1, 2] },
      'POST /solve: "a" must be an array of n*n = 4 numbers (column-major), got the string "x"',
    ],
    [
      { n: 2, a: [1, 2, null, 4], b: [1, 2] },
      'POST /solve: "a"[2] must be a finite number, got null',
    ],
    [
      { n: 2, a: [1, 2, 3, '4'], b: [1, 2] },
      'POST /solve: "a"[3] must be a finite number, got the string "4"',
    ],
    [
      { n: 1, a: [Number.POSITIVE_INFINITY], b: [1] },
      'POST /solve: "a"[0] must be a finite number, got Infinity',
    ],
    [
      { n: 2, a: [1, 2, 3, 4], b: [1, 2, 3] },
      'POST /solve: "b" must hold n*k (k defaults to 1) = 2 numbers (column-major), got 3',
    ],
    [
      { n: 2, k: 2, a: [1, 2, 3, 4], b: [1, 2] },
      'POST /solve: "b" must hold n*k = 4 numbers (column-major), got 2',
    ],
    [
      { n: 1, a: [1], b: [1], B: [1] },
      'POST /solve: unknown field "B" (the fields are n, a, b, k)',
    ],
  ])('refuses %j with 400', (body, message) => {
    const error = refusal(() => parseSolveRequest(body));
    expect(error.status).toBe(400);
    expect(error.message).toBe(message);
  });

  it('applies the limits it is given', () => {
    const error = refusal(() =>
      parseSolveRequest({ n: 5, a: [], b: [] }, { ...DEFAULT_LIMITS, maxDimension: 4 }),
    );
    expect(error.message).toBe(
      'POST /solve: "n" = 5 is too large: this service accepts dimensions up to 4',
    );
  });

  it('treats 1e999 (parsed as Infinity) as not finite', () => {
    const body = parseJson('{"n": 1, "a": [1e999], "b": [1]}');
    expect(refusal(() => parseSolveRequest(body)).message).toBe(
      'POST /solve: "a"[0] must be a finite number, got Infinity',
    );
  });
});

describe('parseMatmulRequest', () => {
  it('accepts A (m x k) and B (k x n)', () => {
    const request = parseMatmulRequest({ m: 1, k: 2, n: 3, a: [1, 2], b: [1, 2, 3, 4, 5, 6] });
    expect([request.m, request.k, request.n]).toEqual([1, 2, 3]);
    expect(request.b).toEqual(new Float64Array([1, 2, 3, 4, 5, 6]));
  });

  it.each([
    [{ k: 1, n: 1, a: [1], b: [1] }, 'POST /matmul: missing field "m"'],
    [{ m: 1, n: 1, a: [1], b: [1] }, 'POST /matmul: missing field "k"'],
    [{ m: 1, k: 1, a: [1], b: [1] }, 'POST /matmul: missing field "n"'],
    [
      { m: 2, k: 2, n: 1, a: [1, 2, 3], b: [1, 2] },
      'POST /matmul: "a" must hold m*k = 4 numbers (column-major), got 3',
    ],
    [
      { m: 1, k: 2, n: 2, a: [1, 2], b: [1, 2, 3] },
      'POST /matmul: "b" must hold k*n = 4 numbers (column-major), got 3',
    ],
    [
      { m: 1, k: 3000, n: 1, a: [], b: [] },
      'POST /matmul: "k" = 3000 is too large: this service accepts dimensions up to 2048',
    ],
    [
      { m: 1, k: 1, n: 1, a: [1], b: [1], c: [] },
      'POST /matmul: unknown field "c" (the fields are m, k, n, a, b)',
    ],
  ])('refuses %j with 400', (body, message) => {
    const error = refusal(() => parseMatmulRequest(body));
    expect(error.status).toBe(400);
    expect(error.message).toBe(message);
  });
});

describe('parseSolveRandomRequest', () => {
  it('accepts n and a seed', () => {
    expect(parseSolveRandomRequest({ n: 1024, seed: 7 })).toEqual({ n: 1024, seed: 7 });
    expect(parseSolveRandomRequest({ n: 1, seed: 0 })).toEqual({ n: 1, seed: 0 });
    expect(parseSolveRandomRequest({ n: 2, seed: 2 ** 53 - 1 }).seed).toBe(2 ** 53 - 1);
  });

  it('refuses a missing or bad seed, a bad n and unknown fields with 400', () => {
    const cases: [unknown, RegExp][] = [
      [{ n: 4 }, /missing field "seed"/],
      [{ n: 4, seed: -1 }, /"seed" must be an integer in 0\.\.2\^53-1, got -1/],
      [{ n: 4, seed: 1.5 }, /"seed" must be an integer/],
      [{ n: 4, seed: '7' }, /"seed" must be an integer .*the string "7"/],
      [{ n: 4, seed: 2 ** 53 }, /"seed" must be an integer/],
      [{ seed: 1 }, /missing field "n"/],
      [{ n: 0, seed: 1 }, /"n" must be a positive integer/],
      [{ n: 4096, seed: 1 }, /"n" = 4096 is too large/],
      [{ n: 4, seed: 1, a: [] }, /unknown field "a"/],
      [[4, 1], /must be a JSON object/],
    ];
    for (const [body, message] of cases) {
      const error = refusal(() => parseSolveRandomRequest(body));
      expect(error.status).toBe(400);
      expect(error.message).toMatch(/^POST \/solve-random: /);
      expect(error.message).toMatch(message);
    }
  });
});

describe('parseSearchRequest', () => {
  it('accepts a query of dim finite numbers and k, default 10', () => {
    const request = parseSearchRequest({ query: [0.5, -1, 2] }, 3, 1000);
    expect(request.query).toEqual(new Float32Array([0.5, -1, 2]));
    expect(request.k).toBe(10);
    expect(parseSearchRequest({ query: [1, 2, 3], k: 100 }, 3, 1000).k).toBe(100);
    expect(parseSearchRequest({ query: [1, 2, 3], k: 4 }, 3, 4).k).toBe(4);
  });

  it('refuses a wrong length, non-finite values, a bad k and unknown fields with 400', () => {
    const refused = (body: unknown, rows = 1000) => {
      const error = refusal(() => parseSearchRequest(body, 3, rows));
      expect(error.status).toBe(400);
      return error.message;
    };
    expect(refused({ k: 3 })).toBe('POST /search: missing field "query"');
    expect(refused({ query: [1, 2] })).toBe(
      'POST /search: "query" must be an array of 3 numbers, got an array of 2',
    );
    expect(refused({ query: 'abc' })).toMatch(/must be an array of 3 numbers, got the string/);
    expect(refused({ query: [1, null, 3] })).toBe(
      'POST /search: "query"[1] must be a finite number, got null',
    );
    expect(refused({ query: [1, 2, Number.POSITIVE_INFINITY] })).toMatch(
      /"query"\[2\] must be a finite number/,
    );
    // Finite in float64, Infinity in float32.
    expect(refused({ query: [1, 1e39, 3] })).toBe(
      'POST /search: "query"[1] = 1e+39 is outside the float32 range (magnitude at most 3.4028234663852886e+38)',
    );
    expect(refused({ query: [-3.5e38, 0, 0] })).toMatch(/"query"\[0\] = -3\.5e\+38 is outside/);
    expect(refused({ query: [1, 2, 3], k: 0 })).toBe(
      'POST /search: "k" must be an integer in 1..100, got 0',
    );
    expect(refused({ query: [1, 2, 3], k: 101 })).toMatch(/in 1\.\.100, got 101/);
    expect(refused({ query: [1, 2, 3], k: 2.5 })).toMatch(/"k" must be an integer/);
    expect(refused({ query: [1, 2, 3], k: 5 }, 4)).toMatch(/in 1\.\.4, got 5/);
    expect(refused({ query: [1, 2, 3], top: 5 })).toMatch(/unknown field "top"/);
  });

  it('accepts every value that is finite in float32, to its largest, and refuses the rest', () => {
    // Float32 rounds to nearest: values up to halfway to the next power step round to the max.
    const max = 3.4028234663852886e38;
    expect(parseSearchRequest({ query: [max, -max, 1e-45] }, 3, 10).query).toEqual(
      new Float32Array([max, -max, 1e-45]),
    );
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (value) => {
        const float32Finite = Number.isFinite(Math.fround(value));
        try {
          parseSearchRequest({ query: [value] }, 1, 10);
          return float32Finite;
        } catch (error) {
          return !float32Finite && (error as RequestError).status === 400;
        }
      }),
      { seed: 31, numRuns: 2000 },
    );
  });
});

describe('errorResponse', () => {
  it('keeps a RequestError status', () => {
    expect(errorResponse(new RequestError(413, 'too big'))).toEqual({
      status: 413,
      message: 'too big',
    });
  });

  it('answers a singular matrix with 422 and cuSOLVER’s message', () => {
    const response = errorResponse(new SingularMatrixError('cusolverDnDgetrf', 3));
    expect(response.status).toBe(422);
    expect(response.message).toContain('U(3,3) is exactly zero: the matrix is singular');
  });

  it('answers bad input caught by a library with 400', () => {
    expect(errorResponse(new CudaArgumentError('solve: bad')).status).toBe(400);
  });

  it('answers a missing GPU with 503, its first line, without the folders of file paths', () => {
    const error = new CudaUnavailableError(
      'cuBLAS is not available: could not load /opt/vendor/cuda-12.4/lib64/libcublas.so.12 (from CUDA_TASKS_LIBCUBLAS). Install it.\n  /opt/vendor/cuda-12.4/lib64/libcublas.so.12: cannot open shared object file',
      'cuBLAS',
    );
    expect(errorResponse(error)).toEqual({
      status: 503,
      message:
        'cuBLAS is not available: could not load libcublas.so.12 (from CUDA_TASKS_LIBCUBLAS). Install it.',
    });
  });

  it('answers other GPU errors and anything else with 500 and no details of the server', () => {
    const gpu = new CudaError(
      700,
      'CUDA_ERROR_ILLEGAL_ADDRESS',
      'cuStreamSynchronize',
      'an illegal memory access in /srv/app/kernels.ptx',
    );
    expect(errorResponse(gpu)).toEqual({
      status: 500,
      message:
        'the GPU work failed: CUDA_ERROR_ILLEGAL_ADDRESS in cuStreamSynchronize (details in the server log)',
    });
    const internal = new Error("ENOENT: no such file or directory, open '/home/svc/secret.json'");
    expect(errorResponse(internal)).toEqual({
      status: 500,
      message: 'internal server error (details in the server log)',
    });
    expect(errorResponse('thrown string').message).toBe(
      'internal server error (details in the server log)',
    );
  });

  it('no 5xx body holds a path with its folders', () => {
    const errors: unknown[] = [
      new CudaUnavailableError('could not load /usr/lib/x86_64-linux-gnu/libcuda.so.1', 'libcuda'),
      new CudaError(2, 'CUDA_ERROR_OUT_OF_MEMORY', 'cuMemAllocAsync', 'at /a/b/c.ts:1'),
      new Error('at file:///srv/app/dist/index.js:10:3'),
      new Error('C:\\Users\\svc\\app\\index.js'),
    ];
    for (const error of errors) {
      const { status, message } = errorResponse(error);
      expect(status).toBeGreaterThanOrEqual(500);
      expect(message).not.toMatch(/[\\/][^\s\\/]+[\\/]/);
    }
    expect(withoutDirectories('could not load /usr/lib/libcuda.so.1 or libcuda.so')).toBe(
      'could not load libcuda.so.1 or libcuda.so',
    );
  });
});

describe('the server without touching the GPU for bad requests', () => {
  let server: Server;
  let base: string;
  const serverErrors: unknown[] = [];

  beforeAll(async () => {
    server = createServer({ maxBodyBytes: 4096, onServerError: (e) => serverErrors.push(e) });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  });

  async function call(
    path: string,
    init?: RequestInit,
  ): Promise<{ status: number; body: any; allow: string | null }> {
    const response = await fetch(`${base}${path}`, init);
    return {
      status: response.status,
      body: await response.json(),
      allow: response.headers.get('allow'),
    };
  }

  const post = (path: string, body: string) =>
    call(path, { method: 'POST', body, headers: { 'content-type': 'application/json' } });

  /** /health's status here: 200 with a usable GPU, 503 without. */
  const healthy = () => (gpuHealth().usable ? 200 : 503);

  it('answers GET /health 200 while the GPU is usable, else 503 saying why', async () => {
    const health = await call('/health');
    const expected = gpuHealth();
    expect(health.status).toBe(expected.usable ? 200 : 503);
    expect(health.body).toEqual({ status: expected.usable ? 'ok' : 'unavailable', gpu: expected });
    if (!probeGpu().available) {
      expect(health.body.gpu.usable).toBe(false);
      expect(health.body.gpu.reason).toMatch(/libcuda|CUDA driver|CUDA-capable GPU|CUDA_TASKS_GPU/);
    }
  });

  it('reports the GPU on /health as the check finds it, without file paths', async () => {
    const healthOf = async (checkGpu: () => GpuHealth) => {
      const other = createServer({ checkGpu });
      await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
      try {
        const port = (other.address() as AddressInfo).port;
        const response = await fetch(`http://127.0.0.1:${port}/health`);
        return { status: response.status, body: await response.json() };
      } finally {
        await new Promise<void>((resolve) => other.close(() => resolve()));
      }
    };
    const reason = withoutDirectories('could not load /opt/nvidia/lib/libcuda.so.1');
    expect(await healthOf(() => ({ usable: false, reason }))).toEqual({
      status: 503,
      body: {
        status: 'unavailable',
        gpu: { usable: false, reason: 'could not load libcuda.so.1' },
      },
    });
    expect(await healthOf(() => ({ usable: true, devices: 2 }))).toEqual({
      status: 200,
      body: { status: 'ok', gpu: { usable: true, devices: 2 } },
    });
  });

  it('answers invalid JSON with 400 and a clear message, then keeps serving', async () => {
    const bad = await post('/solve', '{"n": 2, "a": [1, 2');
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/^the request body is not valid JSON: /);
    expect((await call('/health')).status).toBe(healthy());
  });

  it('answers a body with a wrong length with 400 naming the field', async () => {
    const bad = await post('/solve', JSON.stringify({ n: 2, a: [1, 2, 3], b: [1, 2] }));
    expect(bad).toMatchObject({
      status: 400,
      body: { error: 'POST /solve: "a" must hold n*n = 4 numbers (column-major), got 3' },
    });
    const matmul = await post('/matmul', JSON.stringify({ m: 1, k: 1, n: 1, a: [1] }));
    expect(matmul).toMatchObject({
      status: 400,
      body: { error: 'POST /matmul: missing field "b"' },
    });
    const random = await post('/solve-random', JSON.stringify({ n: 8, seed: -3 }));
    expect(random).toMatchObject({
      status: 400,
      body: { error: 'POST /solve-random: "seed" must be an integer in 0..2^53-1, got -3' },
    });
    // The default search index has 128 values per row: a shorter query never reaches the GPU.
    const search = await post('/search', JSON.stringify({ query: [1, 2, 3], k: 5 }));
    expect(search).toMatchObject({
      status: 400,
      body: { error: 'POST /search: "query" must be an array of 128 numbers, got an array of 3' },
    });
  });

  it('answers an unknown route with 404 and a wrong method with 405', async () => {
    const missing = await post('/invert', '{}');
    expect(missing.status).toBe(404);
    expect(missing.body.error).toBe(
      'no route POST /invert: this service has POST /solve, POST /solve-random, POST /matmul, POST /search and GET /health',
    );
    const wrongMethod = await call('/solve');
    expect(wrongMethod.status).toBe(405);
    expect((await call('/solve-random')).status).toBe(405);
    expect(wrongMethod.allow).toBe('POST');
    expect(wrongMethod.body.error).toBe('/solve takes POST with a JSON body, not GET');
  });

  it('answers a body over the size cap with 413, then keeps serving', async () => {
    const big = JSON.stringify({ n: 1, a: [1], b: [1], padding: 'x'.repeat(10_000) });
    const refused = await post('/solve', big);
    expect(refused.status).toBe(413);
    expect(refused.body.error).toBe(
      'the request body is 10036 bytes; this service accepts at most 4096',
    );
    expect((await call('/health')).status).toBe(healthy());
  });

  it('answers a valid request with 503 and the driver message where there is no GPU, without trying it', async () => {
    const gpu = probeGpu().available;
    const response = await post('/solve', JSON.stringify({ n: 2, a: [4, 1, 2, 3], b: [1, 2] }));
    if (!gpu && process.env.CUDA_TASKS_GPU !== '0') {
      expect(response.status).toBe(503);
      // The CudaUnavailableError of cudadrv: no driver library, or a driver without a GPU.
      expect(response.body.error).toMatch(
        /^the GPU is not usable: .*(libcuda|CUDA driver|CUDA-capable GPU)/,
      );
      expect(serverErrors).toHaveLength(0);
    } else if (gpu) {
      // [[4, 2], [1, 3]] x = [1, 2] (column-major a) -> x = [-0.1, 0.7]
      expect(response.status).toBe(200);
      expect(response.body.x[0]).toBeCloseTo(-0.1, 12);
      expect(response.body.x[1]).toBeCloseTo(0.7, 12);
    }
    expect((await call('/health')).status).toBe(healthy());
  });
});

describe('pathOf', () => {
  it('gives the pathname new URL gives, for any request target', () => {
    const piece = fc.constantFrom(
      'solve',
      'search',
      '-',
      '_',
      'A9',
      '.',
      '..',
      '%2e',
      '',
      '?',
      '#',
      'x=1',
      '/',
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 6 }), fc.boolean(), (pieces, slash) => {
        const url = `${slash ? '/' : ''}${pieces.join(slash ? '/' : '')}`;
        let expected: string;
        try {
          expected = new URL(url, 'http://localhost').pathname;
        } catch {
          expected = url;
        }
        expect(pathOf(url)).toBe(expected);
      }),
      { numRuns: 2000 },
    );
    expect(pathOf('/solve')).toBe('/solve');
    expect(pathOf('/solve?n=1')).toBe('/solve');
    expect(pathOf('/a/../solve')).toBe('/solve');
    expect(pathOf(undefined)).toBe('/');
  });
});

describe('streamLabel', () => {
  it('names the stream and its handle in hex, fit for an HTTP header', () => {
    expect(STREAM_HEADER).toBe('x-cuda-stream');
    expect(streamLabel({ name: 'task-stream-3', handle: 0x5581c0a3e2f0n })).toBe(
      'task-stream-3 0x5581c0a3e2f0',
    );
    expect(streamLabel({ name: 'service shared stream', handle: 255n })).toBe(
      'service-shared-stream 0xff',
    );
    expect(streamLabel({ name: undefined, handle: 16n })).toBe('unnamed 0x10');
    expect(streamLabel({ name: 'flux\u00e9\n', handle: 1n })).toBe('flux?? 0x1');
    // Distinct handles give distinct labels even under one name.
    expect(streamLabel({ name: 's', handle: 1n })).not.toBe(streamLabel({ name: 's', handle: 2n }));
  });
});
