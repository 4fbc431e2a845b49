/**
 * The issue worker: a worker thread that issues large LU factorizations (cusolverDn<t>getrf)
 * so that their host-side work does not block the event loop. cuSOLVER enqueues a large
 * factorization as hundreds of kernels from the calling thread: getrf of n = 4096 (float64)
 * keeps the caller busy for 2-3 ms on the H200, during which a Node service answers nothing
 * (docs/decisions/0032-issue-large-factorizations-from-a-worker.md). A C service pays the
 * same on the thread of that one request; the worker gives Node the same: the event loop
 * only posts a message and awaits the reply.
 *
 * The worker owns cusolverDn handles of its own (never the task's lease, so no handle is used
 * from two threads): one per stream, at most as many per context as the task handles' bound
 * (`configureHandles`, 16 by default). It issues the calls one after
 * another, on the caller's stream with the caller's context current; before each call the
 * stream waits for the handle's previous call (an event), as the handle cache does for a
 * task's handle. The caller allocates the workspace (stream-ordered) before posting and frees
 * it after the reply, so the free is ordered after the routine's kernels. Only routines whose
 * promise the caller awaits anyway (`lu`, `solve`) go through it; everything else stays inline.
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
import type { Stream } from '@cuda-tasks/cudadrv';
import { koffiModulePath, libcudaSpec } from '@cuda-tasks/cudadrv/ffi';
import { onStreamDisposed } from '@cuda-tasks/cudadrv/internal';
import { libcusolverSpec } from './ffi/cusolver.js';
import { handles } from './handle.js';

/** The default of `setIssueWorkerThreshold`: factorizations of n >= 2048 go to the worker. */
export const DEFAULT_ISSUE_WORKER_THRESHOLD = 2048;

/** The routines the worker declares (the same prototypes as ffi/cusolver.ts). */
export type OffThreadSymbol = 'cusolverDnSgetrf' | 'cusolverDnDgetrf';

/** What the worker answers for one call: status 0, or the call that failed and its status. */
export interface OffThreadReply {
  /** 0, or the failing call's CUresult (`driver`) or cusolverStatus_t. */
  readonly status: number;
  /** The call that failed (a cuda* driver function or a cusolverDn routine). */
  readonly call?: string;
  /** Whether `status` is a CUresult (else a cusolverStatus_t). */
  readonly driver?: boolean;
  /** The stream began a capture before the worker got to the call: nothing was issued. */
  readonly capturing?: boolean;
  /**
   * The call was cancelled before the worker issued it (its stream was disposed, or the
   * signal given to `issueOffThread` aborted): nothing was issued.
   */
  readonly cancelled?: boolean;
}

/** What the worker needs of the stream a call runs on: a Stream (or a test's stand-in). */
export type OffThreadStream = Pick<Stream, 'ffiHandle'> & {
  readonly context: { readonly handle: bigint };
};

// The states of a call's shared word. The worker moves QUEUED to ISSUING (or finds CANCELLED
// and skips the call), then ISSUING to DONE; the event loop moves QUEUED to CANCELLED.
const QUEUED = 0;
const ISSUING = 1;
const DONE = 2;
const CANCELLED = 3;
/** How long a stream's disposal waits for the worker to finish issuing a call on it. */
const ISSUING_WAIT_MS = 10_000;
const CANCELLED_REPLY: OffThreadReply = Object.freeze({ status: 0, cancelled: true });

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

const STATE_KEY = Symbol.for('@cuda-tasks/cusolver/issue-worker');
// Process-wide, so that two loaded copies of this package share one worker.
const state: WorkerState = ((globalThis as any)[STATE_KEY] ??= {
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
} satisfies WorkerState);
// A state made by an older loaded copy of this package lacks these.
state.streams ??= new WeakSet();
state.kept ??= new WeakSet();

/**
 * The worker's program (CommonJS, run with `eval`). It loads koffi, libcuda and libcusolver
 * by the names the main thread uses (already loaded in the process: the same handles), then
 * answers each `{ id, context, stream, symbol, args, flag }` with `{ id, status, call?, driver? }`
 * (or `{ id, capturing: true }` for a stream that began a capture before the call got here).
 * It claims the call's shared word `flag` first (queued to issuing) and skips a call that was
 * cancelled, without a reply; once done it stores done and wakes a disposal waiting on it.
 * `{ forget: stream, context }` (the stream was disposed) unbinds the handle bound to it.
 * Handles: one per stream, at most `handlesPerContext` per context; past that the least
 * recently used one moves to the new stream. Before each call its stream waits on the event
 * recorded after the handle's previous call (the handle's internal buffers; on the same stream
 * it costs a microsecond and covers a new stream at a disposed one's address).
 */
const WORKER_SOURCE = `
'use strict';
const { parentPort, workerData } = require('node:worker_threads');
function load(koffi, names) {
  const failures = [];
  for (const name of names) {
    try { return koffi.load(name); } catch (error) { failures.push(name + ': ' + error.message); }
  }
  throw new Error('the worker could not load ' + failures.join('; '));
}
let run;
let forget;
try {
  const koffi = require(workerData.koffi);
  const cuda = load(koffi, workerData.cuda);
  const solver = load(koffi, workerData.cusolver);
  const cuCtxSetCurrent = cuda.func('int cuCtxSetCurrent(void *ctx)');
  const cuStreamIsCapturing = cuda.func('int cuStreamIsCapturing(void *hStream, _Out_ int *captureStatus)');
  const cuEventCreate = cuda.func('int cuEventCreate(_Out_ void **phEvent, unsigned int Flags)');
  const cuEventRecord = cuda.func('int cuEventRecord(void *hEvent, void *hStream)');
  const cuStreamWaitEvent = cuda.func('int cuStreamWaitEvent(void *hStream, void *hEvent, unsigned int Flags)');
  const cusolverDnCreate = solver.func('int cusolverDnCreate(_Out_ void **handle)');
  const cusolverDnSetStream = solver.func('int cusolverDnSetStream(void *handle, void *streamId)');
  const routines = {};
  for (const t of ['S', 'D']) {
    routines['cusolverDn' + t + 'getrf'] = solver.func('int cusolverDn' + t +
      'getrf(void *handle, int m, int n, void *A, int lda, void *Workspace, void *devIpiv, void *devInfo)');
  }
  const limit = workerData.handlesPerContext;
  const contexts = new Map();
  let current;
  let clock = 0;
  const driverFailure = (call, status) => ({ status, call, driver: true });
  // The handle for this stream: its own, a new one, or the least recently used one.
  const slotFor = (context, stream) => {
    let slots = contexts.get(context);
    if (slots === undefined) contexts.set(context, (slots = []));
    // Its own handle, else one whose stream was disposed (unbound), else a new one.
    let slot = slots.find((s) => s.stream === stream) ?? slots.find((s) => s.stream === undefined);
    if (slot !== undefined) return slot;
    if (slots.length < limit) {
      const out = [null];
      let status = cuEventCreate(out, 2); // CU_EVENT_DISABLE_TIMING
      if (status !== 0) return driverFailure('cuEventCreate', status);
      const event = out[0];
      status = cusolverDnCreate(out);
      if (status !== 0) return { status, call: 'cusolverDnCreate', driver: false };
      slot = { handle: out[0], event, stream: undefined, used: false, last: 0 };
      slots.push(slot);
      return slot;
    }
    return slots.reduce((a, b) => (b.last < a.last ? b : a));
  };
  forget = (context, stream) => {
    for (const slot of contexts.get(context) ?? []) {
      if (slot.stream === stream) slot.stream = undefined;
    }
  };
  run = (message) => {
    let status;
    if (current !== message.context) {
      status = cuCtxSetCurrent(message.context);
      if (status !== 0) return driverFailure('cuCtxSetCurrent', status);
      current = message.context;
    }
    const capture = [0];
    status = cuStreamIsCapturing(message.stream, capture);
    if (status !== 0) return driverFailure('cuStreamIsCapturing', status);
    if (capture[0] !== 0) return { status: 0, capturing: true };
    const routine = routines[message.symbol];
    if (routine === undefined) return { status: -1, call: String(message.symbol), driver: false };
    const slot = slotFor(message.context, message.stream);
    if (slot.status !== undefined) return slot;
    if (slot.used) {
      status = cuStreamWaitEvent(message.stream, slot.event, 0);
      if (status !== 0) return driverFailure('cuStreamWaitEvent', status);
    }
    if (slot.stream !== message.stream) {
      status = cusolverDnSetStream(slot.handle, message.stream);
      if (status !== 0) return { status, call: 'cusolverDnSetStream', driver: false };
      slot.stream = message.stream;
    }
    slot.last = ++clock;
    const result = routine(slot.handle, ...message.args);
    const recorded = cuEventRecord(slot.event, message.stream);
    slot.used = true;
    if (result !== 0) return { status: result, call: message.symbol, driver: false };
    if (recorded !== 0) return driverFailure('cuEventRecord', recorded);
    return { status: 0 };
  };
} catch (error) {
  parentPort.postMessage({ failed: String((error && error.message) || error) });
}
if (run !== undefined) {
  parentPort.on('message', (message) => {
    if (message.forget !== undefined) {
      forget(message.context, message.forget);
      return;
    }
    const flag = message.flag;
    // Cancelled while queued (its stream disposed, its signal aborted): nothing is issued.
    if (Atomics.compareExchange(flag, 0, ${QUEUED}, ${ISSUING}) !== ${QUEUED}) return;
    let reply;
    try {
      reply = run(message);
    } catch (error) {
      reply = { status: -1, call: String((error && error.message) || error), driver: false };
    } finally {
      Atomics.store(flag, 0, ${DONE});
      Atomics.notify(flag, 0);
    }
    parentPort.postMessage({ ...reply, id: message.id });
  });
  parentPort.postMessage({ ready: true });
}
`;

/** What the worker is started with: where koffi is, the library names to try, the handle bound. */
export interface IssueWorkerData {
  /** koffi's module file (`koffiModulePath()`), or a test double's. */
  readonly koffi: string;
  /** Names to load libcuda by, in order. */
  readonly cuda: readonly string[];
  /** Names to load libcusolver by, in order. */
  readonly cusolver: readonly string[];
  /** Handles the worker keeps per context (one per stream up to this). */
  readonly handlesPerContext: number;
}

function libraryNames(spec: {
  environmentVariable: string;
  candidates: readonly string[];
}): string[] {
  const override = process.env[spec.environmentVariable];
  return override ? [override] : [...spec.candidates];
}

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
  if (reply.status === 0 && reply.capturing !== true && reply.cancelled !== true) {
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
    state.worker?.postMessage({ forget: stream.ffiHandle, context: stream.context.handle });
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
  let data: IssueWorkerData;
  try {
    data = {
      koffi: koffiModulePath(),
      cuda: libraryNames(libcudaSpec),
      cusolver: libraryNames(libcusolverSpec),
      // As many as the task handles' bound (`configureHandles`), read when it starts.
      handlesPerContext: handles.maxHandlesPerContext,
    };
  } catch (error) {
    fail((error as Error).message);
    return Promise.resolve(false);
  }
  return startIssueWorkerWith(data);
}

/**
 * `startIssueWorker` with the worker's data given: the unit tests start it on a koffi test
 * double. Internal.
 */
export function startIssueWorkerWith(data: IssueWorkerData): Promise<boolean> {
  if (state.started !== undefined) return state.started;
  state.state = 'starting';
  state.failure = undefined;
  state.unlisten ??= onStreamDisposed(streamDisposed);
  const started = new Promise<boolean>((resolve) => {
    let worker: Worker;
    try {
      worker = new Worker(WORKER_SOURCE, {
        eval: true,
        workerData: data,
        // Its own small heap: it holds a few closures and numbers.
        resourceLimits: { maxOldGenerationSizeMb: 32 },
      });
    } catch (error) {
      fail((error as Error).message);
      resolve(false);
      return;
    }
    state.worker = worker;
    worker.on('message', (message: Record<string, unknown>) => {
      if (state.worker !== worker) return;
      if (message.ready === true) {
        // Referenced while it starts and while a call is in flight, not while idle. (Here,
        // after the listeners: adding a 'message' listener references its port again.)
        if (state.pending.size === 0) worker.unref();
        state.state = 'ready';
        resolve(true);
        return;
      }
      if (typeof message.failed === 'string') {
        fail(message.failed);
        resolve(false);
        return;
      }
      settle(message.id as number, message as unknown as OffThreadReply);
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
    worker.postMessage({
      id,
      context: stream.context.handle,
      stream: stream.ffiHandle,
      symbol,
      args,
      flag,
    });
  });
}

/**
 * Sets the size from which LU factorizations (`lu`, `solve`: min(m, n) >= n) are issued from
 * the issue worker instead of the calling thread; returns the previous one. Default 2048
 * (`DEFAULT_ISSUE_WORKER_THRESHOLD`); `Infinity` issues everything inline; 0 sends every
 * factorization to the worker. Process-wide. A RangeError for anything but a number >= 0.
 * @example
 * const previous = setIssueWorkerThreshold(Infinity); // all inline
 * setIssueWorkerThreshold(previous);
 */
export function setIssueWorkerThreshold(n: number): number {
  if (typeof n !== 'number' || !(n >= 0)) {
    throw new RangeError(
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
