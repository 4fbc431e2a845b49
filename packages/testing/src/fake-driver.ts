/**
 * A test double of `@cuda-tasks/cudadrv` for the runtime's unit tests: two fake devices with
 * one primary context each, a fake Stream.create that counts creations, and a provider slot
 * like the real one. Used through `vi.mock('@cuda-tasks/cudadrv', () => fake.module)` and the
 * same for `'@cuda-tasks/cudadrv/internal'` (it holds the names of both entries).
 */
export function createFakeDriver() {
  class CudaArgumentError extends TypeError {
    constructor(message: string) {
      super(message);
      this.name = 'CudaArgumentError';
    }
  }
  class FakeStream {
    constructor(
      readonly context: FakeContext,
      readonly name: string | undefined,
    ) {}
    disposed = false;
    /** What `query()` answers: whether the stream's (imaginary) work is done. */
    idle = true;
    query(): boolean {
      return this.idle;
    }
    /** Runs the disposed listeners, as the real Stream does before destroying. */
    dispose(): void {
      if (this.disposed) return;
      for (const listener of disposedListeners) listener(this);
      this.disposed = true;
      state.disposed.push(this);
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
  const devices = [new FakeDevice(0), new FakeDevice(1)];
  const state = {
    streamProvider: undefined as (() => unknown) | undefined,
    deviceProvider: undefined as (() => unknown) | undefined,
    created: [] as FakeStream[],
    disposed: [] as FakeStream[],
    waited: [] as unknown[],
    outOfMemoryHooks: new Set<(context: unknown) => void>(),
  };
  const disposedListeners = new Set<(stream: unknown) => void>();
  const module = {
    CudaArgumentError,
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
      create(options: { context: FakeContext; name?: string }): FakeStream {
        const stream = new FakeStream(options.context, options.name);
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
  return { module, state, devices, FakeStream, FakeEvent, CudaArgumentError, disposedListeners };
}
