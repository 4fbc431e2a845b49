/**
 * cuRAND's generator offset, and `handle()` (the current task's default generator for raw
 * `@cuda-tasks/curand/ffi` calls).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DeviceArray, type Kernel, launch, Module } from '@cuda-tasks/cudadrv';
import { curand } from '@cuda-tasks/curand/ffi';
import { stream, synchronize, task } from '@cuda-tasks/task-runtime';
import { describeGpu } from '@cuda-tasks/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { check, Generator, type GeneratorKind, handle, rand, setDefaultSeed } from './index.js';

const ptxPath = fileURLToPath(new URL('../../cudadrv/test/fixtures/kernels.ptx', import.meta.url));

const N = 20_000;
const SEED = 1234;

async function uniform(kind: GeneratorKind, offset?: number | bigint): Promise<Float32Array> {
  using generator = new Generator(
    offset === undefined ? { kind, seed: SEED } : { kind, seed: SEED, offset },
  );
  using x = DeviceArray.empty('float32', N);
  return (await generator.uniform(x).toHost()) as Float32Array;
}

/** The first index where the two differ, or -1. */
function firstDifference(a: ArrayLike<number>, b: ArrayLike<number>, length: number): number {
  for (let i = 0; i < length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

describeGpu('cuRAND generator offset', () => {
  // cuRAND docs (Generator options, Offset): for pseudorandom generators the offset skips
  // ahead in the sequence, "if offset = 100, the first random number generated will be the
  // 100th in the sequence". With the default ordering and 32-bit uniform floats (one value
  // per 32-bit draw) this is an exact shift of the no-offset output: offset k gives
  // base[k], base[k + 1], ... The relation was checked for Philox, XORWOW and MRG32k3a
  // through cuRAND's host API on an H200 (CUDA 13) for offsets 1 to 12345 (including ones
  // that are not multiples of Philox's 4-value blocks and XORWOW's 4096-thread layout)
  // before it was written down here.
  for (const kind of ['philox', 'curand-philox', 'xorwow', 'mrg32k3a'] as const) {
    it(`${kind}: same seed and offset repeat, offset 0 is no offset, offset k shifts by k`, async () => {
      const base = await uniform(kind);
      expect(firstDifference(await uniform(kind, 0), base, N)).toBe(-1);
      expect(firstDifference(await uniform(kind, 0n), base, N)).toBe(-1);
      for (const k of [1, 3, 4, 5, 1000, 4097]) {
        const shifted = await uniform(kind, k);
        expect(firstDifference(await uniform(kind, BigInt(k)), shifted, N)).toBe(-1);
        // shifted[i] === base[i + k] for every i with i + k < N.
        expect(firstDifference(shifted, base.subarray(k), N - k)).toBe(-1);
        // And not the unshifted sequence (the shift is real).
        expect(firstDifference(shifted, base, N)).not.toBe(-1);
      }
    });
  }
});

describeGpu('curand handle(): the task default generator for raw ffi calls', () => {
  let spin: Kernel;
  beforeAll(() => {
    spin = Module.fromPtx(readFileSync(ptxPath, 'utf8')).kernel('spin_ns', ['uint64']);
  });
  afterAll(() => setDefaultSeed());

  it('is non-zero, stable within a task, and differs between two concurrent tasks', async () => {
    let arrived = 0;
    let release!: () => void;
    const bothHoldOne = new Promise<void>((resolve) => {
      release = resolve;
    });
    const [first, second] = await Promise.all(
      [0, 1].map(() =>
        task(async () => {
          const h = handle();
          expect(handle()).toBe(h);
          // Keep both tasks alive (each holding its generator) until both have one.
          if (++arrived === 2) release();
          await bothHoldOne;
          await synchronize();
          expect(handle()).toBe(h);
          expect(handle(stream())).toBe(h);
          return h;
        }),
      ),
    );
    expect(typeof first).toBe('bigint');
    expect(first).not.toBe(0n);
    expect(second).not.toBe(0n);
    expect(first).not.toBe(second);
  });

  it("generates through the raw ffi on the task's stream, the default generator's numbers", async () => {
    const n = 4096;
    setDefaultSeed(77);
    const raw = await task(async () => {
      const s = stream();
      using x = DeviceArray.empty('float32', n);
      // On the task's stream: 30 ms of spinning, then x = -1, then the raw generation. Bound
      // to the task's stream, the generation runs after the fill; bound to any other stream it
      // would run at once and the fill would overwrite it with -1.
      launch(spin, { grid: 1, block: 1 }, 30_000_000);
      x.fill(-1);
      check(curand().curandGenerateUniform(handle(), x.useOn(s), n), 'curandGenerateUniform');
      return await x.toHost();
    });
    let bad = -1;
    for (let i = 0; i < n && bad < 0; i++) if (!(raw[i]! > 0 && raw[i]! <= 1)) bad = i;
    expect(bad < 0 ? 'all in (0, 1]' : `element ${bad} is ${raw[bad]}`).toBe('all in (0, 1]');
    // handle() is the task's cuRAND generator, not the counter-based one rand() draws from:
    // under the same default seed their numbers differ.
    setDefaultSeed(77);
    const counterBased = await task(async () => {
      using y = rand('float32', n);
      return await y.toHost();
    });
    expect(firstDifference(raw, counterBased, n)).not.toBe(-1);
  });
});
