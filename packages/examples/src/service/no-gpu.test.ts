/**
 * The service where no GPU is usable: `gpuHealth` is cudadrv's `availability()` in the
 * service's words, and the real `server.ts` says so once, in one line at startup, then answers
 * GPU routes 503 without logging anything per request.
 */
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { availability } from '@cuda-tasks/cudadrv';
import { afterEach, describe, expect, it } from 'vitest';
import { gpuHealth, withoutDirectories } from './server.js';
import { startServiceProcess } from './spawn-service.js';

const MISSING_DRIVER = '/nonexistent/driver/libcuda.so.1';

const children: ChildProcess[] = [];
const savedOverride = process.env.CUDA_TASKS_LIBCUDA;
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  if (savedOverride === undefined) delete process.env.CUDA_TASKS_LIBCUDA;
  else process.env.CUDA_TASKS_LIBCUDA = savedOverride;
});

describe('gpuHealth without a driver', () => {
  it("is availability()'s answer: not usable, its reason's first line without directories", () => {
    process.env.CUDA_TASKS_LIBCUDA = MISSING_DRIVER;
    const found = availability();
    expect(found.available).toBe(false);
    const health = gpuHealth();
    expect(health).toEqual({ usable: false, reason: withoutDirectories(found.reason!) });
    expect(health.reason).toBe(
      "The NVIDIA CUDA driver (libcuda) is not available: could not load libcuda.so.1 (from CUDA_TASKS_LIBCUDA). Install the NVIDIA GPU driver (version 525 or newer for CUDA 12, 580 or newer for CUDA 13) on a machine with an NVIDIA GPU. Set CUDA_TASKS_LIBCUDA to the library's full path if it is installed elsewhere.",
    );
    expect(health.reason).not.toContain('/nonexistent');
  });
});

describe('server.ts without a GPU, in a real process', () => {
  it('one line at startup says why; GPU routes answer 503 with no log line each', async () => {
    const server = await startServiceProcess(
      fileURLToPath(new URL('./server.ts', import.meta.url)),
      ['--port', '0'],
      { CUDA_TASKS_LIBCUDA: MISSING_DRIVER },
    );
    children.push(server.child);
    const base = `http://127.0.0.1:${server.port}`;
    const requests: [string, unknown][] = [
      ['/solve-random', { n: 4, seed: 1 }],
      ['/matmul', { m: 1, k: 1, n: 1, a: [1], b: [2] }],
      ['/solve', { n: 1, a: [2], b: [4] }],
      ['/search', { query: Array.from({ length: 128 }, () => 0.5), k: 3 }],
    ];
    for (let round = 0; round < 5; round++) {
      for (const [path, body] of requests) {
        const response = await fetch(`${base}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        expect(response.status).toBe(503);
        expect(((await response.json()) as { error: string }).error).toMatch(
          /^the GPU is not usable: The NVIDIA CUDA driver \(libcuda\) is not available/,
        );
      }
    }
    const health = await fetch(`${base}/health`);
    expect(health.status).toBe(503);
    // Give any late log line time to arrive.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const lines = server.stderr().split('\n').filter(Boolean);
    expect(lines).toEqual([
      `no usable GPU: ${((await health.json()) as { gpu: { reason: string } }).gpu.reason} The GPU routes answer 503 while none is usable; GET /health says why.`,
    ]);
    server.child.kill('SIGTERM');
    expect((await server.exited).code).toBe(0);
  }, 60_000);
});
