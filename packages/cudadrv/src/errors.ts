/**
 * The error hierarchy of cuda-tasks. Errors are branded with `Symbol.for` keys so that
 * `isCudaError` works across two loaded copies of the package, where `instanceof` would not.
 */

const cudaErrorBrand = Symbol.for('@cuda-tasks/CudaError');
const argumentErrorBrand = Symbol.for('@cuda-tasks/CudaArgumentError');
const unavailableErrorBrand = Symbol.for('@cuda-tasks/CudaUnavailableError');

/**
 * A failed call into a CUDA library: the numeric status, its symbolic name, the library's
 * message and the call that failed. Library packages extend it (`CublasError`, ...).
 */
export class CudaError extends Error {
  readonly [cudaErrorBrand] = true;
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

  /** True for any CudaError, also one thrown by another loaded copy of this package. */
  static isInstance(value: unknown): value is CudaError {
    return typeof value === 'object' && value !== null && cudaErrorBrand in value;
  }
}

/** The CUDA driver or a CUDA library (or a GPU) is missing: the message says what and how to fix it. */
export class CudaUnavailableError extends Error {
  readonly [unavailableErrorBrand] = true;
  /** What is missing, e.g. "libcuda.so.1", "cuBLAS". */
  readonly missing: string;
  constructor(message: string, missing: string) {
    super(message);
    this.name = 'CudaUnavailableError';
    this.missing = missing;
  }
  /** True for any CudaUnavailableError, also one from another loaded copy of this package. */
  static isInstance(value: unknown): value is CudaUnavailableError {
    return typeof value === 'object' && value !== null && unavailableErrorBrand in value;
  }
}

/**
 * Bad input found before any native call: wrong dtype, shape, length, a disposed buffer,
 * a wrong kernel argument list.
 */
export class CudaArgumentError extends TypeError {
  readonly [argumentErrorBrand] = true;
  constructor(message: string) {
    super(message);
    this.name = 'CudaArgumentError';
  }
  /** True for any CudaArgumentError, also one from another loaded copy of this package. */
  static isInstance(value: unknown): value is CudaArgumentError {
    return typeof value === 'object' && value !== null && argumentErrorBrand in value;
  }
}

/** A buffer, stream, event or module was used after `dispose()`. */
export class DisposedError extends CudaArgumentError {
  constructor(what: string) {
    super(`${what} has been disposed and cannot be used`);
    this.name = 'DisposedError';
  }
}

/** Allocation failed even after trimming the pool and waiting for pending frees. */
export class CudaOutOfMemoryError extends CudaError {
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
