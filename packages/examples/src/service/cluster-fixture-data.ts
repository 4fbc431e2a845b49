/**
 * The data of cluster-fixture.ts's stand-in index, for the fixture and for cluster.test.ts's
 * reference (importing the fixture itself would start a cluster).
 */
import { rng } from '@cuda-tasks/testing';

/** The stand-in index's shape. */
export const FIXTURE_ROWS = 1000;
export const FIXTURE_DIM = 128;

/** The stand-in index: FIXTURE_ROWS x FIXTURE_DIM float32, column-major, from seed 7. */
export function fixtureEmbeddings(): Float32Array {
  const next = rng(7);
  return Float32Array.from({ length: FIXTURE_ROWS * FIXTURE_DIM }, () => next() * 2 - 1);
}

/** Query `seed` of the fixture's `/search`. */
export function fixtureQuery(seed: number): Float32Array {
  const next = rng(1000 + seed);
  return Float32Array.from({ length: FIXTURE_DIM }, () => next() * 2 - 1);
}
