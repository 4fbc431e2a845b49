import type { Context } from '../context/device.js';
import { checkExporter, deviceOf, identityOf } from '../context/ipc-device.js';
import {
  EVENT_HANDLE_FORMAT,
  IPC_HANDLE_VERSION,
  ipcHandleBytes,
  ipcHandleHex,
  parseSharedEventHandle,
  type SharedEventHandle,
  SharedMemoryError,
} from '../context/ipc-handle.js';
import { currentContext, currentStream } from '../context/provider.js';
import { check, cudaError, driver, ffiValue } from '../driver.js';
import { DisposedError } from '../errors.js';
import {
  CU_EVENT_DISABLE_TIMING,
  CU_EVENT_INTERPROCESS,
  CU_IPC_HANDLE_SIZE,
  CUresult,
} from '../ffi/cuda.js';
import type { Stream } from './stream.js';

const finalizer = new FinalizationRegistry<{ handle: bigint }>((held) => {
  try {
    driver().cuEventDestroy_v2(held.handle);
  } catch {
    // Process teardown.
  }
});

/**
 * An event shared between processes (CU_EVENT_INTERPROCESS, timing off, as CUDA requires): a
 * writer records it after its update, and readers in other processes make their streams wait
 * for it on the GPU, without a round trip through the writer's host thread. The writer
 * `share()`s a handle and sends it (`process.send`, a cluster message, a file); a reader
 * `InterprocessEvent.open(handle)`s it. Either side may record, wait or query.
 *
 * A wait orders after the record that the waiting process's call follows: tell the reader that
 * the writer has recorded (a message) before it waits, as with any event.
 * @example
 * // writer
 * const ready = InterprocessEvent.create();
 * worker.send({ ready: ready.share() });
 * update(index); ready.record(); worker.send({ updated: true });
 * // reader, on { updated }
 * const ready = InterprocessEvent.open(message.ready);
 * ready.wait(); // this stream's later work runs after the writer's update
 */
export class InterprocessEvent {
  /** The CUevent handle. */
  readonly handle: bigint;
  /** The handle as koffi converts it fastest (see `ffiValue`). */
  readonly ffiHandle: number | bigint;
  /** The context the event belongs to. */
  readonly context: Context;
  /** The process that created the event (this one, or the exporter of an opened one). */
  readonly exporterPid: number;
  #disposed = false;

  private constructor(handle: bigint, context: Context, exporterPid: number) {
    this.handle = handle;
    this.ffiHandle = ffiValue(handle);
    this.context = context;
    this.exporterPid = exporterPid;
    finalizer.register(this, { handle }, this);
  }

  /** Creates an interprocess event in `context` (default: the current context). */
  static create(options: { context?: Context } = {}): InterprocessEvent {
    const context = options.context ?? currentContext();
    context.makeCurrent();
    const handle: (bigint | null)[] = [null];
    check(
      driver().cuEventCreate(handle, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING),
      'cuEventCreate',
    );
    return new InterprocessEvent(handle[0] as bigint, context, process.pid);
  }

  /**
   * Opens an event another process shared (the handle object or its JSON text, checked as
   * untrusted input). A SharedMemoryError for a malformed handle, one of this process, one
   * whose exporter has exited, or one of a device this process does not see.
   */
  static open(handle: SharedEventHandle | string): InterprocessEvent {
    const checked = parseSharedEventHandle(handle);
    const what = 'the shared event';
    checkExporter(what, checked.pid);
    const context = deviceOf(what, checked.device).primaryContext();
    context.makeCurrent();
    const out: (bigint | null)[] = [null];
    const result = driver().cuIpcOpenEventHandle(out, {
      reserved: ipcHandleBytes(checked.ipcHandle),
    });
    if (result !== 0) {
      const error = cudaError(result, 'cuIpcOpenEventHandle');
      throw new SharedMemoryError(
        'stale',
        `${what} could not be opened (${error.status}: the event was destroyed, or the handle does not name an event of this device): ${error.message}`,
      );
    }
    return new InterprocessEvent(out[0] as bigint, context, checked.pid);
  }

  /** The handle to send to other processes (a plain JSON-able object). */
  share(): SharedEventHandle {
    this.#assertUsable();
    const bytes = new Uint8Array(CU_IPC_HANDLE_SIZE);
    check(driver().cuIpcGetEventHandle(bytes, this.handle), 'cuIpcGetEventHandle');
    return {
      format: EVENT_HANDLE_FORMAT,
      version: IPC_HANDLE_VERSION,
      ipcHandle: ipcHandleHex(bytes),
      pid: this.exporterPid,
      device: identityOf(this.context.device),
    };
  }

  /** Records the event on `stream` (default: the current stream). */
  record(stream: Stream = currentStream()): this {
    this.#assertUsable();
    stream.assertUsable();
    check(driver().cuEventRecord(this.ffiHandle, stream.ffiHandle), 'cuEventRecord');
    return this;
  }

  /** Makes `stream`'s later work (default: the current stream's) wait for the event, on the GPU. */
  wait(stream: Stream = currentStream()): this {
    this.#assertUsable();
    stream.waitEvent(this);
    return this;
  }

  /** True when the work before the last record has completed. */
  query(): boolean {
    this.#assertUsable();
    const result = driver().cuEventQuery(this.ffiHandle);
    if (result === CUresult.CUDA_SUCCESS) return true;
    if (result === CUresult.CUDA_ERROR_NOT_READY) return false;
    throw cudaError(result, 'cuEventQuery');
  }

  /** Blocks the calling thread until the event has completed (scripts only). */
  synchronize(): void {
    this.#assertUsable();
    check(driver().cuEventSynchronize(this.ffiHandle), 'cuEventSynchronize');
  }

  /** Whether `dispose()` has been called. */
  get disposed(): boolean {
    return this.#disposed;
  }

  #assertUsable(): void {
    if (this.#disposed) throw new DisposedError('InterprocessEvent');
  }

  /**
   * Destroys this process's event (an opened one only closes here; the exporter's stays).
   * Safe to call twice.
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    finalizer.unregister(this);
    check(driver().cuEventDestroy_v2(this.handle), 'cuEventDestroy_v2');
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
