/**
 * What a `WorkerPool` and its worker threads exchange (worker-pool.ts is the caller's side,
 * worker-jobs.ts the worker's): plain data that `postMessage` clones. Device arrays travel as
 * cudadrv's thread descriptors (`lendArray`, `transferArray`), never as copies.
 */
import type {
  LentArrayDescriptor,
  ThreadEventDescriptor,
  TransferredArrayDescriptor,
} from '@cuda-tasks/cudadrv';
import type { WorkerRings } from './worker-ring.js';

/** What the worker thread is started with. */
export interface WorkerPoolData {
  /** The job module's URL (a `file:` URL or a path made absolute by the pool). */
  readonly module: string;
  /** The device the worker's tasks run on (its process default device). */
  readonly device: number | undefined;
  /** The worker's index in its pool (for errors and traces). */
  readonly index: number;
  /** The worker's shared rings (plain jobs and results; worker-ring.ts). */
  readonly rings?: WorkerRings;
}

/**
 * An argument or a result, encoded: plain values as they are; device arrays and events as
 * descriptors;
 * lists and plain objects walked (up to `MAX_DEPTH` deep).
 */
export type Encoded =
  | { readonly $lent: LentArrayDescriptor }
  | { readonly $transferred: TransferredArrayDescriptor }
  /** A result that is the job's own argument (a lent array): the caller's array itself. */
  | { readonly $argument: number }
  /** An event: the receiving thread opens the same CUevent (see `Event.toThreadDescriptor`). */
  | { readonly $event: ThreadEventDescriptor }
  | { readonly $list: readonly Encoded[] }
  | { readonly $object: Readonly<Record<string, Encoded>> }
  | { readonly $value: unknown };

/** How deep arguments and results are searched for device arrays. */
export const MAX_DEPTH = 8;

/** Caller -> worker. */
export type ToWorker =
  | {
      readonly type: 'run';
      readonly id: number;
      readonly job: string;
      /** Encoded arguments, or (`plain`) the arguments themselves: values to clone as they are. */
      readonly args: readonly Encoded[] | readonly unknown[];
      readonly plain: boolean;
      /** Whether the caller gave a signal (the job's task then gets one the caller can abort). */
      readonly cancellable: boolean;
      readonly name: string | undefined;
      readonly priority: 'high' | 'normal' | 'low' | undefined;
    }
  | { readonly type: 'cancel'; readonly id: number; readonly reason: SerializedError }
  | { readonly type: 'close' };

/** An error as it crosses threads: enough to rebuild a typed one on the caller's side. */
export interface SerializedError {
  readonly name: string;
  readonly message: string;
  readonly stack: string | undefined;
  /** `CudaError.call` and `.code`, where the error has them. */
  readonly call: string | undefined;
  readonly code: number | string | undefined;
}

/** Worker -> caller. */
export type FromWorker =
  | { readonly type: 'ready'; readonly jobs: readonly string[] }
  | { readonly type: 'failed'; readonly error: SerializedError }
  | { readonly type: 'done'; readonly id: number; readonly value: Encoded }
  | { readonly type: 'error'; readonly id: number; readonly error: SerializedError };

/** Turns anything thrown into a `SerializedError`. */
export function serializeError(error: unknown): SerializedError {
  if (
    error instanceof Error ||
    (typeof error === 'object' && error !== null && 'message' in error)
  ) {
    const e = error as Error & { call?: unknown; code?: unknown };
    return {
      name: typeof e.name === 'string' ? e.name : 'Error',
      message: String(e.message),
      stack: typeof e.stack === 'string' ? e.stack : undefined,
      call: typeof e.call === 'string' ? e.call : undefined,
      code: typeof e.code === 'number' || typeof e.code === 'string' ? e.code : undefined,
    };
  }
  return {
    name: 'Error',
    message: String(error),
    stack: undefined,
    call: undefined,
    code: undefined,
  };
}

/**
 * Sets `out[key] = value` as an own data property, the key `__proto__` included: an assignment
 * would take that key as the object's prototype, so an object with such an own key (which
 * `JSON.parse` makes) would lose it on the way to or from a worker, or get its prototype from
 * the data.
 */
export function setOwn<T>(out: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__') {
    Object.defineProperty(out, key, {
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  } else out[key] = value;
}

/** True for a plain object (not a class instance): what the encoders walk into. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}
