/**
 * The one place where this package's routines issue their native call: the issue envelope's
 * five steps (task-runtime's `IssueEnvelope`, here `blas`) written once, so that a routine
 * states only what is its own: its checks, its operands and its native call.
 *
 * A routine's native call is an `Issue`, a module constant made once (`cublasCall`): a
 * function that takes the handle, the routine's checked arguments (its reused `Checked*`
 * object) and the operands' addresses, and calls the entry point. Nothing is allocated per
 * call: no closure, no array, no object; the arguments reach the native call as parameters.
 */
import type { DeviceArray, Stream } from '@cuda-tasks/cudadrv';
import { CUBLAS_POINTER_MODE_DEVICE, CUBLAS_POINTER_MODE_HOST, cublas } from './ffi/cublas.js';
import { blas } from './handle.js';
import type { Routine } from './routines.js';

/** A handle or a device address as koffi converts it fastest (see `ffiValue`); 0: none. */
export type Address = number | bigint;

/** What names a call: the trace operation (`cublas.sgemm`) and the entry point it checks. */
export interface CallName {
  /** What the operation observer (traces, NVTX ranges) records. */
  readonly operation: string;
  /** The entry point a failing status is reported under (the error's `call`). */
  readonly symbol: string;
}

/**
 * How one routine is issued (a module constant: see `cublasCall`). `R` is what names the
 * call (a routine of the tables, whose `symbol` the native call looks its entry point up by),
 * `A` the routine's checked arguments.
 */
export interface Issue<A, R extends CallName = Routine> {
  /**
   * Step 1: the handle the native call takes, bound to `stream` with the stream's context
   * current. Whatever can fail before the operands are declared used belongs here.
   */
  readonly handle: (stream: Stream, args: A) => Address;
  /**
   * Step 4: the native call, with the handle, the checked arguments and the addresses of the
   * operands in the order `issue` takes them (read, read, written; 0 for one not given).
   * Returns the status.
   */
  readonly call: (
    routine: R,
    handle: Address,
    args: A,
    first: Address,
    second: Address,
    written: Address,
  ) => number;
  /**
   * Whether the call runs in device pointer mode (a reduction writing its result to device
   * memory): set after the operands are declared, host mode restored whatever happened.
   */
  readonly devicePointers: boolean;
}

/** Step 1 of a cuBLAS routine: the task's cuBLAS handle bound to the stream. */
function taskHandle(stream: Stream): Address {
  return blas.handle(stream).ffiHandle;
}

/**
 * A cuBLAS routine's `Issue`: the task's handle, `call`, and host pointer mode (device
 * pointer mode with `devicePointers`). Make it once, at module level.
 * @example
 * const SCAL_CALL = cublasCall<CheckedVector>((routine, handle, v, _, __, x) =>
 *   cublas()[routine.symbol](handle, v.n, scalars().alpha, x, v.incx));
 */
export function cublasCall<A>(call: Issue<A>['call'], devicePointers = false): Issue<A> {
  return Object.freeze({ handle: taskHandle, call, devicePointers });
}

function setPointerMode(handle: Address, mode: number): void {
  blas.check(cublas().cublasSetPointerMode_v2(handle, mode), 'cublasSetPointerMode_v2');
}

/**
 * Issues `routine` on `stream` in the envelope's order: `how.handle` (everything that can
 * fail comes before any operand is touched, so a call that throws there leaves no trace on
 * its operands); `first` and `second` declared read on the stream and `written` written, in
 * that order (an operand left undefined is skipped); device pointer mode if `how` asks; the
 * trace operation `routine.operation` begun; `how.call`; the trace ended (and host pointer
 * mode back) whatever the call did; then its status checked under `routine.symbol`, so a
 * failing status throws a CublasError with the trace closed.
 */
export function issue<A, R extends CallName>(
  stream: Stream,
  routine: R,
  how: Issue<A, R>,
  args: A,
  first: DeviceArray | undefined,
  second: DeviceArray | undefined,
  written: DeviceArray,
): void {
  const handle = how.handle(stream, args);
  const a = first === undefined ? 0 : first.ffiAddressOn(stream, 'read');
  const b = second === undefined ? 0 : second.ffiAddressOn(stream, 'read');
  const c = written.ffiAddressOn(stream);
  if (how.devicePointers) setPointerMode(handle, CUBLAS_POINTER_MODE_DEVICE);
  const token = blas.begin(stream, routine.operation);
  let status: number;
  try {
    status = how.call(routine, handle, args, a, b, c);
  } finally {
    blas.endTrace(token);
    if (how.devicePointers) setPointerMode(handle, CUBLAS_POINTER_MODE_HOST);
  }
  blas.check(status, routine.symbol);
}
