import koffi from 'koffi';
import { describe, expect, it } from 'vitest';
import {
  AXPB_PARAMETERS,
  bareAxpbArguments,
  bareLaunchConfig,
  bareStreamWaiter,
} from '../src/bare.js';

describe('bareStreamWaiter', () => {
  it('queries the pending streams round-robin and settles each when its query returns 0', async () => {
    // Stream 1 is done at its 3rd query, stream 2 at its 1st, stream 3 fails at its 2nd.
    const answers = new Map<number, number[]>([
      [1, [600, 600, 0]],
      [2, [0]],
      [3, [600, 700]],
    ]);
    const log: number[] = [];
    const wait = bareStreamWaiter((stream) => {
      log.push(Number(stream));
      return answers.get(Number(stream))!.shift()!;
    });
    const settled: string[] = [];
    const waits = [1, 2, 3].map((stream) =>
      wait(stream).then(
        () => settled.push(`${stream} done`),
        (error: Error) => settled.push(`${stream} ${error.message}`),
      ),
    );
    await Promise.all(waits);
    // Round 1 queries all three and settles 2; round 2 (next microtask) settles 3; round 3, 1.
    expect(log).toEqual([1, 2, 3, 1, 3, 1]);
    expect(settled).toEqual(['2 done', '3 cuStreamQuery returned 700', '1 done']);
  });

  it('queries one pending stream back to back up to queriesPerPass times in one microtask', async () => {
    let queries = 0;
    const wait = bareStreamWaiter(() => (++queries >= 12 ? 0 : 600), 4);
    let done = false;
    const waited = wait(7).then(() => {
      done = true;
    });
    await Promise.resolve(); // the first pass: 4 queries, not done
    await Promise.resolve();
    expect(queries).toBeGreaterThanOrEqual(4);
    expect(queries % 4).toBe(0);
    expect(done).toBe(false);
    await waited;
    expect(queries).toBe(12);
  });
});

describe('bareLaunchConfig', () => {
  it('lays out a CUlaunchConfig as cuda.h does: grid, block, shared memory, stream, no attributes', () => {
    const stream = 0x7f00_1234_5678n;
    const pointer = bareLaunchConfig(stream, 256, 128);
    try {
      const view = koffi.view(pointer, 64);
      // gridDim x, y, z, blockDim x, y, z, sharedMemBytes (unsigned ints at bytes 0-24), then
      // hStream at byte 32, attrs at 40 and numAttrs at 48.
      expect([...new Uint32Array(view, 0, 7)]).toEqual([256, 1, 1, 128, 1, 1, 0]);
      const words = new BigUint64Array(view);
      expect(words[4]).toBe(stream);
      expect(words[5]).toBe(0n);
      expect(new Uint32Array(view)[12]).toBe(0);
    } finally {
      koffi.free(pointer);
    }
    const single = bareLaunchConfig(5n);
    try {
      expect([...new Uint32Array(koffi.view(single, 64), 0, 7)]).toEqual([1, 1, 1, 1, 1, 1, 0]);
    } finally {
      koffi.free(single);
    }
  });
});

describe('bareAxpbArguments', () => {
  it("points five void* at y, x, a, b and n, laid out as launch() marshals axpb_f32's parameters", () => {
    const y = 0x7f00_0000_1000n;
    const x = 0x7f00_0000_2000n;
    const pointer = bareAxpbArguments(y, x, 0.5, -2, 65_536);
    try {
      const view = koffi.view(pointer, 80);
      const words = new BigUint64Array(view);
      // The five slots follow the five pointers, 8 bytes each.
      expect([...words.slice(0, 5)]).toEqual(
        [0, 1, 2, 3, 4].map((i) => pointer + BigInt(40 + 8 * i)),
      );
      expect(words[5]).toBe(y);
      expect(words[6]).toBe(x);
      const floats = new Float32Array(view);
      expect(floats[14]).toBe(0.5);
      expect(floats[16]).toBe(-2);
      expect(words[9]).toBe(65_536n);
      expect(AXPB_PARAMETERS).toEqual([
        'float32*',
        'const float32*',
        'float32',
        'float32',
        'uint64',
      ]);
    } finally {
      koffi.free(pointer);
    }
  });
});
