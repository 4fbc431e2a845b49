import { describe, expect, it } from 'vitest';
import { Admission, AdmissionRefused } from './admission.js';

/** Lets every settled promise's reactions run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('Admission: a bound on requests running at once', () => {
  it('grants up to the limit at once; the others wait and get slots in arrival order', async () => {
    const gate = new Admission(2);
    const granted: number[] = [];
    const requests = Array.from({ length: 6 }, (_, i) =>
      gate.acquire().then(() => granted.push(i)),
    );
    await settle();
    expect(granted).toEqual([0, 1]);
    expect(gate.holders).toBe(2);
    expect(gate.waiting).toBe(4);
    for (let step = 0; step < 4; step++) {
      gate.release();
      await settle();
      expect(granted).toEqual([0, 1, 2, 3, 4, 5].slice(0, 3 + step));
      expect(gate.holders).toBe(2);
    }
    gate.release();
    gate.release();
    await Promise.all(requests);
    expect(gate.holders).toBe(0);
    expect(gate.waiting).toBe(0);
  });

  it('a newcomer does not pass requests already waiting, even when a slot frees', async () => {
    const gate = new Admission(1);
    const order: string[] = [];
    await gate.acquire();
    const first = gate.acquire().then(() => order.push('first'));
    gate.release(); // the slot goes to `first`, not to the pool
    const second = gate.acquire().then(() => order.push('second'));
    await first;
    gate.release();
    await second;
    expect(order).toEqual(['first', 'second']);
  });

  it('an aborted waiter leaves the line with the reason; its turn goes to the next', async () => {
    const gate = new Admission(1);
    await gate.acquire();
    const controller = new AbortController();
    const leaving = gate.acquire(controller.signal);
    let next = false;
    const staying = gate.acquire().then(() => {
      next = true;
    });
    const reason = new Error('client left');
    controller.abort(reason);
    await expect(leaving).rejects.toBe(reason);
    expect(gate.waiting).toBe(1);
    gate.release();
    await staying;
    expect(next).toBe(true);
    expect(gate.holders).toBe(1);
  });

  it('an already aborted signal is refused without taking a slot', async () => {
    const gate = new Admission(1);
    const reason = new Error('deadline');
    await expect(gate.acquire(AbortSignal.abort(reason))).rejects.toBe(reason);
    expect(gate.holders).toBe(0);
  });

  it('a long run of waiters keeps the order and the count (the line is compacted)', async () => {
    const gate = new Admission(3);
    const granted: number[] = [];
    const all: Promise<unknown>[] = [];
    for (let i = 0; i < 5000; i++) all.push(gate.acquire().then(() => granted.push(i)));
    await settle();
    for (let i = 0; i < 4997; i++) {
      gate.release();
      if (i % 500 === 0) await settle();
    }
    await Promise.all(all);
    expect(granted).toEqual(Array.from({ length: 5000 }, (_, i) => i));
    expect(gate.holders).toBe(3);
  });

  it('refuses a bad limit and a release without an acquire', () => {
    expect(() => new Admission(0)).toThrow(RangeError);
    expect(() => new Admission(1.5)).toThrow(RangeError);
    expect(() => new Admission(2).release()).toThrow(/without acquire/);
  });
});

describe('Admission in units: a bound on estimated bytes', () => {
  it('grants by units in arrival order; a large one at the head holds back smaller ones behind it', async () => {
    const gate = new Admission(100);
    const granted: string[] = [];
    const a = gate.acquire(undefined, 60).then(() => granted.push('a60'));
    const b = gate.acquire(undefined, 50).then(() => granted.push('b50'));
    const c = gate.acquire(undefined, 10).then(() => granted.push('c10'));
    await settle();
    expect(granted).toEqual(['a60']); // c would fit, but b is older
    expect(gate.holders).toBe(60);
    gate.release(60);
    await Promise.all([b, c]);
    expect(granted).toEqual(['a60', 'b50', 'c10']);
    expect(gate.holders).toBe(60);
    gate.release(50);
    gate.release(10);
    expect(gate.holders).toBe(0);
    await a;
  });

  it('more units than the limit count as the limit: such a request runs alone', async () => {
    const gate = new Admission(100);
    await gate.acquire(undefined, 1000);
    expect(gate.holders).toBe(100);
    gate.release(1000);
    expect(gate.holders).toBe(0);
  });

  it('a waiter that leaves lets the smaller ones behind it in', async () => {
    const gate = new Admission(100);
    await gate.acquire(undefined, 60);
    const controller = new AbortController();
    const big = gate.acquire(controller.signal, 50);
    let small = false;
    const behind = gate.acquire(undefined, 30).then(() => {
      small = true;
    });
    await settle();
    expect(small).toBe(false);
    controller.abort(new Error('left'));
    await expect(big).rejects.toThrow('left');
    await behind;
    expect(gate.holders).toBe(90);
  });

  it('a full line is refused at once; a wait past maxWaitMs is refused; neither takes units', async () => {
    const gate = new Admission(1, { maxWaiting: 1, maxWaitMs: 50 });
    await gate.acquire();
    // The wait's clock starts with its acquire (not after the checks below, which a loaded
    // machine may stretch): it is refused no sooner than maxWaitMs, less a timer's rounding.
    const started = performance.now();
    const waiting = gate.acquire();
    const full = gate.acquire();
    await expect(full).rejects.toBeInstanceOf(AdmissionRefused);
    await expect(full).rejects.toMatchObject({ kind: 'full' });
    await expect(waiting).rejects.toMatchObject({ kind: 'timeout' });
    expect(performance.now() - started).toBeGreaterThanOrEqual(48);
    expect(gate.waiting).toBe(0);
    expect(gate.holders).toBe(1);
    gate.release();
    expect(gate.holders).toBe(0);
  });
});
