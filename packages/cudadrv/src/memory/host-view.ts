/**
 * Zero-copy host views: page-locked host memory that JavaScript reads and writes as a typed
 * array, that copies to and from the device read and write directly (no staging), and that a
 * kernel can read and write through its device alias when mapped. The memory is an ordinary
 * JavaScript ArrayBuffer registered with the driver (cuMemHostRegister), so that `dispose()`
 * can detach it: every typed array over it becomes empty, and nothing reads the memory after
 * it is unpinned. See decision 0038 for why not cuMemHostAlloc memory behind koffi.view.
 */

import type { Context } from '../context/device.js';
import { currentContext, resolveStream } from '../context/provider.js';
import { check, driver } from '../driver.js';
import { assertDType, type DType, dtypeBytes } from '../dtype.js';
import { CaptureError, CudaArgumentError, DisposedError } from '../errors.js';
import { CU_MEMHOSTREGISTER_DEVICEMAP, CU_MEMHOSTREGISTER_PORTABLE } from '../ffi/cuda.js';
import { koffi } from '../ffi/library.js';
import { assertOptions, NO_OPTIONS, STREAM_ONLY } from '../options-checks.js';
import { useClock } from '../progress.js';
import { beginOperation, endOperation } from '../stream/observer.js';
import type { Stream } from '../stream/stream.js';
import { type WaitOptions, waitForStream } from '../stream/wait.js';
import { columnMajorStrides, DeviceArray, type Shape } from './array.js';
import { hostAliases } from './dlpack.js';
import {
  type Allocation,
  afterLoans,
  DeviceBuffer,
  type ForeignMemory,
  recordOf,
  type StreamOption,
} from './memory.js';
import { pinnedArrayBuffers } from './transfer.js';

/** The typed array a host view of each dtype gives (half precision as its raw bits). */
export interface HostViewArrayOf {
  /** float32 as Float32Array. */
  float32: Float32Array;
  /** float64 as Float64Array. */
  float64: Float64Array;
  /** int32 as Int32Array. */
  int32: Int32Array;
  /** uint32 as Uint32Array. */
  uint32: Uint32Array;
  /** int8 as Int8Array. */
  int8: Int8Array;
  /** uint8 as Uint8Array. */
  uint8: Uint8Array;
  /** float16 as its bits, a Uint16Array (see `float16BitsToFloat32`). */
  float16: Uint16Array;
  /** bfloat16 as its bits, a Uint16Array (see `bfloat16BitsToFloat32`). */
  bfloat16: Uint16Array;
}

const VIEW_TYPES: Readonly<
  Record<DType, new (buffer: ArrayBuffer, byteOffset: number, length: number) => ArrayBufferView>
> = {
  float32: Float32Array,
  float64: Float64Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int8: Int8Array,
  uint8: Uint8Array,
  float16: Uint16Array,
  bfloat16: Uint16Array,
};

/**
 * Registration works on whole pages: each view's registered range starts and ends on a page of
 * its own (64 KiB covers the largest base page of the supported Linux platforms), so two
 * views never share a page.
 */
const PAGE = process.arch === 'arm64' ? 65536 : 4096;

/** The options `HostView.allocate` and `ready` take (the copies take `stream` only). */
const ALLOCATE_OPTIONS: readonly string[] = ['mapped'];
const READY_OPTIONS: readonly string[] = ['signal'];

/** Options of `HostView.allocate`. */
export interface HostViewOptions {
  /**
   * Also maps the memory into the device address space (CU_MEMHOSTREGISTER_DEVICEMAP), so that
   * kernels read and write it through `deviceArray()` (default false).
   */
  mapped?: boolean;
}

/**
 * What outlives the view object until the memory is unpinned: the finalizer's record (it
 * refers to neither the view nor its alias buffers).
 */
interface Registration {
  /** The JavaScript memory (null once detached or given back). */
  buffer: ArrayBuffer | null;
  /** The page-aligned start of the registered range. */
  address: bigint;
  /** The context the memory was registered in. */
  context: Context;
  /** Each stream that copied to or from the view, with the clock tick of its last copy. */
  readonly copies: Map<Stream, number>;
  /** The allocation records of the device aliases (their streams and stamps). */
  readonly aliases: Allocation[];
  /** Targets (the view, its alias buffers) not yet collected. */
  live: number;
  /** Whether the memory has been unregistered (or is being, after pending work). */
  released: boolean;
}

const finalizer = new FinalizationRegistry<Registration>((registration) => {
  registration.live--;
  if (registration.live > 0 || registration.released) return;
  registration.released = true;
  // Collected without dispose: nothing can read the memory any more; unpin it once the GPU
  // work still queued on it is done (the memory itself goes with the ArrayBuffer).
  const streams = pendingStreams(registration);
  const unpin = () => {
    try {
      unregister(registration);
    } catch {
      // Teardown or a sticky error: the registration goes with the context.
    }
    registration.buffer = null;
  };
  if (streams.length === 0) unpin();
  else Promise.all(streams.map((stream) => waitForStream(stream))).then(unpin, unpin);
});

/**
 * Page-locked host memory as a typed array, read and written by JavaScript without copies.
 * Copies between it and device arrays (`copyFrom`, `copyTo`, `toDevice`) go straight from
 * and to the pinned memory, asynchronously on the stream; with `mapped: true`,
 * `deviceArray()` is a DeviceArray over the same memory, which kernels read and write over
 * the bus (numba's `mapped_array`). GPU work on the memory runs after the call that queues it
 * returns: `await view.ready()` before the host reads what the GPU wrote, and before it
 * writes memory a queued copy still reads. `dispose()` unpins the memory and detaches the
 * ArrayBuffer: every typed array over it has length 0 from then on.
 *
 * Allocation pins pages (milliseconds for large views, like `cuMemHostAlloc`): keep a view and
 * reuse it.
 * @example
 * using view = HostView.allocate('float32', 1 << 20);
 * view.array.fill(1);
 * const onDevice = view.toDevice();          // one async copy, no staging
 * view.copyFrom(onDevice);                   // and back, into the same pinned memory
 * await view.ready();
 * console.log(view.array[0]);
 */
export class HostView<D extends DType = DType> {
  /** The element type. */
  readonly dtype: D;
  /** Number of elements. */
  readonly length: number;
  /** Size in bytes. */
  readonly byteLength: number;
  /** Whether the memory is mapped into the device address space (see `deviceArray`). */
  readonly mapped: boolean;
  readonly #registration: Registration;
  readonly #array: HostViewArrayOf[D];
  readonly #bytes: Uint8Array;
  /** Device aliases made by `deviceArray`, one per context. */
  readonly #aliases: DeviceBuffer[] = [];
  #disposed = false;

  private constructor(
    dtype: D,
    length: number,
    mapped: boolean,
    registration: Registration,
    array: HostViewArrayOf[D],
    bytes: Uint8Array,
  ) {
    this.dtype = dtype;
    this.length = length;
    this.byteLength = bytes.byteLength;
    this.mapped = mapped;
    this.#registration = registration;
    this.#array = array;
    this.#bytes = bytes;
  }

  /**
   * Allocates `length` elements of `dtype` (zeroed) and pins them (cuMemHostRegister,
   * portable: pinned for every context; `mapped` also maps them for the devices). Inside a
   * cancelled task it throws the task's cancellation reason.
   * @example const view = HostView.allocate('float64', 4096, { mapped: true });
   */
  static allocate<D extends DType>(
    dtype: D,
    length: number,
    options: HostViewOptions = NO_OPTIONS,
  ): HostView<D> {
    assertOptions('HostView.allocate', options, ALLOCATE_OPTIONS);
    assertDType(dtype);
    if (!Number.isSafeInteger(length) || length < 0) {
      throw new CudaArgumentError(
        `HostView.allocate: length must be a non-negative integer, got ${length}`,
      );
    }
    const mapped = options.mapped ?? false;
    if (typeof mapped !== 'boolean') {
      throw new CudaArgumentError(`HostView.allocate: mapped must be a boolean, got ${mapped}`);
    }
    const byteLength = length * dtypeBytes(dtype);
    if (!Number.isSafeInteger(byteLength + 2 * PAGE)) {
      throw new CudaArgumentError(`HostView.allocate: ${length} elements are too many bytes`);
    }
    const context = currentContext();
    const pages = Math.ceil(byteLength / PAGE) * PAGE;
    // The JavaScript engine owns the memory (so that it can be detached); the view starts on
    // the first page boundary inside it.
    const buffer = new ArrayBuffer(byteLength === 0 ? 0 : pages + PAGE);
    const base = byteLength === 0 ? 0n : (koffi().address(buffer) as bigint);
    const start = byteLength === 0 ? 0 : (PAGE - Number(base % BigInt(PAGE))) % PAGE;
    const registration: Registration = {
      buffer,
      address: base + BigInt(start),
      context,
      copies: new Map(),
      aliases: [],
      live: 1,
      released: byteLength === 0,
    };
    if (byteLength > 0) {
      context.makeCurrent();
      const flags = CU_MEMHOSTREGISTER_PORTABLE | (mapped ? CU_MEMHOSTREGISTER_DEVICEMAP : 0);
      check(driver().cuMemHostRegister(registration.address, pages, flags), 'cuMemHostRegister');
      pinnedArrayBuffers.add(buffer); // uploads from its typed arrays need no staging
    }
    const array = new VIEW_TYPES[dtype](buffer, start, length) as HostViewArrayOf[D];
    const bytes = new Uint8Array(buffer, start, byteLength);
    const view = new HostView(dtype, length, mapped, registration, array, bytes);
    if (byteLength > 0) finalizer.register(view, registration, registration);
    return view;
  }

  /**
   * The elements as a typed array over the pinned memory (half precision as raw bits). Its
   * `buffer` is larger than the view (the view starts on a page boundary inside it): use the
   * array, or `bytes`, not the ArrayBuffer. Throws DisposedError after dispose; arrays taken
   * before have length 0 then.
   */
  get array(): HostViewArrayOf[D] {
    if (this.#disposed) throw new DisposedError('HostView');
    return this.#array;
  }

  /** The view's bytes as a Uint8Array over the same memory (see `array`). */
  get bytes(): Uint8Array {
    if (this.#disposed) throw new DisposedError('HostView');
    return this.#bytes;
  }

  /** The host address of the first element (0 for an empty view; throws after dispose). */
  get pointer(): bigint {
    if (this.#disposed) throw new DisposedError('HostView');
    return this.byteLength === 0 ? 0n : this.#registration.address;
  }

  /** Whether `dispose()` has been called. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /**
   * A DeviceArray over the same memory through its device alias (mapped views only; the
   * address from cuMemHostGetDevicePointer): kernels and copies on the device read and write
   * the host memory over the bus, and the host sees a kernel's writes once `ready()` has
   * resolved. `shape` defaults to `[length]` and must hold at most `length` elements. The
   * array does not own the memory (its dispose does nothing); the view's `dispose()` ends it.
   * @example const out = view.deviceArray([rows, columns]); launch(kernel, out, ...); await view.ready();
   */
  deviceArray(shape?: Shape | number, options: StreamOption = NO_OPTIONS): DeviceArray<D> {
    assertOptions('HostView.deviceArray', options, STREAM_ONLY);
    this.#assertUsable('HostView.deviceArray');
    if (!this.mapped) {
      throw new CudaArgumentError(
        'HostView.deviceArray: the view is not mapped into the device address space; allocate it with { mapped: true }',
      );
    }
    const dims = shape === undefined ? [this.length] : typeof shape === 'number' ? [shape] : shape;
    if (
      !Array.isArray(dims) ||
      dims.length === 0 ||
      !dims.every((extent) => Number.isSafeInteger(extent) && extent >= 0)
    ) {
      throw new CudaArgumentError(
        `HostView.deviceArray: shape must be a non-empty array of non-negative integers, got ${JSON.stringify(dims)}`,
      );
    }
    const elements = dims.reduce((product, extent) => product * extent, 1);
    if (elements > this.length) {
      throw new CudaArgumentError(
        `HostView.deviceArray: shape ${JSON.stringify(dims)} holds ${elements} elements, the view ${this.length}`,
      );
    }
    const stream = resolveStream(options.stream);
    stream.assertUsable();
    const alias = this.#aliasFor(stream);
    return new DeviceArray(alias, this.dtype, dims, columnMajorStrides(dims), 0, false);
  }

  /**
   * Copies `source` (same dtype, at most `length` elements, column-major order) into the
   * view's first elements, device to host, asynchronously on the stream (default: the current
   * stream): `await ready()` before reading them.
   * @example view.copyFrom(result); await view.ready(); use(view.array);
   */
  copyFrom(source: DeviceArray<D>, options: StreamOption = NO_OPTIONS): this {
    assertOptions('HostView.copyFrom', options, STREAM_ONLY);
    this.#checkOperand('HostView.copyFrom', source);
    const stream = this.#copyStream('HostView.copyFrom', options.stream);
    if (source.length === 0) return this;
    const contiguous = source.contiguous ? source : source.copy({ stream });
    const byteLength = source.length * source.elementBytes;
    const from = contiguous.useOn(stream, 'read');
    stream.context.makeCurrent();
    const token = beginOperation('memcpyDtoH', stream);
    const result = driver().cuMemcpyDtoHAsync_v2(
      this.#registration.address,
      from,
      byteLength,
      stream.ffiHandle,
    );
    endOperation(token);
    if (contiguous !== source) contiguous.dispose();
    check(result, 'cuMemcpyDtoHAsync_v2');
    this.#registration.copies.set(stream, ++useClock.value);
    return this;
  }

  /**
   * Copies the view's first `destination.length` elements into `destination` (same dtype),
   * host to device, asynchronously on the stream, straight from the pinned memory: do not
   * write those elements until `ready()` resolves.
   */
  copyTo(destination: DeviceArray<D>, options: StreamOption = NO_OPTIONS): DeviceArray<D> {
    assertOptions('HostView.copyTo', options, STREAM_ONLY);
    this.#checkOperand('HostView.copyTo', destination);
    const stream = this.#copyStream('HostView.copyTo', options.stream);
    if (destination.length === 0) return destination;
    const target = destination.contiguous
      ? destination
      : DeviceArray.empty(this.dtype, destination.shape, { stream });
    const byteLength = destination.length * destination.elementBytes;
    const to = target.useOn(stream, 'write');
    stream.context.makeCurrent();
    const token = beginOperation('memcpyHtoD', stream);
    const result = driver().cuMemcpyHtoDAsync_v2(
      to,
      this.#registration.address,
      byteLength,
      stream.ffiHandle,
    );
    endOperation(token);
    this.#registration.copies.set(stream, ++useClock.value);
    if (target !== destination) {
      try {
        check(result, 'cuMemcpyHtoDAsync_v2');
        destination.copyFrom(target, { stream });
      } finally {
        target.dispose();
      }
      return destination;
    }
    check(result, 'cuMemcpyHtoDAsync_v2');
    return destination;
  }

  /**
   * A new DeviceArray of `shape` (default `[length]`) holding the view's first elements,
   * copied on the stream straight from the pinned memory (see `copyTo`).
   * @example const a = view.toDevice([rows, columns]);
   */
  toDevice(shape?: Shape | number, options: StreamOption = NO_OPTIONS): DeviceArray<D> {
    assertOptions('HostView.toDevice', options, STREAM_ONLY);
    this.#assertUsable('HostView.toDevice');
    // Too many elements is refused before the allocation (other bad shapes by `empty`).
    const dims = typeof shape === 'number' ? [shape] : (shape ?? [this.length]);
    const elements =
      Array.isArray(dims) && !dims.includes(0) ? dims.reduce((product, e) => product * e, 1) : 0;
    if (elements > this.length) {
      throw new CudaArgumentError(
        `HostView.toDevice: shape ${JSON.stringify(dims)} holds ${elements} elements, the view ${this.length}`,
      );
    }
    const array = DeviceArray.empty(this.dtype, shape ?? this.length, options);
    try {
      return this.copyTo(array, options);
    } catch (error) {
      array.dispose();
      throw error;
    }
  }

  /**
   * Resolves when the GPU work queued so far on the view's memory has completed: its copies
   * and the work on its device aliases. Then the host may read what the GPU wrote and write
   * what it read. Never blocks the event loop; `signal` stops the wait (see `waitForStream`).
   */
  async ready(options: WaitOptions = NO_OPTIONS): Promise<void> {
    assertOptions('HostView.ready', options, READY_OPTIONS);
    if (this.#disposed) return;
    const streams = pendingStreams(this.#registration);
    if (streams.length === 0) return;
    await Promise.all(streams.map((stream) => waitForStream(stream, options)));
  }

  /**
   * Unpins the memory and detaches the ArrayBuffer: every typed array over it has length 0
   * from then on, and the memory goes back to the JavaScript engine. GPU work still queued on
   * it is waited for first, blocking the thread: `await ready()` before, or use
   * `await using`, which does. Its device arrays refuse use afterwards. Safe to call twice.
   * While a device array of the view is exported through DLPack (`toDLPack`) and its deleter
   * has not been called, the memory stays pinned and attached (the consumer's tensor points at
   * it): it is unpinned and detached when the last such deleter is called.
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    const registration = this.#registration;
    if (registration.released) return;
    registration.released = true;
    finalizer.unregister(registration);
    // The aliases go first: their release waits for their own uses, and later uses throw.
    for (const alias of this.#aliases) DeviceBuffer.releaseForeign(alias);
    // An alias exported through DLPack: the consumer's tensor still points at the memory, which
    // stays pinned and attached until the last deleter has been called.
    let lent = 0;
    const last = () => {
      if (--lent > 0) return;
      try {
        unpinAndDetach(registration);
      } catch {
        // Called from a consumer's deleter: a sticky error or teardown takes the pages with the
        // context, as for a view the garbage collector takes.
      }
    };
    for (const alias of this.#aliases) if (afterLoans(alias, last)) lent++;
    if (lent === 0) unpinAndDetach(registration);
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  /** `await using view = ...`: waits for `ready()` without blocking, then disposes. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.ready();
    this.dispose();
  }

  /** `HostView<dtype>[length]`, for messages and logs. */
  toString(): string {
    return `HostView<${this.dtype}>[${this.length}]${this.mapped ? ' (mapped)' : ''}`;
  }

  #assertUsable(what: string): void {
    if (this.#disposed) throw new DisposedError(`${what}: the HostView`);
  }

  #checkOperand(what: string, array: DeviceArray): void {
    this.#assertUsable(what);
    if (!DeviceArray.isInstance(array)) {
      throw new CudaArgumentError(`${what}: expected a DeviceArray, got ${typeof array}`);
    }
    if (array.dtype !== this.dtype) {
      throw new CudaArgumentError(`${what}: ${array} into a ${this} (dtypes differ)`);
    }
    if (array.length > this.length) {
      throw new CudaArgumentError(
        `${what}: ${array} holds ${array.length} elements, the view ${this.length}`,
      );
    }
    array.assertUsable(`${what}: the DeviceArray`);
  }

  #copyStream(what: string, given: Stream | undefined): Stream {
    const stream = resolveStream(given);
    stream.assertUsable();
    if (stream.capture !== null) {
      throw new CaptureError(
        what,
        `${stream} is capturing a graph: a copy with a HostView is not captured (its lifetime is the view's, not the graph's); copy before the capture, or from a PinnedHostBuffer`,
      );
    }
    return stream;
  }

  /** The device alias of the memory in `stream`'s context, made on first use. */
  #aliasFor(stream: Stream): DeviceBuffer {
    for (const alias of this.#aliases) if (alias.context === stream.context) return alias;
    if (this.byteLength === 0) {
      // Nothing is registered (the driver refuses a device pointer for address 0).
      const empty = DeviceBuffer.adoptForeign(0, 0, stream, mappedAlias);
      this.#aliases.push(empty);
      return empty;
    }
    const registration = this.#registration;
    stream.context.makeCurrent();
    const pointer = [0n];
    check(
      driver().cuMemHostGetDevicePointer(pointer, registration.address, 0),
      'cuMemHostGetDevicePointer',
    );
    const address = BigInt(pointer[0]!);
    const alias = DeviceBuffer.adoptForeign(
      address <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(address) : address,
      this.byteLength,
      stream,
      mappedAlias,
    );
    this.#aliases.push(alias);
    registration.aliases.push(recordOf(alias));
    // The memory stays pinned while an alias is reachable, even if the view is not.
    registration.live++;
    finalizer.register(alias, registration, registration);
    hostAliases.set(alias, registration.address);
    return alias;
  }
}

/** The foreign side of a device alias: the memory is the view's, so its release does nothing. */
const mappedAlias: ForeignMemory = {
  readOnly: false,
  writeError: () => new CudaArgumentError('unreachable: a mapped alias is writable'),
  release: () => {},
  goneError: () =>
    new DisposedError('HostView (this DeviceArray is the device alias of its memory)'),
};

/** The streams whose copies or alias uses of the memory are not known complete. */
function pendingStreams(registration: Registration): Stream[] {
  const streams: Stream[] = [];
  const add = (stream: Stream, stamp: number) => {
    if (stream.disposed || stream.capture !== null || stream.hasCompleted(stamp)) return;
    if (!streams.includes(stream)) streams.push(stream);
  };
  for (const [stream, stamp] of registration.copies) add(stream, stamp);
  for (const alias of registration.aliases) {
    add(alias.stream, alias.stamp);
    const readers = alias.readers;
    if (readers !== null) {
      for (let i = 0; i < readers.length; i++) add(readers[i]!, alias.readerStamps![i]!);
    }
  }
  return streams;
}

/** Waits for the GPU work queued on the memory, unpins it and detaches its ArrayBuffer. */
function unpinAndDetach(registration: Registration): void {
  for (const stream of pendingStreams(registration)) stream.synchronize();
  try {
    unregister(registration);
  } finally {
    const buffer = registration.buffer!;
    registration.buffer = null;
    structuredClone(buffer, { transfer: [buffer] });
  }
}

function unregister(registration: Registration): void {
  if (registration.buffer !== null) pinnedArrayBuffers.delete(registration.buffer);
  registration.context.makeCurrent();
  check(driver().cuMemHostUnregister(registration.address), 'cuMemHostUnregister');
}
