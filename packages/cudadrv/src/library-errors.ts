/**
 * The error module of a CUDA library, made from its status table: the status names and
 * messages, the error class (a `CudaError` subclass whose `isInstance` works across loaded
 * copies) and `check`, the one place where a status becomes an error. cuBLAS, cuRAND, cuSOLVER
 * and user libraries (see the cuFFT example) build theirs with `libraryErrors`.
 */
import { CudaArgumentError, CudaError, markErrorClass } from './errors.js';

/**
 * A library's error class: a `CudaError` subclass made with (code, status, call, message),
 * whose `isInstance` is true for its instances, also ones from another loaded copy.
 */
export interface LibraryErrorClass<E extends CudaError = CudaError> {
  /** An error for `call`, which returned `code` (named `status`); `message` says what it means. */
  new (code: number, status: string, call: string, message: string): E;
  /** The prototype of the instances. */
  readonly prototype: E;
  /** True for an instance of the class or a subclass, also one from another loaded copy. */
  isInstance(value: unknown): value is E;
}

/** What `libraryErrors` needs to know about a library's statuses. */
export interface LibraryStatusTable {
  /** The library as messages name it, e.g. `cuBLAS` (in `unknown cuBLAS status`). */
  readonly library: string;
  /**
   * The status names, either way round as the bindings hold them: the header's enum as
   * `{ CUBLAS_STATUS_SUCCESS: 0, ... }`, or `{ 0: 'CUSOLVER_STATUS_SUCCESS', ... }`.
   */
  readonly statuses: Readonly<Record<string, number>> | Readonly<Record<number, string>>;
  /** The name of a status missing from `statuses` is this prefix and the number. */
  readonly unknownPrefix: string;
  /** What each status means, by name or by number (missing: `unknown <library> status`). */
  readonly messages?: Readonly<Record<string | number, string>>;
  /**
   * The library's own name for a status when it can give one (e.g. cublasGetStatusName once
   * the library is loaded); undefined falls back to `statuses`.
   */
  readonly nativeName?: (status: number) => string | undefined;
  /** The library's own text for a status when it can give one; undefined falls back to `messages`. */
  readonly nativeMessage?: (status: number) => string | undefined;
}

/** `libraryErrors` makes the error class: its name and the `Symbol.for` key that marks it. */
export interface MadeErrorClass {
  /** The class's name and each error's `name`, e.g. `CublasError`. */
  readonly className: string;
  /** The global key of its `isInstance` marker, e.g. `@cuda-tasks/CublasError` (see `markErrorClass`). */
  readonly markerKey: string;
  /** Not with `className`. */
  readonly errorClass?: never;
}

/** The library brings its own error class (one that carries more than a returned status). */
export interface OwnErrorClass<E extends CudaError> {
  /** The class `error` and `check` construct, with (code, status, call, message). */
  readonly errorClass: LibraryErrorClass<E>;
  /** Not with `errorClass`. */
  readonly className?: never;
  /** Not with `errorClass`. */
  readonly markerKey?: never;
}

/** A library's error module, as `libraryErrors` makes it. */
export interface LibraryErrors<E extends CudaError = CudaError> {
  /** The error class. */
  readonly ErrorClass: LibraryErrorClass<E>;
  /** The symbolic name of a status: the library's own, else the table's, else prefix + number. */
  statusName(status: number): string;
  /** What a status means: the library's own text, else the table's, else `unknown <library> status`. */
  statusMessage(status: number): string;
  /** The error for `status` returned by `call`. */
  error(status: number, call: string): E;
  /** Throws the error for `status` returned by `call` unless `status` is 0 (success). */
  check(status: number, call: string): void;
}

/**
 * Makes a library's error module from its status table: `statusName`, `statusMessage`, the
 * error class (made here from `className` and `markerKey`, or the library's own `errorClass`)
 * and `check(status, call)`, which throws unless the status is 0. `check` allocates nothing
 * on success, so library calls can use it on every call. Call it once, at module level.
 * @example
 * const cufftErrors = libraryErrors({
 *   library: 'cuFFT',
 *   className: 'CufftError',
 *   markerKey: '@my-library/CufftError',
 *   statuses: { 0: 'CUFFT_SUCCESS', 1: 'CUFFT_INVALID_PLAN' },
 *   unknownPrefix: 'CUFFT_STATUS_',
 *   messages: { 1: 'cuFFT was passed an invalid plan handle' },
 * });
 * export const CufftError = cufftErrors.ErrorClass;
 * export const { check } = cufftErrors;
 * check(cufft().cufftDestroy(plan), 'cufftDestroy'); // throws a CufftError unless 0
 */
export function libraryErrors(spec: LibraryStatusTable & MadeErrorClass): LibraryErrors<CudaError>;
export function libraryErrors<E extends CudaError>(
  spec: LibraryStatusTable & OwnErrorClass<E>,
): LibraryErrors<E>;
export function libraryErrors<E extends CudaError>(
  spec: LibraryStatusTable & (MadeErrorClass | OwnErrorClass<E>),
): LibraryErrors<E> {
  const ErrorClass = errorClassOf(spec) as LibraryErrorClass<E>;
  const { library, unknownPrefix, nativeName, nativeMessage } = spec;
  if (typeof library !== 'string' || library === '') {
    throw new CudaArgumentError('libraryErrors: library must name the library, e.g. "cuBLAS"');
  }
  if (typeof unknownPrefix !== 'string') {
    throw new CudaArgumentError('libraryErrors: unknownPrefix must be a string');
  }
  const names = namesByValue(spec.statuses);
  const messages = spec.messages ?? {};
  const unknownMessage = `unknown ${library} status`;

  const statusName = (status: number): string =>
    nativeName?.(status) ?? names.get(status) ?? `${unknownPrefix}${status}`;
  const statusMessage = (status: number): string => {
    const own = nativeMessage?.(status);
    if (own !== undefined) return own;
    const name = names.get(status);
    return (name === undefined ? undefined : messages[name]) ?? messages[status] ?? unknownMessage;
  };
  const error = (status: number, call: string): E =>
    new ErrorClass(status, statusName(status), call, statusMessage(status));
  const check = (status: number, call: string): void => {
    if (status !== 0) throw error(status, call);
  };
  return { ErrorClass, statusName, statusMessage, error, check };
}

function errorClassOf(spec: MadeErrorClass | OwnErrorClass<CudaError>): LibraryErrorClass {
  const { errorClass, className, markerKey } = spec as {
    errorClass?: unknown;
    className?: unknown;
    markerKey?: unknown;
  };
  if (errorClass !== undefined) {
    if (className !== undefined || markerKey !== undefined) {
      throw new CudaArgumentError(
        'libraryErrors: give either errorClass or className and markerKey, not both',
      );
    }
    if (typeof errorClass !== 'function' || !CudaError.isInstance(errorClass.prototype)) {
      throw new CudaArgumentError('libraryErrors: errorClass must be a subclass of CudaError');
    }
    return errorClass as LibraryErrorClass;
  }
  if (typeof className !== 'string' || !/^[A-Za-z_$][\w$]*$/.test(className)) {
    throw new CudaArgumentError(
      `libraryErrors: className must be an identifier such as "CublasError" (got ${String(className)})`,
    );
  }
  if (typeof markerKey !== 'string' || markerKey === '') {
    throw new CudaArgumentError(
      'libraryErrors: markerKey must be a non-empty string, e.g. "@my-library/CufftError"',
    );
  }
  class LibraryError extends CudaError {
    static override readonly isInstance: (value: unknown) => value is CudaError = markErrorClass(
      LibraryError,
      markerKey as string,
    );
    constructor(code: number, status: string, call: string, message: string) {
      super(code, status, call, message);
      this.name = className as string;
    }
  }
  Object.defineProperty(LibraryError, 'name', { value: className, configurable: true });
  return LibraryError;
}

function namesByValue(statuses: LibraryStatusTable['statuses']): Map<number, string> {
  if (typeof statuses !== 'object' || statuses === null) {
    throw new CudaArgumentError('libraryErrors: statuses must be an object of status names');
  }
  const names = new Map<number, string>();
  for (const [key, value] of Object.entries(statuses)) {
    if (typeof value === 'number') names.set(value, key);
    else if (typeof value === 'string' && /^-?\d+$/.test(key)) names.set(Number(key), value);
    else {
      throw new CudaArgumentError(
        `libraryErrors: statuses entry ${key}: ${String(value)} is neither name: number nor number: name`,
      );
    }
  }
  return names;
}
