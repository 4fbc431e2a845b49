import { Stream } from '@cuda-tasks/cudadrv';
import { stream, task, withStream } from '@cuda-tasks/task-runtime';
import {
  barrier,
  describeGpu,
  diagonallyDominant,
  Rng,
  randomMatrix,
  relativeResidual,
} from '@cuda-tasks/testing';
import { expect, it } from 'vitest';
import { download, upload } from '../test/device.js';
import { cusolver } from './ffi/index.js';
import { handle, handles, solve, version } from './index.js';

/** The stream a cusolverDn handle is bound to, asked from cuSOLVER itself. */
function boundStream(h: bigint): bigint | null {
  const out: (bigint | null)[] = [null];
  expect(cusolver().cusolverDnGetStream(h, out)).toBe(0);
  return out[0] ?? null;
}

describeGpu('cusolverDn handles follow the task stream', () => {
  it('reports the library version', () => {
    const v = version();
    expect(v).toBeGreaterThanOrEqual(11000);
    expect(v).toBeLessThan(100000);
  });

  it('rebinds the task handle when the task switches streams (withStream)', async () => {
    await task(async () => {
      const h = handle();
      expect(boundStream(h)).toBe(stream().handle);
      const s2 = Stream.create({ name: 'cusolver-test' });
      try {
        withStream(s2, () => {
          const inner = handle();
          expect(inner).toBe(h); // one lease per task and context
          expect(boundStream(inner)).toBe(s2.handle);
          expect(handles.boundStream(inner)).toBe(s2);
        });
        expect(boundStream(handle())).toBe(stream().handle);
        // A solver call inside withStream runs on s2 with the handle bound there, and is right.
        const n = 64;
        const rng = new Rng(61);
        const { array: a, host: hostA } = upload('float64', diagonallyDominant(rng, n), [n, n]);
        const { array: b, host: hostB } = upload('float64', randomMatrix(rng, n, 2), [n, 2]);
        const x = await withStream(s2, async () => {
          const result = await solve(a, b);
          expect(boundStream(handle())).toBe(s2.handle);
          return result;
        });
        expect(boundStream(h)).toBe(s2.handle);
        expect(relativeResidual(hostA, await download(x), hostB, n, 2)).toBeLessThan(1e-12);
        for (const array of [a, b, x]) array.dispose();
      } finally {
        handle(); // bind back to the task's stream before s2 goes away
        s2.dispose();
      }
    });
  });

  it('an explicit { stream } binds the handle to that stream', async () => {
    await task(async () => {
      const s2 = Stream.create();
      try {
        const n = 32;
        const rng = new Rng(62);
        const { array: a, host: hostA } = upload('float64', diagonallyDominant(rng, n), [n, n]);
        const { array: b, host: hostB } = upload('float64', randomMatrix(rng, n, 1), [n, 1]);
        const x = await solve(a, b, { stream: s2 });
        expect(boundStream(handle(s2))).toBe(s2.handle);
        expect(relativeResidual(hostA, await download(x), hostB, n, 1)).toBeLessThan(1e-12);
        for (const array of [a, b, x]) array.dispose();
      } finally {
        handle(); // bind back to the task's stream before s2 goes away
        s2.dispose();
      }
    });
  });

  it('concurrent tasks get distinct handles on distinct streams and correct results', async () => {
    const n = 128;
    const arrive = barrier(4);
    const results = await Promise.all(
      Array.from({ length: 4 }, (_, t) =>
        task(async () => {
          const h = handle();
          const own = stream().handle;
          await arrive(); // all four hold their handles at once (starts may span turns)
          const rng = new Rng(70 + t);
          const { array: a, host: hostA } = upload('float32', diagonallyDominant(rng, n), [n, n]);
          const { array: b, host: hostB } = upload('float32', randomMatrix(rng, n, 2), [n, 2]);
          const x = await solve(a, b);
          const residual = relativeResidual(hostA, await download(x), hostB, n, 2);
          const bound = boundStream(h);
          for (const array of [a, b, x]) array.dispose();
          return { h, own, bound, residual };
        }),
      ),
    );
    expect(new Set(results.map((r) => r.h)).size).toBe(4);
    expect(new Set(results.map((r) => r.own)).size).toBe(4);
    for (const r of results) {
      expect(r.bound).toBe(r.own);
      expect(r.residual).toBeLessThan(1e-5);
    }
  });
});
