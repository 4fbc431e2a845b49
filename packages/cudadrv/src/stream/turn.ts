import { cudadrvState } from '../process-state.js';

/**
 * One budget per turn of the event loop, shared by everything the runtime does on its own
 * initiative in that turn: the task runtime's task starts (each task's `fn` up to its first
 * await) and the waiters' spin passes (`cuStreamQuery` rounds and the continuations they
 * settle). The turn's clock starts at the first such piece of work and counts wall time, so
 * what runs between pieces (the continuations of settled waits, a garbage collection) counts
 * too. Once the turn has used `TURN_BUDGET_MS`, the next start or spin pass waits for the next
 * turn, and timers, I/O and everything else run in between: a burst never holds the loop for
 * the sum of its parts (docs/decisions/0035-a-stream-per-task-up-to-128.md).
 */

/** Milliseconds of one event-loop turn that task starts and spin passes may take together. */
export const TURN_BUDGET_MS = 3;

// Process-wide: every loaded copy of cudadrv (and the task runtime through it) shares one clock.
const turn = cudadrvState('turn', () => ({
  /** `performance.now()` at the turn's first budgeted work; meaningful while `armed`. */
  start: 0,
  /** Whether this turn's clock runs (its end is scheduled). */
  armed: false,
}));

function endTurn(): void {
  turn.armed = false;
}

/**
 * Milliseconds of this turn's budget used so far; starts the turn's clock (and schedules its
 * end) when this is the turn's first budgeted work, returning 0.
 */
export function turnElapsed(): number {
  const now = performance.now();
  if (!turn.armed) {
    turn.armed = true;
    turn.start = now;
    setImmediate(endTurn);
    return 0;
  }
  return now - turn.start;
}

/** Whether this turn's budget is used up (starts the turn's clock when it does not run yet). */
export function turnSpent(): boolean {
  return turnElapsed() > TURN_BUDGET_MS;
}
