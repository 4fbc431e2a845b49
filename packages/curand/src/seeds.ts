import { randomBytes } from 'node:crypto';
import { curandState } from './process.js';
import { toUint64 } from './validation.js';

const MASK_64 = (1n << 64n) - 1n;
const GOLDEN_GAMMA = 0x9e3779b97f4a7c15n;

/** SplitMix64's output function: a bijective 64-bit mix (Steele, Lea & Flood, 2014). */
export function mix64(value: bigint): bigint {
  let z = value & MASK_64;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK_64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK_64;
  return z ^ (z >> 31n);
}

/**
 * The `index`-th seed (0-based) of the sequence that starts from `base`: SplitMix64, so
 * consecutive seeds are statistically unrelated even for consecutive bases.
 */
export function seedAt(base: bigint, index: number): bigint {
  return mix64(base + BigInt(index + 1) * GOLDEN_GAMMA);
}

interface SeedState {
  /** The base of the sequence (from `setDefaultSeed`, or random per process). */
  base: bigint;
  /** Seeds handed out since the base was set. */
  next: number;
  /** Incremented by `setDefaultSeed`: default generators seeded under an older epoch are reseeded on next use. */
  epoch: number;
}

function randomSeed(): bigint {
  return randomBytes(8).readBigUInt64LE(0);
}

// Process-wide, shared by every loaded copy of a compatible version of this package.
const state: SeedState = curandState<SeedState>('seeds', () => ({
  base: randomSeed(),
  next: 0,
  epoch: 0,
}));

/**
 * Restarts the process's seed sequence, from which every task's default generator (and every
 * `Generator` created without a seed) takes its seed. After `setDefaultSeed(s)`, a program
 * that creates and uses generators in the same order draws the same numbers on every run.
 * Default generators seeded before the call are reseeded from the new sequence on their next
 * use. Without an argument, a fresh random base is drawn (the state at process start).
 * @example
 * setDefaultSeed(1234);
 * const a = randn('float32', 1000); // the same numbers on every run
 */
export function setDefaultSeed(seed?: number | bigint): void {
  state.base = seed === undefined ? randomSeed() : toUint64(seed, 'setDefaultSeed: seed');
  state.next = 0;
  state.epoch++;
}

/** The base of the current seed sequence (log it to reproduce a run with `setDefaultSeed`). */
export function defaultSeed(): bigint {
  return state.base;
}

/** @internal The next seed of the sequence. */
export function nextSeed(): bigint {
  return seedAt(state.base, state.next++);
}

/** @internal The current epoch (see `SeedState.epoch`). */
export function seedEpoch(): number {
  return state.epoch;
}
