import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest';

// The driver replaced by a scripted stand-in: each stream and event completes when the test
// says so; the calls are counted.
const fake = vi.hoisted(() => {
  const state = {
    done: new Set<bigint>(),
    failing: new Map<bigint, number>(),
    queries: 0,
    /** Queries per stream handle, in the order they were made. */
    queryLog: [] as bigint[],
    eventQueries: 0,
    recorded: new Map<bigint, bigint>(),
    nextEvent: 1000n,
    blockingCalls: 0,
    blockingStreams: new Set<bigint>(),
    blockingCallbacks: [] as (() => void)[],
  };
  const api = {
    cuStreamQuery(stream: bigint) {
      state.queries++;
      state.queryLog.push(stream);
      if (state.failing.has(stream)) return state.failing.get(stream)!;
      return state.done.has(stream) ? 0 : 600;
    },
    cuEventCreate(out: (bigint | null)[]) {
      out[0] = state.nextEvent++;
      return 0;
    },
    cuEventRecord(event: bigint, stream: bigint) {
      state.recorded.set(event, stream);
      return 0;
    },
    cuEventQuery(event: bigint) {
      state.eventQueries++;
      return state.done.has(state.recorded.get(event)!) ? 0 : 600;
    },
    cuEventSynchronize: {
      async(event: bigint, callback: (error: unknown, result: number) => void) {
        state.blockingCalls++;
        const stream = state.recorded.get(event)!;
        state.blockingStreams.add(stream);
        const finish = () => callback(null, state.failing.get(stream) ?? 0);
        if (state.done.has(stream)) setImmediate(finish);
        else state.blockingCallbacks.push(finish);
      },
    },
    cuGetErrorName(result: number, out: (string | null)[]) {
      out[0] = result === 700 ? 'CUDA_ERROR_ILLEGAL_ADDRESS' : `CUresult ${result}`;
      return 0;
    },
    cuGetErrorString(_result: number, out: (string | null)[]) {
      out[0] = 'scripted failure';
      return 0;
    },
  };
  return { state, api };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  return { ...original, driver: () => fake.api, check: () => undefined };
});
vi.mock('../ffi/cuda.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../ffi/cuda.js')>();
  return { ...original, cuda: () => fake.api };
});

import { CudaArgumentError } from '../errors.js';
import { useClock } from '../progress.js';
import type { Stream } from './stream.js';
import { TURN_BUDGET_MS, turnElapsed, turnSpent } from './turn.js';
import {
  DEFAULT_POLLING_WINDOW_MS,
  MAX_BLOCKING_WAITS,
  pendingWaits,
  pollingWindow,
  SPIN_BUDGET_PER_TURN,
  SPIN_QUERIES,
  SPIN_QUERIES_PER_PASS,
  setPollingWindow,
  waitForStream,
} from './wait.js';

/** Sets the polling window for the rest of the test (restored after it). */
function pollingWindowForTest(ms: number): void {
  const previous = setPollingWindow(ms);
  onTestFinished(() => {
    setPollingWindow(previous);
  });
}

const context = { makeCurrent() {} };
let nextStream = 1n;
function stream(): Stream {
  const handle = nextStream++;
  const fakeStream = {
    handle,
    ffiHandle: handle,
    context,
    completedThrough: 0,
    capture: null,
    markCompleted,
  };
  function markCompleted(stamp: number): void {
    fakeStream.completedThrough = Math.max(fakeStream.completedThrough, stamp);
  }
  return fakeStream as unknown as Stream;
}
const turn = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

afterEach(async () => {
  // Let every parked waiter finish before the next test.
  for (const s of fake.state.recorded.values()) fake.state.done.add(s);
  for (const finish of fake.state.blockingCallbacks.splice(0)) finish();
  await sleep(5);
  fake.state.queries = 0;
  fake.state.queryLog.length = 0;
  fake.state.failing.clear();
  fake.state.eventQueries = 0;
  fake.state.blockingCalls = 0;
});

describe('waitForStream', () => {
  it('a wrapped stream disposed before the wait began polls the event its dispose recorded', async () => {
    // Held still: this test is about the polling phase, not the move to a blocking wait.
    const frozen = performance.now();
    const clock = vi.spyOn(performance, 'now').mockReturnValue(frozen);
    onTestFinished(() => clock.mockRestore());
    const s = stream() as unknown as { disposed: boolean; tailEvent: bigint; handle: bigint };
    const waiting = waitForStream(s as unknown as Stream);
    // dispose() of a wrapped stream records its tail event on it and marks it disposed.
    const tail = fake.state.nextEvent++;
    fake.state.recorded.set(tail, s.handle);
    s.disposed = true;
    s.tailEvent = tail;
    await turn();
    await turn();
    expect(fake.state.queries).toBe(0); // the handle is no longer ours to query
    expect(fake.state.eventQueries).toBeGreaterThan(0);
    let resolved = false;
    void waiting.then(() => {
      resolved = true;
    });
    await turn();
    expect(resolved).toBe(false);
    fake.state.done.add(s.handle);
    await waiting;
    expect(pendingWaits()).toEqual({ blocking: 0, polled: 0 });
    fake.state.recorded.delete(tail);
  });

  it('an owned stream disposed before the wait began resolves at once (its dispose drained it)', async () => {
    const s = stream() as unknown as { disposed: boolean; tailEvent: number };
    const waiting = waitForStream(s as unknown as Stream);
    const recorded = fake.state.recorded.size;
    s.disposed = true;
    s.tailEvent = 0;
    await waiting;
    expect(fake.state.queries).toBe(0);
    expect(fake.state.recorded.size).toBe(recorded);
  });

  it('does not query before the microtask, then resolves as soon as the stream is done', async () => {
    const s = stream();
    const waiting = waitForStream(s);
    expect(fake.state.queries).toBe(0); // other tasks issue their work first
    fake.state.done.add(s.handle);
    useClock.value += 3; // buffer uses issued before the wait
    const issued = useClock.value;
    await waiting;
    expect(fake.state.queries).toBe(1);
    expect(fake.state.recorded.size).toBe(0); // no event needed for a short wait
    // The query found the stream idle: every use stamped so far is known complete.
    expect(s.completedThrough).toBe(issued);
  });

  it('rejects with a CudaError naming the failure found while spinning', async () => {
    const s = stream();
    fake.state.failing.set(s.handle, 700);
    await expect(waitForStream(s)).rejects.toMatchObject({
      name: 'CudaError',
      status: 'CUDA_ERROR_ILLEGAL_ADDRESS',
      call: 'cuStreamQuery',
    });
  });

  it('after the spin, polls an event each turn and resolves when the work is done', async () => {
    // The polling phase lasts 2 ms of real time; a loaded machine can spend that between two
    // turns. Hold the clock still so that this test sees the polling phase only.
    const frozen = performance.now();
    const clock = vi.spyOn(performance, 'now').mockReturnValue(frozen);
    onTestFinished(() => clock.mockRestore());
    const s = stream();
    let resolved = false;
    const waiting = waitForStream(s).then(() => {
      resolved = true;
    });
    await turn();
    await turn();
    expect(fake.state.queries).toBe(SPIN_QUERIES);
    expect([...fake.state.recorded.values()]).toContain(s.handle);
    expect(pendingWaits().polled).toBe(1);
    expect(resolved).toBe(false);
    const recordedAt = useClock.value;
    useClock.value += 2; // uses after the event was recorded are not covered by it
    fake.state.done.add(s.handle);
    await waiting;
    expect(fake.state.blockingCalls).toBe(0); // done within the 2 ms polling phase
    expect(s.completedThrough).toBe(recordedAt);
  });

  it('moves long waits off the main thread, at most MAX_BLOCKING_WAITS at once', async () => {
    pollingWindowForTest(2);
    const streams = Array.from({ length: MAX_BLOCKING_WAITS + 3 }, stream);
    const waiting = Promise.all(streams.map((s) => waitForStream(s)));
    await sleep(50);
    expect(fake.state.blockingCalls).toBe(MAX_BLOCKING_WAITS);
    expect(pendingWaits()).toEqual({ blocking: MAX_BLOCKING_WAITS, polled: 3 });
    // The polled ones complete on their own, without waiting for the blocking ones.
    for (const s of streams)
      if (!fake.state.blockingStreams.has(s.handle)) fake.state.done.add(s.handle);
    await sleep(50);
    expect(pendingWaits().polled).toBe(0);
    for (const s of streams) fake.state.done.add(s.handle);
    for (const finish of fake.state.blockingCallbacks.splice(0)) finish();
    await waiting;
    expect(pendingWaits()).toEqual({ blocking: 0, polled: 0 });
  });

  it('caps the spinning of all waiters in one turn of the event loop', async () => {
    const streams = Array.from({ length: 10 }, stream);
    const waiting = Promise.all(streams.map((s) => waitForStream(s)));
    await Promise.resolve();
    await Promise.resolve();
    // The microtasks of this turn have run: no more than the per-turn budget was spent.
    expect(fake.state.queries).toBeLessThanOrEqual(SPIN_BUDGET_PER_TURN);
    expect(fake.state.queries).toBeGreaterThan(0);
    for (const s of streams) fake.state.done.add(s.handle);
    await waiting;
  });

  describe('with a signal', () => {
    it('an already-aborted signal rejects with its reason before any query', async () => {
      const s = stream();
      const reason = new Error('gone');
      await expect(waitForStream(s, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
      expect(fake.state.queries).toBe(0);
    });

    it('rejects at once when the signal aborts while polling, and stops polling', async () => {
      const frozen = performance.now();
      const clock = vi.spyOn(performance, 'now').mockReturnValue(frozen);
      onTestFinished(() => clock.mockRestore());
      const s = stream();
      const controller = new AbortController();
      let outcome: unknown;
      const waiting = waitForStream(s, { signal: controller.signal }).catch((error) => {
        outcome = error;
      });
      await turn();
      await turn();
      expect(pendingWaits().polled).toBe(1);
      controller.abort();
      await waiting;
      // No reason given: an AbortError DOMException, as AbortController makes it.
      expect(outcome).toBeInstanceOf(DOMException);
      expect((outcome as DOMException).name).toBe('AbortError');
      expect(outcome).toBe(controller.signal.reason);
      const polls = fake.state.eventQueries;
      await turn();
      await turn();
      expect(pendingWaits().polled).toBe(0);
      expect(fake.state.eventQueries).toBe(polls);
      // The stream is not marked complete: its work was never seen to finish.
      expect(s.completedThrough).toBe(0);
    });

    it('rejects at once while a worker thread waits, and the worker ends with the work', async () => {
      pollingWindowForTest(2);
      const s = stream();
      const controller = new AbortController();
      const reason = new Error('client went away');
      const waiting = waitForStream(s, { signal: controller.signal });
      await sleep(20);
      expect(pendingWaits().blocking).toBe(1);
      const start = performance.now();
      controller.abort(reason);
      await expect(waiting).rejects.toBe(reason);
      expect(performance.now() - start).toBeLessThan(20);
      // The blocking call cannot be recalled: it returns when the GPU work does.
      expect(pendingWaits().blocking).toBe(1);
      fake.state.done.add(s.handle);
      for (const finish of fake.state.blockingCallbacks.splice(0)) finish();
      expect(pendingWaits().blocking).toBe(0);
    });

    it('resolves as usual when the work finishes first, and leaves no listener behind', async () => {
      const s = stream();
      const controller = new AbortController();
      const added = vi.spyOn(controller.signal, 'addEventListener');
      const removed = vi.spyOn(controller.signal, 'removeEventListener');
      fake.state.done.add(s.handle);
      await waitForStream(s, { signal: controller.signal });
      expect(added).toHaveBeenCalledTimes(1);
      expect(removed).toHaveBeenCalledWith('abort', added.mock.calls[0]![1]);
      controller.abort(); // too late to matter
    });

    it('an abort during the spin phase drops the waiter before it records an event', async () => {
      const s = stream();
      const controller = new AbortController();
      const waiting = waitForStream(s, { signal: controller.signal });
      controller.abort(); // before the microtask that would spin
      await expect(waiting).rejects.toBe(controller.signal.reason);
      await turn();
      expect(fake.state.queries).toBe(0);
      expect([...fake.state.recorded.values()]).not.toContain(s.handle);
    });
  });
});

describe('the polling window', () => {
  /**
   * A clock the test moves by hand, from a whole millisecond, so that steps exact in binary
   * (9.75 + 0.25) reach a window's edge exactly rather than a rounding off it.
   */
  function handClock(): { advance(ms: number): void } {
    let now = Math.floor(performance.now());
    const clock = vi.spyOn(performance, 'now').mockImplementation(() => now);
    onTestFinished(() => clock.mockRestore());
    return {
      advance(ms) {
        now += ms;
      },
    };
  }

  it('is 20 ms by default; setPollingWindow returns the previous window', () => {
    expect(DEFAULT_POLLING_WINDOW_MS).toBe(20);
    expect(pollingWindow()).toBe(DEFAULT_POLLING_WINDOW_MS);
    expect(setPollingWindow(5)).toBe(DEFAULT_POLLING_WINDOW_MS);
    expect(pollingWindow()).toBe(5);
    expect(setPollingWindow(Infinity)).toBe(5);
    expect(setPollingWindow(DEFAULT_POLLING_WINDOW_MS)).toBe(Infinity);
  });

  it.each([
    [-1, '-1'],
    [Number.NaN, 'NaN'],
    ['5', '5'],
    [undefined, 'undefined'],
  ])('rejects %s with a CudaArgumentError and keeps the window', (ms, shown) => {
    expect(() => setPollingWindow(ms as number)).toThrow(CudaArgumentError);
    expect(() => setPollingWindow(ms as number)).toThrow(
      `setPollingWindow: ms must be a number >= 0 (Infinity: always poll), got ${shown}`,
    );
    expect(pollingWindow()).toBe(DEFAULT_POLLING_WINDOW_MS);
  });

  it('a wait is polled on the event loop until the window has passed, then sleeps on a worker', async () => {
    const clock = handClock();
    pollingWindowForTest(10);
    const s = stream();
    const waiting = waitForStream(s);
    await turn();
    await turn();
    expect(pendingWaits()).toEqual({ blocking: 0, polled: 1 });
    clock.advance(9.75);
    const polls = fake.state.eventQueries;
    await turn();
    await turn();
    // Still inside the window: polled each turn, no worker.
    expect(fake.state.eventQueries).toBeGreaterThan(polls);
    expect(pendingWaits()).toEqual({ blocking: 0, polled: 1 });
    expect(fake.state.blockingCalls).toBe(0);
    clock.advance(0.25);
    await turn();
    await turn();
    expect(pendingWaits()).toEqual({ blocking: 1, polled: 0 });
    expect(fake.state.blockingCalls).toBe(1);
    fake.state.done.add(s.handle);
    for (const finish of fake.state.blockingCallbacks.splice(0)) finish();
    await waiting;
  });

  it('Infinity polls for as long as the wait lasts; 0 sleeps right after the spin', async () => {
    const clock = handClock();
    pollingWindowForTest(Infinity);
    const polledOnly = stream();
    const waitingPolled = waitForStream(polledOnly);
    await turn();
    await turn();
    clock.advance(3_600_000);
    await turn();
    await turn();
    expect(pendingWaits()).toEqual({ blocking: 0, polled: 1 });
    fake.state.done.add(polledOnly.handle);
    await waitingPolled;
    expect(fake.state.blockingCalls).toBe(0);

    setPollingWindow(0);
    const sleeper = stream();
    const waitingSleeper = waitForStream(sleeper);
    await turn();
    await turn();
    await sleep(5); // out of the window: the next poll is a 1 ms timer
    expect(pendingWaits()).toEqual({ blocking: 1, polled: 0 });
    fake.state.done.add(sleeper.handle);
    for (const finish of fake.state.blockingCallbacks.splice(0)) finish();
    await waitingSleeper;
  });
});

describe('the round-robin spin', () => {
  const queriesOf = (s: Stream) => fake.state.queryLog.filter((h) => h === s.handle).length;

  it('queries each waiting stream once per round: a stream done early resolves at once', async () => {
    const [first, second] = [stream(), stream()];
    let firstResolved = false;
    const waitingFirst = waitForStream(first).then(() => {
      firstResolved = true;
    });
    fake.state.done.add(second.handle);
    await waitForStream(second);
    // One query of each, not the first's whole spin of SPIN_QUERIES.
    expect(fake.state.queryLog).toEqual([first.handle, second.handle]);
    expect(firstResolved).toBe(false);
    fake.state.done.add(first.handle);
    await waitingFirst;
  });

  it("runs a resolved waiter's continuation before the next round", async () => {
    const [busy, quick, next] = [stream(), stream(), stream()];
    fake.state.done.add(quick.handle);
    fake.state.done.add(next.handle);
    const waitingBusy = waitForStream(busy);
    // The continuation issues the next wait; it joins the very next round.
    await waitForStream(quick).then(() => waitForStream(next));
    // (The test itself resumes a few microtasks later: more rounds on busy may follow.)
    expect(fake.state.queryLog.slice(0, 4)).toEqual([
      busy.handle,
      quick.handle,
      busy.handle,
      next.handle,
    ]);
    fake.state.done.add(busy.handle);
    await waitingBusy;
  });

  it("waits for the next turn when the turn's shared time budget is used up (task starts, other work)", async () => {
    // A clock of the test's own: on a loaded machine a real one can pass the budget between two
    // lines of the next turn too.
    let now = performance.now();
    const clock = vi.spyOn(performance, 'now').mockImplementation(() => now);
    onTestFinished(() => clock.mockRestore());
    await turn(); // a fresh turn
    const spent = turnElapsed(); // the turn's clock starts here (0), as a task start starts it
    expect(spent).toBe(0);
    now += TURN_BUDGET_MS + 1; // a burst's starts (and a scavenge) held the turn
    expect(turnSpent()).toBe(true);
    const s = stream();
    const waiting = waitForStream(s);
    await Promise.resolve();
    await Promise.resolve();
    expect(fake.state.queries).toBe(0); // no spin pass in this turn
    await turn();
    expect(fake.state.queries).toBeGreaterThan(0); // the next turn spins
    expect(turnSpent()).toBe(false);
    fake.state.done.add(s.handle);
    await waiting;
  });

  it('spends at most the per-turn budget, shared evenly, and goes on in the next turn', async () => {
    const streams = Array.from({ length: 10 }, stream);
    const waiting = Promise.all(streams.map((s) => waitForStream(s)));
    // Queued before the spin began: runs after this turn's microtasks, before the budget resets.
    const firstTurn = await new Promise<number>((resolve) =>
      setImmediate(() => resolve(fake.state.queries)),
    );
    expect(firstTurn).toBe(SPIN_BUDGET_PER_TURN); // 10 waiters would spin 640 without the cap
    const counts = streams.map(queriesOf);
    const fair = Math.floor(SPIN_BUDGET_PER_TURN / streams.length);
    for (const count of counts) expect(count - fair).toBeGreaterThanOrEqual(0);
    for (const count of counts) expect(count - fair).toBeLessThanOrEqual(1);
    await turn();
    await turn();
    expect(fake.state.queries).toBeGreaterThan(SPIN_BUDGET_PER_TURN);
    for (const s of streams) fake.state.done.add(s.handle);
    await waiting;
  });

  it('moves each waiter to the polling phase after its own SPIN_QUERIES queries', async () => {
    const frozen = performance.now();
    const clock = vi.spyOn(performance, 'now').mockReturnValue(frozen);
    onTestFinished(() => clock.mockRestore());
    const [first, second] = [stream(), stream()];
    const waiting = Promise.all([waitForStream(first), waitForStream(second)]);
    await turn();
    await turn();
    expect(queriesOf(first)).toBe(SPIN_QUERIES);
    expect(queriesOf(second)).toBe(SPIN_QUERIES);
    expect(fake.state.queries).toBe(2 * SPIN_QUERIES); // the spin stopped: no query after
    // An event recorded on each (events are reused across tests: the streams are new).
    expect([...fake.state.recorded.values()]).toEqual(
      expect.arrayContaining([first.handle, second.handle]),
    );
    expect(pendingWaits().polled).toBe(2);
    fake.state.done.add(first.handle);
    fake.state.done.add(second.handle);
    await waiting;
    expect(pendingWaits().polled).toBe(0);
  });

  it('one pending stream is queried back to back, SPIN_QUERIES_PER_PASS queries per microtask', async () => {
    const s = stream();
    const waiting = waitForStream(s);
    // The spin's microtask was queued by the wait, this continuation after it.
    await Promise.resolve();
    expect(fake.state.queries).toBe(SPIN_QUERIES_PER_PASS);
    await Promise.resolve();
    expect(fake.state.queries).toBe(2 * SPIN_QUERIES_PER_PASS);
    fake.state.done.add(s.handle);
    await waiting;
    expect(fake.state.queries).toBeLessThanOrEqual(3 * SPIN_QUERIES_PER_PASS);
  });

  it('many pending streams get one round per microtask', async () => {
    const streams = Array.from({ length: SPIN_QUERIES_PER_PASS + 2 }, stream);
    const waiting = Promise.all(streams.map((s) => waitForStream(s)));
    await Promise.resolve();
    expect(fake.state.queryLog).toEqual(streams.map((s) => s.handle));
    for (const s of streams) fake.state.done.add(s.handle);
    await waiting;
  });

  it('a round that finds a stream done ends the microtask: the next round comes after its continuation', async () => {
    const [busy, quick] = [stream(), stream()];
    const waitingBusy = waitForStream(busy);
    const waitingQuick = waitForStream(quick);
    let queriesAtContinuation = -1;
    const continued = waitingQuick.then(() => {
      queriesAtContinuation = fake.state.queries;
    });
    // Found done by the third round's query: rounds 1 and 2 ran back to back (nothing settled).
    let rounds = 0;
    const query = fake.api.cuStreamQuery;
    fake.api.cuStreamQuery = (handle: bigint) => {
      if (handle === quick.handle && ++rounds === 3) fake.state.done.add(quick.handle);
      return query(handle);
    };
    onTestFinished(() => {
      fake.api.cuStreamQuery = query;
    });
    await continued;
    expect(queriesAtContinuation).toBe(6); // three rounds of two; none after the settling one
    expect(fake.state.queryLog.slice(0, 6)).toEqual([
      busy.handle,
      quick.handle,
      busy.handle,
      quick.handle,
      busy.handle,
      quick.handle,
    ]);
    fake.state.done.add(busy.handle);
    await waitingBusy;
  });

  it('a waiter record reused after its wait settled serves its next wait only', async () => {
    // Settled waits give their records back; the next waits take them.
    const done = Array.from({ length: 4 }, stream);
    for (const s of done) fake.state.done.add(s.handle);
    await Promise.all(done.map((s) => waitForStream(s)));
    const failing = stream();
    fake.state.failing.set(failing.handle, 700);
    await expect(waitForStream(failing)).rejects.toMatchObject({ call: 'cuStreamQuery' });
    const [busy, other] = [stream(), stream()];
    let busyResolved = false;
    const waitingBusy = waitForStream(busy).then(() => {
      busyResolved = true;
    });
    fake.state.done.add(other.handle);
    await waitForStream(other);
    await Promise.resolve();
    expect(busyResolved).toBe(false);
    fake.state.done.add(busy.handle);
    await waitingBusy;
    expect(busyResolved).toBe(true);
    expect(busy.completedThrough).toBe(useClock.value);
  });

  it('a failure rejects only its own waiter; the others go on spinning', async () => {
    const [failing, busy] = [stream(), stream()];
    fake.state.failing.set(failing.handle, 700);
    let busyResolved = false;
    const waitingBusy = waitForStream(busy).then(() => {
      busyResolved = true;
    });
    await expect(waitForStream(failing)).rejects.toMatchObject({
      status: 'CUDA_ERROR_ILLEGAL_ADDRESS',
      call: 'cuStreamQuery',
    });
    expect(queriesOf(failing)).toBe(1);
    expect(busyResolved).toBe(false);
    const before = queriesOf(busy);
    await Promise.resolve();
    await Promise.resolve();
    expect(queriesOf(busy)).toBeGreaterThan(before);
    fake.state.done.add(busy.handle);
    await waitingBusy;
    expect(busyResolved).toBe(true);
  });
});

describe('waitForStream with the issue engine', () => {
  it('launches not issued yet are waited for without queries and without using the waiter’s spins', async () => {
    const s = stream();
    fake.state.done.add(s.handle);
    let checks = 0;
    let issuedAfter = 3 * SPIN_QUERIES;
    (s as unknown as { issue: unknown }).issue = {
      pending: () => ++checks <= issuedAfter,
      failure: () => null,
      takeError: () => null,
    };
    const recordedBefore = fake.state.recorded.size;
    await waitForStream(s);
    // Every check while pending found it pending; then one query found the stream done.
    expect(checks).toBeGreaterThan(issuedAfter);
    expect(fake.state.queryLog.filter((h) => h === s.handle)).toHaveLength(1);
    // It never moved to the polling phase (no event recorded) though it checked > SPIN_QUERIES times.
    expect(fake.state.recorded.size).toBe(recordedBefore);
    issuedAfter = 0;
  });

  it('a launch the driver refused on an issuer, or a failed engine, rejects the wait', async () => {
    const refused = stream();
    const error = new Error('cuLaunchKernel(k) refused');
    (refused as unknown as { issue: unknown }).issue = {
      pending: () => false,
      failure: () => null,
      takeError: () => error,
    };
    await expect(waitForStream(refused)).rejects.toBe(error);
    const stalled = stream();
    const gone = new Error('an issuer thread exited');
    (stalled as unknown as { issue: unknown }).issue = {
      pending: () => true,
      failure: () => gone,
      takeError: () => null,
    };
    await expect(waitForStream(stalled)).rejects.toBe(gone);
  });
});
