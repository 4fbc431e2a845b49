// The real options check, from its source file: the double cannot import it through
// '@cuda-tasks/cudadrv', which the tests replace with the double itself. The file is pure
// (it imports only the error classes and the stream brand), so nothing native loads.
import {
  assertOptions as realAssertOptions,
  stringOption as realStringOption,
} from '../../cudadrv/src/options-checks.js';
import { turnElapsed } from '../../cudadrv/src/stream/turn.js';

/**
 * A test double of `@cuda-tasks/cudadrv` for the runtime's unit tests: two fake devices with
 * one primary context each (device 0 has stream priorities 0..-5 as current GPUs do, device 1
 * a single level; `state.priorityRanges` changes them), a fake Stream.create that counts
 * creations and keeps the priority (clamped to the range as CUDA does), a provider slot like
 * the real one (stream, device and signal providers; `resolveStream` and `currentContext`
 * check the signal as the real ones do) with the process default device (`setDefaultDevice`,
 * `state.defaultDevice`), a `waitForStream` whose waits can be held until the
 * test completes them (`state.holdWaits`, `state.heldWaits`) and that rejects when its signal
 * aborts, and a scripted stream capture (StreamCapture.begin / end / abort, Graph) that
 * logs each step in `state.captureLog` and can be told to fail (`state.captureFailures`;
 * `end` also makes `StreamCapture.endLeftOpen` fail).
 * Used through `vi.mock('@cuda-tasks/cudadrv', () => fake.module)` and the same for
 * `'@cuda-tasks/cudadrv/internal'` (it holds the names of both entries).
 */
export function createFakeDriver() {
  class CudaArgumentError extends TypeError {
    constructor(message: string) {
      super(message);
      this.name = 'CudaArgumentError';
    }
  }
  class DisposedError extends CudaArgumentError {
    constructor(what: string) {
      super(`${what} has been disposed and cannot be used`);
      this.name = 'DisposedError';
    }
  }
  /**
   * Stream-ordered device memory: an address per allocation; a block freed on a stream comes
   * back to the next allocation of the same size on that stream, as the real pool does.
   * Allocations and frees are logged in `state.gpuLog`.
   */
  class FakeDeviceBuffer {
    static nextAddress = 0x10_0000;
    static readonly freed = new Map<unknown, Map<number, number[]>>();
    disposed = false;
    constructor(
      readonly address: number,
      readonly byteLength: number,
      public stream: FakeStream,
    ) {}
    /** The stream that used it last (the real buffer's `lastStream`). */
    get lastStream(): FakeStream {
      return this.stream;
    }
    /**
     * Declares a use on `stream`: another stream than the last one waits for it (logged
     * `<stream> waits for <last>`) and becomes the buffer's stream, as the real `useOn` orders
     * a write (the double knows nothing of completed work, so it always waits).
     */
    useOn(stream: FakeStream, _access: 'read' | 'write' = 'write'): bigint {
      if (this.disposed) throw new DisposedError('FakeDeviceBuffer');
      if (stream !== this.stream) {
        stream.waitFor(this.stream);
        this.stream = stream;
      }
      return BigInt(this.address);
    }
    static allocate(byteLength: number, options: { stream: FakeStream }): FakeDeviceBuffer {
      const reused = FakeDeviceBuffer.freed.get(options.stream)?.get(byteLength)?.pop();
      const address = reused ?? (FakeDeviceBuffer.nextAddress += 0x1000_0000);
      state.gpuLog.push(
        `allocate ${byteLength} on ${options.stream.name} at 0x${address.toString(16)}`,
      );
      return new FakeDeviceBuffer(address, byteLength, options.stream);
    }
    dispose(): void {
      if (this.disposed) return;
      this.disposed = true;
      state.gpuLog.push(`free 0x${this.address.toString(16)} on ${this.stream.name}`);
      let bySize = FakeDeviceBuffer.freed.get(this.stream);
      if (bySize === undefined) FakeDeviceBuffer.freed.set(this.stream, (bySize = new Map()));
      let list = bySize.get(this.byteLength);
      if (list === undefined) bySize.set(this.byteLength, (list = []));
      list.push(this.address);
    }
  }
  class CaptureError extends Error {
    constructor(
      readonly call: string,
      reason: string,
    ) {
      super(`${call} failed: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900): ${reason}`);
      this.name = 'CaptureError';
    }
    static isInstance(value: unknown): value is CaptureError {
      return value instanceof CaptureError;
    }
  }
  class FakeStream {
    constructor(
      readonly context: FakeContext,
      readonly name: string | undefined,
    ) {}
    disposed = false;
    /** The priority it was created with (clamped to the context's range, as CUDA does). */
    priority = 0;
    /** What `query()` answers: whether the stream's (imaginary) work is done. */
    idle = true;
    /** Times `cancelIssue()` was called (the issue engine's cancellation of unissued launches). */
    issueCancels = 0;
    cancelIssue(): void {
      this.issueCancels++;
    }
    query(): boolean {
      return this.idle;
    }
    /** Throws DisposedError naming the stream after dispose(), as the real Stream does. */
    assertUsable(): void {
      if (this.disposed) throw new DisposedError(String(this));
    }
    /**
     * Runs the disposed listeners, as the real Stream does before destroying: each in its own
     * try, their errors thrown once the stream is disposed (an AggregateError for several).
     */
    dispose(): void {
      if (this.disposed) return;
      const errors: unknown[] = [];
      for (const listener of disposedListeners) {
        try {
          listener(this);
        } catch (error) {
          errors.push(error);
        }
      }
      this.disposed = true;
      state.disposed.push(this);
      if (errors.length === 1) throw errors[0];
      if (errors.length > 1) {
        throw new AggregateError(errors, `${errors.length} stream-disposed listeners failed`);
      }
    }
    /** The use clock's tick through which its work is known complete (as the real Stream keeps it). */
    completedThrough = 0;
    /** Whether the work of a use stamped `stamp` is known complete, as the real Stream answers. */
    hasCompleted(stamp: number): boolean {
      return stamp <= this.completedThrough;
    }
    /** Its work issued so far is known complete (a synchronize found it idle): the clock now. */
    markCompletedNow(): void {
      this.completedThrough = state.useClock;
    }
    /** Orders this stream after `other`'s work so far (logged in `state.gpuLog`). */
    waitFor(other: FakeStream): void {
      if (other === this) return;
      state.gpuLog.push(`${this.name} waits for ${other.name}`);
    }
    /** Makes this stream wait for `event` (logged with where the event was recorded). */
    waitEvent(event: FakeEvent): void {
      state.gpuLog.push(`${this.name} waits for event ${event.id} (${event.recordedOn?.name})`);
    }
    /** The capture in progress on this stream, or null. */
    capture: FakeCapture | null = null;
    get capturing(): boolean {
      return this.capture !== null;
    }
    toString(): string {
      return `FakeStream(${this.name})`;
    }
  }
  class FakeContext {
    readonly defaultStream: FakeStream;
    makeCurrentCalls = 0;
    constructor(readonly device: FakeDevice) {
      this.defaultStream = new FakeStream(this, `default-${device.ordinal}`);
    }
    makeCurrent(): void {
      this.makeCurrentCalls++;
    }
    /** Lower numbers are higher priorities, as in CUDA. */
    streamPriorityRange(): { least: number; greatest: number } {
      return rangeOf(this.device.ordinal);
    }
  }
  class FakeDevice {
    readonly context: FakeContext;
    constructor(readonly ordinal: number) {
      this.context = new FakeContext(this);
    }
    primaryContext(): FakeContext {
      return this.context;
    }
  }
  /** An event: records where it was recorded; completes at once (no GPU work exists). */
  class FakeEvent {
    static created = 0;
    readonly id = ++FakeEvent.created;
    recordedOn: FakeStream | undefined;
    disposed = false;
    constructor(readonly context: FakeContext | undefined) {}
    static create(options: { context?: FakeContext } = {}): FakeEvent {
      return new FakeEvent(options.context);
    }
    static elapsedTime(): number {
      return 0;
    }
    record(stream: FakeStream): this {
      this.recordedOn = stream;
      state.gpuLog.push(`record event ${this.id} on ${stream.name}`);
      return this;
    }
    query(): boolean {
      return true;
    }
    synchronize(): void {}
    dispose(): void {
      this.disposed = true;
    }
  }
  let nextGraph = 1;
  /** A captured graph: a number, the stream it was captured on, what happened to it. */
  class FakeGraph {
    readonly id = nextGraph++;
    instantiated = false;
    disposed = false;
    /** The graphs whose parameters were taken in by update(). */
    readonly updatedFrom: number[] = [];
    constructor(
      readonly context: FakeContext,
      readonly capturedOn: FakeStream,
    ) {}
    static isInstance(value: unknown): value is FakeGraph {
      return value instanceof FakeGraph;
    }
    instantiate(): this {
      if (state.captureFailures.instantiate) throw new Error('cuGraphInstantiateWithFlags failed');
      this.instantiated = true;
      state.captureLog.push(`instantiate graph ${this.id}`);
      return this;
    }
    update(source: FakeGraph): void {
      if (state.captureFailures.update) {
        throw new Error('cuGraphExecUpdate_v2 failed: CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED');
      }
      this.updatedFrom.push(source.id);
      state.captureLog.push(`update graph ${this.id} from ${source.id}`);
      source.dispose();
    }
    dispose(): void {
      if (this.disposed) return;
      this.disposed = true;
      state.captureLog.push(`dispose graph ${this.id}`);
    }
  }
  /**
   * A capture in progress: ends in a FakeGraph, or is aborted. Buffers it owns are allocated
   * with the module's `DeviceBuffer` double (a test that needs them assigns one) on the
   * context's default stream; `afterEnd` callbacks run once the stream has left capture mode.
   */
  class FakeCapture {
    ended = false;
    readonly owned: unknown[] = [];
    readonly #afterEnd: (() => void)[] = [];
    constructor(readonly stream: FakeStream) {}
    allocateOwned(byteLength: number): unknown {
      const allocator = (
        module as {
          DeviceBuffer?: { allocate(bytes: number, options: { stream: unknown }): unknown };
        }
      ).DeviceBuffer;
      const buffer = allocator!.allocate(byteLength, {
        stream: this.stream.context.defaultStream,
      });
      this.owned.push(buffer);
      return buffer;
    }
    adopt(buffer: unknown): void {
      this.owned.push(buffer);
    }
    afterEnd(callback: () => void): void {
      this.#afterEnd.push(callback);
    }
    #finish(): void {
      this.ended = true;
      this.stream.capture = null;
      for (const callback of this.#afterEnd.splice(0)) callback();
    }
    end(): FakeGraph {
      this.#finish();
      if (state.captureFailures.end) {
        state.captureLog.push(`end ${this.stream.name} (invalidated)`);
        throw new CaptureError('cuStreamEndCapture', 'the capture was invalidated');
      }
      state.captureLog.push(`end ${this.stream.name}`);
      return new FakeGraph(this.stream.context, this.stream);
    }
    abort(): void {
      if (this.ended) return;
      this.#finish();
      state.captureLog.push(`abort ${this.stream.name}`);
    }
  }
  const devices = [new FakeDevice(0), new FakeDevice(1)];
  const state = {
    streamProvider: undefined as (() => unknown) | undefined,
    deviceProvider: undefined as (() => unknown) | undefined,
    created: [] as FakeStream[],
    disposed: [] as FakeStream[],
    trimmed: [] as FakeStream[],
    waited: [] as unknown[],
    /** GPU-side steps in order: event records, stream waits, allocations and frees. */
    gpuLog: [] as string[],
    /** The use clock (cudadrv's `nextUseStamp` ticks it). */
    useClock: 0,
    outOfMemoryHooks: new Set<(context: unknown) => void>(),
    /** The `onReleaseCached` hooks (a test runs them as `MemoryPool.releaseCached()` would). */
    releaseCachedHooks: new Set<(context: unknown) => void>(),
    /** Each capture step: `begin <stream>`, `end <stream>`, `abort <stream>`, `instantiate graph N`, ... */
    captureLog: [] as string[],
    /** Steps told to fail: begin and end throw, instantiate and update throw. */
    captureFailures: { begin: false, end: false, instantiate: false, update: false },
    signalProvider: undefined as (() => AbortSignal | undefined) | undefined,
    /** The process default device's ordinal (`setDefaultDevice`). */
    defaultDevice: 0,
    /**
     * Each device's stream priority range (device 0 like an H200, device 1 a single level;
     * devices made by tests beyond these have device 0's).
     */
    priorityRanges: [
      { least: 0, greatest: -5 },
      { least: 0, greatest: 0 },
    ],
    /** While true, `waitForStream` promises stay pending until the test calls `finish()`. */
    holdWaits: false,
    /** The waits held (see `holdWaits`), in order. */
    heldWaits: [] as { stream: unknown; finish(): void }[],
  };
  /** A device's priority range: its entry in `state.priorityRanges`, else device 0's. */
  const rangeOf = (ordinal: number) => state.priorityRanges[ordinal] ?? state.priorityRanges[0]!;
  const currentSignal = () => state.signalProvider?.();
  const throwIfCancelled = () => {
    const signal = currentSignal();
    if (signal?.aborted) throw signal.reason;
  };
  const disposedListeners = new Set<(stream: unknown) => void>();
  const module = {
    CudaArgumentError,
    /**
     * The real check (unknown and misspelt options, options not an object), its
     * CudaArgumentError thrown as the double's, with the same message.
     */
    assertOptions(call: string, options: unknown, known?: readonly string[]): void {
      try {
        realAssertOptions(call, options, known);
      } catch (error) {
        throw new CudaArgumentError((error as Error).message);
      }
    },
    /** As the real one: a handle that fits a Number exactly as a Number, else the bigint. */
    ffiValue: (handle: bigint): number | bigint =>
      handle <= 0x1f_ffff_ffff_ffffn && handle >= 0n ? Number(handle) : handle,
    /** The real string-option check, its CudaArgumentError thrown as the double's. */
    stringOption(call: string, name: string, value: unknown): string | undefined {
      try {
        return realStringOption(call, name, value);
      } catch (error) {
        throw new CudaArgumentError((error as Error).message);
      }
    },
    /** The real turn clock (task starts and spin passes share one budget per turn). */
    turnElapsed,
    /** A tick of the use clock, as cudadrv/internal's. */
    nextUseStamp: (): number => ++state.useClock,
    /** No operation observer is ever installed (`setOperationObserver` keeps none): -1. */
    beginOperation: (_name: string, _stream: unknown): number => -1,
    endOperation: (_token: number): void => {},
    // Process-wide state as cudadrv/internal keeps it: one value per package and name.
    packageOf: (_moduleUrl: string, name: string) => ({
      name,
      version: '0.0.0-test',
      directory: '',
    }),
    processState<T>(owner: { name: string }, name: string, create: () => T): T {
      const key = Symbol.for(`${owner.name}@fake/${name}`);
      const holder = globalThis as unknown as Record<symbol, T | undefined>;
      let value = holder[key];
      if (value === undefined) holder[key] = value = create();
      return value;
    },
    DeviceBuffer: FakeDeviceBuffer as unknown,
    CaptureError,
    Graph: FakeGraph,
    StreamCapture: {
      begin(stream: FakeStream): FakeCapture {
        if (state.captureFailures.begin) throw new Error('cuStreamBeginCapture_v2 failed');
        if (stream.capture !== null) throw new CaptureError('StreamCapture.begin', 'capturing');
        const session = new FakeCapture(stream);
        stream.capture = session;
        state.captureLog.push(`begin ${stream.name}`);
        return session;
      },
      /** Aborts a capture left open on `stream` (logged as `abort`); with `captureFailures.end`, throws instead. */
      endLeftOpen(stream: FakeStream): FakeCapture | null {
        const session = stream.capture;
        if (session === null) return null;
        if (state.captureFailures.end) {
          throw new CaptureError(
            'cuStreamEndCapture',
            `the capture left open on ${stream.name} could not be ended`,
          );
        }
        session.abort();
        return session;
      },
    },
    DisposedError,
    Device: {
      get(ordinal = 0): FakeDevice {
        const device = Number.isInteger(ordinal) ? devices[ordinal] : undefined;
        if (device === undefined) {
          throw new CudaArgumentError(
            `device ${ordinal} does not exist: this process sees 2 CUDA devices (ordinals 0..1)`,
          );
        }
        return device;
      },
    },
    Stream: {
      create(options: { context: FakeContext; name?: string; priority?: number }): FakeStream {
        const range = rangeOf(options.context.device.ordinal);
        const stream = new FakeStream(options.context, options.name);
        stream.priority = Math.min(range.least, Math.max(range.greatest, options.priority ?? 0));
        state.created.push(stream);
        return stream;
      },
    },
    /** As the real one: a name looked up in the context's range, a number passed through. */
    streamPriority(priority: 'high' | 'normal' | 'low' | number, context: FakeContext): number {
      if (typeof priority === 'number') return priority;
      const range = rangeOf(context.device.ordinal);
      if (priority === 'high') return range.greatest;
      if (priority === 'low') return range.least;
      return Math.min(range.least, Math.max(range.greatest, 0));
    },
    setCurrentStreamProvider(
      stream: () => unknown,
      device: () => unknown,
      signal?: () => AbortSignal | undefined,
    ) {
      const previous = {
        stream: state.streamProvider,
        device: state.deviceProvider,
        signal: state.signalProvider,
      };
      state.streamProvider = stream;
      state.deviceProvider = device;
      state.signalProvider = signal;
      return previous;
    },
    /** The process default device's ordinal (`setDefaultDevice`), as cudadrv/internal keeps it. */
    defaultDeviceOrdinal: () => state.defaultDevice,
    defaultDevice: () => devices[state.defaultDevice]!,
    /** As the real one: an ordinal or a Device, checked; a bad one is a CudaArgumentError. */
    setDefaultDevice(device: FakeDevice | number): void {
      if (typeof device === 'number') {
        state.defaultDevice = module.Device.get(device).ordinal;
      } else if (typeof device === 'object' && device !== null && devices.includes(device)) {
        state.defaultDevice = device.ordinal;
      } else {
        throw new CudaArgumentError(
          `setDefaultDevice: device must be a Device or a device ordinal, got ${String(device)}`,
        );
      }
    },
    currentDevice: () =>
      state.deviceProvider === undefined ? devices[state.defaultDevice]! : state.deviceProvider(),
    currentStream: () => state.streamProvider!(),
    currentSignal,
    resolveStream(stream: unknown) {
      if (stream === undefined) return state.streamProvider!();
      throwIfCancelled();
      return stream;
    },
    currentContext(): FakeContext {
      throwIfCancelled();
      return state.deviceProvider === undefined
        ? devices[state.defaultDevice]!.context
        : (state.deviceProvider() as FakeDevice).primaryContext();
    },
    onOutOfMemory(hook: (context: unknown) => void) {
      state.outOfMemoryHooks.add(hook);
      return () => state.outOfMemoryHooks.delete(hook);
    },
    onReleaseCached(hook: (context: unknown) => void) {
      state.releaseCachedHooks.add(hook);
      return () => state.releaseCachedHooks.delete(hook);
    },
    onStreamDisposed(listener: (stream: unknown) => void) {
      disposedListeners.add(listener);
      return () => disposedListeners.delete(listener);
    },
    /** Records which streams' cached blocks were given back. */
    releaseStreamCache(stream: unknown): number {
      state.trimmed.push(stream as FakeStream);
      return 0;
    },
    waitForStream(stream: unknown, options?: { signal?: AbortSignal }): Promise<void> {
      state.waited.push(stream);
      const signal = options?.signal;
      if (signal?.aborted) return Promise.reject(signal.reason);
      if (!state.holdWaits) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const onAbort = () => reject(signal!.reason);
        signal?.addEventListener('abort', onAbort, { once: true });
        state.heldWaits.push({
          stream,
          finish() {
            signal?.removeEventListener('abort', onAbort);
            resolve();
          },
        });
      });
    },
    Event: FakeEvent,
    setOperationObserver: () => null,
    // As the real one does it, so that library error classes can be defined over the double.
    markErrorClass(errorClass: abstract new (...args: never[]) => Error, key: string) {
      const marker = Symbol.for(key);
      Object.defineProperty(errorClass.prototype, marker, { value: true });
      return (value: unknown) => typeof value === 'object' && value !== null && marker in value;
    },
  };
  return {
    module,
    state,
    devices,
    FakeStream,
    FakeEvent,
    FakeGraph,
    FakeDeviceBuffer,
    CaptureError,
    CudaArgumentError,
    DisposedError,
    disposedListeners,
  };
}
