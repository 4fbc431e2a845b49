/**
 * Device arrays across the threads of one process (`worker_threads`), without copies. Device
 * pointers, events and streams of a context are valid in every thread of the process, so an
 * array crosses as a descriptor: plain data that `postMessage` clones (its address, dtype,
 * shape, context, two event handles and a shared state word). The hand-offs are ordered on the
 * GPU with events, never by blocking a thread.
 *
 * Two ways across:
 * - A loan (`lendArray` / `borrowArray`): the lender keeps the memory; the borrower's array
 *   views it until the borrower disposes it. Meanwhile the lender's own uses of the array
 *   throw (for a read-only loan, only its writes). `loan.end()` after the borrower returned it
 *   orders the lender's stream after the borrower's work, and the array is the lender's again.
 * - A transfer (`transferArray` / `receiveArray`): the memory changes owner. The sender's array
 *   is disposed at once; the receiver's array owns the memory and frees it.
 *
 * A descriptor is for the threads of the process that made it: another process refuses it
 * (share memory between processes with `shareableArray` / `shareMemory` instead).
 */
import { type Context, Device } from '../context/device.js';
import { resolveStream } from '../context/provider.js';
import { check, driver, ffiValue } from '../driver.js';
import { DTYPES, type DType, dtypeBytes } from '../dtype.js';
import { CaptureError, CudaArgumentError } from '../errors.js';
import { CU_EVENT_DISABLE_TIMING } from '../ffi/cuda.js';
import { assertOptions, NO_OPTIONS, STREAM_ONLY } from '../options-checks.js';
import type { Stream } from '../stream/stream.js';
import { columnMajorStrides, DeviceArray } from './array.js';
import { assertArray, describeValue } from './array-checks.js';
import {
  assertRelinquishable,
  DeviceBuffer,
  type ForeignMemory,
  LoanBlock,
  lendAllocation,
  relinquishAllocation,
} from './memory.js';
import { waitForContext } from './memory-pool.js';

/** The states of a loan's shared word. */
const LENT = 1;
const BORROWED = 2;
const RETURNED = 3;
const ENDED = 4;
/** The borrower could not record its `done` event (a driver error): only `abandon()` ends it. */
const FAILED = 5;
/** The states of a transfer's shared word. */
const SENT = 1;
const RECEIVED = 2;

const LOAN_KIND = 'cuda-tasks/lent-array@1';
const TRANSFER_KIND = 'cuda-tasks/transferred-array@1';

/** What crosses to another thread for a lent array (`lendArray`): plain data. */
export interface LentArrayDescriptor {
  /** What made it: `lendArray`. */
  readonly kind: typeof LOAN_KIND;
  /** The process that lent it: another process refuses the descriptor. */
  readonly pid: number;
  /** The lent buffer's device address (the whole buffer, of which the array may be a view). */
  readonly address: bigint;
  /** The lent buffer's size in bytes. */
  readonly byteLength: number;
  /** The array's element type. */
  readonly dtype: DType;
  /** The array's extent per dimension. */
  readonly shape: readonly number[];
  /** The array's element strides per dimension. */
  readonly strides: readonly number[];
  /** Offset of the first element in elements. */
  readonly offset: number;
  /** The device ordinal. */
  readonly device: number;
  /** The handle of the device's primary context. */
  readonly context: bigint;
  /** Recorded on the lender's stream after its uses: the borrower's stream waits for it. */
  readonly ready: bigint;
  /** Recorded by the borrower after its uses: the lender's stream waits for it at `end()`. */
  readonly done: bigint;
  /** Whether the borrower may only read. */
  readonly readOnly: boolean;
  /** One Int32 word: lent, borrowed, returned, ended (or failed). */
  readonly state: SharedArrayBuffer;
}

/** What crosses to another thread for a transferred array (`transferArray`): plain data. */
export interface TransferredArrayDescriptor {
  /** What made it: `transferArray`. */
  readonly kind: typeof TRANSFER_KIND;
  /** The process that sent it: another process refuses the descriptor. */
  readonly pid: number;
  /** The memory's device address (0n for an empty array). */
  readonly address: bigint;
  /** The memory's size in bytes. */
  readonly byteLength: number;
  /** The array's element type. */
  readonly dtype: DType;
  /** The array's extent per dimension (compact, column-major). */
  readonly shape: readonly number[];
  /** The device ordinal. */
  readonly device: number;
  /** The handle of the device's primary context. */
  readonly context: bigint;
  /** Recorded on the sender's stream after its uses (0n for an empty array); the receiver destroys it. */
  readonly ready: bigint;
  /** One Int32 word: sent, received. */
  readonly state: SharedArrayBuffer;
}

/** The options `lendArray` takes (`borrowArray`, `transferArray`, `receiveArray`: `stream` only). */
const LEND_OPTIONS: readonly string[] = ['stream', 'readOnly'];

/** Options of `lendArray`. */
export interface LendOptions {
  /** The stream the loan is ordered on, before and at its end (default: the current stream). */
  stream?: Stream;
  /** The borrower may only read (default false); the lender may go on reading meanwhile. */
  readOnly?: boolean;
}

/** Where the receiving side's work on an array starts (default: the current stream). */
export interface ThreadShareOptions {
  /** The stream the receiving side's first use is ordered on (default: the current stream). */
  stream?: Stream;
}

/** A lent array's lender side (`lendArray`). */
export interface ArrayLoan {
  /** What to post to the borrowing thread. */
  readonly descriptor: LentArrayDescriptor;
  /** True once the borrower disposed its array (the loan can end). */
  readonly returned: boolean;
  /** True once the loan ended (`end` or `abandon`). */
  readonly ended: boolean;
  /**
   * Ends the loan: the loan's stream waits (on the GPU) for the borrower's work on the array,
   * which is the lender's again. Throws a CudaArgumentError while the borrower still holds it;
   * a loan never borrowed ends at once (a later `borrowArray` of its descriptor is refused).
   * Safe to call twice.
   */
  end(): void;
  /**
   * Ends a loan whose borrower is gone without returning the array (its thread exited or
   * failed): waits, off the event loop, for all work in the array's context, then ends it.
   */
  abandon(): Promise<void>;
}

/** Loans not ended yet: each keeps its array (and so its memory) alive. */
const activeLoans = new Set<ArrayLoan>();

/** Loans not ended yet in this thread (to end or abandon before a thread exits). */
export function pendingArrayLoans(): number {
  return activeLoans.size;
}

function createEvent(): bigint {
  const out: (bigint | null)[] = [null];
  check(driver().cuEventCreate(out, CU_EVENT_DISABLE_TIMING), 'cuEventCreate');
  return out[0] as bigint;
}

function destroyEvent(event: bigint): void {
  driver().cuEventDestroy_v2(event);
}

function recordEvent(event: bigint, stream: Stream): void {
  check(driver().cuEventRecord(ffiValue(event), stream.ffiHandle), 'cuEventRecord');
}

/** The stream a side of a hand-off works on: `given`, checked, or the current one. */
function streamFor(given: Stream | undefined, call: string, context: Context): Stream {
  const stream = resolveStream(given);
  stream.assertUsable();
  if (stream.context.handle !== context.handle) {
    if (given !== undefined) {
      throw new CudaArgumentError(
        `${call}: the array is of ${String(context)}, the stream of ${String(stream.context)}`,
      );
    }
    return context.defaultStream;
  }
  if (stream.capture !== null) {
    throw new CaptureError(
      call,
      `${stream} captures a graph: hand arrays between threads outside captures`,
    );
  }
  return stream;
}

/**
 * Lends `array`'s memory to another thread of this process: returns the loan, whose
 * `descriptor` the other thread passes to `borrowArray`. The borrower's work is ordered after
 * the work issued so far on the loan's stream (default: the current stream) and the array's
 * earlier users; until the loan ends, using the array in this thread throws (a read-only loan
 * still lets this thread read it). `loan.end()` after the borrower disposed its array orders
 * the loan's stream after the borrower's work. Disposing the array meanwhile frees its memory
 * when the loan ends. Views lend their own elements (the whole buffer stays lent).
 * @example
 * const loan = lendArray(x);
 * worker.postMessage(loan.descriptor);
 * await replyFrom(worker); // the worker disposed its borrowed array
 * loan.end();
 */
export function lendArray(array: DeviceArray, options: LendOptions = NO_OPTIONS): ArrayLoan {
  assertOptions('lendArray', options, LEND_OPTIONS);
  assertArray('lendArray', 'array', array);
  const readOnly = options.readOnly ?? false;
  if (typeof readOnly !== 'boolean') {
    throw new CudaArgumentError(`lendArray: readOnly must be a boolean, got ${String(readOnly)}`);
  }
  const buffer = array.buffer;
  if (DeviceBuffer.foreignOf(buffer) !== null) {
    throw new CudaArgumentError(
      'lendArray: this array views memory that is not its own (shared, mapped, imported or borrowed): lend the array it came from instead',
    );
  }
  const context = buffer.context;
  const stream = streamFor(options.stream, 'lendArray', context);
  const access = readOnly ? 'read' : 'write';
  // Ordered first (this can wait for earlier users); refused while lent for writing already.
  const address = buffer.byteLength === 0 ? 0n : buffer.useOn(stream, access);
  const block = new LoanBlock(
    readOnly,
    (used) =>
      new CudaArgumentError(
        `this DeviceArray is lent to another thread (lendArray${readOnly ? ', read-only: this thread may only read it' : ''}): ${used} cannot ${readOnly ? 'write' : 'use'} it until the loan ends (loan.end() after the borrower disposed its array)`,
      ),
  );
  // Refused (before any event is made) when the buffer is lent already.
  const endLoan = lendAllocation(buffer, block);
  let ready = 0n;
  let done = 0n;
  try {
    ready = createEvent();
    done = createEvent();
    recordEvent(ready, stream);
  } catch (error) {
    if (ready !== 0n) destroyEvent(ready);
    if (done !== 0n) destroyEvent(done);
    endLoan();
    throw error;
  }
  const stateBuffer = new SharedArrayBuffer(4);
  const state = new Int32Array(stateBuffer);
  state[0] = LENT;
  const descriptor: LentArrayDescriptor = Object.freeze({
    kind: LOAN_KIND,
    pid: process.pid,
    address,
    byteLength: buffer.byteLength,
    dtype: array.dtype,
    shape: Object.freeze([...array.shape]),
    strides: Object.freeze([...array.strides]),
    offset: array.offset,
    device: context.device.ordinal,
    context: context.handle,
    ready,
    done,
    readOnly,
    state: stateBuffer,
  });
  let ended = false;
  const finish = (waitForBorrower: boolean): void => {
    ended = true;
    activeLoans.delete(loan);
    try {
      if (waitForBorrower && buffer.byteLength > 0) {
        // The loan's stream waits for the borrower; then the array is this thread's again and
        // the stream's use of it is declared, so that later users wait for that stream.
        let after = stream;
        if (after.disposed || after.capture !== null) after = context.defaultStream;
        after.waitEvent({ handle: done });
        endLoan();
        if (!buffer.disposed) buffer.useOn(after, access);
      } else endLoan();
    } finally {
      destroyEvent(ready);
      destroyEvent(done);
    }
  };
  const loan: ArrayLoan = {
    descriptor,
    get returned() {
      return Atomics.load(state, 0) === RETURNED;
    },
    get ended() {
      return ended;
    },
    end() {
      if (ended) return;
      const now = Atomics.compareExchange(state, 0, LENT, ENDED);
      if (now === LENT) {
        finish(false);
        return;
      }
      if (now === BORROWED) {
        throw new CudaArgumentError(
          'loan.end(): the borrowing thread still holds the array: end the loan after it disposed its borrowed array',
        );
      }
      if (now === FAILED) {
        throw new CudaArgumentError(
          'loan.end(): the borrower could not record the end of its work (a driver error in its thread): use loan.abandon()',
        );
      }
      Atomics.store(state, 0, ENDED);
      finish(true);
    },
    async abandon() {
      if (ended) return;
      Atomics.store(state, 0, ENDED);
      await waitForContext(context);
      if (!ended) finish(false);
    },
  };
  activeLoans.add(loan);
  return loan;
}

/** Checks a descriptor's common fields; returns the context it names in this thread. */
function checkDescriptor(
  value: unknown,
  kind: string,
  call: string,
): asserts value is LentArrayDescriptor | TransferredArrayDescriptor {
  const bad = (what: string): never => {
    throw new CudaArgumentError(`${call}: not a descriptor from ${kind.split('@')[0]}: ${what}`);
  };
  if (typeof value !== 'object' || value === null) bad(`got ${describeValue(value)}`);
  const d = value as Record<string, unknown>;
  if (d.kind !== kind) bad(`kind ${describeValue(d.kind)}`);
  if (d.pid !== process.pid) {
    throw new CudaArgumentError(
      `${call}: the descriptor comes from process ${describeValue(d.pid)}, this is ${process.pid}: descriptors cross threads of one process only (between processes, use shareableArray / shareMemory)`,
    );
  }
  if (typeof d.address !== 'bigint' || d.address < 0n || d.address >= 1n << 64n) {
    bad(`address ${describeValue(d.address)}`);
  }
  if (!Number.isSafeInteger(d.byteLength) || (d.byteLength as number) < 0) {
    bad(`byteLength ${describeValue(d.byteLength)}`);
  }
  if ((d.address === 0n) !== (d.byteLength === 0)) bad('address and byteLength disagree');
  if (typeof d.dtype !== 'string' || !Object.hasOwn(DTYPES, d.dtype))
    bad(`dtype ${describeValue(d.dtype)}`);
  if (!Array.isArray(d.shape) || !d.shape.every((n) => Number.isSafeInteger(n) && n >= 0)) {
    bad(`shape ${describeValue(d.shape)}`);
  }
  if (!Number.isInteger(d.device) || (d.device as number) < 0)
    bad(`device ${describeValue(d.device)}`);
  if (typeof d.context !== 'bigint') bad(`context ${describeValue(d.context)}`);
  if (typeof d.ready !== 'bigint') bad(`ready ${describeValue(d.ready)}`);
  if (!(d.state instanceof SharedArrayBuffer) || d.state.byteLength < 4) bad('state');
}

/** The primary context a descriptor names, checked against this thread's. */
function contextOf(d: LentArrayDescriptor | TransferredArrayDescriptor, call: string) {
  const context = Device.get(d.device).primaryContext();
  if (context.handle !== d.context) {
    throw new CudaArgumentError(
      `${call}: the descriptor's context (0x${d.context.toString(16)}) is not device ${d.device}'s primary context in this process (0x${context.handle.toString(16)})`,
    );
  }
  return context;
}

/** Elements a strided view reaches past its offset, plus one (0 for an empty shape). */
function span(shape: readonly number[], strides: readonly number[]): number {
  let last = 0;
  for (let i = 0; i < shape.length; i++) {
    if (shape[i] === 0) return 0;
    last += (shape[i]! - 1) * strides[i]!;
  }
  return last + 1;
}

/** The borrower's side of a loan: the release records `done` and marks the loan returned. */
class BorrowedMemory implements ForeignMemory {
  readonly readOnly: boolean;
  readonly #done: bigint;
  readonly #state: Int32Array;

  constructor(readOnly: boolean, done: bigint, state: Int32Array) {
    this.readOnly = readOnly;
    this.#done = done;
    this.#state = state;
  }

  writeError(): Error {
    return new CudaArgumentError(
      'this DeviceArray was lent read-only by another thread (lendArray with readOnly): it cannot be written',
    );
  }

  release(): void {
    // A stream-ordered release (`releaseOn`) always: this runs only for an empty array.
    this.#returned(RETURNED);
  }

  releaseOn(_address: number | bigint, stream: Stream): void {
    try {
      recordEvent(this.#done, stream);
    } catch (error) {
      this.#returned(FAILED);
      throw error;
    }
    this.#returned(RETURNED);
  }

  #returned(state: number): void {
    Atomics.compareExchange(this.#state, 0, BORROWED, state);
    Atomics.notify(this.#state, 0);
  }

  goneError(): Error | null {
    return null;
  }
}

/**
 * The borrowing thread's side of a loan (`lendArray` in another thread of this process): an
 * array over the lent memory, whose work on `stream` (default: the current stream) is ordered
 * after the lender's. Dispose it (or let `using` do it) when done: that returns it, ordered
 * after its uses, and the lender can end the loan. A descriptor is borrowed once.
 * @example
 * parentPort.on('message', (descriptor) => {
 *   using x = borrowArray<'float32'>(descriptor);
 *   launch(scale, { grid, block }, x, 2, x.length);
 * });
 */
export function borrowArray<D extends DType = DType>(
  descriptor: LentArrayDescriptor,
  options: ThreadShareOptions = NO_OPTIONS,
): DeviceArray<D> {
  const call = 'borrowArray';
  assertOptions(call, options, STREAM_ONLY);
  checkDescriptor(descriptor, LOAN_KIND, call);
  const d = descriptor as LentArrayDescriptor;
  if (typeof d.done !== 'bigint' || typeof d.readOnly !== 'boolean') {
    throw new CudaArgumentError(`${call}: not a descriptor from lendArray: done or readOnly`);
  }
  if (
    !Array.isArray(d.strides) ||
    d.strides.length !== d.shape.length ||
    !d.strides.every((n) => Number.isSafeInteger(n) && n >= 0) ||
    !Number.isSafeInteger(d.offset) ||
    d.offset < 0 ||
    (d.offset + span(d.shape, d.strides)) * dtypeBytes(d.dtype) > d.byteLength
  ) {
    throw new CudaArgumentError(
      `${call}: not a descriptor from lendArray: shape ${describeValue(d.shape)}, strides ${describeValue(d.strides)} and offset ${describeValue(d.offset)} reach past its ${d.byteLength} bytes`,
    );
  }
  const context = contextOf(d, call);
  const stream = streamFor(options.stream, call, context);
  const state = new Int32Array(d.state);
  const was = Atomics.compareExchange(state, 0, LENT, BORROWED);
  if (was !== LENT) {
    throw new CudaArgumentError(
      `${call}: this loan was ${was === ENDED ? 'ended by its lender' : 'borrowed already'}: a descriptor is borrowed once`,
    );
  }
  const memory = new BorrowedMemory(d.readOnly, d.done, state);
  try {
    if (d.byteLength > 0) stream.waitEvent({ handle: d.ready });
  } catch (error) {
    Atomics.store(state, 0, LENT);
    throw error;
  }
  const address = d.byteLength === 0 ? 0 : ffiValue(d.address);
  const buffer = DeviceBuffer.adoptForeign(address, d.byteLength, stream, memory);
  if (d.byteLength === 0) memory.release();
  return new DeviceArray(buffer, d.dtype as D, d.shape, d.strides, d.offset, true);
}

/**
 * Gives `array`'s memory to another thread of this process: returns the descriptor that
 * thread passes to `receiveArray`, and `array` is disposed from now on (its memory is the
 * receiver's, who frees it). The receiver's work is ordered after every use of the array so
 * far; `stream` (default: the current stream) is where that point is marked. Only an array
 * that owns its memory from the pool can be transferred (not a view, nor shared, mapped,
 * imported, borrowed or lent memory, nor memory of a graph).
 * @example
 * const result = DeviceArray.empty('float32', n); // ...filled by kernels
 * parentPort.postMessage(transferArray(result));
 */
export function transferArray(
  array: DeviceArray,
  options: ThreadShareOptions = NO_OPTIONS,
): TransferredArrayDescriptor {
  assertOptions('transferArray', options, STREAM_ONLY);
  assertArray('transferArray', 'array', array);
  if (!array.owner) {
    throw new CudaArgumentError(
      'transferArray: this array is a view of another array: transfer the array that owns the memory',
    );
  }
  const buffer = array.buffer;
  const context = buffer.context;
  const stream = streamFor(options.stream, 'transferArray', context);
  let address = 0n;
  let ready = 0n;
  if (buffer.byteLength > 0) {
    assertRelinquishable(buffer);
    address = buffer.useOn(stream, 'write');
    ready = createEvent();
    try {
      recordEvent(ready, stream);
      relinquishAllocation(buffer);
    } catch (error) {
      destroyEvent(ready);
      throw error;
    }
  } else array.dispose();
  const stateBuffer = new SharedArrayBuffer(4);
  new Int32Array(stateBuffer)[0] = SENT;
  return Object.freeze({
    kind: TRANSFER_KIND,
    pid: process.pid,
    address,
    byteLength: buffer.byteLength,
    dtype: array.dtype,
    shape: Object.freeze([...array.shape]),
    device: context.device.ordinal,
    context: context.handle,
    ready,
    state: stateBuffer,
  });
}

/**
 * The receiving thread's side of `transferArray`: an array that owns the memory from now on,
 * its work on `stream` (default: the current stream) ordered after the sender's. A descriptor
 * is received once.
 * @example
 * worker.on('message', (descriptor) => {
 *   using result = receiveArray<'float32'>(descriptor);
 *   console.log(await result.toHost());
 * });
 */
export function receiveArray<D extends DType = DType>(
  descriptor: TransferredArrayDescriptor,
  options: ThreadShareOptions = NO_OPTIONS,
): DeviceArray<D> {
  const call = 'receiveArray';
  assertOptions(call, options, STREAM_ONLY);
  checkDescriptor(descriptor, TRANSFER_KIND, call);
  const d = descriptor as TransferredArrayDescriptor;
  const count = d.shape.reduce((a, b) => a * b, 1);
  if (count * dtypeBytes(d.dtype) !== d.byteLength) {
    throw new CudaArgumentError(
      `${call}: not a descriptor from transferArray: shape ${describeValue(d.shape)} of ${d.dtype} is not ${d.byteLength} bytes`,
    );
  }
  const context = contextOf(d, call);
  const stream = streamFor(options.stream, call, context);
  const state = new Int32Array(d.state);
  if (Atomics.compareExchange(state, 0, SENT, RECEIVED) !== SENT) {
    throw new CudaArgumentError(
      `${call}: this array was received already: a descriptor is received once`,
    );
  }
  if (d.byteLength > 0) {
    stream.waitEvent({ handle: d.ready });
    destroyEvent(d.ready);
  }
  const buffer = DeviceBuffer.adoptPool(
    d.byteLength === 0 ? 0 : ffiValue(d.address),
    d.byteLength,
    stream,
  );
  return new DeviceArray(buffer, d.dtype as D, d.shape, columnMajorStrides(d.shape), 0, true);
}

/** True for a descriptor made by `lendArray` (checks its kind only). */
export function isLentArrayDescriptor(value: unknown): value is LentArrayDescriptor {
  return (
    typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === LOAN_KIND
  );
}

/** True for a descriptor made by `transferArray` (checks its kind only). */
export function isTransferredArrayDescriptor(value: unknown): value is TransferredArrayDescriptor {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { kind?: unknown }).kind === TRANSFER_KIND
  );
}
