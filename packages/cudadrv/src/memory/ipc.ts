/**
 * Device memory shared between processes through CUDA's legacy IPC (cuIpcGetMemHandle /
 * cuIpcOpenMemHandle): one process allocates memory for sharing and exports it as a handle;
 * others open it as views with the same dtype and shape, read-only or read-write. Why this
 * mechanism, and which memory can be shared: docs/decisions/0039-cross-process-sharing-through-legacy-ipc.md.
 *
 * Lifetimes (see context/ipc-leases.ts): the exporter's `dispose()` frees the memory only once
 * no live importer holds it (it waits, off the event loop's path, for the last to close or
 * die); an importer's views become unusable, with a SharedMemoryError, when the exporter exits.
 */
import { randomBytes } from 'node:crypto';
import { threadId } from 'node:worker_threads';
import type { Context } from '../context/device.js';
import { checkExporter, deviceOf, identityOf } from '../context/ipc-device.js';
import {
  IPC_HANDLE_VERSION,
  ipcHandleBytes,
  ipcHandleHex,
  MEMORY_HANDLE_FORMAT,
  parseSharedMemoryHandle,
  SharedMemoryError,
  type SharedMemoryHandle,
} from '../context/ipc-handle.js';
import { LeaseStore } from '../context/ipc-leases.js';
import { currentStream, resolveStream } from '../context/provider.js';
import { check, cudaError, driver } from '../driver.js';
import { assertDType, type DType, dtypeBytes } from '../dtype.js';
import { CaptureError, CudaArgumentError, DisposedError } from '../errors.js';
import {
  CU_IPC_HANDLE_SIZE,
  CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS,
  CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
} from '../ffi/cuda.js';
import { assertOptions, NO_OPTIONS, STREAM_ONLY } from '../options-checks.js';
import { cudadrvState } from '../process-state.js';
import type { Stream } from '../stream/stream.js';
import { columnMajorStrides, DeviceArray, type Shape } from './array.js';
import { DeviceBuffer, type ForeignMemory, type StreamOption } from './memory.js';

/** How often the lease records are looked at: deferred frees, exporters that exited. */
const WATCH_INTERVAL_MS = 250;

/** Memory this process allocated for sharing, and its export (made on the first `shareMemory`). */
interface Exported {
  readonly context: Context;
  readonly byteLength: number;
  /** Set by the first export. */
  exportId: string | null;
  ipcHandle: string | null;
  /** The address while its free waits for importers (the buffer is disposed), else 0. */
  pendingAddress: number | bigint;
}

/** Another process's memory mapped into this one: one mapping per export, views counted. */
interface Mapping {
  readonly key: string;
  readonly pid: number;
  readonly exportId: string;
  /** The CUDA handle it was mapped from. */
  readonly ipcHandle: string;
  readonly context: Context;
  readonly base: number | bigint;
  /** Bytes mapped (what the driver reports): no handle's view may reach past them. */
  readonly size: number;
  /** Live views (their buffers); the mapping closes when the last goes. */
  readonly views: Set<DeviceBuffer>;
  /** The `onExporterExit` of each open view that gave one. */
  readonly exitListeners: Map<DeviceBuffer, (error: SharedMemoryError) => void>;
  /** Why the memory went without the views' dispose (the exporter exited), else null. */
  gone: SharedMemoryError | null;
}

interface IpcState {
  leases: LeaseStore;
  /** Exporter side, by the buffer's foreign record. */
  exported: WeakMap<ForeignMemory, Exported>;
  /** Frees waiting for importers. */
  pendingFrees: Set<Exported>;
  /** Exports alive in this process (their lease folders go at exit). */
  liveExports: Set<Exported>;
  /** Importer side, by `<pid>-<exportId>`. */
  mappings: Map<string, Mapping>;
  timer: ReturnType<typeof setInterval> | null;
  exitHooked: boolean;
}

const state: IpcState = cudadrvState('ipc', () => ({
  leases: new LeaseStore(),
  exported: new WeakMap(),
  pendingFrees: new Set(),
  liveExports: new Set(),
  mappings: new Map(),
  timer: null,
  exitHooked: false,
}));

/**
 * @internal Where the lease records live (tests give a temporary folder and a liveness test);
 * returns the previous store.
 */
export function setLeaseStore(leases: LeaseStore): LeaseStore {
  const previous = state.leases;
  state.leases = leases;
  return previous;
}

/** The options `openSharedMemory` takes (`allocateShareable`, `shareableArray`: `stream` only). */
const OPEN_OPTIONS: readonly string[] = ['stream', 'access', 'onExporterExit'];

/** Options of `openSharedMemory`. */
export interface OpenSharedMemoryOptions extends StreamOption {
  /**
   * 'read' (default): a write through the view is a SharedMemoryError ('read-only'), before any
   * native call. 'readwrite': the view may be written; order the writes against the other
   * processes yourself (an `InterprocessEvent`).
   */
  access?: 'read' | 'readwrite';
  /**
   * Called once if the exporting process exits while the view is open (found within about
   * 250 ms): the views are unusable from then on, their uses throw this error.
   */
  onExporterExit?: (error: SharedMemoryError) => void;
}

/**
 * Allocates device memory that other processes can open (cuMemAlloc, outside the
 * stream-ordered pool: pool memory cannot be exported by the legacy IPC call). Use it for
 * data many processes read, made once: the allocation costs about as much as cuMemAlloc
 * (tens of microseconds), and its free waits for every importer.
 * @example using buffer = allocateShareable(1 << 30);
 */
export function allocateShareable(
  byteLength: number,
  options: StreamOption = NO_OPTIONS,
): DeviceBuffer {
  assertOptions('allocateShareable', options, STREAM_ONLY);
  if (!Number.isSafeInteger(byteLength) || byteLength < 1) {
    throw new CudaArgumentError(
      `allocateShareable: byteLength must be a positive integer, got ${byteLength}`,
    );
  }
  const stream = resolveStream(options.stream);
  stream.assertUsable();
  if (stream.capture !== null) {
    throw new CaptureError(
      'allocateShareable',
      `${stream} is capturing a graph: memory for sharing is allocated at once (cuMemAlloc), not by the graph; allocate it before the capture`,
    );
  }
  const context = stream.context;
  context.makeCurrent();
  const out = [0 as number | bigint];
  check(driver().cuMemAlloc_v2(out, byteLength), 'cuMemAlloc_v2');
  const address = out[0]!;
  // CUDA's advice for memory shared between processes: its copies synchronize with the
  // device, so that a copy another process orders after an event sees the data.
  const one = new Uint32Array([1]);
  const result = driver().cuPointerSetAttribute(one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, address);
  if (result !== 0) {
    driver().cuMemFree_v2(address);
    check(result, 'cuPointerSetAttribute');
  }
  const exported: Exported = {
    context,
    byteLength,
    exportId: null,
    ipcHandle: null,
    pendingAddress: 0,
  };
  const foreign: ForeignMemory = {
    readOnly: false,
    writeError: () => new CudaArgumentError('unreachable: shareable memory is writable'),
    goneError: () => null,
    release: (freed) => freeExported(exported, freed),
  };
  state.exported.set(foreign, exported);
  return DeviceBuffer.adoptForeign(address, byteLength, stream, foreign);
}

/**
 * A new array of `dtype` and `shape` in memory other processes can open (see
 * `allocateShareable`); uninitialized, like `DeviceArray.empty`.
 * @example const index = shareableArray('float32', [1_000_000, 128]);
 */
export function shareableArray<D extends DType>(
  dtype: D,
  shape: Shape | number,
  options: StreamOption = NO_OPTIONS,
): DeviceArray<D> {
  assertOptions('shareableArray', options, STREAM_ONLY);
  assertDType(dtype);
  const dims = typeof shape === 'number' ? [shape] : [...shape];
  const length = checkedLength('shareableArray', dims);
  const buffer = allocateShareable(Math.max(1, length * dtypeBytes(dtype)), options);
  return new DeviceArray(buffer, dtype, dims, columnMajorStrides(dims), 0, true);
}

/** Frees exported memory, or defers the free while importers hold it. */
function freeExported(exported: Exported, address: number | bigint): void {
  state.pendingFrees.delete(exported);
  const { exportId } = exported;
  if (exportId !== null) {
    // Retired: no new importer can take a lease, so none can open memory freed under it.
    if (!state.leases.retire(process.pid, exportId)) {
      exported.pendingAddress = address;
      state.pendingFrees.add(exported);
      watch();
      return;
    }
    state.liveExports.delete(exported);
  }
  exported.pendingAddress = 0;
  exported.context.makeCurrent();
  check(driver().cuMemFree_v2(address), 'cuMemFree_v2');
}

/**
 * Exports memory allocated for sharing (`allocateShareable`, `shareableArray`, or a
 * contiguous view of one) as a handle to send to other processes: a plain object, safe to
 * `JSON.stringify`. Memory from the stream-ordered pool (every other allocation) cannot be
 * shared: a SharedMemoryError ('not-shareable') says so, before any native call.
 *
 * The handle carries no data: make the contents complete before another process reads them
 * (synchronize, or record an `InterprocessEvent` that the readers wait for).
 * @example process.send({ index: shareMemory(embeddings) });
 */
export function shareMemory(source: DeviceArray | DeviceBuffer): SharedMemoryHandle {
  let buffer: DeviceBuffer;
  let dtype: DType;
  let shape: readonly number[];
  let byteOffset: number;
  if (DeviceArray.isInstance(source)) {
    if (!source.contiguous) {
      throw new SharedMemoryError(
        'not-shareable',
        `shareMemory: ${source} is a strided view; share the whole array or a contiguous view`,
      );
    }
    source.assertUsable();
    buffer = source.buffer;
    dtype = source.dtype;
    shape = source.shape;
    byteOffset = source.offset * source.elementBytes;
  } else if (DeviceBuffer.isInstance(source)) {
    if (source.disposed) throw new DisposedError('DeviceBuffer');
    buffer = source;
    dtype = 'uint8';
    shape = [source.byteLength];
    byteOffset = 0;
  } else {
    throw new CudaArgumentError('shareMemory: expected a DeviceArray or a DeviceBuffer');
  }
  const foreign = DeviceBuffer.foreignOf(buffer);
  const exported = foreign === null ? undefined : state.exported.get(foreign);
  if (exported === undefined) {
    throw new SharedMemoryError(
      'not-shareable',
      foreign === null
        ? 'shareMemory: this memory comes from the stream-ordered pool, which CUDA cannot share between processes through IPC handles; allocate it for sharing (shareableArray, allocateShareable)'
        : 'shareMemory: this is a view of memory another process shared; only the exporting process shares it',
    );
  }
  if (exported.exportId === null) {
    const bytes = new Uint8Array(CU_IPC_HANDLE_SIZE);
    exported.context.makeCurrent();
    check(driver().cuIpcGetMemHandle(bytes, buffer.address), 'cuIpcGetMemHandle');
    const exportId = randomBytes(16).toString('hex');
    state.leases.openExport(process.pid, exportId);
    exported.ipcHandle = ipcHandleHex(bytes);
    exported.exportId = exportId;
    state.liveExports.add(exported);
    hookExit();
  }
  const elementBytes = dtypeBytes(dtype);
  let elements = 1;
  for (const extent of shape) elements *= extent;
  return {
    format: MEMORY_HANDLE_FORMAT,
    version: IPC_HANDLE_VERSION,
    ipcHandle: exported.ipcHandle!,
    allocationBytes: exported.byteLength,
    byteOffset,
    byteLength: elements * elementBytes,
    dtype,
    shape: [...shape],
    pid: process.pid,
    exportId: exported.exportId!,
    device: identityOf(exported.context.device),
  };
}

/**
 * The processes that hold shared memory open now (the exporter's view of its importers; a
 * process that died holding it is dropped). Empty for memory never shared.
 */
export function sharedMemoryHolders(source: DeviceArray | DeviceBuffer): number[] {
  const buffer = DeviceArray.isInstance(source) ? source.buffer : source;
  const foreign = DeviceBuffer.foreignOf(buffer);
  const exported = foreign === null ? undefined : state.exported.get(foreign);
  if (exported?.exportId == null) return [];
  return state.leases.holders(process.pid, exported.exportId);
}

/**
 * Opens memory another process shared (`shareMemory`'s handle, or its JSON text, checked as
 * untrusted input) as a `DeviceArray` with the handle's dtype and shape. Its `dispose()`
 * closes it here; the exporter keeps the memory while any process holds it open.
 *
 * A SharedMemoryError (before any native call where it can be known before) for a malformed
 * handle, one of this process, one whose exporter exited or freed the memory ('stale'), one
 * of a device this process does not see. Opening one handle twice in a process maps it once
 * and gives two views.
 * @example const embeddings = openSharedMemory<'float32'>(message.index);
 */
export function openSharedMemory<D extends DType = DType>(
  handle: SharedMemoryHandle | string,
  options: OpenSharedMemoryOptions = NO_OPTIONS,
): DeviceArray<D> {
  assertOptions('openSharedMemory', options, OPEN_OPTIONS);
  const checked = parseSharedMemoryHandle(handle);
  const access = options.access ?? 'read';
  if (access !== 'read' && access !== 'readwrite') {
    throw new CudaArgumentError(
      `openSharedMemory: access must be 'read' or 'readwrite', got ${String(access)}`,
    );
  }
  if (options.onExporterExit !== undefined && typeof options.onExporterExit !== 'function') {
    throw new CudaArgumentError('openSharedMemory: onExporterExit must be a function');
  }
  const what = `the shared memory ${checked.pid}-${checked.exportId.slice(0, 8)}`;
  checkExporter(what, checked.pid);
  const context = deviceOf(what, checked.device).primaryContext();
  const stream = streamFor(context, options.stream);
  const mapping = openMapping(what, checked, context);
  const readOnly = access === 'read';
  const foreign: ForeignMemory = {
    readOnly,
    writeError: () =>
      new SharedMemoryError(
        'read-only',
        `${what} was opened read-only: open it with { access: 'readwrite' } to write it`,
      ),
    goneError: () => mapping.gone,
    release: () => closeView(mapping, buffer),
  };
  const address =
    typeof mapping.base === 'number'
      ? mapping.base + checked.byteOffset
      : mapping.base + BigInt(checked.byteOffset);
  // A view of no elements still holds the mapping (its buffer has one byte of the view).
  const buffer = DeviceBuffer.adoptForeign(address, checked.byteLength, stream, foreign);
  mapping.views.add(buffer);
  if (options.onExporterExit !== undefined) {
    mapping.exitListeners.set(buffer, options.onExporterExit);
  }
  const shape = [...checked.shape];
  return new DeviceArray(buffer, checked.dtype as D, shape, columnMajorStrides(shape), 0, true);
}

/**
 * Throws the SharedMemoryError of a view whose exporter has exited (or freed the memory);
 * checks now, not at the next watch. Nothing for a live one, or for memory of this process.
 */
export function checkSharedMemory(view: DeviceArray | DeviceBuffer): void {
  const buffer = DeviceArray.isInstance(view) ? view.buffer : view;
  for (const mapping of state.mappings.values()) {
    if (!mapping.views.has(buffer)) continue;
    lookAt(mapping);
    if (mapping.gone !== null) throw mapping.gone;
    return;
  }
  const foreign = DeviceBuffer.foreignOf(buffer);
  const gone = foreign?.goneError();
  if (gone) throw gone;
}

function streamFor(context: Context, stream: Stream | undefined): Stream {
  if (stream !== undefined) {
    stream.assertUsable();
    if (stream.context !== context) {
      throw new CudaArgumentError(
        `openSharedMemory: the memory is on ${context}, the stream ${stream} on ${stream.context}`,
      );
    }
    return stream;
  }
  const current = currentStream();
  return current.context === context ? current : context.defaultStream;
}

/** The mapping of an export in this process, made on its first open (the lease taken first). */
function openMapping(what: string, handle: SharedMemoryHandle, context: Context): Mapping {
  const key = `${handle.pid}-${handle.exportId}`;
  const known = state.mappings.get(key);
  if (known !== undefined && known.gone === null) {
    if (known.context !== context) {
      throw new SharedMemoryError(
        'malformed',
        `${what}: the handle names another device than the same export opened before`,
      );
    }
    if (handle.allocationBytes > known.size)
      throw oversized(what, handle.allocationBytes, known.size);
    if (handle.ipcHandle !== known.ipcHandle) {
      throw new SharedMemoryError(
        'malformed',
        `${what}: the handle names other memory than the same export opened before`,
      );
    }
    return known;
  }
  const exportState = state.leases.exportState(handle.pid, handle.exportId);
  if (exportState !== 'live') throw goneError(what, exportState, handle.pid);
  if (!state.leases.take(handle.pid, handle.exportId, process.pid, threadId)) {
    throw goneError(what, 'stale', handle.pid);
  }
  let base: number | bigint;
  let size: number;
  try {
    context.makeCurrent();
    const out = [0 as number | bigint];
    const result = driver().cuIpcOpenMemHandle(
      out,
      { reserved: ipcHandleBytes(handle.ipcHandle) },
      CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS,
    );
    if (result !== 0) {
      const error = cudaError(result, 'cuIpcOpenMemHandle');
      throw new SharedMemoryError(
        'stale',
        `${what} could not be opened (${error.status}: the memory was freed, or the handle does not name memory of this device): ${error.message}`,
      );
    }
    base = out[0]!;
    size = mappedSize(what, base, handle.allocationBytes);
  } catch (error) {
    state.leases.give(handle.pid, handle.exportId, process.pid, threadId);
    throw error;
  }
  const mapping: Mapping = {
    key,
    pid: handle.pid,
    exportId: handle.exportId,
    ipcHandle: handle.ipcHandle,
    context,
    base,
    size,
    views: new Set(),
    exitListeners: new Map(),
    gone: null,
  };
  state.mappings.set(key, mapping);
  hookExit();
  watch();
  return mapping;
}

/**
 * The bytes mapped at `base`. The handle's sizes are the sender's word: the mapping must be at
 * least that large, else it is closed and refused.
 */
function mappedSize(what: string, base: number | bigint, allocationBytes: number): number {
  const start = [0 as number | bigint];
  const size = [0 as number | bigint];
  const result = driver().cuMemGetAddressRange_v2(start, size, base);
  const mapped = result === 0 && BigInt(start[0]!) === BigInt(base) ? Number(size[0]) : 0;
  if (mapped < allocationBytes) {
    driver().cuIpcCloseMemHandle(base);
    throw oversized(what, allocationBytes, mapped);
  }
  return mapped;
}

function oversized(what: string, allocationBytes: number, mapped: number): SharedMemoryError {
  return new SharedMemoryError(
    'malformed',
    `${what}: the handle says ${allocationBytes} bytes, the memory it opens has ${mapped}`,
  );
}

function goneError(
  what: string,
  reason: 'exporter-exited' | 'stale',
  pid: number,
): SharedMemoryError {
  return new SharedMemoryError(
    reason,
    reason === 'exporter-exited'
      ? `${what}: the process that exported it (${pid}) has exited, and the memory went with it`
      : `${what} has been freed by its exporter (process ${pid}): ask it for a new handle`,
  );
}

/** A view's buffer released its memory: the last one closes the mapping and gives the lease. */
function closeView(mapping: Mapping, buffer: DeviceBuffer): void {
  mapping.views.delete(buffer);
  mapping.exitListeners.delete(buffer);
  if (mapping.views.size > 0) return;
  if (state.mappings.get(mapping.key) === mapping) state.mappings.delete(mapping.key);
  try {
    mapping.context.makeCurrent();
    check(driver().cuIpcCloseMemHandle(mapping.base), 'cuIpcCloseMemHandle');
  } finally {
    state.leases.give(mapping.pid, mapping.exportId, process.pid, threadId);
    if (state.mappings.size === 0 && state.pendingFrees.size === 0) unwatch();
  }
}

/** Looks at an open mapping's exporter: gone, its views are released and told. */
function lookAt(mapping: Mapping): void {
  if (mapping.gone !== null) return;
  // Held: an export its exporter retired (disposed, the free waiting for us) is still live.
  const exportState = state.leases.exportState(mapping.pid, mapping.exportId, true);
  if (exportState === 'live') return;
  const what = `the shared memory ${mapping.pid}-${mapping.exportId.slice(0, 8)}`;
  mapping.gone = goneError(what, exportState, mapping.pid);
  if (state.mappings.get(mapping.key) === mapping) state.mappings.delete(mapping.key);
  // The listeners of the views open now (releasing a view forgets its listener).
  const listeners = [...mapping.exitListeners.values()];
  for (const view of [...mapping.views]) {
    try {
      DeviceBuffer.releaseForeign(view);
    } catch {
      // The mapping goes with the process at worst; the views are unusable either way.
    }
  }
  for (const listener of listeners) {
    try {
      listener(mapping.gone);
    } catch (error) {
      queueMicrotask(() => {
        throw error;
      });
    }
  }
}

/** One timer for the process while anything is open or waits: never keeps the process up. */
function watch(): void {
  if (state.timer !== null) return;
  state.timer = setInterval(tick, WATCH_INTERVAL_MS);
  state.timer.unref();
}

function unwatch(): void {
  if (state.timer === null) return;
  clearInterval(state.timer);
  state.timer = null;
}

function tick(): void {
  for (const mapping of [...state.mappings.values()]) lookAt(mapping);
  for (const exported of [...state.pendingFrees]) {
    try {
      freeExported(exported, exported.pendingAddress);
    } catch {
      // A failed free (a context gone unusable): the memory goes with the process.
      state.pendingFrees.delete(exported);
    }
  }
  if (state.mappings.size === 0 && state.pendingFrees.size === 0) unwatch();
}

/** At exit, the lease records of this process go (its memory goes with it anyway). */
function hookExit(): void {
  if (state.exitHooked) return;
  state.exitHooked = true;
  process.on('exit', () => {
    for (const exported of state.liveExports) {
      if (exported.exportId !== null) state.leases.closeExport(process.pid, exported.exportId);
    }
    for (const mapping of state.mappings.values()) {
      state.leases.give(mapping.pid, mapping.exportId, process.pid, threadId);
    }
  });
}

function checkedLength(call: string, shape: readonly number[]): number {
  if (!Array.isArray(shape) || shape.length === 0) {
    throw new CudaArgumentError(`${call}: shape must be a non-empty array, got ${String(shape)}`);
  }
  let length = 1;
  for (const extent of shape) {
    if (!Number.isSafeInteger(extent) || extent < 0) {
      throw new CudaArgumentError(
        `${call}: shape must hold non-negative integers, got ${JSON.stringify(shape)}`,
      );
    }
    length *= extent;
  }
  return length;
}
