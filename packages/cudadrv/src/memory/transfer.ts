/**
 * Host memory and transfers: page-locked host buffers, the pinned staging pool that `toHost()`
 * and uploads from typed arrays copy through, and the copies and memsets between host and
 * device memory.
 */
import { resolveStream, throwIfCancelled } from '../context/provider.js';
import { check, driver, ffiValue } from '../driver.js';
import { CaptureError, CudaArgumentError, CudaError, DisposedError } from '../errors.js';
import {
  CU_EVENT_DISABLE_TIMING,
  CU_MEMHOSTALLOC_PORTABLE,
  CU_MEMORYTYPE_DEVICE,
  CUresult,
} from '../ffi/cuda.js';
import { koffi } from '../ffi/library.js';
import { assertOptions, NO_OPTIONS, STREAM_ONLY } from '../options-checks.js';
import { cudadrvState } from '../process-state.js';
import { beginOperation, endOperation } from '../stream/observer.js';
import type { Stream } from '../stream/stream.js';
import type { DeviceBuffer, StreamOption } from './memory.js';
import { footprintsOverlap, matrixFootprint, newFootprint } from './operands.js';

/** Page-locked host memory: the only host memory that copies to and from the device can overlap with. */
export class PinnedHostBuffer {
  /** The host address of the pinned memory. */
  readonly pointer: bigint;
  /** Size in bytes. */
  readonly byteLength: number;
  /** A view of the memory; invalid after dispose(). */
  readonly bytes: Uint8Array;
  #disposed = false;

  private constructor(pointer: bigint, byteLength: number) {
    this.pointer = pointer;
    this.byteLength = byteLength;
    this.bytes =
      byteLength === 0 ? new Uint8Array(0) : new Uint8Array(koffi().view(pointer, byteLength));
  }

  /**
   * Allocates pinned memory usable from every context (cuMemHostAlloc, portable). Inside a
   * cancelled task it throws the task's cancellation reason instead (see `currentSignal`).
   */
  static allocate(byteLength: number): PinnedHostBuffer {
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) {
      throw new CudaArgumentError(`byteLength must be a non-negative integer, got ${byteLength}`);
    }
    throwIfCancelled();
    if (byteLength === 0) return new PinnedHostBuffer(0n, 0);
    const pointer: (bigint | null)[] = [null];
    check(driver().cuMemHostAlloc(pointer, byteLength, CU_MEMHOSTALLOC_PORTABLE), 'cuMemHostAlloc');
    return new PinnedHostBuffer(pointer[0] as bigint, byteLength);
  }

  /** Whether `dispose()` has freed the memory. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /** Frees the memory. The caller must make sure no copy still uses it. Safe to call twice. */
  dispose(): void {
    if (this.#disposed || this.pointer === 0n) return;
    this.#disposed = true;
    check(driver().cuMemFreeHost(this.pointer), 'cuMemFreeHost');
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** Uploads from a typed array of at least this many bytes are staged in pinned memory of our own. */
export const STAGED_UPLOAD_MIN_BYTES = 16 * 1024;
/** ... and of at most this many; larger ones go through the driver's own staging. */
export const STAGED_UPLOAD_MAX_BYTES = 16 * 1024 * 1024;

/**
 * @internal ArrayBuffers whose memory is pinned already (a `HostView`'s, registered with
 * cuMemHostRegister): an upload from a typed array over one needs no staging.
 */
export const pinnedArrayBuffers: WeakSet<ArrayBufferLike> = cudadrvState(
  'pinnedArrayBuffers',
  () => new WeakSet<ArrayBufferLike>(),
);

/** An upload's staging buffer that the GPU may still read: free once its event completes. */
interface PendingUpload {
  buffer: PinnedHostBuffer;
  /** The event recorded after the copy, as koffi takes it. */
  event: number | bigint;
  /** The context the event belongs to (its free list). */
  context: Stream['context'];
}

/** How many pending uploads one reclaim asks the driver about, at most. */
const RECLAIM_QUERIES = 4;

/** A staging step that failed after its copy was queued: the call and its CUresult. */
interface StagingFailure {
  readonly call: 'cuEventCreate' | 'cuEventRecord';
  readonly result: number;
}

/** The bytes of the staging buffer an upload of `byteLength` bytes takes: a power of two, >= 4 KiB. */
function stagingSize(byteLength: number): number {
  return Math.max(4096, 2 ** Math.ceil(Math.log2(Math.max(1, byteLength))));
}

/**
 * A cache of pinned staging buffers by power-of-two size, so that transfers from and to
 * typed arrays are truly asynchronous without paying cuMemHostAlloc (milliseconds) each time:
 * `toHost()` copies into one and reads it once the stream got there; an upload
 * (`stageUpload`) copies the typed array into one and queues the copy from it, and the buffer
 * comes back to the cache once an event recorded after that copy has completed (`reclaim`).
 */
class StagingPool {
  readonly #idle = new Map<number, PinnedHostBuffer[]>();
  #idleBytes = 0;
  readonly maxIdleBytes = 256 * 1024 * 1024;
  /** The most staging bytes that uploads the GPU has not read yet may hold. */
  readonly maxPendingUploadBytes = 256 * 1024 * 1024;
  readonly #pending: PendingUpload[] = [];
  #pendingBytes = 0;
  /** Events free for the next upload, per context. */
  readonly #events = new WeakMap<Stream['context'], (number | bigint)[]>();

  /** Staging bytes held by uploads the GPU may not have read yet. */
  get pendingUploadBytes(): number {
    return this.#pendingBytes;
  }

  /**
   * A staging buffer for an upload of `byteLength` bytes, or undefined when uploads already
   * hold `maxPendingUploadBytes` or no pinned memory can be allocated (the caller then leaves
   * the staging to the driver). Pass it to `uploaded` once its copy is queued, or back to
   * `release` if the copy was refused.
   */
  stageUpload(byteLength: number): PinnedHostBuffer | undefined {
    if (this.#pending.length > 0) this.reclaim();
    // Pending uploads hold whole staging buffers (a power of two of bytes, see `acquire`).
    if (this.#pendingBytes + stagingSize(byteLength) > this.maxPendingUploadBytes) return undefined;
    try {
      return this.acquire(byteLength);
    } catch (error) {
      // No pinned memory to be had (cuMemHostAlloc failed): the driver stages this one.
      if (CudaError.isInstance(error)) return undefined;
      throw error;
    }
  }

  /**
   * Records an event on `stream` after the upload queued from `buffer`: the buffer is pending
   * until the event completes. Returns 0, or the failed call's name and CUresult (the event's
   * creation or its record); where it failed, the buffer is never reused (the GPU may still
   * read it).
   */
  uploaded(buffer: PinnedHostBuffer, stream: Stream): StagingFailure | 0 {
    const context = stream.context;
    let free = this.#events.get(context);
    if (free === undefined) this.#events.set(context, (free = []));
    let event = free.pop();
    if (event === undefined) {
      const handle: (bigint | null)[] = [null];
      const created = driver().cuEventCreate(handle, CU_EVENT_DISABLE_TIMING);
      if (created !== 0) return { call: 'cuEventCreate', result: created };
      event = ffiValue(handle[0] as bigint);
    }
    const result = driver().cuEventRecord(event, stream.ffiHandle);
    if (result !== 0) {
      free.push(event);
      return { call: 'cuEventRecord', result };
    }
    this.#pending.push({ buffer, event, context });
    this.#pendingBytes += buffer.byteLength;
    return 0;
  }

  /**
   * Returns to the cache the staging buffers of uploads the GPU has read (their event has
   * completed), asking about `RECLAIM_QUERIES` of them at most, oldest first; one not read yet
   * goes to the back, so that a long stream's uploads do not hold back the others'. An event
   * the driver no longer knows (its context gone) gives its buffer up: nothing of it is reused.
   */
  reclaim(): void {
    const pending = this.#pending;
    const queries = Math.min(RECLAIM_QUERIES, pending.length);
    for (let i = 0; i < queries; i++) {
      const entry = pending.shift()!;
      const result = driver().cuEventQuery(entry.event);
      if (result === CUresult.CUDA_ERROR_NOT_READY) {
        pending.push(entry);
        continue;
      }
      this.#pendingBytes -= entry.buffer.byteLength;
      if (result === CUresult.CUDA_SUCCESS) {
        this.#events.get(entry.context)?.push(entry.event);
        this.release(entry.buffer);
      }
    }
  }

  acquire(byteLength: number): PinnedHostBuffer {
    const size = stagingSize(byteLength);
    const buffer = this.#idle.get(size)?.pop();
    if (buffer !== undefined) {
      this.#idleBytes -= size;
      return buffer;
    }
    return PinnedHostBuffer.allocate(size);
  }

  release(buffer: PinnedHostBuffer): void {
    if (this.#idleBytes + buffer.byteLength > this.maxIdleBytes) {
      buffer.dispose();
      return;
    }
    let list = this.#idle.get(buffer.byteLength);
    if (list === undefined) this.#idle.set(buffer.byteLength, (list = []));
    list.push(buffer);
    this.#idleBytes += buffer.byteLength;
  }
}

/** @internal The process's pinned staging pool. */
export const stagingPool: StagingPool = cudadrvState('staging', () => new StagingPool());

/** Anything that names device memory: a DeviceBuffer (with an optional byte offset). */
export interface DeviceRegion {
  /** The device buffer. */
  buffer: DeviceBuffer;
  /** Where the region starts in the buffer, in bytes (default 0). */
  byteOffset?: number;
}

function checkRange(what: string, region: DeviceRegion, byteLength: number): number {
  const offset = region.byteOffset ?? 0;
  if (
    !Number.isSafeInteger(offset) ||
    offset < 0 ||
    offset + byteLength > region.buffer.byteLength
  ) {
    throw new CudaArgumentError(
      `${what}: ${byteLength} bytes at offset ${offset} do not fit in a buffer of ${region.buffer.byteLength} bytes`,
    );
  }
  return offset;
}

/** The options `copyHostToDevice` takes (the other copies and memsets take `stream` only). */
const COPY_HOST_TO_DEVICE_OPTIONS: readonly string[] = ['stream', 'byteLength'];

/** Copies host memory (a typed array, or pinned memory) to the device, ordered on the stream. */
export function copyHostToDevice(
  destination: DeviceRegion,
  source: ArrayBufferView | PinnedHostBuffer,
  options: StreamOption & { byteLength?: number } = NO_OPTIONS,
): void {
  assertOptions('copyHostToDevice', options, COPY_HOST_TO_DEVICE_OPTIONS);
  const byteLength = options.byteLength ?? source.byteLength;
  if (byteLength > source.byteLength) {
    throw new CudaArgumentError(
      `copyHostToDevice: source has ${source.byteLength} bytes, ${byteLength} asked`,
    );
  }
  const offset = checkRange('copyHostToDevice', destination, byteLength);
  const stream = resolveStream(options.stream);
  if (byteLength === 0) return;
  stream.assertUsable();
  const capture = stream.capture;
  if (capture !== null) {
    if (!(source instanceof PinnedHostBuffer)) {
      throw new CaptureError(
        'copyHostToDevice',
        `${stream} is capturing a graph: a copy from pageable host memory (a typed array) cannot be captured (the driver stages it synchronously, and a replay would read memory the garbage collector may have moved). Copy into device memory before the capture, or from a PinnedHostBuffer, which the graph then reads at each launch`,
      );
    }
    capture.retainHost(source);
  }
  const pointer = destination.buffer.useOn(stream) + BigInt(offset);
  stream.context.makeCurrent();
  // A typed array is copied into staging memory of our own, so that the call never waits for
  // the stream (the driver's own staging of pageable memory may; decision 0047). A HostView's
  // memory is pinned already: the driver copies from it asynchronously.
  const staged =
    capture === null &&
    !(source instanceof PinnedHostBuffer) &&
    byteLength >= STAGED_UPLOAD_MIN_BYTES &&
    byteLength <= STAGED_UPLOAD_MAX_BYTES &&
    !pinnedArrayBuffers.has(source.buffer)
      ? stagingPool.stageUpload(byteLength)
      : undefined;
  const token = beginOperation('memcpyHtoD', stream);
  let result: number;
  let recorded: StagingFailure | 0 = 0;
  if (staged !== undefined) {
    const view = source as ArrayBufferView;
    staged.bytes.set(new Uint8Array(view.buffer, view.byteOffset, byteLength));
    result = driver().cuMemcpyHtoDAsync_v2(pointer, staged.pointer, byteLength, stream.ffiHandle);
    if (result === 0) recorded = stagingPool.uploaded(staged, stream);
    else stagingPool.release(staged);
  } else {
    const host = source instanceof PinnedHostBuffer ? source.pointer : asBytes(source);
    result = driver().cuMemcpyHtoDAsync_v2(pointer, host, byteLength, stream.ffiHandle);
  }
  endOperation(token);
  check(result, 'cuMemcpyHtoDAsync_v2');
  if (recorded !== 0) check(recorded.result, recorded.call);
}

/**
 * Copies device memory into pinned host memory, ordered on the stream. The data is there once
 * the stream reaches this point (await `waitForStream(stream)`).
 */
export function copyDeviceToPinned(
  destination: PinnedHostBuffer,
  source: DeviceRegion,
  byteLength: number,
  options: StreamOption = NO_OPTIONS,
): void {
  assertOptions('copyDeviceToPinned', options, STREAM_ONLY);
  if (destination.disposed) throw new DisposedError('PinnedHostBuffer');
  if (byteLength > destination.byteLength) {
    throw new CudaArgumentError(
      `copyDeviceToPinned: destination has ${destination.byteLength} bytes, ${byteLength} asked`,
    );
  }
  const offset = checkRange('copyDeviceToPinned', source, byteLength);
  const stream = resolveStream(options.stream);
  if (byteLength === 0) return;
  stream.assertUsable();
  stream.capture?.retainHost(destination);
  const pointer = source.buffer.useOn(stream, 'read') + BigInt(offset);
  stream.context.makeCurrent();
  const token = beginOperation('memcpyDtoH', stream);
  const result = driver().cuMemcpyDtoHAsync_v2(
    destination.pointer,
    pointer,
    byteLength,
    stream.ffiHandle,
  );
  endOperation(token);
  check(result, 'cuMemcpyDtoHAsync_v2');
}

/**
 * Copies between device buffers, ordered on the stream; across devices it goes through
 * cuMemcpyPeerAsync (direct where peer access is enabled, staged by the driver otherwise).
 * Refused with a CudaArgumentError before any native call: a byte count that is not a
 * non-negative integer, a region that does not fit its buffer, overlapping regions of one
 * buffer, a stream of neither buffer's context (for a copy within one context, a stream of
 * another); with a DisposedError: a disposed stream or buffer. A refused copy declares no use
 * of either buffer.
 */
export function copyDeviceToDevice(
  destination: DeviceRegion,
  source: DeviceRegion,
  byteLength: number,
  options: StreamOption = NO_OPTIONS,
): void {
  assertOptions('copyDeviceToDevice', options, STREAM_ONLY);
  copyDeviceRegion(
    'copyDeviceToDevice',
    destination.buffer,
    destination.byteOffset ?? 0,
    0,
    source.buffer,
    source.byteOffset ?? 0,
    0,
    byteLength,
    1,
    options.stream,
  );
}

/** The two regions of the copy being checked (reused: the checks allocate nothing). */
const destinationFootprint = newFootprint();
const sourceFootprint = newFootprint();

/**
 * @internal The one device-to-device copy (`copyDeviceToDevice` and `DeviceArray.copyFrom`
 * call it): `height` rows of `width` bytes, `destinationPitch` and `sourcePitch` bytes apart
 * (a pitch is unused for one row), from `source` at byte `sourceOffset` to `destination` at
 * byte `destinationOffset`, ordered on `stream` (default: the current stream). Everything is
 * checked (the counts and ranges, the stream, both buffers, their contexts, overlap) before
 * either buffer is declared used; `what` names the call in the errors.
 */
export function copyDeviceRegion(
  what: string,
  destination: DeviceBuffer,
  destinationOffset: number,
  destinationPitch: number,
  source: DeviceBuffer,
  sourceOffset: number,
  sourcePitch: number,
  width: number,
  height: number,
  streamOption: Stream | undefined,
): void {
  if (!Number.isSafeInteger(width) || width < 0 || !Number.isSafeInteger(height) || height < 0) {
    throw new CudaArgumentError(
      `${what}: the byte count must be a non-negative integer, got ${height === 1 ? width : `${height} rows of ${width}`}`,
    );
  }
  const rows = height > 1;
  if (rows && (!(destinationPitch >= width) || !(sourcePitch >= width))) {
    throw new CudaArgumentError(
      `${what}: pitches ${destinationPitch} (destination) and ${sourcePitch} (source) must be at least the row of ${width} bytes`,
    );
  }
  const byteLength = width * height;
  const destinationSpan = byteLength === 0 ? 0 : (height - 1) * destinationPitch + width;
  const sourceSpan = byteLength === 0 ? 0 : (height - 1) * sourcePitch + width;
  checkSpan(what, 'destination', destination, destinationOffset, destinationSpan);
  checkSpan(what, 'source', source, sourceOffset, sourceSpan);
  const stream = resolveStream(streamOption);
  stream.assertUsable();
  if (byteLength === 0) return;
  if (destination.disposed) throw new DisposedError(`${what}: the destination DeviceBuffer`);
  if (source.disposed) throw new DisposedError(`${what}: the source DeviceBuffer`);
  const context = destination.context;
  const peer = context !== source.context;
  if (
    peer
      ? stream.context !== context && stream.context !== source.context
      : stream.context !== context
  ) {
    throw new CudaArgumentError(
      `${what}: the destination lives in ${context} and the source in ${source.context}, but ${stream} belongs to ${stream.context}; copy on a stream of ${peer ? 'either context' : 'their context'}`,
    );
  }
  if (
    destination === source &&
    footprintsOverlap(
      matrixFootprint(
        destinationFootprint,
        destination,
        destinationOffset,
        1,
        width,
        height,
        destinationPitch,
      ),
      matrixFootprint(sourceFootprint, source, sourceOffset, 1, width, height, sourcePitch),
    )
  ) {
    throw new CudaArgumentError(
      `${what}: the destination (byte ${destinationOffset}) and the source (byte ${sourceOffset}) overlap in one buffer; copy through a temporary buffer`,
    );
  }
  const to = destination.useOn(stream) + BigInt(destinationOffset);
  const from = source.useOn(stream, 'read') + BigInt(sourceOffset);
  stream.context.makeCurrent();
  const api = driver();
  if (rows) {
    const token = beginOperation('memcpy2D', stream);
    const result = api.cuMemcpy2DAsync_v2(
      {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: CU_MEMORYTYPE_DEVICE,
        srcHost: null,
        srcDevice: from,
        srcArray: null,
        srcPitch: sourcePitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: CU_MEMORYTYPE_DEVICE,
        dstHost: null,
        dstDevice: to,
        dstArray: null,
        dstPitch: destinationPitch,
        WidthInBytes: width,
        Height: height,
      },
      stream.handle,
    );
    endOperation(token);
    check(result, 'cuMemcpy2DAsync_v2');
  } else if (!peer) {
    const token = beginOperation('memcpyDtoD', stream);
    const result = api.cuMemcpyDtoDAsync_v2(to, from, byteLength, stream.ffiHandle);
    endOperation(token);
    check(result, 'cuMemcpyDtoDAsync_v2');
  } else {
    const token = beginOperation('memcpyPeer', stream);
    const result = api.cuMemcpyPeerAsync(
      to,
      context.handle,
      from,
      source.context.handle,
      byteLength,
      stream.handle,
    );
    endOperation(token);
    check(result, 'cuMemcpyPeerAsync');
  }
}

/**
 * Throws unless `span` bytes from byte `offset` fit in `buffer` (the copy's `role` side);
 * the message is built only on failure.
 */
function checkSpan(
  what: string,
  role: 'destination' | 'source',
  buffer: DeviceBuffer,
  offset: number,
  span: number,
): void {
  if (!Number.isSafeInteger(offset) || offset < 0 || offset + span > buffer.byteLength) {
    throw new CudaArgumentError(
      `${what} (${role}): ${span} bytes at offset ${offset} do not fit in a buffer of ${buffer.byteLength} bytes`,
    );
  }
}

/** Sets `byteLength` bytes to `value` (0-255), ordered on the stream. */
export function memset(
  destination: DeviceRegion,
  value: number,
  byteLength: number,
  options: StreamOption = NO_OPTIONS,
): void {
  assertOptions('memset', options, STREAM_ONLY);
  if (!Number.isInteger(value) || value < 0 || value > 255) {
    throw new CudaArgumentError(`memset: value must be a byte (0..255), got ${value}`);
  }
  const offset = checkRange('memset', destination, byteLength);
  const stream = resolveStream(options.stream);
  if (byteLength === 0) return;
  stream.assertUsable();
  const pointer = destination.buffer.useOn(stream) + BigInt(offset);
  stream.context.makeCurrent();
  const token = beginOperation('memset', stream);
  const result = driver().cuMemsetD8Async(pointer, value, byteLength, stream.ffiHandle);
  endOperation(token);
  check(result, 'cuMemsetD8Async');
}

/** Sets `count` 16- or 32-bit words to the bit pattern `word`, ordered on the stream. */
export function memsetWords(
  destination: DeviceRegion,
  word: number,
  count: number,
  wordBytes: 2 | 4,
  options: StreamOption = NO_OPTIONS,
): void {
  assertOptions('memsetWords', options, STREAM_ONLY);
  const offset = checkRange('memsetWords', destination, count * wordBytes);
  if (offset % wordBytes !== 0)
    throw new CudaArgumentError(`memsetWords: offset ${offset} is not ${wordBytes}-byte aligned`);
  const stream = resolveStream(options.stream);
  if (count === 0) return;
  stream.assertUsable();
  const pointer = destination.buffer.useOn(stream) + BigInt(offset);
  stream.context.makeCurrent();
  const api = driver();
  const token = beginOperation('memset', stream);
  const result =
    wordBytes === 2
      ? api.cuMemsetD16Async(pointer, word, count, stream.ffiHandle)
      : api.cuMemsetD32Async(pointer, word >>> 0, count, stream.ffiHandle);
  endOperation(token);
  check(result, wordBytes === 2 ? 'cuMemsetD16Async' : 'cuMemsetD32Async');
}

function asBytes(view: ArrayBufferView): Uint8Array {
  return view instanceof Uint8Array
    ? view
    : new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}
