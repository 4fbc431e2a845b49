import { describe, expect, it } from 'vitest';
import { Admission } from './admission.js';

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
