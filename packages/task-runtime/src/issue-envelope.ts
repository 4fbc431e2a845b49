import type { Stream } from '@cuda-tasks/cudadrv';
// From `./internal` (the same functions as the public ones): the sibling packages' tests
// replace that module to record the trace.
import { beginOperation, endOperation } from '@cuda-tasks/cudadrv/internal';
import type { HandleCache } from './handle-cache.js';
import type { HandleBinding } from './handle-record.js';

/** What an `IssueEnvelope` needs of a library: its status check, and its handles if any. */
export interface IssueEnvelopeOptions<H> {
  /** Library name for diagnostics, e.g. 'cublas'. */
  name: string;
  /**
   * The library's status check: throws the library's error (a `CudaError` subclass) naming
   * `call` when `status` is not success; returns nothing otherwise.
   */
  check(status: number, call: string): void;
  /**
   * The library's handle cache, for `handle()` and `binding()`. Left out by a library whose
   * handles come from elsewhere (cuRAND's generators bind themselves): it uses the trace and
   * the check only.
   */
  handles?: HandleCache<H>;
}

/**
 * The issue envelope: how every library call of this repository (cuBLAS, cuBLASLt, cuSOLVER,
 * cuRAND), and a library of your own, issues one native call on a stream. Five steps, always
 * in this order:
 *
 * 1. `handle(stream)` (or `binding(stream)` for the workspace too): the running task's handle,
 *    leased and bound to `stream`, with the stream's context current. This is what can fail
 *    (a disposed stream, a handle that cannot be made), so it comes first.
 * 2. The operands declared used on the stream (`ffiAddressOn(stream, 'read')` for an input,
 *    `ffiAddressOn(stream)` for an output): after step 1, so that a call that throws getting
 *    its handle leaves no trace on any operand (no stamp, no reader on a stream that ran
 *    nothing).
 * 3. `begin(stream, name)`: the trace operation begins (the task runtime's recorder, NVTX),
 *    named as the trace shows it (`cublas.sgemm`); a token comes back.
 * 4. The native call, which returns a status.
 * 5. `end(token, status, call)`: the trace operation ends, then the status is checked under the
 *    entry point's name (`cublasSgemm_v2`), which the library's error reports as its `call`.
 *    A failing status thus throws with the trace closed.
 *
 * Where step 4 can throw instead of returning (an awaited call, a call with a `finally` of its
 * own), `endTrace(token)` closes the trace in that `finally` and `check(status, call)` reads the
 * status after. Nothing here allocates: the token is a number, the names are the routine
 * table's strings, and one envelope serves every call of its library (one call at a time on
 * the event loop's thread, or several awaited ones: the state of a call is its token).
 * @example
 * const fft = new IssueEnvelope({ name: 'cufft', check, handles: plans });
 * const plan = fft.handle(stream); // 1: the task's plan, bound to the stream
 * const input = x.ffiAddressOn(stream, 'read'); // 2: the operands
 * const output = y.ffiAddressOn(stream);
 * const token = fft.begin(stream, 'cufft.c2c.forward'); // 3
 * const status = cufft().cufftExecC2C(plan.handle, input, output, CUFFT_FORWARD); // 4
 * fft.end(token, status, 'cufftExecC2C'); // 5: trace closed, then CufftError on failure
 */
export class IssueEnvelope<H> {
  /** The name given in the options. */
  readonly name: string;
  /** The library's handle cache (undefined: the library binds its handles itself). */
  readonly handles: HandleCache<H> | undefined;
  readonly #check: (status: number, call: string) => void;

  /** An envelope for the library that `options` describes. */
  constructor(options: IssueEnvelopeOptions<H>) {
    this.name = options.name;
    this.handles = options.handles;
    this.#check = options.check;
  }

  /**
   * Step 1: the running task's handle, leased and bound to `stream`, with the stream's
   * context current. A disposed stream gives a DisposedError naming it, before any lease.
   * Allocates nothing once the task holds its lease.
   */
  handle(stream: Stream): H {
    const handle = this.#cache().get(stream);
    stream.context.makeCurrent();
    return handle;
  }

  /**
   * Step 1 with the workspace: `handle(stream)`, as the cache's read-only binding view (the
   * handle, its stream, its workspace there). Use it within the call it came from.
   */
  binding(stream: Stream): HandleBinding<H> {
    const binding = this.#cache().bind(stream);
    stream.context.makeCurrent();
    return binding;
  }

  /**
   * Step 3: begins the trace operation `name` on `stream` (after the operands are declared
   * used). Returns the token for `end` or `endTrace`; -1 when nothing observes (no recorder,
   * or a capturing stream), at the cost of one comparison.
   */
  begin(stream: Stream, name: string): number {
    // With cudadrv's issue engine, the stream's launches not issued yet go first: the call
    // reaches the stream through its handle, not the stream's own (which would wait for them).
    stream.waitForIssue?.();
    return beginOperation(name, stream);
  }

  /**
   * Step 5: ends the trace operation of `token`, then checks `status` with the library's check
   * under `call` (the entry point): a failing status throws the library's error, the trace
   * already closed.
   */
  end(token: number, status: number, call: string): void {
    endOperation(token);
    this.#check(status, call);
  }

  /**
   * Ends the trace operation of `token` without a status: in the `finally` of a call that can
   * throw before it returns one, or whose status arrives later (then `check` it).
   */
  endTrace(token: number): void {
    endOperation(token);
  }

  /** The library's status check: throws its error naming `call` when `status` is a failure. */
  check(status: number, call: string): void {
    this.#check(status, call);
  }

  #cache(): HandleCache<H> {
    const handles = this.handles;
    if (handles === undefined) {
      throw new Error(
        `IssueEnvelope "${this.name}": no handle cache was given to take handles from`,
      );
    }
    return handles;
  }
}
