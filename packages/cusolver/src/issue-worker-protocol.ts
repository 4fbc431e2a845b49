/**
 * What the event loop and the issue worker (issue-worker.ts, issue-worker-thread.ts) say to
 * each other: the messages, the states of a call's shared word, and what the worker is started
 * with. Imported by both threads; it holds no code that touches native libraries.
 */

/** The routines the worker issues (declared in ffi/cusolver.ts). */
export type OffThreadSymbol = 'cusolverDnSgetrf' | 'cusolverDnDgetrf';

// The states of a call's shared word (an Int32Array of one element on a SharedArrayBuffer).
// The worker moves QUEUED to ISSUING (or finds CANCELLED and skips the call), then ISSUING to
// DONE; the event loop moves QUEUED to CANCELLED.
/** The call waits for the worker. */
export const QUEUED = 0;
/** The worker has claimed the call and is issuing it. */
export const ISSUING = 1;
/** The worker is done with the call (issued, or failed). */
export const DONE = 2;
/** The event loop cancelled the call before the worker claimed it: nothing is issued. */
export const CANCELLED = 3;

/**
 * A failure in the worker, as a structured message from which the event loop rebuilds the
 * library's own error: `CudaError` (a CUresult of a driver call), `CusolverError` (a
 * cusolverStatus_t of a cuSOLVER call), or any other error the worker caught (its name and
 * message; `status` is then -1).
 */
export interface IssueFailure {
  /** The error class: `CudaError`, `CusolverError`, or the name of another caught error. */
  readonly name: string;
  /** The CUresult or cusolverStatus_t; -1 for another error. */
  readonly status: number;
  /** The native call that failed (a cu* driver function or a cusolverDn routine). */
  readonly call: string;
  /** The caught error's message (for a name other than CudaError and CusolverError). */
  readonly message?: string;
}

/** What the worker answers for one call: nothing (done), a failure, or why nothing was issued. */
export interface OffThreadReply {
  /** The call, or a driver call the worker made for it, failed. */
  readonly error?: IssueFailure;
  /** The stream began a capture before the worker got to the call: nothing was issued. */
  readonly capturing?: boolean;
  /**
   * The call was cancelled before the worker issued it (its stream was disposed, or the
   * signal given to `issueOffThread` aborted): nothing was issued.
   */
  readonly cancelled?: boolean;
}

/** What the worker is started with (its `workerData`). */
export interface IssueWorkerData {
  /** Handles the worker keeps per context (one per stream up to this). */
  readonly handlesPerContext: number;
  /**
   * A module whose `bindings()` gives the native functions instead of the package's FFI
   * declarations (the unit tests' double; a file URL or path). Unset: the package's own.
   */
  readonly bindings?: string;
}

/** Issue `symbol(handle, ...args)` on `stream` with `context` current; `flag` is its shared word. */
export interface IssueMessage {
  /** The message's kind. */
  readonly kind: 'issue';
  /** The call's id, which the reply carries. */
  readonly id: number;
  /** The caller's CUcontext. */
  readonly context: bigint;
  /** The caller's CUstream. */
  readonly stream: number | bigint;
  /** The routine. */
  readonly symbol: OffThreadSymbol;
  /** The routine's arguments after the handle. */
  readonly args: readonly (number | bigint)[];
  /** The call's shared word (QUEUED, ISSUING, DONE or CANCELLED). */
  readonly flag: Int32Array;
}

/** The stream was disposed: unbind the handle bound to it. */
export interface ForgetMessage {
  /** The message's kind. */
  readonly kind: 'forget';
  /** The stream's CUcontext. */
  readonly context: bigint;
  /** The disposed CUstream. */
  readonly stream: number | bigint;
}

/** What the event loop posts to the worker. */
export type ToWorker = IssueMessage | ForgetMessage;

/** What the worker posts to the event loop. */
export type FromWorker =
  | { readonly kind: 'ready' }
  | { readonly kind: 'failed'; readonly reason: string }
  | { readonly kind: 'reply'; readonly id: number; readonly reply: OffThreadReply };
