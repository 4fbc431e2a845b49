/**
 * The state of a counter-based Philox generator (the 'philox' kind): a seed and an offset on
 * the host, nothing on the device. A call draws from the offset on and advances it at issue
 * time by the outputs it consumes (`outputsConsumed`), so the numbers depend only on the order
 * in which calls are issued, never on streams or GPU timing.
 */
import type { DType } from '@cuda-tasks/cudadrv';

const TWO_32 = 2 ** 32;
/** Offsets with a high word below this are safe integers: passed to the kernel as a number. */
const SAFE_HIGH = 2 ** 21;

/** The distributions a counter-based generator fills. */
export type CounterDistribution = 'bits' | 'uniform' | 'normal' | 'logNormal' | 'poisson';

/**
 * The 32-bit outputs a call of `count` elements consumes, which is how far it moves the
 * offset: bits, uniform float32 and Poisson 1 per element; uniform float64 2 per element;
 * normal and log-normal float32 2 per pair of elements, float64 4 per pair (an odd count is
 * rounded up to a whole pair).
 */
export function outputsConsumed(
  distribution: CounterDistribution,
  dtype: DType,
  count: number,
): number {
  const double = dtype === 'float64';
  switch (distribution) {
    case 'bits':
    case 'poisson':
      return count;
    case 'uniform':
      return double ? 2 * count : count;
    default:
      return (double ? 4 : 2) * Math.ceil(count / 2);
  }
}

/** @internal (seed, offset) of one counter-based generator. */
export class CounterState {
  /** The seed (below 2^64). */
  seed = 0n;
  /** The seed as the kernel takes it: a number when it is a safe integer (no conversion per call). */
  seedArgument: number | bigint = 0;
  /** The offset's high and low 32-bit words (numbers, so that advancing allocates nothing). */
  #high = 0;
  #low = 0;
  /** For the tasks' default generators: the seed sequence's epoch the seed was drawn in. */
  epoch = 0;

  constructor(seed: bigint, offset = 0n) {
    this.setSeed(seed);
    this.setOffset(offset);
  }

  /** Sets the seed and moves back to offset 0. */
  setSeed(seed: bigint): void {
    this.seed = seed;
    this.seedArgument = seed < 2n ** 53n ? Number(seed) : seed;
    this.#high = 0;
    this.#low = 0;
  }

  /** Moves to `offset` (below 2^64). */
  setOffset(offset: bigint): void {
    this.#high = Number(offset >> 32n);
    this.#low = Number(offset & 0xffffffffn);
  }

  /** The index of the next output a call draws. */
  get offset(): bigint {
    return (BigInt(this.#high) << 32n) | BigInt(this.#low);
  }

  /**
   * The offset as the kernel takes it: a number below 2^53 (no allocation), a BigInt above
   * (2^53 outputs take days to draw, so only a `setOffset` that far gets there).
   */
  get offsetArgument(): number | bigint {
    return this.#high < SAFE_HIGH ? this.#high * TWO_32 + this.#low : this.offset;
  }

  /** Moves the offset on by `outputs` (a safe integer), modulo 2^64. */
  advance(outputs: number): void {
    const sum = this.#low + outputs;
    const carry = Math.floor(sum / TWO_32);
    this.#low = sum - carry * TWO_32;
    this.#high = (this.#high + carry) % TWO_32;
  }
}
