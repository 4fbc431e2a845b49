/**
 * The issue worker's job module (issue-worker.ts runs it in a `WorkerPool` of one thread;
 * built, it is dist/issue-jobs.js). In that thread every factorization is issued inline: this
 * thread is the worker. The driver and cuSOLVER are loaded when the module loads, so that a
 * worker that cannot have them fails to start, with the loader's message, rather than at its
 * first call.
 */
import { type DeviceArray, driver, type FloatDType } from '@cuda-tasks/cudadrv';
import { stream as currentStream } from '@cuda-tasks/task-runtime';
import { cusolver } from './ffi/cusolver.js';
import { setIssueWorkerThreshold } from './issue-worker.js';
import { getrf as issueGetrf } from './routines.js';

driver();
cusolver();
setIssueWorkerThreshold(Number.POSITIVE_INFINITY);

/**
 * getrf of the m x n `factors` (leading dimension m) in place, on this job's stream, with its
 * pivots and status (lent by the caller: borrowed on this stream, given back after the job).
 */
export function getrf(
  factors: DeviceArray<FloatDType>,
  pivots: DeviceArray<'int32'>,
  info: DeviceArray<'int32'>,
  m: number,
  n: number,
): void {
  const stream = currentStream();
  issueGetrf(
    stream,
    factors.dtype,
    m,
    n,
    factors.useOn(stream),
    m,
    pivots.useOn(stream),
    info.useOn(stream),
  );
}
