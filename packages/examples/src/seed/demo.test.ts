import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { probeGpu } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';

// `pnpm demo` where there is no GPU: one clear message on stderr, exit status 1. The unit
// project does not get the vitest config's CUDA_TASKS_GPU, so ask the probe itself (with
// CUDA_TASKS_GPU left out: a "0" there would say nothing about this machine).

const packageRoot = fileURLToPath(new URL('../..', import.meta.url));
const tsx = fileURLToPath(new URL('../../node_modules/.bin/tsx', import.meta.url));

function gpuHere(): boolean {
  const saved = process.env.CUDA_TASKS_GPU;
  delete process.env.CUDA_TASKS_GPU;
  try {
    return probeGpu().available;
  } finally {
    if (saved !== undefined) process.env.CUDA_TASKS_GPU = saved;
  }
}

function runDemo(env: Record<string, string | undefined>) {
  return spawnSync(tsx, ['--conditions=@cuda-tasks/source', 'src/seed/demo.ts', '--n', '64'], {
    cwd: packageRoot,
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, ...env },
  });
}

/** The messages CudaUnavailableError carries from cudadrv (driver.ts, the library loader). */
const UNAVAILABLE =
  /^(The NVIDIA CUDA driver \(libcuda\) is not available: |The NVIDIA driver is installed but reports no CUDA-capable GPU|The CUDA driver failed to initialize: )/;

function expectOneClearMessage(result: ReturnType<typeof runDemo>): void {
  expect(result.error).toBeUndefined();
  expect(result.status).toBe(1);
  // Nothing on stdout: no results table, no "OK" and no "FAILED" line.
  expect(result.stdout).toBe('');
  expect(result.stderr).toMatch(UNAVAILABLE);
  // One message, not a stack trace.
  expect(result.stderr.match(new RegExp(UNAVAILABLE.source.slice(1), 'g')) ?? []).toHaveLength(1);
  expect(result.stderr).not.toMatch(/^\s+at /m);
  expect(result.stderr).not.toMatch(/CudaUnavailableError|Error:/);
}

describe('the demo without a GPU', () => {
  it.skipIf(gpuHere())(
    'exits with 1 and one message naming what is missing',
    () => {
      expectOneClearMessage(runDemo({}));
    },
    60_000,
  );

  it('exits with 1 and names the driver it could not load (CUDA_TASKS_LIBCUDA)', () => {
    // Runs on any machine: a driver path that does not exist stands for a missing driver.
    const result = runDemo({ CUDA_TASKS_LIBCUDA: '/nonexistent/libcuda.so.1' });
    expectOneClearMessage(result);
    expect(result.stderr).toContain(
      'could not load /nonexistent/libcuda.so.1 (from CUDA_TASKS_LIBCUDA)',
    );
    expect(result.stderr).toContain('Install the NVIDIA GPU driver');
  }, 60_000);
});
