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
 */
import { Worker } from 'node:worker_threads';
import { koffiModulePath, libcudaSpec } from '@cuda-tasks/cudadrv/ffi';
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
}

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
} satisfies WorkerState);

/**
 * The worker's program (CommonJS, run with `eval`). It loads koffi, libcuda and libcusolver
 * by the names the main thread uses (already loaded in the process: the same handles), then
 * answers each `{ id, context, stream, symbol, args }` with `{ id, status, call?, driver? }`
 * (or `{ id, capturing: true }` for a stream that began a capture before the call got here).
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
    let slot = slots.find((s) => s.stream === stream);
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
    let reply;
    try {
      reply = run(message);
    } catch (error) {
      reply = { status: -1, call: String((error && error.message) || error), driver: false };
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
  const pending = [...state.pending.values()];
  state.pending.clear();
  for (const call of pending) {
    call.reject(new Error(`the cuSOLVER issue worker stopped during a call: ${reason}`));
  }
  void worker?.terminate();
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
    worker.unref(); // referenced only while a call is in flight
    worker.on('message', (message: Record<string, unknown>) => {
      if (state.worker !== worker) return;
      if (message.ready === true) {
        state.state = 'ready';
        resolve(true);
        return;
      }
      if (typeof message.failed === 'string') {
        fail(message.failed);
        resolve(false);
        return;
      }
      const id = message.id as number;
      const call = state.pending.get(id);
      if (call === undefined) return;
      state.pending.delete(id);
      if (state.pending.size === 0) worker.unref();
      if (message.status === 0 && message.capturing !== true) state.offThread++;
      call.resolve(message as unknown as OffThreadReply);
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
  for (const call of state.pending.values()) call.reject(new Error('the issue worker was stopped'));
  state.pending.clear();
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
 * Issues one routine from the worker on `stream` (its CUstream) with `context` (its CUcontext)
 * current there; resolves with the worker's reply. Only after `offThreadReady` said true.
 */
export function issueOffThread(
  symbol: OffThreadSymbol,
  context: bigint,
  stream: number | bigint,
  args: readonly (number | bigint)[],
): Promise<OffThreadReply> {
  const worker = state.worker!;
  const id = state.nextId++;
  return new Promise<OffThreadReply>((resolve, reject) => {
    if (state.pending.size === 0) worker.ref();
    state.pending.set(id, { resolve, reject });
    worker.postMessage({ id, context, stream, symbol, args });
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
