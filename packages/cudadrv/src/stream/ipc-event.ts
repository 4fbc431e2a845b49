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
import { check, cudaError, driver } from '../driver.js';
import { CU_EVENT_DISABLE_TIMING, CU_EVENT_INTERPROCESS, CU_IPC_HANDLE_SIZE } from '../ffi/cuda.js';
import { Event } from './event.js';
import type { Stream } from './stream.js';

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
export class InterprocessEvent extends Event {
  /** The process that created the event (this one, or the exporter of an opened one). */
  readonly exporterPid: number;

  private constructor(handle: bigint, context: Context, exporterPid: number) {
    super(handle, context, false, 'InterprocessEvent');
    this.exporterPid = exporterPid;
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
    this.assertUsable();
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

  /** Makes `stream`'s later work (default: the current stream's) wait for the event, on the GPU. */
  wait(stream: Stream = currentStream()): this {
    this.assertUsable();
    stream.waitEvent(this);
    return this;
  }
}
