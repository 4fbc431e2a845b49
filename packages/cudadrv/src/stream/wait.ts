import type { Context } from '../context/device.js';
import { check, cudaError, driver, ffiValue } from '../driver.js';
import { CudaArgumentError, DisposedError } from '../errors.js';
import { CU_EVENT_BLOCKING_SYNC, CU_EVENT_DISABLE_TIMING, CUresult } from '../ffi/cuda.js';
import { cudadrvState } from '../process-state.js';
import { useClock } from '../progress.js';
import type { Stream } from './stream.js';
import { turnSpent } from './turn.js';

/**
 * Waiting for the GPU without blocking the event loop.
 *
 * Strategy (chosen by measurement: docs/decisions/0004-waiter-tiers.md):
 * 1. in a microtask (so that other tasks started in the same turn issue their work first),
 *    spin on cuStreamQuery up to 64 times: short work completes here with the latency of a
 *    blocking synchronize. All spinning waiters share one round-robin spin: each round queries
 *    every waiter's stream once, resolves those that are done, and lets their continuations
 *    issue more work before the next round (one thread serving many streams, as in C). The
 *    spinning of all waiters together is capped per turn of the event loop, in queries and in
 *    the turn's time budget shared with task starts (`turn.ts`; the rest goes on in the next
 *    turn), so many waiters, or a chain of awaits that never yields, never hold the loop for
 *    long;
 * 2. then record an event and poll it each turn of the event loop (setImmediate, so other
 *    callbacks run in between) for up to the polling window (`setPollingWindow`, 20 ms by
 *    default): waits of a few milliseconds (GEMMs, solves, copies) complete with a few
 *    microseconds of latency and the loop stays responsive, at the price of a busy loop while
 *    they last;
 * 3. longer waits move off the main thread: a koffi async call of cuEventSynchronize (the event
 *    uses blocking sync, so the worker sleeps). At most `MAX_BLOCKING_WAITS` such calls run at
 *    once, so libuv's pool (4 threads) is never starved; the others go on being polled every
 *    millisecond, each on its own, so no waiter waits behind another's longer work. A sleeping
 *    wait learns of the work's end later than a polled one (a blocking sync's wake-up and the
 *    callback's way back to the event loop, against a turn of the loop):
 *    docs/decisions/0031-poll-waits-of-milliseconds.md.
 */

/** Queries one waiter spins before leaving the spin phase. */
export const SPIN_QUERIES = 64;
/** Queries all waiters together may spin in one turn of the event loop. */
export const SPIN_BUDGET_PER_TURN = 256;
/**
 * Queries one spin microtask makes back to back while none of them finds work done (one or a
 * few streams pending); many waiters get one round per microtask.
 */
export const SPIN_QUERIES_PER_PASS = 8;
/** Blocking waits in flight on libuv's pool at once. */
export const MAX_BLOCKING_WAITS = 2;
/** The default polling window, ms (see `setPollingWindow`). */
export const DEFAULT_POLLING_WINDOW_MS = 20;

interface PendingWait {
  /** The event handle as `ffiValue` gives it. */
  event: number | bigint;
  /**
   * Whether the event is the waiter's own, back to the idle events when done (else a capture's
   * pre-capture event or a disposed wrapped stream's tail).
   */
  pooled: boolean;
  context: Context;
  stream: Stream;
  /** The use clock when the event was recorded: the stream is complete through it once the event is. */
  stamp: number;
  since: number;
  resolve: () => void;
  reject: (error: unknown) => void;
  /** The waiter it came from (dropped once its signal aborted). */
  waiter: Waiter;
}

// The waiter's state is process-wide, so every loaded copy of this package shares one bound on
// blocking waits, one spin budget per turn, one round-robin spin and one list of polled waits.
const waitState = cudadrvState('waiter', () => ({
  idleEvents: new Map<Context, (number | bigint)[]>(),
  blockingInFlight: 0,
  polled: [] as PendingWait[],
  pollScheduled: false,
  spinBudget: SPIN_BUDGET_PER_TURN,
  budgetResetScheduled: false,
  /** Waiters in the spin phase, in the order they are queried. */
  spinning: [] as Waiter[],
  spinPassScheduled: false,
  pollingWindowMs: DEFAULT_POLLING_WINDOW_MS,
}));
// A slot made by an older loaded copy of this package has no polling window.
waitState.pollingWindowMs ??= DEFAULT_POLLING_WINDOW_MS;

/**
 * Sets how long a wait (`waitForStream`, `synchronize()`, `toHost()`, ...) polls the GPU from
 * the event loop before it sleeps on a worker thread, in milliseconds; returns the previous
 * window. Within the window a wait sees its work done within microseconds, and the event loop
 * turns without pause while any wait is pending (one CPU core busy, the loop still serving
 * everything else between two polls). Past it the wait sleeps in `cuEventSynchronize` on
 * libuv's pool: no CPU, but it learns of the end later, by a worker thread's wake-up. The
 * default, 20 ms, polls the waits of a service's requests and sleeps through long batch work;
 * `Infinity` always polls (as CUDA's own spinning synchronize does), 0 sleeps after the first
 * spin. Process-wide.
 * @example setPollingWindow(5); // a service that would rather spare the CPU
 */
export function setPollingWindow(ms: number): number {
  if (typeof ms !== 'number' || Number.isNaN(ms) || ms < 0) {
    throw new CudaArgumentError(
      `setPollingWindow: ms must be a number >= 0 (Infinity: always poll), got ${String(ms)}`,
    );
  }
  const previous = waitState.pollingWindowMs;
  waitState.pollingWindowMs = ms;
  return previous;
}

/** The polling window in milliseconds (see `setPollingWindow`). */
export function pollingWindow(): number {
  return waitState.pollingWindowMs;
}

function resetSpinBudget(): void {
  waitState.spinBudget = SPIN_BUDGET_PER_TURN;
  waitState.budgetResetScheduled = false;
}

function acquireEvent(context: Context): number | bigint {
  const idle = waitState.idleEvents.get(context);
  const reused = idle?.pop();
  if (reused !== undefined) return reused;
  context.makeCurrent();
  const handle: (bigint | null)[] = [null];
  check(
    driver().cuEventCreate(handle, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC),
    'cuEventCreate',
  );
  return ffiValue(handle[0] as bigint);
}

function releaseEvent(context: Context, event: number | bigint): void {
  let idle = waitState.idleEvents.get(context);
  if (idle === undefined) waitState.idleEvents.set(context, (idle = []));
  idle.push(event);
}

/** Options of `waitForStream`. */
export interface WaitOptions {
  /**
   * Stops waiting when it aborts: the promise rejects at once with the signal's reason (an
   * `AbortError` DOMException when none was given), without waiting for the GPU. The work
   * already queued on the stream runs on (CUDA cannot recall it).
   */
  signal?: AbortSignal | undefined;
}

/**
 * Resolves when all work submitted to `stream` so far has completed; rejects with a
 * CudaError on a device error (an illegal address, ...), with a DisposedError naming the
 * stream when it has been disposed, with a CaptureError while the stream captures a graph, and
 * with `signal`'s reason as soon as it aborts. Never blocks the event loop for longer than a
 * short, capped spin.
 * @example
 * await waitForStream(stream, { signal: AbortSignal.timeout(100) });
 */
export function waitForStream(stream: Stream, options?: WaitOptions): Promise<void> {
  if (stream.disposed) return Promise.reject(new DisposedError(String(stream)));
  if (stream.capture !== null) return Promise.reject(stream.capturingError('waitForStream'));
  const signal = options?.signal;
  if (signal?.aborted) return Promise.reject(signal.reason);
  // No query here: right after a launch the stream is busy, and the other tasks should issue
  // their work before anyone spins (the spin pass runs in a microtask).
  const promise = new Promise<void>(takeSettlers);
  const resolve = settlers.resolve!;
  const reject = settlers.reject!;
  settlers.resolve = settlers.reject = undefined;
  let waiter: Waiter;
  if (signal === undefined) {
    // A wait without a signal reuses a waiter record that the spin is done with.
    waiter = freeWaiters.pop() ?? newWaiter();
    waiter.stream = stream;
    waiter.resolve = resolve;
    waiter.reject = reject;
  } else {
    waiter = {
      stream,
      resolve,
      reject,
      spun: 0,
      abandoned: false,
      reusable: false,
      asked: ASK_NOT_YET,
      ticket: 0,
      stamp: 0,
    };
    const onAbort = () => {
      // The waiter is dropped where it is (spinning, polled, or on a worker thread, whose
      // blocking call ends with the work): only its promise settles now.
      waiter.abandoned = true;
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    waiter.resolve = () => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    };
    waiter.reject = (error) => {
      signal.removeEventListener('abort', onAbort);
      reject(error);
    };
  }
  waitState.spinning.push(waiter);
  if (!waitState.spinPassScheduled) {
    waitState.spinPassScheduled = true;
    scheduleSpinPass();
  }
  return promise;
}

/**
 * The resolving functions of the promise being made (see `takeSettlers`): taken from one
 * shared executor, so that a wait allocates no closure for its promise's executor.
 */
const settlers: {
  resolve: (() => void) | undefined;
  reject: ((error: unknown) => void) | undefined;
} = { resolve: undefined, reject: undefined };

function takeSettlers(resolve: () => void, reject: (error: unknown) => void): void {
  settlers.resolve = resolve;
  settlers.reject = reject;
}

interface Waiter {
  stream: Stream;
  resolve: () => void;
  reject: (error: unknown) => void;
  /** Queries spun so far. */
  spun: number;
  /** Its signal aborted: its promise is settled, nothing more is done for it. */
  abandoned: boolean;
  /**
   * A waiter without a signal: once the spin has settled it, nothing refers to it any more
   * and it goes back to `freeWaiters` (one that moved on to polling never comes back).
   */
  reusable: boolean;
  /**
   * With the issue engine: whether the stream's issuer was asked to query the stream
   * (`ASK_NOT_YET`, `ASKED`, or `ASK_LEFT`: not at all, or the issuer left the wait to this
   * thread), its query's ticket, and the use clock when it was asked.
   */
  asked: number;
  ticket: number;
  stamp: number;
}

const ASK_NOT_YET = 0;
const ASKED = 1;
const ASK_LEFT = 2;

function settledNothing(): void {}

function newWaiter(): Waiter {
  return {
    stream: undefined as unknown as Stream,
    resolve: settledNothing,
    reject: settledNothing,
    spun: 0,
    abandoned: false,
    reusable: true,
    asked: ASK_NOT_YET,
    ticket: 0,
    stamp: 0,
  };
}

/** Waiter records the spin has settled, for the next waits without a signal. */
const freeWaiters: Waiter[] = [];
/** More than this many free waiter records are left to the garbage collector. */
const MAX_FREE_WAITERS = 256;

/** Gives a settled waiter's record back (it must no longer be referred to anywhere). */
function recycle(waiter: Waiter): void {
  if (!waiter.reusable || freeWaiters.length >= MAX_FREE_WAITERS) return;
  waiter.stream = undefined as unknown as Stream;
  waiter.resolve = settledNothing;
  waiter.reject = settledNothing;
  waiter.spun = 0;
  waiter.asked = ASK_NOT_YET;
  freeWaiters.push(waiter);
}

/**
 * Queues the next spin pass as a microtask: a reaction on a settled promise, which costs less
 * than `queueMicrotask` (that one makes an async resource per call) and runs in the same
 * order, after the reactions queued before it.
 */
function scheduleSpinPass(): void {
  settledPromise.then(spinPass);
}

const settledPromise = Promise.resolve();

/**
 * The spin phase's microtask: rounds of `spinRound`. The next round runs at once while the
 * rounds so far settled no waiter and made fewer than `SPIN_QUERIES_PER_PASS` queries (one or
 * a few streams pending: they are queried back to back, as a C loop polls them, instead of
 * paying a microtask per query); otherwise it is scheduled behind the continuations of the
 * waiters just settled (their next launches and waits), or in the next turn of the event
 * loop once the turn's budget is spent.
 */
function spinPass(): void {
  // The turn's shared budget (task starts, earlier passes and what their continuations ran) is
  // used up: the spinning goes on in the next turn, after timers and I/O.
  if (turnSpent()) {
    setImmediate(spinPass);
    return;
  }
  waitState.spinPassScheduled = false;
  if (!waitState.budgetResetScheduled) {
    waitState.budgetResetScheduled = true;
    setImmediate(resetSpinBudget);
  }
  let queried = 0;
  for (;;) {
    const budget = waitState.spinBudget;
    const settled = spinRound();
    if (waitState.spinning.length === 0) return;
    queried += budget - waitState.spinBudget;
    if (settled || queried >= SPIN_QUERIES_PER_PASS || waitState.spinBudget <= 0) break;
  }
  waitState.spinPassScheduled = true;
  // A microtask queued now runs after the reactions of the promises just settled: the tasks
  // whose work is done issue their next work before the next round queries.
  if (waitState.spinBudget > 0) scheduleSpinPass();
  // The turn's spinning is used up (many waiters, or a chain of awaits that never yields):
  // let the event loop run, then go on spinning in the next turn.
  else setImmediate(spinPass);
}

/**
 * One round of the spin phase: queries each spinning waiter's stream once (round-robin, as a
 * C loop that serves many streams from one thread does) and settles the ones that are done.
 * Returns whether it settled any (their continuations are then queued).
 */
function spinRound(): boolean {
  const api = driver();
  const spinning = waitState.spinning;
  let kept = 0;
  let settled = false;
  const count = spinning.length;
  for (let i = 0; i < count; i++) {
    const waiter = spinning[i]!;
    if (waiter.abandoned) continue;
    if (waitState.spinBudget <= 0) {
      spinning[kept++] = waiter;
      continue;
    }
    const stream = waiter.stream;
    if (stream.disposed) {
      waitForDisposed(waiter);
      continue;
    }
    if (stream.capture !== null) {
      waitForPrecapture(waiter);
      continue;
    }
    waitState.spinBudget--;
    const issue = stream.issue;
    if (issue != null && waiter.asked !== ASK_LEFT && issue.queriesOnIssuer) {
      // The issue engine's issuer queries the stream after its launches and answers in shared
      // memory: this thread makes no driver call for the wait. Reading the answer costs
      // nanoseconds: it uses the turn's budget (so the loop still turns), not the waiter's
      // spins. A failed engine is this wait's error.
      const failure = issue.failure();
      if (failure !== null) {
        waiter.reject(failure);
        recycle(waiter);
        settled = true;
        continue;
      }
      if (waiter.asked === ASK_NOT_YET) {
        waiter.stamp = useClock.value;
        try {
          waiter.ticket = issue.requestQuery();
        } catch (error) {
          // A full ring whose issuer died while this thread waited for room: the wait's error,
          // not an exception out of the spin pass.
          waiter.reject(error);
          recycle(waiter);
          settled = true;
          continue;
        }
        waiter.asked = ASKED;
        spinning[kept++] = waiter;
        continue;
      }
      const answer = issue.answer(waiter.ticket);
      if (answer === 0) {
        spinning[kept++] = waiter;
        continue;
      }
      if (answer > 0) {
        // Done, or failed: a launch the driver refused, or the query's own error.
        const failed = issue.takeError();
        if (failed !== null) waiter.reject(failed);
        else {
          stream.markCompleted(waiter.stamp);
          waiter.resolve();
        }
        recycle(waiter);
        settled = true;
        continue;
      }
      // Not done within the issuer's watch: this thread goes on as without the queries.
      waiter.asked = ASK_LEFT;
    }
    if (issue != null) {
      // Launches the issue engine has not issued yet (for microseconds): not done, and nothing
      // to query yet (a query now would not see them). Such a check costs nanoseconds, not a
      // query's microsecond: it uses the turn's budget (so the loop still turns) but not the
      // waiter's spins. A launch the driver refused, or a failed engine, is this wait's error.
      const pending = issue.pending();
      const failed = pending ? issue.failure() : issue.takeError();
      if (failed !== null) {
        waiter.reject(failed);
        recycle(waiter);
        settled = true;
        continue;
      }
      if (pending) {
        spinning[kept++] = waiter;
        continue;
      }
    }
    waiter.spun++;
    const stamp = useClock.value;
    const result = api.cuStreamQuery(stream.ffiHandle);
    if (result === CUresult.CUDA_SUCCESS) {
      stream.markCompleted(stamp);
      waiter.resolve();
      recycle(waiter);
      settled = true;
    } else if (result !== CUresult.CUDA_ERROR_NOT_READY) {
      waiter.reject(cudaError(result, 'cuStreamQuery'));
      recycle(waiter);
      settled = true;
    } else if (waiter.spun >= SPIN_QUERIES) {
      startPolling(waiter);
    } else {
      spinning[kept++] = waiter;
    }
  }
  // Waiters added during the round (none today: settling runs no code at once) stay queued.
  for (let i = count; i < spinning.length; i++) spinning[kept++] = spinning[i]!;
  // Setting an array's length is a call into the runtime, not a plain store: made only in the
  // rounds where a waiter left the list.
  if (kept !== spinning.length) spinning.length = kept;
  return settled;
}

/**
 * Disposed after the wait was asked for: an owned stream was drained by its dispose; a wrapped
 * one is waited for through the event its dispose recorded (its handle is no longer ours to
 * query).
 */
function waitForDisposed(waiter: Waiter): void {
  const stream = waiter.stream;
  const tail = stream.tailEvent;
  if (tail === 0) {
    waiter.resolve();
    return;
  }
  waitState.polled.push({
    event: tail,
    pooled: false,
    context: stream.context,
    stream,
    stamp: useClock.value,
    since: performance.now(),
    resolve: waiter.resolve,
    reject: waiter.reject,
    waiter,
  });
  schedulePoll();
}

/**
 * The stream began capturing after this wait was asked for: what the wait is for is the work
 * from before the capture, which its pre-capture event marks (querying the stream would
 * invalidate the capture).
 */
function waitForPrecapture(waiter: Waiter): void {
  const stream = waiter.stream;
  waitState.polled.push({
    event: stream.capture!.precaptureEvent,
    pooled: false,
    context: stream.context,
    stream,
    stamp: 0,
    since: performance.now(),
    resolve: waiter.resolve,
    reject: waiter.reject,
    waiter,
  });
  schedulePoll();
}

/** Leaves the spin phase: records an event on the stream and polls it. */
function startPolling(waiter: Waiter): void {
  const { stream, resolve, reject } = waiter;
  const context = stream.context;
  let event: number | bigint;
  try {
    event = acquireEvent(context);
  } catch (error) {
    reject(error);
    return;
  }
  const stamp = useClock.value;
  const recorded = driver().cuEventRecord(event, stream.ffiHandle);
  if (recorded !== 0) {
    releaseEvent(context, event);
    reject(cudaError(recorded, 'cuEventRecord'));
    return;
  }
  waitState.polled.push({
    event,
    pooled: true,
    context,
    stream,
    stamp,
    since: performance.now(),
    resolve,
    reject,
    waiter,
  });
  schedulePoll();
}

/** Waits for a recorded event on libuv's pool (the event uses blocking sync: the worker sleeps). */
function waitBlocking(wait: PendingWait): void {
  waitState.blockingInFlight++;
  driver().cuEventSynchronize.async(wait.event, (error: unknown, result: number) => {
    waitState.blockingInFlight--;
    if (wait.pooled) releaseEvent(wait.context, wait.event);
    if (error) wait.reject(error);
    else if (result !== 0) wait.reject(cudaError(result, 'cuEventSynchronize'));
    else {
      wait.stream.markCompleted(wait.stamp);
      wait.resolve();
    }
  });
}

function schedulePoll(): void {
  if (waitState.pollScheduled || waitState.polled.length === 0) return;
  waitState.pollScheduled = true;
  const now = performance.now();
  let youngest = 0;
  for (const wait of waitState.polled) youngest = Math.max(youngest, wait.since);
  if (now - youngest < waitState.pollingWindowMs) setImmediate(poll);
  else setTimeout(poll, 1);
}

function poll(): void {
  waitState.pollScheduled = false;
  const api = driver();
  const now = performance.now();
  const pollingWindowMs = waitState.pollingWindowMs;
  for (let i = waitState.polled.length - 1; i >= 0; i--) {
    const wait = waitState.polled[i]!;
    if (wait.waiter.abandoned) {
      // Its signal aborted: stop polling. A pooled event may still be pending; recording it
      // again later is allowed, and replaces what it waits for.
      waitState.polled.splice(i, 1);
      if (wait.pooled) releaseEvent(wait.context, wait.event);
      continue;
    }
    const result = api.cuEventQuery(wait.event);
    if (result === CUresult.CUDA_ERROR_NOT_READY) {
      // Long waits move off the main thread while a blocking slot is free.
      if (now - wait.since >= pollingWindowMs && waitState.blockingInFlight < MAX_BLOCKING_WAITS) {
        waitState.polled.splice(i, 1);
        waitBlocking(wait);
      }
      continue;
    }
    waitState.polled.splice(i, 1);
    if (wait.pooled) releaseEvent(wait.context, wait.event);
    if (result === CUresult.CUDA_SUCCESS) {
      wait.stream.markCompleted(wait.stamp);
      wait.resolve();
    } else wait.reject(cudaError(result, 'cuEventQuery'));
  }
  schedulePoll();
}

/** Waiters currently parked (for tests and diagnostics). */
export function pendingWaits(): { blocking: number; polled: number } {
  return { blocking: waitState.blockingInFlight, polled: waitState.polled.length };
}
