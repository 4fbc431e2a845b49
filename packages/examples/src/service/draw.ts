/**
 * The random systems of `POST /solve-random`, drawn by a counter-based kernel: each element is
 * SplitMix64 of (seed, index), so a draw needs no generator state and nothing to set up when
 * the seed changes. Reseeding a cuRAND generator per request would: cuRAND sets up its state
 * for a new seed (curandGenerateSeeds) with a call that returns only once the GPU has finished
 * the work in flight, other requests' included, which holds the event loop for as long as a
 * large request runs (see docs/decisions/0024-no-generator-reseeding-per-request.md).
 */

import type { DeviceArray } from '@cuda-tasks/cudadrv';
import { elementwise } from '@cuda-tasks/kernels';

const TWO_TO_32 = 2 ** 32;

/** z = ((SplitMix64(seed + (offset + i + 1) * golden) >> 11) + 1) / 2^53: uniform in (0, 1]. */
const splitMixUniform = elementwise(
  'seedHigh: uint32, seedLow: uint32, offset: uint32 -> z: float64',
  `unsigned long long x = ((((unsigned long long)seedHigh) << 32) | seedLow)
    + ((unsigned long long)offset + (unsigned long long)i + 1ULL) * 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  x = x ^ (x >> 31);
  z = (double)((x >> 11) + 1ULL) * 1.1102230246251565e-16;`,
  { name: 'splitmix_uniform' },
);

/**
 * Fills a float64 array (column-major order of its elements) with uniform values in (0, 1]:
 * element k gets draw number `offset + k` of `seed` (an integer in 0..2^53-1; `offset` below
 * 2^32 - the array's length). On the current stream.
 * @example drawUniform(DeviceArray.empty('float64', [n, n]), seed, 0);
 */
export function drawUniform(
  array: DeviceArray<'float64'>,
  seed: number,
  offset: number,
): DeviceArray<'float64'> {
  const high = Math.floor(seed / TWO_TO_32);
  const low = seed - high * TWO_TO_32;
  splitMixUniform(high, low, offset, array);
  return array;
}
