/**
 * The handles that carry device memory and events from one process to another (CUDA IPC):
 * plain JSON-able objects that a user sends through `process.send`, a cluster message or a
 * file. A handle read back is untrusted input: `parseSharedMemoryHandle` and
 * `parseSharedEventHandle` check every field, bound every size, and refuse anything else with
 * a `SharedMemoryError` before any native call.
 */
import { DTYPES, type DType, dtypeBytes } from '../dtype.js';
import { CudaArgumentError, markErrorClass } from '../errors.js';

/** The format version this package writes and reads. */
export const IPC_HANDLE_VERSION = 1;
/** The `format` of a memory handle. */
export const MEMORY_HANDLE_FORMAT = 'cuda-tasks/ipc-memory';
/** The `format` of an event handle. */
export const EVENT_HANDLE_FORMAT = 'cuda-tasks/ipc-event';
/** The most characters a handle's JSON text may have (a real one has about 600). */
export const MAX_HANDLE_TEXT = 4096;
/** The most dimensions a shared array may have. */
export const MAX_SHARED_DIMENSIONS = 8;
/** The largest process id Linux hands out (pid_max can be set up to 2^22). */
const MAX_PID = 4_194_304;
/** The largest byte count a handle may name (2^50 bytes: beyond any device). */
const MAX_BYTES = 2 ** 50;

/** Why a shared handle was refused, or a view of shared memory cannot be used. */
export type SharedMemoryFailure =
  /** The handle is not one this package wrote: a field is missing, of the wrong type or out of range. */
  | 'malformed'
  /** The handle was written by a newer or older format this package does not read. */
  | 'version'
  /** The memory or event lives on a device this process does not see. */
  | 'other-device'
  /** The process that exported the memory or event has exited. */
  | 'exporter-exited'
  /** The exporter has freed the memory since it wrote the handle. */
  | 'stale'
  /** The handle was exported by this very process (CUDA refuses to open it here). */
  | 'own-process'
  /** A write through a read-only view. */
  | 'read-only'
  /** The memory cannot be shared: not allocated for sharing (pool memory), or not contiguous. */
  | 'not-shareable'
  /**
   * The per-user folder of lease records is not safe to use (not a folder of this user, others
   * can write it or rename it away): nothing is shared or opened through it.
   */
  | 'lease-folder';

/**
 * A handle of shared memory or a shared event that cannot be used: malformed, from another
 * device, stale, its exporter gone, opened in its own process; or a write through a read-only
 * view. A `CudaArgumentError`; `reason` says which.
 */
export class SharedMemoryError extends CudaArgumentError {
  /** True for any SharedMemoryError, also one from another loaded copy of this package. */
  static override readonly isInstance = markErrorClass(
    SharedMemoryError,
    '@cuda-tasks/SharedMemoryError',
  );
  /** What was wrong. */
  readonly reason: SharedMemoryFailure;
  constructor(reason: SharedMemoryFailure, message: string) {
    super(message);
    this.name = 'SharedMemoryError';
    this.reason = reason;
  }
}

/** The device a handle's memory or event lives on, as the exporter saw it. */
export interface SharedDeviceIdentity {
  /** The exporter's ordinal for it (ordinals differ between processes with CUDA_VISIBLE_DEVICES). */
  readonly ordinal: number;
  /** Its UUID, "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx": what the importer looks it up by. */
  readonly uuid: string;
  /** Its PCI bus id, "0000:3b:00.0", for messages. */
  readonly pciBusId: string;
}

/**
 * Device memory exported by one process for others to open (`openSharedMemory`): a plain
 * object, safe to `JSON.stringify` and send. It names the memory (CUDA's 64-byte IPC handle),
 * the view (dtype, shape, byte offset), the exporter (pid and an export id) and the device.
 */
export interface SharedMemoryHandle {
  /** What the object is: `'cuda-tasks/ipc-memory'`. */
  readonly format: typeof MEMORY_HANDLE_FORMAT;
  /** The format's version (`IPC_HANDLE_VERSION`); another is refused with reason 'version'. */
  readonly version: typeof IPC_HANDLE_VERSION;
  /** The CUipcMemHandle, 128 hex digits. */
  readonly ipcHandle: string;
  /** Bytes of the whole shared allocation. */
  readonly allocationBytes: number;
  /** Where the view starts in the allocation, in bytes (a multiple of the element size). */
  readonly byteOffset: number;
  /** Bytes of the view (its elements times the element size). */
  readonly byteLength: number;
  /** The element type. */
  readonly dtype: DType;
  /** The extents, column-major (the view is contiguous). */
  readonly shape: readonly number[];
  /** The exporting process. */
  readonly pid: number;
  /** This export among the exporter's, 32 hex digits: names its lease records. */
  readonly exportId: string;
  /** The device the memory lives on. */
  readonly device: SharedDeviceIdentity;
}

/** An interprocess event exported by one process for others to open (`InterprocessEvent.open`). */
export interface SharedEventHandle {
  /** What the object is: `'cuda-tasks/ipc-event'`. */
  readonly format: typeof EVENT_HANDLE_FORMAT;
  /** The format's version (`IPC_HANDLE_VERSION`); another is refused with reason 'version'. */
  readonly version: typeof IPC_HANDLE_VERSION;
  /** The CUipcEventHandle, 128 hex digits. */
  readonly ipcHandle: string;
  /** The exporting process. */
  readonly pid: number;
  /** The device the event lives on. */
  readonly device: SharedDeviceIdentity;
}

const HEX_128 = /^[0-9a-f]{128}$/;
const HEX_32 = /^[0-9a-f]{32}$/;
const UUID = /^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const PCI_BUS_ID = /^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]$/;
const MEMORY_KEYS = [
  'format',
  'version',
  'ipcHandle',
  'allocationBytes',
  'byteOffset',
  'byteLength',
  'dtype',
  'shape',
  'pid',
  'exportId',
  'device',
] as const;
const EVENT_KEYS = ['format', 'version', 'ipcHandle', 'pid', 'device'] as const;
const DEVICE_KEYS = ['ordinal', 'uuid', 'pciBusId'] as const;

function malformed(what: string, detail: string): SharedMemoryError {
  return new SharedMemoryError('malformed', `${what}: ${detail}`);
}

/** A short, printable rendering of an untrusted value for messages (never the whole input). */
function show(value: unknown): string {
  let text: string;
  try {
    text = typeof value === 'bigint' ? `${value}n` : (JSON.stringify(value) ?? String(value));
  } catch {
    text = Object.prototype.toString.call(value);
  }
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/**
 * The object a handle was given as: the object itself, or JSON text of one (bounded). Only own,
 * plain data properties with exactly the expected names count; a getter or a prototype's
 * property is refused, so that reading the handle runs no code of the sender's.
 */
function record(what: string, input: unknown, keys: readonly string[]): Record<string, unknown> {
  let value = input;
  if (typeof value === 'string') {
    if (value.length > MAX_HANDLE_TEXT) {
      throw malformed(what, `the text has ${value.length} characters, at most ${MAX_HANDLE_TEXT}`);
    }
    try {
      value = JSON.parse(value);
    } catch {
      throw malformed(what, 'the text is not JSON');
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw malformed(what, `expected an object or its JSON text, got ${show(value)}`);
  }
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) {
    throw malformed(what, 'expected a plain object');
  }
  const own = Object.getOwnPropertyNames(value);
  const extra = own.filter((key) => !keys.includes(key));
  if (extra.length > 0) throw malformed(what, `unknown field ${show(extra[0])}`);
  const out: Record<string, unknown> = Object.create(null);
  for (const key of keys) {
    const descriptor = Object.getOwnPropertyDescriptor(value, key);
    if (descriptor === undefined) throw malformed(what, `the field ${key} is missing`);
    if (!('value' in descriptor)) throw malformed(what, `the field ${key} is not a plain value`);
    out[key] = descriptor.value;
  }
  return out;
}

function integer(what: string, key: string, value: unknown, low: number, high: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < low || value > high) {
    throw malformed(what, `${key} must be an integer in ${low}..${high}, got ${show(value)}`);
  }
  return value;
}

function matching(what: string, key: string, value: unknown, pattern: RegExp): string {
  if (typeof value !== 'string' || value.length > 160 || !pattern.test(value)) {
    throw malformed(what, `${key} is not a valid ${key}: ${show(value)}`);
  }
  return value;
}

function header(what: string, fields: Record<string, unknown>, format: string): void {
  if (fields.format !== format) {
    throw malformed(what, `format must be ${JSON.stringify(format)}, got ${show(fields.format)}`);
  }
  if (fields.version !== IPC_HANDLE_VERSION) {
    throw new SharedMemoryError(
      'version',
      `${what}: version ${show(fields.version)} is not one this package reads (it reads ${IPC_HANDLE_VERSION}); export and open with the same version of @cuda-tasks/cudadrv`,
    );
  }
}

function deviceIdentity(what: string, value: unknown): SharedDeviceIdentity {
  const fields = record(`${what} (device)`, value, DEVICE_KEYS);
  return Object.freeze({
    ordinal: integer(what, 'device.ordinal', fields.ordinal, 0, 1023),
    uuid: matching(what, 'device.uuid', fields.uuid, UUID),
    pciBusId: matching(what, 'device.pciBusId', fields.pciBusId, PCI_BUS_ID),
  });
}

/**
 * Checks a shared memory handle (the object or its JSON text) field by field and returns a
 * frozen copy of it; a `SharedMemoryError` ('malformed' or 'version') names the first bad
 * field. Sizes are bounded and consistent: the view lies inside the allocation, its length is
 * its shape's elements times the dtype's size, its offset a multiple of that size.
 * @example const handle = parseSharedMemoryHandle(message.index);
 */
export function parseSharedMemoryHandle(input: unknown): SharedMemoryHandle {
  const what = 'shared memory handle';
  const fields = record(what, input, MEMORY_KEYS);
  header(what, fields, MEMORY_HANDLE_FORMAT);
  const ipcHandle = matching(what, 'ipcHandle', fields.ipcHandle, HEX_128);
  const allocationBytes = integer(what, 'allocationBytes', fields.allocationBytes, 1, MAX_BYTES);
  const byteOffset = integer(what, 'byteOffset', fields.byteOffset, 0, MAX_BYTES);
  const byteLength = integer(what, 'byteLength', fields.byteLength, 0, MAX_BYTES);
  const dtype = fields.dtype;
  if (typeof dtype !== 'string' || !Object.hasOwn(DTYPES, dtype)) {
    throw malformed(
      what,
      `dtype must be one of ${Object.keys(DTYPES).join(', ')}, got ${show(dtype)}`,
    );
  }
  const shapeValue = fields.shape;
  if (
    !Array.isArray(shapeValue) ||
    shapeValue.length === 0 ||
    shapeValue.length > MAX_SHARED_DIMENSIONS
  ) {
    throw malformed(
      what,
      `shape must be an array of 1..${MAX_SHARED_DIMENSIONS} extents, got ${show(shapeValue)}`,
    );
  }
  const shape: number[] = [];
  let elements = 1;
  for (let i = 0; i < shapeValue.length; i++) {
    const extent = integer(what, `shape[${i}]`, shapeValue[i], 0, MAX_BYTES);
    shape.push(extent);
    elements *= extent;
  }
  const elementBytes = dtypeBytes(dtype as DType);
  if (!(elements * elementBytes === byteLength)) {
    throw malformed(
      what,
      `byteLength ${byteLength} is not the ${shape.join('x')} ${dtype} elements' ${elements * elementBytes} bytes`,
    );
  }
  if (byteOffset % elementBytes !== 0) {
    throw malformed(
      what,
      `byteOffset ${byteOffset} is not a multiple of ${dtype}'s ${elementBytes} bytes`,
    );
  }
  if (byteOffset + byteLength > allocationBytes) {
    throw malformed(
      what,
      `the view (bytes ${byteOffset}..${byteOffset + byteLength}) exceeds the allocation's ${allocationBytes} bytes`,
    );
  }
  return Object.freeze({
    format: MEMORY_HANDLE_FORMAT,
    version: IPC_HANDLE_VERSION,
    ipcHandle,
    allocationBytes,
    byteOffset,
    byteLength,
    dtype: dtype as DType,
    shape: Object.freeze(shape),
    pid: integer(what, 'pid', fields.pid, 1, MAX_PID),
    exportId: matching(what, 'exportId', fields.exportId, HEX_32),
    device: deviceIdentity(what, fields.device),
  });
}

/**
 * Checks a shared event handle (the object or its JSON text) field by field and returns a
 * frozen copy; a `SharedMemoryError` ('malformed' or 'version') otherwise.
 */
export function parseSharedEventHandle(input: unknown): SharedEventHandle {
  const what = 'shared event handle';
  const fields = record(what, input, EVENT_KEYS);
  header(what, fields, EVENT_HANDLE_FORMAT);
  return Object.freeze({
    format: EVENT_HANDLE_FORMAT,
    version: IPC_HANDLE_VERSION,
    ipcHandle: matching(what, 'ipcHandle', fields.ipcHandle, HEX_128),
    pid: integer(what, 'pid', fields.pid, 1, MAX_PID),
    device: deviceIdentity(what, fields.device),
  });
}

/** A CUDA IPC handle's 64 bytes as the 128 hex digits a handle carries. */
export function ipcHandleHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

/** The 64 bytes of a (checked) handle's `ipcHandle`. */
export function ipcHandleBytes(hex: string): Uint8Array {
  return new Uint8Array(Buffer.from(hex, 'hex'));
}
