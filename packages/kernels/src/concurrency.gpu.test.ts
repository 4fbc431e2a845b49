import type { DeviceArray } from '@cuda-tasks/cudadrv';
import { stream, synchronize, task } from '@cuda-tasks/task-runtime';
import { barrier, describeGpu } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';
import { randomArray } from '../test/reference.js';
import { elementwise } from './elementwise.js';
import { map, mul } from './ops.js';
import { argmax, sum } from './reductions.js';
import { topk } from './topk.js';

// Four tasks at once, each on its own stream, each running element-wise kernels, reductions
// and topk on its own data: every task's results equal the same work done alone beforehand
// (bit for bit: the kernels are deterministic), and the tasks ran on four different streams.

async function pipeline(x: DeviceArray<'float32'>) {
  const scaled = elementwise('x: T, s: T -> y: T', 'y = x * s');
  const y = map(scaled(x, 3) as DeviceArray<'float32'>, 'sin');
  const z = mul(y, y);
  const total = sum(z);
  const rowMax = argmax(z.reshape([1000, z.length / 1000]), { axis: 1 });
  const best = topk(z, 50);
  const values = await Promise.all([
    total.toHost(),
    rowMax.toHost(),
    best.values.toHost(),
    best.indices.toHost(),
    z.toHost(),
  ]);
  for (const array of [y, z, total, rowMax, best.values, best.indices]) array.dispose();
  return values.map((v) => Array.from(v as ArrayLike<number>));
}

describeGpu('kernels in concurrent tasks', () => {
  it('4 tasks on 4 streams give the results each gives alone', async () => {
    const inputs = [0, 1, 2, 3].map(
      (i) => randomArray('float32', [1_000_000], 100 + i).array as DeviceArray<'float32'>,
    );
    const alone: number[][][] = [];
    for (const x of inputs) alone.push(await task(() => pipeline(x)));
    const streams = new Set<unknown>();
    const arrive = barrier(inputs.length); // all four alive at once (starts may span turns)
    const together = await Promise.all(
      inputs.map((x) =>
        task(async () => {
          streams.add(stream());
          await arrive();
          const result = await pipeline(x);
          await synchronize();
          return result;
        }),
      ),
    );
    expect(streams.size).toBe(4);
    for (let i = 0; i < inputs.length; i++) expect(together[i]).toEqual(alone[i]);
    // The tasks' inputs differ, so their results do too (a mix-up would show).
    expect(together[0]![0]).not.toEqual(together[1]![0]);
    for (const x of inputs) x.dispose();
  });
});
