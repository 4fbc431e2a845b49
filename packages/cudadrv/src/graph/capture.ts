import type { Context } from '../context/device.js';
import { check, cudaError, driver } from '../driver.js';
import { CaptureError, DisposedError } from '../errors.js';
import {
  CU_STREAM_CAPTURE_MODE_RELAXED,
  CU_STREAM_CAPTURE_STATUS_NONE,
  CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
  cudaGraph,
} from '../ffi/graph.js';
import type { Module } from '../kernel/module.js';
import { abandonCapturedAllocation, DeviceBuffer, holdAsGraphOutput } from '../memory/memory.js';
import type { PinnedHostBuffer } from '../memory/transfer.js';
import type { Stream } from '../stream/stream.js';
import { Graph } from './graph.js';

/**
 * cuStreamIsCapturing's out-parameter, reused: the query allocates nothing. A typed array, which
 * koffi hands to C as is, where a plain array is converted each way (the query runs at every
 * task's end, see `endLeftOpen`; decision 0042).
 */
const captureStatus = new Int32Array(1);
/** cuStreamGetCaptureInfo_v3's capture-id out-parameter. */
const captureId: (number | bigint)[] = [0];
/** Sessions of `begin` not yet ended (each has its origin stream). */
const openSessions = new Set<StreamCapture>();

/** The driver's id of the capture `stream` is part of (0n when it is not capturing). */
function captureIdOf(stream: Stream): bigint {
  captureId[0] = 0;
  const status = cudaGraph().cuStreamGetCaptureInfo_v3(
    stream.ffiHandle,
    captureStatus,
    captureId,
    null,
    null,
    null,
    null,
  );
  check(status, 'cuStreamGetCaptureInfo_v3');
  return BigInt(captureId[0]!);
}

/** How captured work uses a buffer: reads only, or writes too. */
export type BufferAccess = 'read' | 'write';

/**
 * One capture of a stream into a graph (cuStreamBeginCapture in relaxed mode, so that other
 * streams, of this task or any other, go on launching, allocating and synchronizing), and
 * what the captured work touched: the buffers from outside the capture and how they are used,
 * the allocations made inside it, the kernels' modules, pinned host memory, and the streams
 * the captured work must come after. The graph it ends in re-declares those uses on the
 * replaying stream at each launch, so hand-offs between streams hold for replays too.
 *
 * `StreamCapture.begin(stream)` is the layer under `capture()` of `@cuda-tasks/task-runtime`
 * (which runs a function on a capture stream of its own); use it directly where streams are
 * passed explicitly: every operation given `{ stream }` is captured.
 * @example
 * const session = StreamCapture.begin(s);
 * try { launch(kernel, { grid, block, stream: s }, y, x, n); }
 * catch (error) { session.abort(); throw error; }
 * const graph = session.end().instantiate();
 * graph.launch({ stream: s });
 */
export class StreamCapture {
  /** The stream being captured. */
  readonly stream: Stream;
  /** The stream's context. */
  readonly context: Context;
  /** Buffers allocated outside the capture that the captured work uses, and how ('write' wins). */
  readonly uses = new Map<DeviceBuffer, BufferAccess>();
  /** Buffers allocated inside the capture (graph memory): disposed inside, or outputs. */
  readonly allocations: DeviceBuffer[] = [];
  /** Modules whose kernels were captured: they must stay loaded while the graph lives. */
  readonly modules = new Set<Module>();
  /** Pinned host memory that captured copies read or write at each replay. */
  readonly hostBuffers = new Set<PinnedHostBuffer>();
  /** Buffers the graph owns (libraries' capture workspaces): freed with the graph. */
  readonly owned: DeviceBuffer[] = [];
  /** Streams whose work a replay must come after (a hand-off asked for during the capture). */
  readonly dependencies = new Set<Stream>();
  /**
   * @internal An event recorded on the stream just before the capture began: other streams
   * that need the stream's eager work wait for it (an event recorded during the capture would
   * join them to it).
   */
  readonly precaptureEvent: number | bigint;
  readonly #afterEnd: (() => void)[] = [];
  #ended = false;

  private constructor(stream: Stream, precaptureEvent: number | bigint) {
    this.stream = stream;
    this.context = stream.context;
    this.precaptureEvent = precaptureEvent;
  }

  /**
   * Begins capturing `stream` (cuStreamBeginCapture_v2, relaxed mode). Its work from now on is
   * recorded, not run, until `end()` or `abort()`. Throws a CaptureError when the stream
   * already captures, and refuses a stream that is not ours to capture (a wrapped one).
   */
  static begin(stream: Stream): StreamCapture {
    stream.assertUsable();
    if (stream.capture !== null) {
      throw new CaptureError(
        'StreamCapture.begin',
        `${stream} is already capturing a graph; a stream captures one graph at a time`,
      );
    }
    const context = stream.context;
    context.makeCurrent();
    const api = driver();
    // An issuer of the issue engine that watches the stream for a wait stops first: a query of
    // a capturing stream would invalidate the capture.
    stream.quiesceIssue();
    const event = stream.captureEvent();
    check(api.cuEventRecord(event, stream.ffiHandle), 'cuEventRecord');
    check(
      cudaGraph().cuStreamBeginCapture_v2(stream.ffiHandle, CU_STREAM_CAPTURE_MODE_RELAXED),
      'cuStreamBeginCapture_v2',
    );
    const session = new StreamCapture(stream, event);
    stream.capture = session;
    openSessions.add(session);
    context.capturingStreams++;
    return session;
  }

  /**
   * Ends a capture left open on `stream` and discards what it recorded, so that the stream
   * runs its work again, when `stream` began it: a session of `begin` that was neither ended
   * nor aborted (aborted, as `abort()` does); returns that session. Only the stream that began
   * a capture may end it (ending it from a stream that joined it, by waiting on an event
   * recorded in it, invalidates the capture for its owner), so a capture `stream` is only part
   * of is left alone: `'joined'` when `stream` joined a capture that a session of `begin` on
   * another stream is recording, `'foreign'` for a capture begun outside cuda-tasks (through
   * the ffi layer: which stream began it cannot be told). Either way `stream` stays in that
   * capture until its owner ends it, and must not take other work meanwhile (retire it; see
   * `isCapturing`). Returns null when the stream was not capturing: then it made one driver
   * query (cuStreamIsCapturing) and allocated nothing. Throws a CaptureError when a session's
   * stream still captures after it was aborted (it must not be used again), or what its
   * `afterEnd` callback threw (the stream has left capture mode then). A wrapped or disposed
   * stream answers null.
   * @example if (StreamCapture.endLeftOpen(s) !== null) console.warn(`${s} was left capturing`);
   */
  static endLeftOpen(stream: Stream): StreamCapture | 'joined' | 'foreign' | null {
    if (stream.disposed) return null;
    const session = stream.capture;
    if (session !== null) {
      try {
        session.abort();
      } finally {
        StreamCapture.#assertLeft(stream);
      }
      return session;
    }
    // A wrapped stream's captures are its owner's.
    if (!stream.owned) return null;
    check(cudaGraph().cuStreamIsCapturing(stream.ffiHandle, captureStatus), 'cuStreamIsCapturing');
    if (captureStatus[0] === CU_STREAM_CAPTURE_STATUS_NONE) return null;
    stream.context.makeCurrent();
    const id = captureIdOf(stream);
    for (const open of openSessions) {
      if (open.stream !== stream && !open.stream.disposed && captureIdOf(open.stream) === id) {
        return 'joined';
      }
    }
    return 'foreign';
  }

  /**
   * Whether the driver says `stream` is in a capture: its own, or one it joined by waiting on
   * an event recorded in another stream's capture (which `capturing` does not show). One
   * driver query.
   */
  static isCapturing(stream: Stream): boolean {
    check(cudaGraph().cuStreamIsCapturing(stream.ffiHandle, captureStatus), 'cuStreamIsCapturing');
    return captureStatus[0] !== CU_STREAM_CAPTURE_STATUS_NONE;
  }

  /** Throws a CaptureError when the driver says `stream` still captures. */
  static #assertLeft(stream: Stream): void {
    const status = cudaGraph().cuStreamIsCapturing(stream.ffiHandle, captureStatus);
    if (status === 0 && captureStatus[0] === CU_STREAM_CAPTURE_STATUS_NONE) return;
    throw new CaptureError(
      'cuStreamEndCapture',
      `the capture left open on ${stream} could not be ended (${status === 0 ? `capture status ${captureStatus[0]}` : `cuStreamIsCapturing returned ${status}`}); the stream must not be used again`,
    );
  }

  /** Whether `end()` or `abort()` has run. */
  get ended(): boolean {
    return this.#ended;
  }

  /** @internal Records a use of `buffer` (allocated outside the capture) by the captured work. */
  recordUse(buffer: DeviceBuffer, access: BufferAccess): void {
    if (access === 'write' || !this.uses.has(buffer)) this.uses.set(buffer, access);
  }

  /** @internal Keeps `module` loaded for the graph (a kernel of it was captured). */
  retainModule(module: Module): void {
    this.modules.add(module);
  }

  /** @internal Keeps `buffer` alive for the graph (a captured copy reads or writes it). */
  retainHost(buffer: PinnedHostBuffer): void {
    this.hostBuffers.add(buffer);
  }

  /**
   * Gives `buffer` (allocated outside the capture, e.g. a library's workspace for the captured
   * calls) to the graph: each launch declares it written by the replaying stream, and it is
   * freed when the graph is disposed.
   */
  adopt(buffer: DeviceBuffer): void {
    this.owned.push(buffer);
  }

  /**
   * A buffer of `byteLength` bytes for the captured work that the graph owns (see `adopt`),
   * allocated outside the capture, on the context's default stream: memory that must exist at
   * every replay and that nothing else may use meanwhile, such as a library's workspace.
   */
  allocateOwned(byteLength: number): DeviceBuffer {
    const stream = this.context.defaultStream;
    if (stream.capture !== null) {
      throw new CaptureError(
        'StreamCapture.allocateOwned',
        `the default stream of ${this.context} is capturing too: memory for the graph is allocated there, outside the capture`,
      );
    }
    const buffer = DeviceBuffer.allocate(byteLength, { stream });
    this.adopt(buffer);
    return buffer;
  }

  /** @internal Replays must come after the work `stream` has when they are launched. */
  dependOn(stream: Stream): void {
    if (stream !== this.stream) this.dependencies.add(stream);
  }

  /**
   * Runs `callback` once the capture has ended (also when it failed or was aborted), after
   * the stream left capture mode: libraries restore per-stream state there, and frees that
   * could not be captured are issued there.
   */
  afterEnd(callback: () => void): void {
    this.#afterEnd.push(callback);
  }

  /**
   * Ends the capture and returns the captured graph, not yet instantiated (`instantiate()`,
   * or the first `launch()`, does that). Throws a CaptureError when the driver invalidated the
   * capture (an operation it does not allow happened on the stream); the stream has left
   * capture mode either way.
   */
  end(): Graph {
    if (this.#ended) throw new DisposedError('StreamCapture (already ended)');
    const out: (bigint | null)[] = [null];
    const result = this.#endCapture(out);
    const handle = out[0];
    if (result !== 0 || handle === null || handle === 0n) {
      this.#abandonAllocations();
      this.#runAfterEnd();
      if (handle) cudaGraph().cuGraphDestroy(handle);
      const error = cudaError(result === 0 ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : result, '');
      throw new CaptureError(
        'cuStreamEndCapture',
        `the capture of ${this.stream} was invalidated by an operation the driver does not allow while a stream captures (${error.status}); the stream has left capture mode and is usable`,
        error.code,
        error.status,
      );
    }
    const outputs: DeviceBuffer[] = [];
    for (const buffer of this.allocations) if (holdAsGraphOutput(buffer)) outputs.push(buffer);
    const graph = new Graph(handle, this, outputs);
    try {
      this.#runAfterEnd();
    } catch (error) {
      graph.dispose();
      throw error;
    }
    return graph;
  }

  /**
   * Ends the capture and discards what it recorded (the captured function failed). Buffers
   * allocated inside it become unusable; the stream leaves capture mode. Safe to call twice.
   */
  abort(): void {
    if (this.#ended) return;
    const out: (bigint | null)[] = [null];
    this.#endCapture(out);
    this.#abandonAllocations();
    this.#runAfterEnd();
    if (out[0]) cudaGraph().cuGraphDestroy(out[0]);
  }

  /** cuStreamEndCapture; the stream is out of capture mode afterwards whatever it returns. */
  #endCapture(out: (bigint | null)[]): number {
    this.#ended = true;
    this.context.makeCurrent();
    try {
      return cudaGraph().cuStreamEndCapture(this.stream.ffiHandle, out);
    } finally {
      this.stream.capture = null;
      openSessions.delete(this);
      this.context.capturingStreams--;
    }
  }

  #abandonAllocations(): void {
    for (const buffer of this.allocations) abandonCapturedAllocation(buffer);
  }

  #runAfterEnd(): void {
    let failure: unknown;
    for (const callback of this.#afterEnd.splice(0)) {
      try {
        callback();
      } catch (error) {
        failure ??= error;
      }
    }
    if (failure !== undefined) throw failure;
  }

  /** `StreamCapture(stream)`. */
  toString(): string {
    return `StreamCapture(${this.stream})`;
  }
}
