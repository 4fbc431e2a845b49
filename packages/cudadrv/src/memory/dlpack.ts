/**
 * DLPack 1.x: a `DeviceArray` handed to a native library of this process as a
 * `DLManagedTensorVersioned *`, and one taken from it, without copying. The struct layout is
 * dlpack.h's (LP64: 80 bytes, the tensor at byte 32); see decision 0038.
 */

import { Device, deviceCount } from '../context/device.js';
import { resolveStream } from '../context/provider.js';
import { type DType, dtypeBytes } from '../dtype.js';
import { CudaArgumentError } from '../errors.js';
import { koffi } from '../ffi/library.js';
import { assertOptions, NO_OPTIONS } from '../options-checks.js';
import { cudadrvState } from '../process-state.js';
import type { Stream } from '../stream/stream.js';
import { columnMajorStrides, DeviceArray } from './array.js';
import { DeviceBuffer, type ForeignMemory, lendAllocation, type StreamOption } from './memory.js';

/** The DLPack ABI version this package produces and reads (major must match). */
export const DLPACK_VERSION: Readonly<{ major: number; minor: number }> = Object.freeze({
  major: 1,
  minor: 1,
});
/** `DLManagedTensorVersioned.flags`: the consumer must not write the tensor. */
export const DLPACK_FLAG_BITMASK_READ_ONLY = 1n;
/** `DLManagedTensorVersioned.flags`: the producer made a copy for the consumer. */
export const DLPACK_FLAG_BITMASK_IS_COPIED = 2n;
/** `DLDeviceType` values this package reads or writes. */
export const DLDeviceType = Object.freeze({
  kDLCPU: 1,
  kDLCUDA: 2,
  kDLCUDAHost: 3,
  kDLCUDAManaged: 13,
});

/** Byte offsets in `DLManagedTensorVersioned` (LP64). */
const at = {
  major: 0,
  minor: 4,
  managerContext: 8,
  deleter: 16,
  flags: 24,
  data: 32,
  deviceType: 40,
  deviceId: 44,
  ndim: 48,
  code: 52,
  bits: 53,
  lanes: 54,
  shape: 56,
  strides: 64,
  byteOffset: 72,
} as const;
/** sizeof(DLManagedTensorVersioned). */
const STRUCT_BYTES = 80;
/** The most dimensions accepted on import (DeviceArray has no limit; a corrupt ndim has). */
const MAX_DIMENSIONS = 64;

/** DLDataTypeCode and bits of each dtype (lanes are always 1). */
const DLPACK_DTYPES: Readonly<Record<DType, readonly [code: number, bits: number]>> = {
  int8: [0, 8],
  int32: [0, 32],
  uint8: [1, 8],
  uint32: [1, 32],
  float16: [2, 16],
  float32: [2, 32],
  float64: [2, 64],
  bfloat16: [4, 16],
};

function dtypeOfDLPack(code: number, bits: number, lanes: number): DType | undefined {
  if (lanes !== 1) return undefined;
  for (const [dtype, [c, b]] of Object.entries(DLPACK_DTYPES)) {
    if (c === code && b === bits) return dtype as DType;
  }
  return undefined;
}

/** One exported tensor: the native block and the array it keeps alive. */
interface Export {
  memory: unknown;
  array: DeviceArray | undefined;
  /** Ends the loan of the array's memory (see `lendAllocation`). */
  endLoan: () => void;
}

interface DLPackState {
  /** Exported tensors by the address of their struct. */
  exports: Map<bigint, Export>;
  /** The one registered deleter (a koffi callback) every export points to, made on first use. */
  deleter: { pointer: bigint } | undefined;
}

// Process-wide: a second loaded copy of this package finds the same exports and deleter.
const state: DLPackState = cudadrvState('dlpack', () => ({
  exports: new Map(),
  deleter: undefined,
}));

let deleterType: unknown;

/** `void (*)(DLManagedTensorVersioned *self)`, declared once. */
function deleterPrototype(): unknown {
  return (deleterType ??= koffi().proto('void DLPackManagedTensorDeleter(void *self)'));
}

/**
 * The deleter every exported tensor carries. A call from another thread is queued by koffi to
 * the main thread and runs when the event loop turns (the calling thread waits until then).
 */
function exportDeleter(): bigint {
  if (state.deleter === undefined) {
    const k = koffi();
    const callback = k.register(
      (self: bigint | null) => releaseExport(self),
      k.pointer(deleterPrototype() as never),
    );
    state.deleter = { pointer: k.address(callback) as bigint };
  }
  return state.deleter.pointer;
}

function releaseExport(self: bigint | number | null): void {
  if (self === null) return;
  const key = BigInt(self);
  const record = state.exports.get(key);
  // A second call (a consumer's bug) finds nothing: the first freed the struct.
  if (record === undefined) return;
  state.exports.delete(key);
  record.array = undefined;
  koffi().free(record.memory as never);
  record.endLoan();
}

/** The options `toDLPack` and `fromDLPack` take. */
const TO_DLPACK_OPTIONS: readonly string[] = ['stream', 'readOnly', 'reverseDimensions'];
const FROM_DLPACK_OPTIONS: readonly string[] = ['stream', 'reverseDimensions'];

/** Options of `toDLPack`. */
export interface ToDLPackOptions extends StreamOption {
  /** Sets DLPACK_FLAG_BITMASK_READ_ONLY: the consumer promises not to write (default false). */
  readOnly?: boolean;
  /**
   * Exports the dimensions in reverse order (default false): a column-major `[rows, columns]`
   * array becomes a row-major (C-order) `[columns, rows]` tensor, its transpose, as row-major
   * libraries expect.
   */
  reverseDimensions?: boolean;
}

/**
 * Exports `array` as a DLPack 1.x `DLManagedTensorVersioned *` (a BigInt address) for a native
 * library of this process, without copying: dimensions as the array's, strides in elements
 * (column-major: the first stride is 1), `data` the allocation and `byte_offset` the first
 * element. The tensor is valid for work the consumer queues on `stream` (default: the current
 * stream) after this call; the array's pending work is ordered before it there. The memory
 * stays allocated until the consumer calls the tensor's deleter (once): the array is kept from
 * the garbage collector, and its `dispose()` meanwhile makes it unusable here but frees the
 * memory only at the deleter (ordered after this process's uses; the consumer calls the
 * deleter once its own GPU work on the tensor is complete or ordered before the stream's).
 *
 * The deleter is a JavaScript function: called from another thread, it runs when this
 * thread's event loop turns, and the calling thread waits until then (so a thread that the
 * main thread joins must not call it).
 * @example const tensor = toDLPack(a); native.consume(tensor);
 */
export function toDLPack(array: DeviceArray, options: ToDLPackOptions = NO_OPTIONS): bigint {
  assertOptions('toDLPack', options, TO_DLPACK_OPTIONS);
  if (!DeviceArray.isInstance(array)) {
    throw new CudaArgumentError(`toDLPack: expected a DeviceArray, got ${describe(array)}`);
  }
  array.assertUsable('toDLPack: the DeviceArray');
  const stream = resolveStream(options.stream);
  stream.assertUsable();
  const context = array.buffer.context;
  if (stream.context !== context) {
    throw new CudaArgumentError(
      `toDLPack: ${array} lives in ${context}, but ${stream} belongs to ${stream.context}`,
    );
  }
  const readOnly = options.readOnly ?? false;
  const reverseDimensions = options.reverseDimensions ?? false;
  if (typeof readOnly !== 'boolean' || typeof reverseDimensions !== 'boolean') {
    throw new CudaArgumentError('toDLPack: readOnly and reverseDimensions must be booleans');
  }
  const ndim = array.shape.length;
  const k = koffi();
  const deleter = exportDeleter();
  const bytes = array.elementBytes;
  const empty = array.length === 0 || array.buffer.byteLength === 0;
  // The use is declared (and may be refused: a read-only buffer) before anything is allocated.
  const base = empty ? 0n : array.buffer.useOn(stream, readOnly ? 'read' : 'write');
  const memory = k.alloc('uint8_t', STRUCT_BYTES + 16 * ndim);
  const address = k.address(memory) as bigint;
  const view = new DataView(k.view(memory, STRUCT_BYTES + 16 * ndim));
  const [code, bits] = DLPACK_DTYPES[array.dtype];
  view.setUint32(at.major, DLPACK_VERSION.major, true);
  view.setUint32(at.minor, DLPACK_VERSION.minor, true);
  view.setBigUint64(at.managerContext, 0n, true);
  view.setBigUint64(at.deleter, deleter, true);
  view.setBigUint64(at.flags, readOnly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0n, true);
  const host = hostAliases.get(array.buffer);
  view.setBigUint64(at.data, empty ? 0n : (host ?? base), true);
  view.setInt32(
    at.deviceType,
    host === undefined ? DLDeviceType.kDLCUDA : DLDeviceType.kDLCUDAHost,
    true,
  );
  view.setInt32(at.deviceId, host === undefined ? context.device.ordinal : 0, true);
  view.setInt32(at.ndim, ndim, true);
  view.setUint8(at.code, code);
  view.setUint8(at.bits, bits);
  view.setUint16(at.lanes, 1, true);
  view.setBigUint64(at.shape, address + BigInt(STRUCT_BYTES), true);
  view.setBigUint64(at.strides, address + BigInt(STRUCT_BYTES + 8 * ndim), true);
  view.setBigUint64(at.byteOffset, empty ? 0n : BigInt(array.offset * bytes), true);
  for (let i = 0; i < ndim; i++) {
    const source = reverseDimensions ? ndim - 1 - i : i;
    view.setBigInt64(STRUCT_BYTES + 8 * i, BigInt(array.shape[source]!), true);
    view.setBigInt64(STRUCT_BYTES + 8 * (ndim + i), BigInt(array.strides[source]!), true);
  }
  state.exports.set(address, { memory, array, endLoan: lendAllocation(array.buffer) });
  return address;
}

/**
 * @internal Buffers that alias mapped host memory (a HostView's `deviceArray`), with the host
 * address: exported as kDLCUDAHost.
 */
export const hostAliases: WeakMap<DeviceBuffer, bigint> = new WeakMap();

/** The number of tensors exported by `toDLPack` whose deleter has not been called yet. */
export function pendingDLPackExports(): number {
  return state.exports.size;
}

/** Options of `fromDLPack`. */
export interface FromDLPackOptions extends StreamOption {
  /**
   * Views the tensor with its dimensions in reverse order (default false): a row-major
   * (C-order) `[rows, columns]` tensor becomes the column-major `[columns, rows]` array of the
   * same memory, its transpose.
   */
  reverseDimensions?: boolean;
}

/** What `readTensor` found in a DLManagedTensorVersioned (all checked). */
interface TensorFields {
  deleter: bigint;
  flags: bigint;
  data: bigint;
  deviceType: number;
  deviceId: number;
  dtype: DType;
  shape: number[];
  strides: number[];
  byteOffset: bigint;
}

/**
 * Wraps a DLPack 1.x `DLManagedTensorVersioned *` (a producer's, e.g. a native library's) as a
 * DeviceArray without copying. Accepted: CUDA memory (kDLCUDA) of a visible device, pinned or
 * managed memory (kDLCUDAHost, kDLCUDAManaged); dtypes int8, uint8, int32, uint32, float16,
 * bfloat16, float32, float64 with one lane; layouts a DeviceArray expresses: compact
 * column-major (first stride 1; a row-major tensor with `reverseDimensions: true`), or 2-D with a
 * leading dimension. Everything is checked before the data is used, and a refused tensor stays
 * the caller's (its deleter is not called). A tensor flagged DLPACK_FLAG_BITMASK_READ_ONLY
 * gives an array that refuses writes (a CudaArgumentError at the use). The array owns the
 * tensor: its `dispose()` (or the garbage collector) calls the producer's deleter exactly
 * once, after the GPU work queued on it has completed (dispose waits for it); an empty tensor
 * goes back at once. The memory must be usable from the device's primary context and valid for
 * work on `stream` (default: the current stream, or the device's default stream when the
 * current one is of another device).
 * @example using imported = fromDLPack(native.makeTensor()); const values = await imported.toHost();
 */
export function fromDLPack<D extends DType = DType>(
  pointer: bigint | number,
  options: FromDLPackOptions = NO_OPTIONS,
): DeviceArray<D> {
  assertOptions('fromDLPack', options, FROM_DLPACK_OPTIONS);
  const reverseDimensions = options.reverseDimensions ?? false;
  if (typeof reverseDimensions !== 'boolean') {
    throw new CudaArgumentError(
      `fromDLPack: reverseDimensions must be a boolean, got ${String(reverseDimensions)}`,
    );
  }
  const self = checkAddress(pointer);
  const fields = readTensor(self);
  const layout = arrayLayout(fields, reverseDimensions);
  const bytes = dtypeBytes(fields.dtype);
  const first = fields.data + fields.byteOffset;
  const spanBytes = layout.span * bytes;
  if (!Number.isSafeInteger(spanBytes)) {
    refuse(
      `strides [${fields.strides.join(', ')}] of shape [${fields.shape.join(', ')}] span ${BigInt(layout.span) * BigInt(bytes)} bytes, more than 2^53`,
    );
  }
  if (first + BigInt(spanBytes) > 1n << 64n) {
    refuse(
      `the tensor's ${spanBytes} bytes from 0x${first.toString(16)} run past the end of the 64-bit address space`,
    );
  }
  const stream = streamFor(fields, options.stream);
  const tensor = new ImportedTensor(
    self,
    fields.deleter,
    (fields.flags & DLPACK_FLAG_BITMASK_READ_ONLY) !== 0n,
  );
  // An empty tensor refers to no memory: it goes back to its producer at once.
  if (layout.span === 0) tensor.release();
  const address = layout.span === 0 ? 0 : ffiAddress(first);
  const buffer = DeviceBuffer.adoptForeign(address, spanBytes, stream, tensor);
  return new DeviceArray(buffer, fields.dtype as D, layout.shape, layout.strides, 0, true);
}

/** An address as koffi converts it fastest: a Number below 2^53 (see `ffiValue`). */
function ffiAddress(address: bigint): number | bigint {
  return address <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(address) : address;
}

/** The foreign side of an imported tensor: its release calls the producer's deleter, once. */
class ImportedTensor implements ForeignMemory {
  #self: bigint;
  #deleter: bigint;
  readonly readOnly: boolean;

  constructor(self: bigint, deleter: bigint, readOnly: boolean) {
    this.#self = self;
    this.#deleter = deleter;
    this.readOnly = readOnly;
  }

  writeError(): Error {
    return new CudaArgumentError(
      'this DeviceArray views a DLPack tensor its producer marked read-only (DLPACK_FLAG_BITMASK_READ_ONLY): it cannot be written',
    );
  }

  release(): void {
    const deleter = this.#deleter;
    // A NULL deleter is allowed: the producer has nothing to free.
    this.#deleter = 0n;
    if (deleter !== 0n) koffi().call(deleter, deleterPrototype() as never, this.#self);
  }

  goneError(): Error | null {
    return null;
  }
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object') return (value as object).constructor?.name ?? 'an object';
  return typeof value;
}

function checkAddress(pointer: unknown): bigint {
  const valid =
    (typeof pointer === 'bigint' && pointer > 0n && pointer < 1n << 64n) ||
    (typeof pointer === 'number' && Number.isSafeInteger(pointer) && pointer > 0);
  if (!valid) {
    throw new CudaArgumentError(
      `fromDLPack: expected the address of a DLManagedTensorVersioned (a non-zero BigInt), got ${typeof pointer === 'bigint' || typeof pointer === 'number' ? String(pointer) : describe(pointer)}`,
    );
  }
  return BigInt(pointer as bigint | number);
}

function refuse(detail: string): never {
  throw new CudaArgumentError(`fromDLPack: ${detail}`);
}

/** Reads and checks the struct at `self`: version, device, dtype, shape, strides, offsets. */
function readTensor(self: bigint): TensorFields {
  const k = koffi();
  const header = new DataView(k.view(self, STRUCT_BYTES));
  const major = header.getUint32(at.major, true);
  if (major !== DLPACK_VERSION.major) {
    refuse(
      `the tensor is DLPack ${major}.${header.getUint32(at.minor, true)}; this package reads major version ${DLPACK_VERSION.major} (its layout differs: call the tensor's deleter yourself)`,
    );
  }
  const deviceType = header.getInt32(at.deviceType, true);
  const deviceId = header.getInt32(at.deviceId, true);
  if (
    deviceType !== DLDeviceType.kDLCUDA &&
    deviceType !== DLDeviceType.kDLCUDAHost &&
    deviceType !== DLDeviceType.kDLCUDAManaged
  ) {
    refuse(
      deviceType === DLDeviceType.kDLCPU
        ? 'the tensor is in pageable host memory (kDLCPU), which the GPU cannot read; copy it into a HostView or a DeviceArray'
        : `the tensor's device type ${deviceType} is not CUDA memory (kDLCUDA 2, kDLCUDAHost 3, kDLCUDAManaged 13)`,
    );
  }
  if (deviceId < 0) refuse(`device_id ${deviceId} is negative`);
  const code = header.getUint8(at.code);
  const bits = header.getUint8(at.bits);
  const lanes = header.getUint16(at.lanes, true);
  const dtype = dtypeOfDLPack(code, bits, lanes);
  if (dtype === undefined) {
    refuse(
      `dtype (code ${code}, bits ${bits}, lanes ${lanes}) has no DeviceArray dtype (int8, uint8, int32, uint32, float16, bfloat16, float32, float64; one lane)`,
    );
  }
  const ndim = header.getInt32(at.ndim, true);
  if (ndim < 0 || ndim > MAX_DIMENSIONS) refuse(`ndim ${ndim} is outside 0..${MAX_DIMENSIONS}`);
  const shapePointer = header.getBigUint64(at.shape, true);
  const stridesPointer = header.getBigUint64(at.strides, true);
  if (ndim > 0 && shapePointer === 0n) refuse(`shape is NULL for ${ndim} dimensions`);
  const shape = readInt64s(shapePointer, ndim);
  let length = 1;
  for (const extent of shape) {
    if (extent < 0n || extent > BigInt(Number.MAX_SAFE_INTEGER)) {
      refuse(`shape [${shape.join(', ')}] holds an extent outside 0..2^53`);
    }
    length *= Number(extent);
  }
  // A zero extent makes the tensor empty, however large the others (their product may be
  // Infinity, and Infinity * 0 is NaN).
  if (shape.includes(0n)) length = 0;
  if (!Number.isSafeInteger(length * dtypeBytes(dtype))) {
    refuse(`shape [${shape.join(', ')}] holds more bytes than 2^53`);
  }
  // A NULL strides pointer (DLPack before 1.2 allowed it) means compact row-major.
  const strides = stridesPointer === 0n ? rowMajorStrides(shape) : readInt64s(stridesPointer, ndim);
  for (const stride of strides) {
    if (stride < BigInt(-Number.MAX_SAFE_INTEGER) || stride > BigInt(Number.MAX_SAFE_INTEGER)) {
      refuse(`strides [${strides.join(', ')}] hold a value beyond 2^53`);
    }
  }
  const data = header.getBigUint64(at.data, true);
  const byteOffset = header.getBigUint64(at.byteOffset, true);
  const bytes = BigInt(dtypeBytes(dtype));
  if (length > 0) {
    if (data === 0n) refuse(`data is NULL for ${length} elements`);
    if (byteOffset % bytes !== 0n || (data + byteOffset) % bytes !== 0n) {
      refuse(
        `the first element (data 0x${data.toString(16)} + byte_offset ${byteOffset}) is not aligned to the ${bytes}-byte ${dtype}`,
      );
    }
    if (data + byteOffset >= 1n << 64n) refuse('data + byte_offset overflows 64 bits');
  }
  return {
    deleter: header.getBigUint64(at.deleter, true),
    flags: header.getBigUint64(at.flags, true),
    data,
    deviceType,
    deviceId,
    dtype,
    shape: shape.map(Number),
    strides: strides.map(Number),
    byteOffset,
  };
}

function readInt64s(pointer: bigint, count: number): bigint[] {
  if (count === 0) return [];
  return Array.from(new BigInt64Array(koffi().view(pointer, 8 * count)));
}

function rowMajorStrides(shape: readonly bigint[]): bigint[] {
  const strides = new Array<bigint>(shape.length);
  let stride = 1n;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = stride;
    stride *= shape[i]!;
  }
  return strides;
}

/**
 * The DeviceArray shape and strides for the tensor, and its span in elements from the first
 * one; refused unless a DeviceArray expresses the layout with the same indices (reversed with
 * `reverseDimensions`).
 */
function arrayLayout(
  fields: TensorFields,
  reverseDimensions: boolean,
): { shape: number[]; strides: number[]; span: number } {
  let shape = fields.shape;
  let strides = fields.strides;
  if (reverseDimensions) {
    shape = [...shape].reverse();
    strides = [...strides].reverse();
  }
  if (shape.length === 0) return { shape: [1], strides: [1], span: 1 };
  const length = shape.includes(0) ? 0 : shape.reduce((product, extent) => product * extent, 1);
  if (length === 0) return { shape, strides: columnMajorStrides(shape), span: 0 };
  for (let i = 0; i < shape.length; i++) {
    if (shape[i]! > 1 && strides[i]! <= 0) {
      refuse(
        `strides [${fields.strides.join(', ')}] of shape [${fields.shape.join(', ')}]: a zero or negative stride (broadcast or reversed) is not a DeviceArray layout; copy the tensor first`,
      );
    }
  }
  let span = 1;
  for (let i = 0; i < shape.length; i++) span += (shape[i]! - 1) * Math.max(0, strides[i]!);
  if (isColumnMajor(shape, strides)) return { shape, strides: columnMajorStrides(shape), span };
  if (
    shape.length === 2 &&
    (shape[0]! <= 1 || strides[0] === 1) &&
    strides[1]! >= Math.max(1, shape[0]!)
  ) {
    return { shape, strides: [1, strides[1]!], span };
  }
  const reversed = [...shape].reverse();
  const hint =
    !reverseDimensions && isColumnMajor(reversed, [...strides].reverse())
      ? '; it is row-major (C order): pass { reverseDimensions: true } to view it as its column-major transpose'
      : '';
  refuse(
    `strides [${fields.strides.join(', ')}] of shape [${fields.shape.join(', ')}] are not a DeviceArray layout (compact column-major, or 2-D column-major with a leading dimension)${hint}`,
  );
}

function isColumnMajor(shape: readonly number[], strides: readonly number[]): boolean {
  let expected = 1;
  for (let i = 0; i < shape.length; i++) {
    if (shape[i]! > 1 && strides[i] !== expected) return false;
    expected *= shape[i]!;
  }
  return true;
}

/** The stream the imported memory is used on: the tensor's device must be the stream's. */
function streamFor(fields: TensorFields, given: Stream | undefined): Stream {
  if (fields.deviceType !== DLDeviceType.kDLCUDA) return resolveStream(given);
  if (given !== undefined) {
    const stream = resolveStream(given);
    if (stream.context.device.ordinal !== fields.deviceId) {
      refuse(
        `the tensor is on device ${fields.deviceId}, but ${stream} belongs to device ${stream.context.device.ordinal}`,
      );
    }
    return stream;
  }
  const current = resolveStream(undefined);
  if (current.context.device.ordinal === fields.deviceId) return current;
  const count = deviceCount();
  if (fields.deviceId >= count) {
    refuse(`the tensor is on device ${fields.deviceId}, but this process sees ${count} device(s)`);
  }
  return Device.get(fields.deviceId).primaryContext().defaultStream;
}
