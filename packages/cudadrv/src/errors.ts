/**
 * The error hierarchy of cuda-tasks. Each error class is marked with a `Symbol.for` key, so
 * that its `isInstance` works across two loaded copies of a package, where `instanceof` would
 * not.
 */

/**
 * Marks `errorClass` with `Symbol.for(key)` and returns its `isInstance`: true for an instance
 * of the class or of a subclass, also one made by another loaded copy of the package (the key
 * is global; the class object is not). The marker lives on the prototype, so subclasses carry
 * their ancestors' markers. A subclass that wants its own `isInstance` marks itself with a key
 * of its own.
 * @example
 * export class CufftError extends CudaError {
 *   // True for any CufftError, also one from another loaded copy.
 *   static override readonly isInstance = markErrorClass(CufftError, '@my-library/CufftError');
 * }
 */
export function markErrorClass<T extends Error>(
  errorClass: abstract new (...args: never[]) => T,
  key: string,
): (value: unknown) => value is T {
  const marker = Symbol.for(key);
  Object.defineProperty(errorClass.prototype, marker, { value: true });
  return (value: unknown): value is T =>
    typeof value === 'object' && value !== null && marker in value;
}

/**
 * A failed call into a CUDA library: the numeric status, its symbolic name, the library's
 * message and the call that failed. Library packages extend it (`CublasError`, ...).
 */
export class CudaError extends Error {
  /** True for any CudaError, also one thrown by another loaded copy of this package. */
  static readonly isInstance = markErrorClass(CudaError, '@cuda-tasks/CudaError');
  /** The numeric status the call returned (a CUresult for the driver). */
  readonly code: number;
  /** The symbolic name, e.g. `CUDA_ERROR_OUT_OF_MEMORY`. */
  readonly status: string;
  /** The native function that failed, e.g. `cuMemAllocAsync`. */
  readonly call: string;

  constructor(code: number, status: string, call: string, message: string) {
    super(`${call} failed: ${status} (${code}): ${message}`);
    this.name = 'CudaError';
    this.code = code;
    this.status = status;
    this.call = call;
  }
}

/** The CUDA driver or a CUDA library (or a GPU) is missing: the message says what and how to fix it. */
export class CudaUnavailableError extends Error {
  /** True for any CudaUnavailableError, also one thrown by another loaded copy of this package. */
  static readonly isInstance = markErrorClass(
    CudaUnavailableError,
    '@cuda-tasks/CudaUnavailableError',
  );
  /** What is missing, e.g. "libcuda.so.1", "cuBLAS". */
  readonly missing: string;
  constructor(message: string, missing: string) {
    super(message);
    this.name = 'CudaUnavailableError';
    this.missing = missing;
  }
}

/**
 * Bad input found before any native call: wrong dtype, shape, length, a disposed buffer,
 * a wrong kernel argument list.
 */
export class CudaArgumentError extends TypeError {
  /** True for any CudaArgumentError, also one from another loaded copy of this package. */
  static readonly isInstance = markErrorClass(CudaArgumentError, '@cuda-tasks/CudaArgumentError');
  constructor(message: string) {
    super(message);
    this.name = 'CudaArgumentError';
  }
}

/** A buffer, stream, event or module was used after `dispose()`. */
export class DisposedError extends CudaArgumentError {
  /** True for any DisposedError, also one from another loaded copy of this package. */
  static override readonly isInstance = markErrorClass(DisposedError, '@cuda-tasks/DisposedError');
  constructor(what: string) {
    super(`${what} has been disposed and cannot be used`);
    this.name = 'DisposedError';
  }
}

/**
 * An operation that cannot happen while its stream captures a graph: waiting for the stream
 * (`synchronize()`, `toHost()`), a copy from pageable host memory, a library routine that reads
 * its status back to the host, or a capture the driver invalidated. The message says why. An
 * operation refused here made no native call, so the capture goes on unharmed (and ends
 * cleanly when the captured function settles); `code` is then
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900) and `call` names the refused operation.
 * @example
 * try { await capture(async () => { launch(k, config, x); await synchronize(); }); }
 * catch (error) { if (CaptureError.isInstance(error)) console.log(error.call); // 'synchronize()' }
 */
export class CaptureError extends CudaError {
  /** True for any CaptureError, also one thrown by another loaded copy of this package. */
  static override readonly isInstance = markErrorClass(CaptureError, '@cuda-tasks/CaptureError');
  constructor(
    call: string,
    reason: string,
    code = 900,
    status = 'CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED',
  ) {
    super(code, status, call, reason);
    this.name = 'CaptureError';
  }
}

/** Allocation failed even after trimming the pool and waiting for pending frees. */
export class CudaOutOfMemoryError extends CudaError {
  /** True for any CudaOutOfMemoryError, also one thrown by another loaded copy of this package. */
  static override readonly isInstance = markErrorClass(
    CudaOutOfMemoryError,
    '@cuda-tasks/CudaOutOfMemoryError',
  );
  /** Bytes that were asked for. */
  readonly requestedBytes: number;
  /** The pool's state when the allocation failed. */
  readonly pool: {
    reservedBytes: number;
    usedBytes: number;
    freeDeviceBytes: number;
    totalDeviceBytes: number;
  };
  constructor(
    code: number,
    status: string,
    requestedBytes: number,
    pool: CudaOutOfMemoryError['pool'],
  ) {
    super(
      code,
      status,
      'cuMemAllocAsync',
      `out of device memory allocating ${formatBytes(requestedBytes)}; pool reserved ${formatBytes(pool.reservedBytes)}, in use ${formatBytes(pool.usedBytes)}; device free ${formatBytes(pool.freeDeviceBytes)} of ${formatBytes(pool.totalDeviceBytes)}`,
    );
    this.name = 'CudaOutOfMemoryError';
    this.requestedBytes = requestedBytes;
    this.pool = pool;
  }
}

// DeviceArray's brand (memory/array.ts), read here without importing the class: this file is
// the bottom layer, and every layer's messages describe values with the function below.
const arrayBrand = Symbol.for('@cuda-tasks/DeviceArray');

/**
 * A short description of a value for messages: an array's own description, `null`, a class
 * name, a quoted string, a number as written.
 */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object') {
    return arrayBrand in value ? String(value) : (value.constructor?.name ?? 'an object');
  }
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'string') return JSON.stringify(value);
  return String(value);
}

/** Human-readable byte counts for error messages. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}
