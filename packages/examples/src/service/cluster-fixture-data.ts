/**
 * The data of cluster-fixture.ts's stand-in index, for the fixture and for cluster.test.ts's
 * reference (importing the fixture itself would start a cluster).
 */
/** Uniform values in [-1, 1) from a 32-bit linear congruential generator seeded `seed`. */
function uniform(seed: number, length: number): Float32Array {
  let state = seed >>> 0;
  return Float32Array.from({ length }, () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return (state / 2 ** 32) * 2 - 1;
  });
}

/** The stand-in index's rows. */
export const FIXTURE_ROWS = 1000;
/** The stand-in index's dimension (as the service's). */
export const FIXTURE_DIM = 128;

/** The stand-in index: FIXTURE_ROWS x FIXTURE_DIM float32, column-major, from seed 7. */
export function fixtureEmbeddings(): Float32Array {
  return uniform(7, FIXTURE_ROWS * FIXTURE_DIM);
}

/** Query `seed` of the fixture's `/search`. */
export function fixtureQuery(seed: number): Float32Array {
  return uniform(1000 + seed, FIXTURE_DIM);
}
