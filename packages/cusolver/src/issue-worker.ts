/**
 * The issue worker: large LU factorizations (cusolverDn<t>getrf) made on a worker thread, so
 * that their host-side work does not block the event loop. cuSOLVER enqueues a large
 * factorization as hundreds of kernels from the calling thread, which in Node is the event
 * loop: a service answers nothing meanwhile (the figures are in
 * docs/decisions/0032-issue-large-factorizations-from-a-worker.md). With the worker, the event
 * loop only hands the arrays over and awaits the answer.
 *
 * The worker is the task runtime's `WorkerPool` of one thread, on the job module
 * issue-jobs.ts: one mechanism for every worker of the repository. The factorization runs
 * there as a task of its own (its own stream and cusolverDn handle, its workspace from the
 * pool on that stream); the matrix, the pivots and the status are lent to it without copies,
 * ordered after the caller's work on them and the caller's stream after the factorization, on
 * the GPU. Only routines whose promise the caller awaits anyway (`lu`, `solve`) go through it;
 * everything else stays inline, and so does everything inside a graph capture. A failure in
 * the worker comes back as the library's own error (CudaError, CusolverError).
 */
import {
  CudaArgumentError,
  check as checkDriver,
  type DeviceArray,
  type FloatDType,
  packageOf,
  processState,
  type Stream,
} from '@cuda-tasks/cudadrv';
import { WorkerJobError, WorkerPool } from '@cuda-tasks/task-runtime';
import { check } from './errors.js';

/** The default of `setIssueWorkerThreshold`: factorizations of n >= 2048 go to the worker. */
export const DEFAULT_ISSUE_WORKER_THRESHOLD = 2048;

/** How the issue worker stands, from `issueWorkerStatistics`. */
export interface IssueWorkerStatistics {
  /** `stopped` (not needed yet), `starting`, `ready`, or `failed` (calls stay inline). */
  readonly state: 'stopped' | 'starting' | 'ready' | 'failed';
  /** Calls the worker issued successfully so far. */
  readonly offThread: number;
  /** Calls at or over the threshold issued inline because the worker was not ready yet. */
  readonly inline: number;
  /** Why the worker failed to start or stopped (state `failed`). */
  readonly failure?: string;
}

interface WorkerState {
  threshold: number;
  pool: WorkerPool | undefined;
  state: IssueWorkerStatistics['state'];
  started: Promise<boolean> | undefined;
  failure: string | undefined;
  offThread: number;
  inline: number;
}

// Process-wide, so that two loaded copies of this package share one worker.
const state: WorkerState = processState(
  packageOf(import.meta.url, '@cuda-tasks/cusolver'),
  'issue-worker-pool',
  (): WorkerState => ({
    threshold: DEFAULT_ISSUE_WORKER_THRESHOLD,
    pool: undefined,
    state: 'stopped',
    started: undefined,
    failure: undefined,
    offThread: 0,
    inline: 0,
  }),
);

/** The job module: built, issue-jobs.js beside this chunk; from the source, issue-jobs.ts. */
function jobModule(): URL {
  const source = import.meta.url.endsWith('.ts');
  return new URL(source ? './issue-jobs.ts' : './issue-jobs.js', import.meta.url);
}

/**
 * Starts the issue worker if it is not running (it takes some tens of milliseconds; calls
 * made meanwhile are issued inline). Resolves true once it is ready, false if it could not
 * start (`issueWorkerStatistics().failure` says why; calls then stay inline until a later
 * `startIssueWorker()` succeeds). Call it ahead of a burst, as `prewarm` does for streams
 * and handles.
 * @example
 * await startIssueWorker();
 * const x = await solve(a, b); // n = 4096: issued from the worker
 */
export function startIssueWorker(): Promise<boolean> {
  if (state.started !== undefined) return state.started;
  state.state = 'starting';
  state.failure = undefined;
  const started = WorkerPool.start(jobModule(), { workers: 1 }).then(
    (pool) => {
      state.pool = pool;
      state.state = 'ready';
      return true;
    },
    (error: unknown) => {
      state.state = 'failed';
      state.failure =
        error instanceof WorkerJobError ? error.remoteMessage : (error as Error).message;
      state.started = undefined; // a later startIssueWorker() tries again
      return false;
    },
  );
  state.started = started;
  return started;
}

/** Stops the worker and forgets it (the unit tests start one per case). Internal. */
export async function stopIssueWorker(): Promise<void> {
  const pool = state.pool;
  state.pool = undefined;
  state.started = undefined;
  state.state = 'stopped';
  state.failure = undefined;
  state.offThread = 0;
  state.inline = 0;
  await pool?.close();
}

/**
 * Whether a factorization of this size goes to the worker; starts the worker the first time
 * one does (that call and the ones until it is ready are issued inline and counted).
 */
export function offThreadReady(size: number): boolean {
  if (!(size >= state.threshold)) return false;
  if (state.state === 'ready') return true;
  if (state.state === 'stopped') void startIssueWorker();
  if (state.state !== 'failed') state.inline++;
  return false;
}

/**
 * getrf of the m x n matrix `factors` (leading dimension m) in place, made by the worker:
 * `factors`, `pivots` and `info` are lent to it on `stream` (nothing else may use them until
 * this resolves), and `stream` waits on the GPU for the factorization when it does. Rejects
 * with the library's own error for a failing call, with `signal`'s reason when it aborts (the
 * factorization's task in the worker is aborted: what it had not issued is not issued). Only
 * after `offThreadReady` said true.
 */
export async function factorOffThread(
  stream: Stream,
  factors: DeviceArray<FloatDType>,
  pivots: DeviceArray<'int32'>,
  info: DeviceArray<'int32'>,
  m: number,
  n: number,
  signal: AbortSignal | undefined,
): Promise<void> {
  const pool = state.pool!;
  try {
    await pool.runWith('getrf', [factors, pivots, info, m, n], {
      stream,
      ...(signal === undefined ? {} : { signal }),
    });
  } catch (error) {
    throw error instanceof WorkerJobError ? libraryError(error) : error;
  }
  state.offThread++;
}

/**
 * The library's own error for a failure in the worker: the CudaError that cudadrv's `check`
 * makes for a CUresult, the CusolverError of this package's `check` for a cusolverStatus_t,
 * else the worker's error as it came (a WorkerJobError naming the worker's class). Internal.
 */
export function libraryError(error: WorkerJobError): Error {
  const code = error.code;
  if (typeof code === 'number' && error.call !== undefined) {
    try {
      if (error.remoteName === 'CudaError') checkDriver(code, error.call);
      else if (error.remoteName === 'CusolverError') check(code, error.call);
    } catch (rebuilt) {
      return rebuilt as Error;
    }
  }
  return error;
}

/**
 * Sets the size from which LU factorizations (`lu`, `solve`: min(m, n) >= n) are issued from
 * the issue worker instead of the calling thread; returns the previous one. Default 2048
 * (`DEFAULT_ISSUE_WORKER_THRESHOLD`); `Infinity` issues everything inline; 0 sends every
 * factorization to the worker. Process-wide. A CudaArgumentError for anything but a number >= 0.
 * @example
 * const previous = setIssueWorkerThreshold(Infinity); // all inline
 * setIssueWorkerThreshold(previous);
 */
export function setIssueWorkerThreshold(n: number): number {
  if (typeof n !== 'number' || !(n >= 0)) {
    throw new CudaArgumentError(
      `setIssueWorkerThreshold: n must be a number >= 0 (Infinity: never), got ${String(n)}`,
    );
  }
  const previous = state.threshold;
  state.threshold = n;
  return previous;
}

/** The size from which LU factorizations are issued from the worker (see setIssueWorkerThreshold). */
export function issueWorkerThreshold(): number {
  return state.threshold;
}

/**
 * How the issue worker stands: its state, how many calls it issued, how many large ones were
 * issued inline while it started, and why it failed if it did.
 * @example
 * console.log(issueWorkerStatistics()); // { state: 'ready', offThread: 12, inline: 1 }
 */
export function issueWorkerStatistics(): IssueWorkerStatistics {
  return {
    state: state.state,
    offThread: state.offThread,
    inline: state.inline,
    ...(state.failure === undefined ? {} : { failure: state.failure }),
  };
}
