import { CudaArgumentError } from '@cuda-tasks/cudadrv';
import { afterAll, describe, expect, it } from 'vitest';
import {
  DEFAULT_ISSUE_WORKER_THRESHOLD,
  issueWorkerStatistics,
  issueWorkerThreshold,
  offThreadReady,
  setIssueWorkerThreshold,
  startIssueWorker,
} from './issue-worker.js';

describe('the issue worker threshold', () => {
  afterAll(() => {
    setIssueWorkerThreshold(DEFAULT_ISSUE_WORKER_THRESHOLD);
  });

  it('is 2048 by default; setIssueWorkerThreshold returns the previous one', () => {
    expect(issueWorkerThreshold()).toBe(2048);
    expect(setIssueWorkerThreshold(Number.POSITIVE_INFINITY)).toBe(2048);
    expect(issueWorkerThreshold()).toBe(Number.POSITIVE_INFINITY);
    expect(setIssueWorkerThreshold(0)).toBe(Number.POSITIVE_INFINITY);
    expect(setIssueWorkerThreshold(2048)).toBe(0);
  });

  it('takes only a number >= 0, and names what it got', () => {
    for (const bad of [-1, Number.NaN, '512', undefined]) {
      expect(() => setIssueWorkerThreshold(bad as number)).toThrow(CudaArgumentError);
    }
    expect(() => setIssueWorkerThreshold(-1)).toThrow(
      'setIssueWorkerThreshold: n must be a number >= 0 (Infinity: never), got -1',
    );
    expect(issueWorkerThreshold()).toBe(2048);
  });

  it('below the threshold nothing goes to the worker and the worker is not started', () => {
    expect(offThreadReady(2047)).toBe(false);
    expect(issueWorkerStatistics()).toEqual({ state: 'stopped', offThread: 0, inline: 0 });
  });
});

describe('a worker that cannot load its libraries', () => {
  it('reports why in the shared loader’s words, and every call stays inline (counted while it started, not after)', async () => {
    const saved = process.env.CUDA_TASKS_LIBCUSOLVER;
    process.env.CUDA_TASKS_LIBCUSOLVER = '/nonexistent/libcusolver.so.12';
    try {
      // The first large call starts the worker and is issued inline.
      expect(offThreadReady(4096)).toBe(false);
      expect(issueWorkerStatistics()).toMatchObject({ state: 'starting', inline: 1 });
      expect(await startIssueWorker()).toBe(false);
      const statistics = issueWorkerStatistics();
      expect(statistics).toMatchObject({ state: 'failed', offThread: 0, inline: 1 });
      // The loader's CudaUnavailableError for whichever library failed first (libcuda where
      // there is no driver, else libcusolver, from the environment variable).
      expect(statistics.failure).toMatch(
        /^(The NVIDIA CUDA driver \(libcuda\) is not available: could not load libcuda\.so\.1 or libcuda\.so\.|cuSOLVER is not available: could not load \/nonexistent\/libcusolver\.so\.12 \(from CUDA_TASKS_LIBCUSOLVER\)\.)/,
      );
      expect(offThreadReady(4096)).toBe(false);
      expect(issueWorkerStatistics().inline).toBe(1);
    } finally {
      if (saved === undefined) delete process.env.CUDA_TASKS_LIBCUSOLVER;
      else process.env.CUDA_TASKS_LIBCUSOLVER = saved;
    }
  });
});
