/**
 * The issue worker: a worker thread that issues large LU factorizations (cusolverDn<t>getrf)
 * so that their host-side work does not block the event loop. cuSOLVER enqueues a large
 * factorization as hundreds of kernels from the calling thread, which in Node is the event
 * loop: a service answers nothing meanwhile (the figures are in
 * docs/decisions/0032-issue-large-factorizations-from-a-worker.md). With the worker, the event
 * loop only posts a message and awaits the reply. This module is the event loop's side; the
 * worker runs issue-worker-thread.ts, and issue-worker-protocol.ts holds what they exchange.
 *
 * The worker owns cusolverDn handles of its own (never the task's lease, so no handle is used
 * from two threads): one per stream, at most as many per context as the task handles' bound
 * (`configureHandles`, 16 by default). It issues the calls one after another, on the caller's
 * stream with the caller's context current; before each call the stream waits for the
 * handle's previous call (an event), as the handle cache does for a task's handle. The caller
 * allocates the workspace (stream-ordered) before posting and frees it after the reply, so the
 * free is ordered after the routine's kernels. Only routines whose promise the caller awaits
 * anyway (`lu`, `solve`) go through it; everything else stays inline. A failure in the worker
 * comes back as a structured message (`IssueFailure`) from which `issueFailureError` rebuilds
 * the library's own error (CudaError, CusolverError).
 *
 * Each call carries a shared word (queued, issuing, done, cancelled) that the worker claims
 * before it issues anything. A call still queued can thus be cancelled from the event loop:
 * when its stream is disposed (a stream-disposed listener, which runs before the stream is
 * destroyed) or its task's signal aborts; nothing of it reaches the driver. A call the worker
 * is issuing makes the stream's disposal wait until the worker is done with it, so that its
 * kernels are on the stream before the stream is drained and destroyed, and no call ever goes
 * to a destroyed stream (or to a later stream created at its address); past the wait's bound
 * the native stream is kept (leaked, with a process warning) instead of destroyed.
 */
import { Worker } from 'node:worker_threads';
import {
  CudaArgumentError,
  check as checkDriver,
  packageOf,
  processState,
  type Stream,
} from '@cuda-tasks/cudadrv';
import { onStreamDisposed, threadEntry } from '@cuda-tasks/cudadrv/internal';
import { check } from './errors.js';
import { handles } from './handle.js';
import {
  CANCELLED,
  type FromWorker,
  ISSUING,
  type IssueFailure,
  type IssueWorkerData,
  type OffThreadReply,
  type OffThreadSymbol,
  QUEUED,
  type ToWorker,
} from './issue-worker-protocol.js';

export type {
  IssueFailure,
  IssueWorkerData,
  OffThreadReply,
  OffThreadSymbol,
} from './issue-worker-protocol.js';

/** The default of `setIssueWorkerThreshold`: factorizations of n >= 2048 go to the worker. */
export const DEFAULT_ISSUE_WORKER_THRESHOLD = 2048;

/** What the worker needs of the stream a call runs on: a Stream (or a test's stand-in). */
export type OffThreadStream = Pick<Stream, 'ffiHandle'> & {
  readonly context: { readonly handle: bigint };
};

/** How long a stream's disposal waits for the worker to finish issuing a call on it. */
const ISSUING_WAIT_MS = 10_000;
const CANCELLED_REPLY: OffThreadReply = Object.freeze({ cancelled: true });

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

interface Pending {
  readonly stream: OffThreadStream;
  /** The call's shared word (QUEUED, ISSUING, DONE or CANCELLED). */
  readonly flag: Int32Array;
  readonly signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  resolve(reply: OffThreadReply): void;
  reject(error: Error): void;
}

interface WorkerState {
  threshold: number;
  worker: Worker | undefined;
  state: IssueWorkerStatistics['state'];
  started: Promise<boolean> | undefined;
  failure: string | undefined;
  pending: Map<number, Pending>;
  nextId: number;
  offThread: number;
  inline: number;
  /** Streams the worker has been given calls for (it may hold a handle bound to them). */
  streams: WeakSet<OffThreadStream>;
  /** Disposed streams whose native stream was kept: the worker was still issuing on them. */
  kept: WeakSet<OffThreadStream>;
  /** Removes the stream-disposed listener; set once the first worker starts. */
  unlisten: (() => void) | undefined;
}

// Process-wide, so that two loaded copies of this package share one worker.
const state: WorkerState = processState(
  packageOf(import.meta.url, '@cuda-tasks/cusolver'),
  'issue-worker',
  (): WorkerState => ({
    threshold: DEFAULT_ISSUE_WORKER_THRESHOLD,
    worker: undefined,
    state: 'stopped',
    started: undefined,
    failure: undefined,
    pending: new Map(),
    nextId: 1,
    offThread: 0,
    inline: 0,
    streams: new WeakSet(),
    kept: new WeakSet(),
    unlisten: undefined,
  }),
);
// A state made by an older loaded copy of this package lacks these.
state.streams ??= new WeakSet();
state.kept ??= new WeakSet();

function fail(reason: string): void {
  state.state = 'failed';
  state.failure = reason;
  state.started = undefined; // startIssueWorker() tries again; calls meanwhile stay inline
  const worker = state.worker;
  state.worker = undefined;
  rejectPending(new Error(`the cuSOLVER issue worker stopped during a call: ${reason}`));
  void worker?.terminate();
}

/** Rejects every call in flight with `error` (the worker stopped). */
function rejectPending(error: Error): void {
  const pending = [...state.pending.values()];
  state.pending.clear();
  for (const call of pending) {
    forgetSignal(call);
    call.reject(error);
  }
}

function forgetSignal(call: Pending): void {
  if (call.onAbort !== undefined) call.signal!.removeEventListener('abort', call.onAbort);
  call.onAbort = undefined;
}

/** Resolves call `id` with `reply` (once; a later reply for it is ignored). */
function settle(id: number, reply: OffThreadReply): void {
  const call = state.pending.get(id);
  if (call === undefined) return;
  state.pending.delete(id);
  if (state.pending.size === 0) state.worker?.unref();
  forgetSignal(call);
  if (reply.error === undefined && reply.capturing !== true && reply.cancelled !== true) {
    state.offThread++;
  }
  call.resolve(reply);
}

/** Cancels a call the worker has not claimed yet; false once it has (issuing or done). */
function cancelQueued(call: Pending): boolean {
  return Atomics.compareExchange(call.flag, 0, QUEUED, CANCELLED) === QUEUED;
}

/**
 * What happens when a stream is disposed, before it is destroyed (a stream-disposed listener):
 * first every call of the stream still queued for the worker is cancelled (each resolves
 * `{ cancelled: true }`, nothing issued); then, for one the worker is issuing, the event loop
 * waits (blocking, as the disposal's own drain does) until the worker is done with it, so that
 * its kernels are on the stream before the stream is drained and destroyed; last the worker
 * unbinds its handle from the stream, whatever happened. When the worker is still issuing
 * after the wait's bound (10 s), it answers `'keep-native-stream'` (the disposal then leaves
 * the native stream alive for the process's life, as the process warning says) rather than
 * let it be destroyed while the worker may still use it. Internal (the unit tests call it with
 * stand-in streams).
 */
export function streamDisposed(stream: OffThreadStream): 'keep-native-stream' | undefined {
  if (!state.streams.has(stream)) return undefined;
  state.streams.delete(stream);
  let issuing: Int32Array | undefined;
  for (const [id, call] of state.pending) {
    if (call.stream !== stream) continue;
    if (cancelQueued(call)) settle(id, CANCELLED_REPLY);
    else issuing = call.flag; // the worker issues one call at a time
  }
  try {
    if (issuing === undefined || awaitIssued(issuing)) return undefined;
    process.emitWarning(
      `the cuSOLVER issue worker was still issuing a call on ${streamName(stream)} after ${issuingWaitMs / 1000} s of its disposal; the native stream is not destroyed (it stays allocated for the life of the process) so that the worker never issues on a destroyed stream or on a later one created at its address`,
      { type: 'CudaTasksIssueWorkerWarning' },
    );
    state.kept.add(stream);
    return 'keep-native-stream';
  } finally {
    post({ kind: 'forget', context: stream.context.handle, stream: stream.ffiHandle });
  }
}

/**
 * Whether `stream`'s disposal kept its native stream because the worker was still issuing a
 * call on it (see `streamDisposed`): that call's kernels may have been enqueued after the
 * disposal's drain, so what they use is freed only after the native stream is synchronized.
 * Internal.
 */
export function nativeStreamKept(stream: OffThreadStream): boolean {
  return state.kept.has(stream);
}

/** `Stream(name)` for a Stream, `Stream(0x…)` for a test's stand-in. */
function streamName(stream: OffThreadStream): string {
  const text = String(stream);
  return text.startsWith('Stream(') ? text : `Stream(0x${BigInt(stream.ffiHandle).toString(16)})`;
}

/** How long a stream's disposal waits for the worker (ISSUING_WAIT_MS; the tests shorten it). */
let issuingWaitMs = ISSUING_WAIT_MS;

/** Sets how long a stream's disposal waits for the worker; returns the previous bound. Internal (tests). */
export function setIssuingWaitMs(ms: number): number {
  const previous = issuingWaitMs;
  issuingWaitMs = ms;
  return previous;
}

/** Blocks until the worker has finished issuing the call of `flag`; false after `issuingWaitMs`. */
function awaitIssued(flag: Int32Array): boolean {
  const deadline = performance.now() + issuingWaitMs;
  while (Atomics.load(flag, 0) === ISSUING) {
    const left = deadline - performance.now();
    if (left <= 0) return false;
    Atomics.wait(flag, 0, ISSUING, left);
  }
  return true;
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
  // As many handles as the task handles' bound (`configureHandles`), read when it starts.
  return startIssueWorkerWith({ handlesPerContext: handles.maxHandlesPerContext });
}

/**
 * `startIssueWorker` with the worker's data given: the unit tests start it on a test double
 * of the native functions (`bindings`). Internal.
 */
export function startIssueWorkerWith(data: IssueWorkerData): Promise<boolean> {
  if (state.started !== undefined) return state.started;
  state.state = 'starting';
  state.failure = undefined;
  state.unlisten ??= onStreamDisposed(streamDisposed);
  const started = new Promise<boolean>((resolve) => {
    let worker: Worker;
    try {
      const entry = threadEntry(
        import.meta.url,
        'issue-worker-thread.js',
        'issue-worker-source.mjs',
      );
      worker = new Worker(entry.url, {
        workerData: data,
        ...(entry.execArgv === undefined ? {} : { execArgv: entry.execArgv }),
        // Its own small heap: it holds its bindings, a few closures and numbers.
        resourceLimits: { maxOldGenerationSizeMb: 32 },
      });
    } catch (error) {
      fail((error as Error).message);
      resolve(false);
      return;
    }
    state.worker = worker;
    worker.on('message', (message: FromWorker) => {
      if (state.worker !== worker) return;
      if (message.kind === 'ready') {
        // Referenced while it starts and while a call is in flight, not while idle. (Here,
        // after the listeners: adding a 'message' listener references its port again.)
        if (state.pending.size === 0) worker.unref();
        state.state = 'ready';
        resolve(true);
        return;
      }
      if (message.kind === 'failed') {
        fail(message.reason);
        resolve(false);
        return;
      }
      settle(message.id, message.reply);
    });
    worker.on('error', (error) => {
      if (state.worker === worker) fail(error.message);
      resolve(false);
    });
    worker.on('exit', (code) => {
      if (state.worker === worker) fail(`it exited with code ${code}`);
      resolve(false);
    });
  });
  state.started = started;
  return started;
}

/** Stops the worker and forgets it (the unit tests start one per case). Internal. */
export async function stopIssueWorker(): Promise<void> {
  const worker = state.worker;
  state.worker = undefined;
  state.started = undefined;
  state.state = 'stopped';
  state.failure = undefined;
  state.offThread = 0;
  state.inline = 0;
  rejectPending(new Error('the issue worker was stopped'));
  await worker?.terminate();
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
 * Issues one routine from the worker on `stream` with its context current there; resolves
 * with the worker's reply. Resolves `{ cancelled: true }`, nothing issued, when `stream` is
 * disposed or `signal` aborts before the worker takes the call up (once it has, the reply
 * comes when it is done). Only after `offThreadReady` said true.
 */
export function issueOffThread(
  symbol: OffThreadSymbol,
  stream: OffThreadStream,
  args: readonly (number | bigint)[],
  signal?: AbortSignal,
): Promise<OffThreadReply> {
  if (signal?.aborted) return Promise.resolve(CANCELLED_REPLY);
  const worker = state.worker!;
  const id = state.nextId++;
  const flag = new Int32Array(new SharedArrayBuffer(4));
  state.streams.add(stream);
  return new Promise<OffThreadReply>((resolve, reject) => {
    const call: Pending = { stream, flag, signal, onAbort: undefined, resolve, reject };
    if (signal !== undefined) {
      call.onAbort = () => {
        if (cancelQueued(call)) settle(id, CANCELLED_REPLY);
      };
      signal.addEventListener('abort', call.onAbort, { once: true });
    }
    if (state.pending.size === 0) worker.ref();
    state.pending.set(id, call);
    post({
      kind: 'issue',
      id,
      context: stream.context.handle,
      stream: stream.ffiHandle,
      symbol,
      args,
      flag,
    });
  });
}

/** Posts `message` to the worker, if one is running. */
function post(message: ToWorker): void {
  state.worker?.postMessage(message);
}

/**
 * The library's own error for a failure the worker reported: the CudaError that cudadrv's
 * `check` makes for a CUresult, the CusolverError of this package's `check` for a
 * cusolverStatus_t, else an Error of the caught error's kind (TypeError, RangeError, or Error
 * with its name) whose message says it came from the worker's call. Internal.
 */
export function issueFailureError(failure: IssueFailure): Error {
  try {
    if (failure.name === 'CudaError') checkDriver(failure.status, failure.call);
    else if (failure.name === 'CusolverError') check(failure.status, failure.call);
  } catch (error) {
    return error as Error;
  }
  const message = `${failure.call} in the cuSOLVER issue worker: ${failure.message ?? `status ${failure.status}`}`;
  if (failure.name === 'TypeError') return new TypeError(message);
  if (failure.name === 'RangeError') return new RangeError(message);
  const error = new Error(message);
  error.name = failure.name;
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
