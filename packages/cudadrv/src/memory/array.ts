import { currentSignal, resolveStream } from '../context/provider.js';
import { int32High, int32Low } from '../driver.js';
import {
  assertDType,
  DTYPES,
  type DType,
  decodeHalf,
  dtypeBytes,
  dtypeOfHost,
  encodeHalf,
  float32ToBfloat16Bits,
  float32ToFloat16Bits,
  type HostArray,
  type HostArrayOf,
} from '../dtype.js';
import { CaptureError, CudaArgumentError, DisposedError } from '../errors.js';
import { assertOptions, NO_OPTIONS, STREAM_ONLY } from '../options-checks.js';
import type { Stream } from '../stream/stream.js';
import { type WaitOptions, waitForStream } from '../stream/wait.js';
import { type Allocation, DeviceBuffer, handOff, recordOf, type StreamOption } from './memory.js';
import {
  copyDeviceRegion,
  copyDeviceToPinned,
  copyHostToDevice,
  memset,
  memsetWords,
  type PinnedHostBuffer,
  stagingPool,
} from './transfer.js';

const arrayBrand = Symbol.for('@cuda-tasks/DeviceArray');

/** The options `DeviceArray.fromHost` and `toHost` take (the other calls take `stream` only). */
const FROM_HOST_OPTIONS: readonly string[] = ['stream', 'dtype'];
const TO_HOST_OPTIONS: readonly string[] = ['stream', 'signal'];

/** A shape: dimensions, first dimension fastest (column-major, as cuBLAS expects). */
export type Shape = readonly number[];

function checkShape(shape: Shape): number {
  if (!Array.isArray(shape) || shape.length === 0) {
    throw new CudaArgumentError(
      `shape must be a non-empty array of non-negative integers, got ${JSON.stringify(shape)}`,
    );
  }
  let length = 1;
  for (const dimension of shape) {
    if (!Number.isSafeInteger(dimension) || dimension < 0) {
      throw new CudaArgumentError(
        `shape must hold non-negative integers, got ${JSON.stringify(shape)}`,
      );
    }
    length *= dimension;
  }
  // A zero extent empties the array however large the others (Infinity * 0 is NaN).
  return shape.includes(0) ? 0 : length;
}

/** @internal The element strides of a compact column-major array of `shape`. */
export function columnMajorStrides(shape: readonly number[]): number[] {
  const strides: number[] = [];
  let stride = 1;
  for (const dimension of shape) {
    strides.push(stride);
    stride *= dimension;
  }
  return strides;
}

/** The values an integer dtype holds (the float dtypes hold any number: NaN, infinities). */
const INTEGER_RANGES: Partial<Record<DType, readonly [number, number]>> = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  uint32: [0, 2 ** 32 - 1],
  int8: [-128, 127],
  uint8: [0, 255],
};

/**
 * Throws a CudaArgumentError unless `value` is a number that `dtype` holds as it is: an integer
 * in range for the integer dtypes (a typed array would wrap 1e10 or truncate 1.5 silently).
 */
function assertElementValue(
  call: string,
  dtype: DType,
  value: unknown,
  index?: number,
): asserts value is number {
  const what = index === undefined ? 'value' : `element ${index}`;
  if (typeof value !== 'number') {
    throw new CudaArgumentError(
      `${call}: ${what} must be a number, got ${typeof value === 'string' ? JSON.stringify(value) : String(value)}`,
    );
  }
  const range = INTEGER_RANGES[dtype];
  if (range !== undefined && !(Number.isInteger(value) && value >= range[0] && value <= range[1])) {
    throw new CudaArgumentError(
      `${call}: ${index === undefined ? '' : `element ${index}: `}${dtype} elements are integers in [${range[0]}, ${range[1]}], got ${value}`,
    );
  }
}

/**
 * A typed, shaped view of device memory, column-major (the first index varies fastest, as in
 * cuBLAS and Fortran). Views and reshapes share the memory without copying; the array that
 * allocated the memory owns it and frees it on `dispose()`.
 */
export class DeviceArray<D extends DType = DType> {
  static {
    // The brand lives on the prototype: a per-instance symbol field slows construction.
    (DeviceArray.prototype as any)[arrayBrand] = true;
  }
  /** The element type. */
  readonly dtype: D;
  /** Extent per dimension (column-major, like cuBLAS). */
  readonly shape: readonly number[];
  /** Element strides per dimension. */
  readonly strides: readonly number[];
  /** Offset of the first element in the buffer, in elements. */
  readonly offset: number;
  /** Number of elements. */
  readonly length: number;
  /** The device memory the elements live in (shared with views). */
  readonly buffer: DeviceBuffer;
  /** Whether this array allocated its buffer (views do not own it). */
  readonly owner: boolean;
  /**
   * @internal The first element's address as `ffiValue` gives it (0 for an empty buffer). It
   * declares no use: pass `ffiAddressOn(stream)` to native calls.
   */
  readonly ffiAddress: number | bigint;
  /**
   * @internal `ffiAddress`'s low and high 32 bits as signed integers, which V8 keeps in the
   * object itself: a launch writes these, not the address (above 2^31, a heap number of its own).
   */
  readonly ffiLo: number;
  /** @internal See `ffiLo`. */
  readonly ffiHi: number;
  /**
   * @internal The buffer's allocation record, handed to `handOff` by this array's uses and by
   * kernel launches (see `compileLaunch`); only the memory layer reads or moves it.
   */
  readonly allocation: Allocation;
  #pointer: bigint | undefined;
  /** Whether the elements are laid out column-major without gaps (kernels check it per call). */
  readonly #contiguous: boolean;

  /** @internal Use `DeviceArray.empty`, `zeros`, `fromHost` or a view method. */
  constructor(
    buffer: DeviceBuffer,
    dtype: D,
    shape: Shape,
    strides: readonly number[],
    offset: number,
    owner: boolean,
  ) {
    this.buffer = buffer;
    this.allocation = recordOf(buffer);
    this.dtype = dtype;
    this.shape = Object.freeze([...shape]);
    this.strides = Object.freeze([...strides]);
    this.offset = offset;
    this.length = checkShape(shape);
    this.owner = owner;
    let stride = 1;
    let contiguous = true;
    for (let i = 0; i < shape.length; i++) {
      if (shape[i]! > 1 && strides[i] !== stride) contiguous = false;
      stride *= shape[i]!;
    }
    this.#contiguous = contiguous;
    const base = buffer.byteLength === 0 ? 0 : buffer.address;
    const offsetBytes = offset * dtypeBytes(dtype);
    const address =
      typeof base === 'number' ? (base === 0 ? 0 : base + offsetBytes) : base + BigInt(offsetBytes);
    this.ffiAddress = address;
    this.ffiLo = int32Low(address);
    this.ffiHi = int32High(address);
  }

  /** True for a DeviceArray of any loaded copy of this package. */
  static isInstance(value: unknown): value is DeviceArray {
    return typeof value === 'object' && value !== null && arrayBrand in value;
  }

  /**
   * Uninitialized array of `dtype` and `shape`, allocated on the stream. Synchronous, as
   * `DeviceBuffer.allocate` is (out of memory, it blocks while pending frees complete);
   * `emptyAsync` is the awaitable form.
   * @example const a = DeviceArray.empty('float32', [1024, 1024]);
   */
  static empty<D extends DType>(
    dtype: D,
    shape: Shape | number,
    options: StreamOption = NO_OPTIONS,
  ): DeviceArray<D> {
    assertOptions('DeviceArray.empty', options, STREAM_ONLY);
    assertDType(dtype);
    const dims = typeof shape === 'number' ? [shape] : shape;
    const length = checkShape(dims);
    const buffer = DeviceBuffer.allocate(length * dtypeBytes(dtype), options);
    return new DeviceArray(buffer, dtype, dims, columnMajorStrides(dims), 0, true);
  }

  /**
   * `empty`, awaitable: on out-of-memory the wait for the device's pending frees does not block
   * the event loop (see `DeviceBuffer.allocateAsync`).
   * @example const a = await DeviceArray.emptyAsync('float32', [8192, 8192]);
   */
  static async emptyAsync<D extends DType>(
    dtype: D,
    shape: Shape | number,
    options: StreamOption = NO_OPTIONS,
  ): Promise<DeviceArray<D>> {
    assertOptions('DeviceArray.emptyAsync', options, STREAM_ONLY);
    assertDType(dtype);
    const dims = typeof shape === 'number' ? [shape] : shape;
    const length = checkShape(dims);
    const buffer = await DeviceBuffer.allocateAsync(length * dtypeBytes(dtype), options);
    return new DeviceArray(buffer, dtype, dims, columnMajorStrides(dims), 0, true);
  }

  /** Array of zeros (memset on the stream). */
  static zeros<D extends DType>(
    dtype: D,
    shape: Shape | number,
    options: StreamOption = NO_OPTIONS,
  ): DeviceArray<D> {
    assertOptions('DeviceArray.zeros', options, STREAM_ONLY);
    const array = DeviceArray.empty(dtype, shape, options);
    memset({ buffer: array.buffer }, 0, array.buffer.byteLength, options);
    return array;
  }

  /** Array filled with `value`. */
  static full<D extends DType>(
    dtype: D,
    shape: Shape | number,
    value: number,
    options: StreamOption = NO_OPTIONS,
  ): DeviceArray<D> {
    assertOptions('DeviceArray.full', options, STREAM_ONLY);
    assertDType(dtype);
    assertElementValue('DeviceArray.full', dtype, value);
    return DeviceArray.empty(dtype, shape, options).fill(value, options);
  }

  /**
   * Copies a host typed array to a new device array. The dtype follows the typed array
   * (Float32Array -> float32, ...); pass `dtype: 'float16' | 'bfloat16'` with a Float32Array
   * to store half precision. `shape` defaults to `[data.length]`; elements are column-major.
   * @example const a = DeviceArray.fromHost(new Float32Array([1, 2, 3, 4]), [2, 2]);
   */
  static fromHost(
    data: Float32Array | readonly number[],
    shape?: Shape,
    options?: StreamOption,
  ): DeviceArray<'float32'>;
  static fromHost(
    data: Float64Array,
    shape?: Shape,
    options?: StreamOption,
  ): DeviceArray<'float64'>;
  static fromHost(data: Int32Array, shape?: Shape, options?: StreamOption): DeviceArray<'int32'>;
  static fromHost(data: Uint32Array, shape?: Shape, options?: StreamOption): DeviceArray<'uint32'>;
  static fromHost(data: Int8Array, shape?: Shape, options?: StreamOption): DeviceArray<'int8'>;
  static fromHost(data: Uint8Array, shape?: Shape, options?: StreamOption): DeviceArray<'uint8'>;
  static fromHost<D extends DType>(
    data: HostArray | readonly number[],
    shape?: Shape,
    options?: StreamOption & { dtype?: D },
  ): DeviceArray<D>;
  static fromHost<D extends DType = DType>(
    data: HostArray | readonly number[],
    shape?: Shape,
    options: StreamOption & { dtype?: D } = NO_OPTIONS,
  ): DeviceArray<D> {
    assertOptions('DeviceArray.fromHost', options, FROM_HOST_OPTIONS);
    if (options.dtype !== undefined) assertDType(options.dtype);
    let host: HostArray;
    if (Array.isArray(data)) {
      // A plain list's numbers are checked first: a typed array would turn 'x' into NaN (or
      // 0), and wrap or truncate what an integer dtype cannot hold, without a word.
      const listed: DType = options.dtype ?? 'float32';
      for (let i = 0; i < data.length; i++) {
        assertElementValue('DeviceArray.fromHost', listed, data[i], i);
      }
      host = new DTYPES[listed].host(data.length);
      host.set(data as number[]);
    } else host = data as HostArray;
    const dtype = (options.dtype ?? dtypeOfHost(host)) as D;
    assertDType(dtype);
    const expectedHost = DTYPES[dtype].host;
    if (!(host instanceof expectedHost)) {
      throw new CudaArgumentError(
        `fromHost: dtype ${dtype} needs a ${expectedHost.name}, got ${host.constructor.name}`,
      );
    }
    const dims = shape ?? [host.length];
    const length = checkShape(dims);
    if (length !== host.length) {
      throw new CudaArgumentError(
        `fromHost: shape ${JSON.stringify(dims)} holds ${length} elements, the data has ${host.length}`,
      );
    }
    // The calls below take the stream only.
    const onStream: StreamOption =
      options.dtype === undefined ? options : { stream: options.stream };
    const array = DeviceArray.empty(dtype, dims, onStream);
    array.copyFromHost(host, onStream);
    return array;
  }

  /** The device address of the first element (throws DisposedError after dispose). */
  get pointer(): bigint {
    if (this.buffer.disposed) throw new DisposedError('DeviceArray');
    return (this.#pointer ??= BigInt(this.ffiAddress));
  }

  /** Whether the memory has been freed. */
  get disposed(): boolean {
    return this.buffer.disposed;
  }

  /** Bytes per element. */
  get elementBytes(): number {
    return dtypeBytes(this.dtype);
  }

  /** Rows (first dimension). */
  get rows(): number {
    return this.shape[0]!;
  }

  /** Columns (second dimension, 1 for vectors). */
  get columns(): number {
    return this.shape.length > 1 ? this.shape[1]! : 1;
  }

  /** Leading dimension of a 2-D array (elements between columns), as BLAS and LAPACK want it. */
  get leadingDimension(): number {
    return this.shape.length > 1 ? this.strides[1]! : Math.max(1, this.shape[0]!);
  }

  /** True when the elements are dense in column-major order. */
  get contiguous(): boolean {
    return this.#contiguous;
  }

  /**
   * Declares that `stream` is about to read or write the memory, ordering it on the GPU after
   * the work it depends on (see `DeviceBuffer.useOn`), and returns the device address of the
   * first element. Library packages call it before each native call.
   */
  useOn(stream: Stream, access: 'read' | 'write' = 'write'): bigint {
    if (this.buffer.byteLength === 0) return 0n;
    handOff(this.buffer, this.allocation, stream, access);
    return (this.#pointer ??= BigInt(this.ffiAddress));
  }

  /**
   * `useOn`, returning the address as koffi converts it fastest (a Number; see `ffiValue`):
   * what the library packages pass to native functions declared with `uint64_t` addresses.
   */
  ffiAddressOn(stream: Stream, access: 'read' | 'write' = 'write'): number | bigint {
    if (this.buffer.byteLength === 0) return 0;
    handOff(this.buffer, this.allocation, stream, access);
    return this.ffiAddress;
  }

  /** Throws DisposedError when the memory has been freed (checked before native calls). */
  assertUsable(what = 'DeviceArray'): void {
    if (this.buffer.disposed) throw new DisposedError(what);
  }

  /**
   * A view of the same memory with another shape; the array must be contiguous.
   * @example const m = DeviceArray.zeros('float32', 12).reshape([3, 4]);
   */
  reshape(shape: Shape): DeviceArray<D> {
    const length = checkShape(shape);
    if (length !== this.length) {
      throw new CudaArgumentError(
        `reshape: ${JSON.stringify(shape)} holds ${length} elements, the array has ${this.length}`,
      );
    }
    if (!this.contiguous)
      throw new CudaArgumentError('reshape: the array is a strided view; copy() it first');
    this.assertUsable();
    return new DeviceArray(
      this.buffer,
      this.dtype,
      shape,
      columnMajorStrides(shape),
      this.offset,
      false,
    );
  }

  /**
   * A rectangular block of a 2-D array (rows `row`..`row+rows`, columns `column`..`column+columns`)
   * without copying; its leading dimension is the parent's.
   * @example const topLeft = a.block(0, 0, 2, 2);
   */
  block(row: number, column: number, rows: number, columns: number): DeviceArray<D> {
    if (this.shape.length !== 2)
      throw new CudaArgumentError(
        `block: needs a 2-D array, got shape ${JSON.stringify(this.shape)}`,
      );
    const [totalRows, totalColumns] = this.shape as [number, number];
    for (const value of [row, column, rows, columns]) {
      if (!Number.isSafeInteger(value) || value < 0)
        throw new CudaArgumentError(`block: indices must be non-negative integers`);
    }
    if (row + rows > totalRows || column + columns > totalColumns) {
      throw new CudaArgumentError(
        `block: rows ${row}..${row + rows} x columns ${column}..${column + columns} exceed the array's ${totalRows} x ${totalColumns}`,
      );
    }
    this.assertUsable();
    const offset = this.offset + row * this.strides[0]! + column * this.strides[1]!;
    return new DeviceArray(this.buffer, this.dtype, [rows, columns], this.strides, offset, false);
  }

  /** Column `j` of a 2-D array as a vector view. */
  column(j: number): DeviceArray<D> {
    if (this.shape.length !== 2)
      throw new CudaArgumentError(
        `column: needs a 2-D array, got shape ${JSON.stringify(this.shape)}`,
      );
    return this.block(0, j, this.rows, 1).reshapeStrided([this.rows], [this.strides[0]!]);
  }

  /** Elements `start`..`start+length` of a vector (1-D) array, as a view. */
  slice(start: number, length: number): DeviceArray<D> {
    if (this.shape.length !== 1) throw new CudaArgumentError('slice: needs a 1-D array');
    if (
      !Number.isSafeInteger(start) ||
      !Number.isSafeInteger(length) ||
      start < 0 ||
      length < 0 ||
      start + length > this.length
    ) {
      throw new CudaArgumentError(
        `slice: ${start}..${start + length} is outside 0..${this.length}`,
      );
    }
    this.assertUsable();
    return new DeviceArray(
      this.buffer,
      this.dtype,
      [length],
      this.strides,
      this.offset + start * this.strides[0]!,
      false,
    );
  }

  private reshapeStrided(shape: Shape, strides: readonly number[]): DeviceArray<D> {
    return new DeviceArray(this.buffer, this.dtype, shape, strides, this.offset, false);
  }

  /** A contiguous copy on the device, ordered on the stream. */
  copy(options: StreamOption = NO_OPTIONS): DeviceArray<D> {
    assertOptions('DeviceArray.copy', options, STREAM_ONLY);
    const out = DeviceArray.empty(this.dtype, this.shape, options);
    out.copyFrom(this, options);
    return out;
  }

  /** Copies `source` (same dtype and shape; either may be a strided 2-D view) into this array. */
  copyFrom(source: DeviceArray<D>, options: StreamOption = NO_OPTIONS): this {
    assertOptions('DeviceArray.copyFrom', options, STREAM_ONLY);
    if (source.dtype !== this.dtype)
      throw new CudaArgumentError(`copyFrom: dtype ${source.dtype} into ${this.dtype}`);
    if (
      source.length !== this.length ||
      source.shape.length !== this.shape.length ||
      source.shape.some((d, i) => d !== this.shape[i])
    ) {
      throw new CudaArgumentError(
        `copyFrom: shape ${JSON.stringify(source.shape)} into ${JSON.stringify(this.shape)}`,
      );
    }
    const bytes = this.elementBytes;
    if (this.contiguous && source.contiguous) {
      copyDeviceRegion(
        'copyFrom',
        this.buffer,
        this.offset * bytes,
        0,
        source.buffer,
        source.offset * bytes,
        0,
        this.length * bytes,
        1,
        options.stream,
      );
      return this;
    }
    if (this.shape.length !== 2 || this.strides[0] !== 1 || source.strides[0] !== 1) {
      throw new CudaArgumentError(
        'copyFrom: strided copies are supported for 2-D column-major views only',
      );
    }
    copyDeviceRegion(
      'copyFrom',
      this.buffer,
      this.offset * bytes,
      this.leadingDimension * bytes,
      source.buffer,
      source.offset * bytes,
      source.leadingDimension * bytes,
      this.rows * bytes,
      this.columns,
      options.stream,
    );
    return this;
  }

  /** Copies host data (same element count, column-major) into this array, ordered on the stream. */
  copyFromHost(data: HostArray, options: StreamOption = NO_OPTIONS): this {
    assertOptions('DeviceArray.copyFromHost', options, STREAM_ONLY);
    if (!ArrayBuffer.isView(data)) {
      throw new CudaArgumentError(
        `copyFromHost: data must be a ${DTYPES[this.dtype].host.name}, got ${data === null ? 'null' : Object.prototype.toString.call(data)}`,
      );
    }
    if (data.length !== this.length) {
      throw new CudaArgumentError(
        `copyFromHost: ${data.length} elements into an array of ${this.length}`,
      );
    }
    const expectedHost = DTYPES[this.dtype].host;
    if (!(data instanceof expectedHost)) {
      throw new CudaArgumentError(
        `copyFromHost: dtype ${this.dtype} needs a ${expectedHost.name}, got ${data.constructor.name}`,
      );
    }
    this.assertUsable();
    const bytes: ArrayBufferView =
      this.dtype === 'float16' || this.dtype === 'bfloat16'
        ? encodeHalf(this.dtype, data as Float32Array)
        : data;
    if (this.contiguous) {
      copyHostToDevice(
        { buffer: this.buffer, byteOffset: this.offset * this.elementBytes },
        bytes,
        options,
      );
      return this;
    }
    const staging = DeviceArray.empty(this.dtype, this.shape, options);
    try {
      copyHostToDevice({ buffer: staging.buffer }, bytes, options);
      this.copyFrom(staging as DeviceArray<D>, options);
    } finally {
      staging.dispose();
    }
    return this;
  }

  /** Sets every element to `value`, ordered on the stream. */
  fill(value: number, options: StreamOption = NO_OPTIONS): this {
    assertOptions('DeviceArray.fill', options, STREAM_ONLY);
    this.assertUsable();
    assertElementValue('DeviceArray.fill', this.dtype, value);
    const stream = resolveStream(options.stream);
    stream.assertUsable();
    if (this.length === 0) return this;
    if (!this.contiguous) {
      const filled = DeviceArray.full(this.dtype, this.shape, value, { stream });
      this.copyFrom(filled as DeviceArray<D>, { stream });
      filled.dispose();
      return this;
    }
    const region = { buffer: this.buffer, byteOffset: this.offset * this.elementBytes };
    const pattern = new DTYPES[this.dtype].host(1);
    pattern[0] = value;
    switch (this.dtype) {
      case 'int8':
      case 'uint8':
        memset(region, new Uint8Array(pattern.buffer)[0]!, this.length, { stream });
        break;
      case 'float16':
        memsetWords(region, float32ToFloat16Bits(value), this.length, 2, { stream });
        break;
      case 'bfloat16':
        memsetWords(region, float32ToBfloat16Bits(value), this.length, 2, { stream });
        break;
      case 'float64': {
        const words = new Uint32Array(pattern.buffer);
        if (words[0] === words[1]) memsetWords(region, words[0]!, this.length * 2, 4, { stream });
        else this.copyFromHost(new Float64Array(this.length).fill(value), { stream });
        break;
      }
      default:
        memsetWords(region, new Uint32Array(pattern.buffer)[0]!, this.length, 4, { stream });
    }
    return this;
  }

  /**
   * Copies the array to the host. The promise resolves when the data has arrived; the copy
   * goes through pinned memory so it is truly asynchronous, and the event loop is never
   * blocked while waiting. Half-precision arrays come back as Float32Array. On a stream that
   * captures a graph it rejects with a CaptureError (before any copy is issued). When `signal`
   * (default: the running task's, see `currentSignal`) aborts, it rejects at once with the
   * signal's reason; the copy already queued lands in a staging buffer that is reused only
   * after it has.
   * @example const values = await a.toHost();
   */
  async toHost(options: StreamOption & WaitOptions = NO_OPTIONS): Promise<HostArrayOf[D]> {
    assertOptions('DeviceArray.toHost', options, TO_HOST_OPTIONS);
    if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
      throw new CudaArgumentError(
        `DeviceArray.toHost: option signal must be an AbortSignal, got ${Object.prototype.toString.call(options.signal)}`,
      );
    }
    this.assertUsable();
    const stream = resolveStream(options.stream);
    stream.assertUsable();
    if (stream.capture !== null) {
      throw new CaptureError(
        'DeviceArray.toHost',
        `${stream} is capturing a graph: toHost() waits for the copy, and captured work runs only when the graph is launched. Read the array after the capture has ended (or after launching the graph)`,
      );
    }
    const signal = options.signal ?? currentSignal();
    const source = this.contiguous ? this : this.copy({ stream });
    const byteLength = this.length * this.elementBytes;
    let staging: PinnedHostBuffer | undefined = stagingPool.acquire(byteLength);
    try {
      copyDeviceToPinned(
        staging,
        { buffer: source.buffer, byteOffset: source.offset * this.elementBytes },
        byteLength,
        {
          stream,
        },
      );
      if (source !== this) source.dispose();
      if (signal === undefined) await waitForStream(stream);
      else {
        try {
          await waitForStream(stream, { signal });
        } catch (error) {
          if (signal.aborted && error === signal.reason) {
            // The copy is still queued: its staging buffer is reused only once it has landed
            // (if that cannot be known, never).
            const held = staging;
            staging = undefined;
            waitForStream(stream).then(
              () => stagingPool.release(held),
              () => {},
            );
          }
          throw error;
        }
      }
      const half = this.dtype === 'float16' || this.dtype === 'bfloat16';
      const out = half ? new Uint16Array(this.length) : new DTYPES[this.dtype].host(this.length);
      new Uint8Array(out.buffer, out.byteOffset, byteLength).set(
        staging.bytes.subarray(0, byteLength),
      );
      return (
        half ? decodeHalf(this.dtype as 'float16', out as Uint16Array) : out
      ) as HostArrayOf[D];
    } finally {
      if (staging !== undefined) stagingPool.release(staging);
    }
  }

  /** Frees the memory if this array owns it (views do nothing). Safe to call twice. */
  dispose(): void {
    if (this.owner) this.buffer.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  /** `DeviceArray<dtype>[shape]`, for messages and logs. */
  toString(): string {
    return `DeviceArray<${this.dtype}>[${this.shape.join('x')}]`;
  }
}
