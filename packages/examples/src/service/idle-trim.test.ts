/**
 * Trimming the pool once the GPU is idle: the scheduling of `IdleTrim` (no trim while work runs,
 * one per idle period, what is kept), and the service's use of it through real sockets with a
 * stand-in pool.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { TaskOptions } from '@cuda-tasks/task-runtime';
import { describe, expect, it } from 'vitest';
import { IdleTrim, type TrimmablePool } from './idle-trim.js';
import { createServer } from './server.js';

const MiB = 2 ** 20;

/** A stand-in pool: records each trim with when it came and the bytes kept. */
function fakePool(usedBytes: number) {
  const trims: { keep: number; at: number }[] = [];
  const pool: TrimmablePool = {
    statistics: () => ({ usedBytes }),
    trim: (keep) => {
      trims.push({ keep, at: performance.now() });
    },
  };
  return { pool, trims };
}

describe('IdleTrim', () => {
  it('trims once, idleMs after the last work ended, keeping used + headroom', async () => {
    const { pool, trims } = fakePool(48 * MiB);
    const idle = new IdleTrim(() => pool, { idleMs: 100, headroomBytes: 256 * MiB });
    const endA = idle.begin();
    const endB = idle.begin();
    endA();
    await sleep(150);
    expect(trims).toEqual([]); // B still runs
    expect(idle.scheduled).toBe(false);
    const ended = performance.now();
    endB();
    endB(); // a second call changes nothing
    expect(idle.inFlight).toBe(0);
    expect(idle.scheduled).toBe(true);
    await sleep(250);
    expect(trims).toHaveLength(1);
    expect(trims[0]!.keep).toBe(48 * MiB + 256 * MiB);
    expect(trims[0]!.at - ended).toBeGreaterThanOrEqual(95);
    await sleep(200);
    expect(trims).toHaveLength(1); // once per idle period
    idle.stop();
  });

  it('work that begins before the idle time is up cancels the trim', async () => {
    const { pool, trims } = fakePool(0);
    const idle = new IdleTrim(() => pool, { idleMs: 100 });
    idle.begin()();
    await sleep(50);
    const end = idle.begin();
    await sleep(150);
    expect(trims).toEqual([]);
    end();
    await sleep(150);
    expect(trims.map((trim) => trim.keep)).toEqual([256 * MiB]);
    idle.stop();
  });

  it('stop() cancels a scheduled trim; no pool means no trim; a failing trim goes to onError', async () => {
    const { pool, trims } = fakePool(0);
    const stopped = new IdleTrim(() => pool, { idleMs: 20 });
    stopped.begin()();
    stopped.stop();
    const none = new IdleTrim(() => undefined, { idleMs: 20 });
    none.begin()();
    const errors: unknown[] = [];
    const failing = new IdleTrim(
      () => ({
        statistics: () => ({ usedBytes: 0 }),
        trim: () => {
          throw new Error('sticky');
        },
      }),
      { idleMs: 20 },
      (error) => errors.push(error),
    );
    failing.begin()();
    await sleep(100);
    expect(trims).toEqual([]);
    expect(none.trims).toBe(0);
    expect(errors).toHaveLength(1);
    expect(() => new IdleTrim(() => pool, { idleMs: -1 })).toThrow(RangeError);
    expect(() => new IdleTrim(() => pool, { headroomBytes: Number.NaN })).toThrow(RangeError);
  });
});

describe('the service trims the pool once idle after load', () => {
  it('no trim while requests run; one about idleMs after the last; none after shutdown', async () => {
    const { pool, trims } = fakePool(10 * MiB);
    const runTask = async (_work: () => Promise<unknown>, options: TaskOptions) => {
      await sleep(100);
      return { ran: options.name };
    };
    const service = createServer({
      checkGpu: () => ({ usable: true, devices: 1 }),
      runTask,
      idleTrim: { idleMs: 150, headroomBytes: MiB, pool },
    });
    await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
    const { port } = service.address() as { port: number };
    const post = (seed: number) =>
      fetch(`http://127.0.0.1:${port}/solve-random`, {
        method: 'POST',
        body: JSON.stringify({ n: 8, seed }),
      }).then((response) => response.status);
    try {
      // Three waves, each starting before the last one's idle time is up.
      for (let wave = 0; wave < 3; wave++) {
        expect(await Promise.all([post(wave), post(wave + 10)])).toEqual([200, 200]);
        expect(trims).toEqual([]);
        await sleep(50);
      }
      const last = performance.now() - 50;
      await sleep(300);
      expect(trims).toHaveLength(1);
      expect(trims[0]!.keep).toBe(11 * MiB);
      expect(trims[0]!.at - last).toBeGreaterThanOrEqual(140);
      // GET routes run no GPU work: no trim scheduled by them.
      await fetch(`http://127.0.0.1:${port}/health`);
      await sleep(250);
      expect(trims).toHaveLength(1);
      expect(await post(99)).toBe(200);
    } finally {
      await service.shutdown({ graceMs: 0 });
    }
    await sleep(250);
    expect(trims).toHaveLength(1); // stopped at shutdown
  });
});
