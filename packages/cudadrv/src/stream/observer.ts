import { launchGate, reopenLaunchGate } from '../context/launch-gate.js';
import { cudadrvState } from '../process-state.js';
import type { Stream } from './stream.js';

/**
 * An observer of GPU operations (the task runtime's trace recorder installs one). Called
 * around each kernel launch (named after the kernel), each copy and memset of this package
 * (`memcpyHtoD`, `memcpyDtoH` (also the staged copy of `toHost()`), `memcpyDtoD`,
 * `memcpyPeer`, `memcpy2D`, `memset`), each graph replay (`graph (N nodes)`, with `{ nodes }`
 * as `args`) and each library call of the library packages; absent by default, when the hooks
 * cost one comparison and allocate nothing. Work issued to a capturing stream is not observed
 * (it does not run then; its graph's replays are).
 */
export interface OperationObserver {
  /**
   * An operation named `name` is about to be issued on `stream`; returns a token for `end`.
   * `args` (when given) are details to show with it, e.g. a replay's node count.
   */
  begin(name: string, stream: Stream, args?: Readonly<Record<string, unknown>>): number;
  /** The operation with this token has been issued. */
  end(token: number): void;
}

const slot = cudadrvState('observer', () => ({ observer: null as OperationObserver | null }));

/** Installs (or with null removes) the operation observer; returns the previous one. */
export function setOperationObserver(observer: OperationObserver | null): OperationObserver | null {
  const previous = slot.observer;
  slot.observer = observer;
  launchGate.observed = observer !== null;
  reopenLaunchGate();
  return previous;
}

/**
 * Marks the start of an operation for the observer (the task runtime's trace recorder);
 * returns -1 (and does nothing) when none is installed, or when `stream` is capturing a graph.
 * A library (this repository's, or a third party's) calls it around each native call it
 * issues, naming the call, and hands the token to `endOperation` right after; the pair
 * allocates nothing when no observer is installed.
 * @example
 * const token = beginOperation('cufft.c2c.forward', stream);
 * const status = cufftExecC2C(plan, input, output, CUFFT_FORWARD);
 * endOperation(token);
 */
export function beginOperation(
  name: string,
  stream: Stream,
  args?: Readonly<Record<string, unknown>>,
): number {
  const observer = slot.observer;
  return observer === null || stream.capture !== null ? -1 : observer.begin(name, stream, args);
}

/** Marks the end of the operation that `beginOperation` returned `token` for (-1: nothing). */
export function endOperation(token: number): void {
  if (token >= 0) slot.observer?.end(token);
}
