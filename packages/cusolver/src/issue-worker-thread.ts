/**
 * The issue worker's thread (started by issue-worker.ts; built as dist/issue-worker-thread.js).
 * It binds the few native functions it needs from the package's FFI declarations (libcuda
 * through `@cuda-tasks/cudadrv/ffi`, libcusolver through ffi/cusolver.ts, loaded by the shared
 * loader: the process's own copies), posts `ready` (or `failed` with the loader's message),
 * then answers each `issue` message with a `reply`.
 *
 * For each call it first claims the call's shared word (QUEUED to ISSUING) and skips a call
 * that was cancelled, without a reply; once done it stores DONE and wakes a disposal waiting on
 * it. It makes the caller's context current, issues nothing on a stream that began a capture
 * (`capturing`), and issues the routine with the stream's handle: one per stream, at most
 * `handlesPerContext` per context; past that the least recently used one moves to the new
 * stream. Before each call its stream waits on the event recorded after the handle's previous
 * call (the handle's internal buffers; on the same stream it costs a microsecond and covers a
 * new stream at a disposed one's address). `forget` (the stream was disposed) unbinds the
 * handle bound to it.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { CU_EVENT_DISABLE_TIMING, cuda, cudaGraph } from '@cuda-tasks/cudadrv/ffi';
import { cusolver } from './ffi/cusolver.js';
import {
  DONE,
  type FromWorker,
  ISSUING,
  type IssueFailure,
  type IssueMessage,
  type IssueWorkerData,
  type OffThreadReply,
  type OffThreadSymbol,
  QUEUED,
  type ToWorker,
} from './issue-worker-protocol.js';

/** A native handle as koffi takes and gives it. */
type Handle = number | bigint;

/** The native functions the worker calls, as the package's FFI declarations bind them. */
export interface IssueBindings {
  /** CUresult cuCtxSetCurrent(CUcontext ctx). */
  cuCtxSetCurrent(context: Handle): number;
  /** CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus). */
  cuStreamIsCapturing(stream: Handle, captureStatus: number[]): number;
  /** CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags). */
  cuEventCreate(event: (Handle | null)[], flags: number): number;
  /** CUresult cuEventRecord(CUevent hEvent, CUstream hStream). */
  cuEventRecord(event: Handle, stream: Handle): number;
  /** CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags). */
  cuStreamWaitEvent(stream: Handle, event: Handle, flags: number): number;
  /** cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t *handle). */
  cusolverDnCreate(handle: (Handle | null)[]): number;
  /** cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t handle, cudaStream_t streamId). */
  cusolverDnSetStream(handle: Handle, stream: Handle): number;
  /** cusolverDnSgetrf(handle, m, n, A, lda, Workspace, devIpiv, devInfo). */
  cusolverDnSgetrf(handle: Handle, ...args: (number | bigint)[]): number;
  /** cusolverDnDgetrf(handle, m, n, A, lda, Workspace, devIpiv, devInfo). */
  cusolverDnDgetrf(handle: Handle, ...args: (number | bigint)[]): number;
}

/** The package's own bindings (loading libcuda and libcusolver; throws CudaUnavailableError). */
export function packageBindings(): IssueBindings {
  const driver = cuda();
  const graph = cudaGraph();
  const solver = cusolver();
  return {
    cuCtxSetCurrent: driver.cuCtxSetCurrent,
    cuStreamIsCapturing: graph.cuStreamIsCapturing,
    cuEventCreate: driver.cuEventCreate,
    cuEventRecord: driver.cuEventRecord,
    cuStreamWaitEvent: driver.cuStreamWaitEvent,
    cusolverDnCreate: solver.cusolverDnCreate,
    cusolverDnSetStream: solver.cusolverDnSetStream,
    cusolverDnSgetrf: solver.cusolverDnSgetrf,
    cusolverDnDgetrf: solver.cusolverDnDgetrf,
  };
}

/** One of the worker's handles: its event, the stream it is bound to, when it was last used. */
interface Slot {
  readonly handle: Handle;
  /** Recorded on the stream after each call of the handle. */
  readonly event: Handle;
  /** The stream it is bound to; undefined once that stream was disposed. */
  stream: Handle | undefined;
  /** Whether `event` has been recorded. */
  used: boolean;
  /** The issuer's clock when it was last used (least recently used: smallest). */
  last: number;
}

/** The worker's issuing logic over `bindings`: `issue` answers a call, `forget` unbinds a stream. */
export function createIssuer(bindings: IssueBindings, handlesPerContext: number) {
  const routines: Readonly<Record<OffThreadSymbol, IssueBindings[OffThreadSymbol]>> = {
    cusolverDnSgetrf: bindings.cusolverDnSgetrf,
    cusolverDnDgetrf: bindings.cusolverDnDgetrf,
  };
  const contexts = new Map<Handle, Slot[]>();
  const out: (Handle | null)[] = [null];
  const captureStatus = [0];
  let current: Handle | undefined;
  let clock = 0;

  const driverFailure = (call: string, status: number): OffThreadReply => ({
    error: { name: 'CudaError', status, call },
  });
  const solverFailure = (call: string, status: number): OffThreadReply => ({
    error: { name: 'CusolverError', status, call },
  });

  /** The handle for this stream: its own, else an unbound one, else a new one, else the LRU. */
  const slotFor = (context: Handle, stream: Handle): Slot | OffThreadReply => {
    let slots = contexts.get(context);
    if (slots === undefined) contexts.set(context, (slots = []));
    const found =
      slots.find((s) => s.stream === stream) ?? slots.find((s) => s.stream === undefined);
    if (found !== undefined) return found;
    if (slots.length < handlesPerContext) {
      let status = bindings.cuEventCreate(out, CU_EVENT_DISABLE_TIMING);
      if (status !== 0) return driverFailure('cuEventCreate', status);
      const event = out[0]!;
      status = bindings.cusolverDnCreate(out);
      if (status !== 0) return solverFailure('cusolverDnCreate', status);
      const slot: Slot = { handle: out[0]!, event, stream: undefined, used: false, last: 0 };
      slots.push(slot);
      return slot;
    }
    return slots.reduce((a, b) => (b.last < a.last ? b : a));
  };

  const run = (message: IssueMessage): OffThreadReply => {
    let status: number;
    if (current !== message.context) {
      status = bindings.cuCtxSetCurrent(message.context);
      if (status !== 0) return driverFailure('cuCtxSetCurrent', status);
      current = message.context;
    }
    status = bindings.cuStreamIsCapturing(message.stream, captureStatus);
    if (status !== 0) return driverFailure('cuStreamIsCapturing', status);
    if (captureStatus[0] !== 0) return { capturing: true };
    const routine = Object.hasOwn(routines, message.symbol) ? routines[message.symbol] : undefined;
    if (routine === undefined) {
      return {
        error: {
          name: 'TypeError',
          status: -1,
          call: String(message.symbol),
          message: `the cuSOLVER issue worker issues no ${String(message.symbol)}`,
        },
      };
    }
    const slot = slotFor(message.context, message.stream);
    if (!('handle' in slot)) return slot;
    if (slot.used) {
      status = bindings.cuStreamWaitEvent(message.stream, slot.event, 0);
      if (status !== 0) return driverFailure('cuStreamWaitEvent', status);
    }
    if (slot.stream !== message.stream) {
      status = bindings.cusolverDnSetStream(slot.handle, message.stream);
      if (status !== 0) return solverFailure('cusolverDnSetStream', status);
      slot.stream = message.stream;
    }
    slot.last = ++clock;
    const result = routine(slot.handle, ...message.args);
    const recorded = bindings.cuEventRecord(slot.event, message.stream);
    slot.used = true;
    if (result !== 0) return solverFailure(message.symbol, result);
    if (recorded !== 0) return driverFailure('cuEventRecord', recorded);
    return {};
  };

  return {
    /**
     * Issues the call unless it was cancelled (then undefined: no reply); its shared word ends
     * DONE, and a waiter on it is woken, whatever happened.
     */
    issue(message: IssueMessage): OffThreadReply | undefined {
      const flag = message.flag;
      // Cancelled while queued (its stream disposed, its signal aborted): nothing is issued.
      if (Atomics.compareExchange(flag, 0, QUEUED, ISSUING) !== QUEUED) return undefined;
      try {
        return run(message);
      } catch (error) {
        const failure: IssueFailure = {
          name: (error as Error)?.name ?? 'Error',
          status: -1,
          call: message.symbol,
          message: String((error as Error)?.message ?? error),
        };
        return { error: failure };
      } finally {
        Atomics.store(flag, 0, DONE);
        Atomics.notify(flag, 0);
      }
    },
    /** Unbinds the handle bound to `stream` (disposed): a later stream at its address rebinds. */
    forget(context: Handle, stream: Handle): void {
      for (const slot of contexts.get(context) ?? []) {
        if (slot.stream === stream) slot.stream = undefined;
      }
    },
  };
}

/** Loads the bindings (the package's, or the test double's), then serves the event loop. */
async function serve(port: NonNullable<typeof parentPort>, data: IssueWorkerData): Promise<void> {
  const post = (message: FromWorker) => port.postMessage(message);
  let issuer: ReturnType<typeof createIssuer>;
  try {
    const bindings =
      data.bindings === undefined
        ? packageBindings()
        : ((await import(data.bindings)) as { bindings(): IssueBindings }).bindings();
    issuer = createIssuer(bindings, data.handlesPerContext);
  } catch (error) {
    post({ kind: 'failed', reason: String((error as Error)?.message ?? error) });
    return;
  }
  port.on('message', (message: ToWorker) => {
    if (message.kind === 'forget') {
      issuer.forget(message.context, message.stream);
      return;
    }
    const reply = issuer.issue(message);
    if (reply !== undefined) post({ kind: 'reply', id: message.id, reply });
  });
  post({ kind: 'ready' });
}

if (parentPort !== null) void serve(parentPort, workerData as IssueWorkerData);
