// Run as a child process (child_process.fork) by src/memory/ipc.gpu.test.ts: the other side of
// memory and events shared between processes. It answers each message of the parent with one
// message; see `handlers` for what each does. Values are checked here against the same CPU
// formula the parent filled them with (`pattern`).
import {
  currentStream,
  DeviceArray,
  InterprocessEvent,
  launch,
  Module,
  openSharedMemory,
  type SharedEventHandle,
  SharedMemoryError,
  type SharedMemoryHandle,
  shareableArray,
  shareMemory,
  waitForStream,
} from '../src/index.js';

/** The values the parent writes: small integers, exact in float32. */
export const pattern = (i: number): number => ((i * 7919) % 1024) - 512;

const timer = `
__device__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}`;
/** `stamp(out)`: out[0..1] = the GPU's global timer (ns) when it ran, out[2] = flag[0] then. */
const kernels = () =>
  Module.compile(`${timer}
extern "C" __global__ void stamp(unsigned int *out, const unsigned int *flag) {
  unsigned long long t = now();
  out[0] = (unsigned int)t; out[1] = (unsigned int)(t >> 32); out[2] = flag[0];
}`);

type Message = { op: string; [key: string]: unknown };
const reasonOf = (error: unknown) =>
  SharedMemoryError.isInstance(error)
    ? { name: error.name, reason: error.reason, message: error.message }
    : {
        name: (error as Error)?.name,
        reason: undefined,
        message: String((error as Error)?.message),
      };

const held: DeviceArray[] = [];

const handlers: Record<string, (message: Message) => Promise<unknown>> = {
  /** Opens the handle read-only and counts the elements that differ from `pattern`. */
  async read(message) {
    const started = performance.now();
    const view = openSharedMemory<'float32'>(message.handle as SharedMemoryHandle);
    const openMs = performance.now() - started;
    const values = await view.toHost();
    let wrong = 0;
    for (let i = 0; i < values.length; i++) if (values[i] !== pattern(i)) wrong++;
    const shape = view.shape;
    view.dispose();
    return { wrong, length: values.length, shape, dtype: view.dtype, openMs };
  },
  /** Opens read-write and writes -pattern(i) - 1, done on the GPU before answering. */
  async write(message) {
    const view = openSharedMemory<'float32'>(message.handle as SharedMemoryHandle, {
      access: 'readwrite',
    });
    const values = new Float32Array(view.length);
    for (let i = 0; i < values.length; i++) values[i] = -pattern(i) - 1;
    view.copyFromHost(values);
    await waitForStream(currentStream());
    view.dispose();
    return { written: values.length };
  },
  /** Opens read-only and tries to write: the error it gets. */
  async writeReadOnly(message) {
    const view = openSharedMemory<'float32'>(message.handle as SharedMemoryHandle);
    try {
      view.copyFromHost(new Float32Array(view.length));
      return { error: null };
    } catch (error) {
      return { error: reasonOf(error) };
    } finally {
      view.dispose();
    }
  },
  /** Opens, and reports the error (or none). */
  async open(message) {
    try {
      const view = openSharedMemory(message.handle as SharedMemoryHandle | string);
      view.dispose();
      return { error: null };
    } catch (error) {
      return { error: reasonOf(error) };
    }
  },
  /**
   * Opens a handle cold, then again while the first view is held (the mapping is reused),
   * then again after closing everything (a new cuIpcOpenMemHandle): milliseconds of each.
   */
  async openTimes(message) {
    const handle = message.handle as SharedMemoryHandle;
    const time = () => {
      const started = performance.now();
      const view = openSharedMemory(handle);
      return { view, ms: performance.now() - started };
    };
    const first = time();
    const second = time();
    const samePointer = first.view.pointer === second.view.pointer;
    first.view.dispose();
    second.view.dispose();
    const reopened = time();
    reopened.view.dispose();
    // Churn, for the parent's leak check: opens and closes, and opens refused after mapping.
    const oversized = { ...handle, allocationBytes: handle.allocationBytes * 2 };
    let refused = 0;
    for (let i = 0; i < 20; i++) {
      openSharedMemory(handle).dispose();
      try {
        openSharedMemory(oversized).dispose();
      } catch (error) {
        if (SharedMemoryError.isInstance(error) && error.reason === 'malformed') refused++;
      }
    }
    return {
      firstMs: first.ms,
      secondMs: second.ms,
      reopenMs: reopened.ms,
      samePointer,
      refused,
    };
  },
  /**
   * Opens the shared event and the flag memory; waits for the parent's 'recorded' message,
   * then makes its stream wait for the event on the GPU and stamps the time and the flag.
   */
  async eventWait(message) {
    const event = InterprocessEvent.open(message.event as SharedEventHandle);
    const flag = openSharedMemory<'uint32'>(message.flag as SharedMemoryHandle);
    const stamp = kernels().kernel('stamp', ['uint32*', 'const uint32*']);
    const out = DeviceArray.zeros('uint32', 4);
    await waitForStream(currentStream());
    process.send!({ ready: true });
    await new Promise<void>((resolve) => {
      process.once('message', () => resolve());
    });
    event.wait();
    launch(stamp, { grid: 1, block: 1 }, out, flag);
    const values = await out.toHost();
    event.dispose();
    flag.dispose();
    out.dispose();
    return {
      flagSeen: values[2],
      startNs: String((BigInt(values[1]!) << 32n) | BigInt(values[0]!)),
    };
  },
  /** Exports memory filled with `pattern` (this child is the exporter); exits on 'exit'. */
  async export(message) {
    const length = message.length as number;
    const array = shareableArray('float32', length);
    const values = new Float32Array(length);
    for (let i = 0; i < length; i++) values[i] = pattern(i);
    array.copyFromHost(values);
    await waitForStream(currentStream());
    held.push(array);
    return { handle: shareMemory(array) };
  },
  /** Opens the handle and reads it over and over until killed. */
  async readForever(message) {
    const view = openSharedMemory<'float32'>(message.handle as SharedMemoryHandle);
    held.push(view);
    const copy = DeviceArray.empty('float32', view.shape);
    setImmediate(function again() {
      copy.copyFrom(view);
      void waitForStream(currentStream()).then(() => setImmediate(again));
    });
    return { reading: true };
  },
};

process.on('message', (message: Message) => {
  const handler = handlers[message.op];
  if (handler === undefined) return;
  handler(message).then(
    (result) => process.send!({ op: message.op, result }),
    (error: unknown) =>
      process.send!({ op: message.op, failed: reasonOf(error), stack: (error as Error)?.stack }),
  );
});
process.send!({ started: process.pid });
