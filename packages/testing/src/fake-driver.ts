/**
 * A test double of `@cuda-tasks/cudadrv` for the runtime's unit tests: two fake devices with
 * one primary context each, a fake Stream.create that counts creations, a provider slot like
 * the real one, and a scripted stream capture (StreamCapture.begin / end / abort, Graph) that
 * logs each step in `state.captureLog` and can be told to fail (`state.captureFailures`).
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
    /** The priority it was created with. */
    priority = 0;
    /** What `query()` answers: whether the stream's (imaginary) work is done. */
    idle = true;
    query(): boolean {
      return this.idle;
    }
    /** Throws DisposedError naming the stream after dispose(), as the real Stream does. */
    assertUsable(): void {
      if (this.disposed) throw new DisposedError(String(this));
    }
    /** Runs the disposed listeners, as the real Stream does before destroying. */
    dispose(): void {
      if (this.disposed) return;
      for (const listener of disposedListeners) listener(this);
      this.disposed = true;
      state.disposed.push(this);
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
    outOfMemoryHooks: new Set<(context: unknown) => void>(),
    /** Each capture step: `begin <stream>`, `end <stream>`, `abort <stream>`, `instantiate graph N`, ... */
    captureLog: [] as string[],
    /** Steps told to fail: begin and end throw, instantiate and update throw. */
    captureFailures: { begin: false, end: false, instantiate: false, update: false },
  };
  const disposedListeners = new Set<(stream: unknown) => void>();
  const module = {
    CudaArgumentError,
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
        const stream = new FakeStream(options.context, options.name);
        stream.priority = options.priority ?? 0;
        state.created.push(stream);
        return stream;
      },
    },
    setCurrentStreamProvider(stream: () => unknown, device: () => unknown) {
      const previous = { stream: state.streamProvider, device: state.deviceProvider };
      state.streamProvider = stream;
      state.deviceProvider = device;
      return previous;
    },
    currentStream: () => state.streamProvider!(),
    onOutOfMemory(hook: (context: unknown) => void) {
      state.outOfMemoryHooks.add(hook);
      return () => state.outOfMemoryHooks.delete(hook);
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
    waitForStream(stream: unknown): Promise<void> {
      state.waited.push(stream);
      return Promise.resolve();
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
    CaptureError,
    CudaArgumentError,
    DisposedError,
    disposedListeners,
  };
}
