/**
 * Completion stamps: what lets a buffer hand-off skip the GPU-side ordering when the work it
 * would wait for is already known to be done.
 *
 * A process-wide clock ticks at every buffer use (`DeviceBuffer.ffiAddressOn`, the allocation
 * too); the buffer keeps the tick of its last use on each stream. A stream keeps the tick
 * through which all its work is known complete: a query or synchronize that found it idle
 * reads the clock before the native call, so every use stamped up to that value had issued
 * its work before the call and has finished. A later hand-off from that stream whose stamp is
 * at or below it needs no event record and stream wait: the GPU has nothing left to order.
 *
 * The contract this relies on is the one `useOn` already states: declare a use right before
 * issuing the work, in the same synchronous step.
 */
import { cudadrvState } from './process-state.js';

interface UseClock {
  value: number;
}

/**
 * @internal The clock (shared by every loaded copy of this package, so that stamps of
 * buffers and streams from two copies stay comparable).
 */
export const useClock: UseClock = cudadrvState('use-clock', () => ({ value: 0 }));

/**
 * A new tick of the clock, for a use of something other than a buffer (a library object's
 * call, see task-runtime's `StreamBinding`): read it right before issuing the work, in the same
 * synchronous step, as a buffer use is declared.
 * @internal
 */
export function nextUseStamp(): number {
  return ++useClock.value;
}
