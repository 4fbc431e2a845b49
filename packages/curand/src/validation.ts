/**
 * Argument checks and generation planning as pure functions: everything here runs before
 * any native call and is unit-tested without a GPU. What every library checks of an array
 * (a usable DeviceArray, its context against the stream's) comes from cudadrv's shared
 * operand checks; what is cuRAND's own (seeds, kinds, orderings, an output cuRAND can fill,
 * distribution parameters) is here.
 */
import { CudaArgumentError, DisposedError, type DType, type Operand } from '@cuda-tasks/cudadrv';
import { curandOrdering, curandRngType } from './ffi/curand.js';

/** The largest `unsigned long long`. */
export const UINT64_MAX = (1n << 64n) - 1n;

/**
 * Checks a seed or offset (a non-negative safe integer, or a BigInt below 2^64) and returns
 * it as a BigInt for `unsigned long long`.
 */
export function toUint64(value: unknown, name: string): bigint {
  if (typeof value === 'bigint') {
    if (value < 0n || value > UINT64_MAX) {
      throw new CudaArgumentError(`${name} must be between 0 and 2^64-1, got ${value}`);
    }
    return value;
  }
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  throw new CudaArgumentError(
    `${name} must be a non-negative integer (a number up to 2^53-1 or a BigInt up to 2^64-1), got ${String(value)}`,
  );
}

/**
 * The pseudorandom generators this package exposes. `'philox'` (the default) is this
 * package's counter-based Philox4x32-10: a (seed, offset) pair on the host and no device
 * state, so creating and seeding one costs no driver call. The others are cuRAND's host
 * generators (a native generator with device state, set up with calls that wait for the GPU
 * to drain): `'curand-philox'` (cuRAND's Philox4x32-10, with its own output order), XORWOW
 * and MRG32k3a.
 */
export type GeneratorKind = 'philox' | 'curand-philox' | 'xorwow' | 'mrg32k3a';

/** The kinds cuRAND generates (a native generator each). */
export type CurandKind = Exclude<GeneratorKind, 'philox'>;

const RNG_TYPES: Readonly<Record<CurandKind, number>> = {
  'curand-philox': curandRngType.CURAND_RNG_PSEUDO_PHILOX4_32_10,
  xorwow: curandRngType.CURAND_RNG_PSEUDO_XORWOW,
  mrg32k3a: curandRngType.CURAND_RNG_PSEUDO_MRG32K3A,
};

const KINDS: readonly GeneratorKind[] = ['philox', ...(Object.keys(RNG_TYPES) as CurandKind[])];

/** Checks a generator kind (CudaArgumentError naming the valid ones for anything else). */
export function checkKind(kind: unknown): GeneratorKind {
  if (typeof kind === 'string' && KINDS.includes(kind as GeneratorKind)) {
    return kind as GeneratorKind;
  }
  throw new CudaArgumentError(
    `generator kind must be one of ${KINDS.join(', ')}, got ${String(kind)}`,
  );
}

/**
 * The largest Poisson rate of the 'philox' kind: its counts are uint32, and 2^31 leaves
 * more than 9,000 standard deviations of room below 2^32.
 */
export const MAX_PHILOX_LAMBDA = 2 ** 31;

/**
 * The enum value `table` gives the name `value`; a CudaArgumentError naming `name` and the
 * valid names for anything else (inherited properties included).
 */
function lookUp(table: Readonly<Record<string, number>>, name: string, value: unknown): number {
  if (typeof value === 'string' && Object.hasOwn(table, value)) return table[value]!;
  throw new CudaArgumentError(
    `${name} must be one of ${Object.keys(table).join(', ')}, got ${String(value)}`,
  );
}

/**
 * The `curandRngType_t` of a cuRAND generator kind (CudaArgumentError for an unknown kind,
 * and for 'philox', which cuRAND does not generate: its cuRAND counterpart is 'curand-philox').
 */
export function rngTypeOf(kind: unknown): number {
  return lookUp(RNG_TYPES, 'cuRAND generator kind', kind);
}

/**
 * How results are laid out in memory (`curandSetGeneratorOrdering`): `default` and `best`
 * are the same sequence; `seeded` (XORWOW only) is faster to seed and of lower quality;
 * `legacy` is guaranteed stable across cuRAND releases; `dynamic` (Philox only) adapts to
 * the device for speed, so it is not reproducible across GPUs.
 */
export type GeneratorOrdering = 'default' | 'best' | 'seeded' | 'legacy' | 'dynamic';

const ORDERINGS: Readonly<Record<GeneratorOrdering, number>> = {
  default: curandOrdering.CURAND_ORDERING_PSEUDO_DEFAULT,
  best: curandOrdering.CURAND_ORDERING_PSEUDO_BEST,
  seeded: curandOrdering.CURAND_ORDERING_PSEUDO_SEEDED,
  legacy: curandOrdering.CURAND_ORDERING_PSEUDO_LEGACY,
  dynamic: curandOrdering.CURAND_ORDERING_PSEUDO_DYNAMIC,
};

/** The `curandOrdering_t` for an ordering name (CudaArgumentError for an unknown one). */
export function orderingOf(ordering: unknown): number {
  return lookUp(ORDERINGS, 'ordering', ordering);
}

/** The parts of a DeviceArray that validation looks at (an operand's, with its length and density). */
export interface ArrayLayout extends Pick<Operand, 'dtype' | 'shape' | 'strides' | 'disposed'> {
  readonly length: number;
  readonly contiguous: boolean;
}

/** How an output array is filled: directly, or through a contiguous temporary and a 2-D copy. */
export type TargetLayout = 'contiguous' | 'strided';

/** The dtypes each generation accepts. */
export const FLOATING_DTYPES: readonly DType[] = ['float32', 'float64'];
export const UINT32_DTYPES: readonly DType[] = ['uint32'];

/**
 * Checks an output array: not disposed, one of `dtypes`, and either contiguous or a 2-D
 * column-major view (a `block()`), which is filled through a temporary. Returns which.
 */
export function checkTarget(
  call: string,
  array: ArrayLayout,
  dtypes: readonly DType[],
): TargetLayout {
  if (array.disposed) throw new DisposedError(`${call}: the output DeviceArray`);
  if (!dtypes.includes(array.dtype)) {
    throw new CudaArgumentError(
      `${call}: needs a ${dtypes.join(' or ')} array, got ${array.dtype}`,
    );
  }
  if (array.contiguous) return 'contiguous';
  if (array.shape.length === 2 && array.strides[0] === 1) return 'strided';
  throw new CudaArgumentError(
    `${call}: the output is a strided view of shape ${JSON.stringify(array.shape)} and strides ${JSON.stringify(array.strides)}; pass a contiguous array or a 2-D column-major block`,
  );
}

/** Checks a shape argument (a non-negative integer, or a non-empty array of them). */
export function checkShape(call: string, shape: unknown): void {
  const dimensions = typeof shape === 'number' ? [shape] : shape;
  if (
    !Array.isArray(dimensions) ||
    dimensions.length === 0 ||
    !dimensions.every((dimension) => Number.isSafeInteger(dimension) && dimension >= 0)
  ) {
    throw new CudaArgumentError(
      `${call}: shape must be a non-negative integer or a non-empty array of them, got ${JSON.stringify(shape)}`,
    );
  }
}

/** Checks the parameters of a normal (or the normal under a log-normal) distribution. */
export function checkNormalParameters(call: string, mean: unknown, stddev: unknown): void {
  if (typeof mean !== 'number' || !Number.isFinite(mean)) {
    throw new CudaArgumentError(`${call}: mean must be a finite number, got ${String(mean)}`);
  }
  if (typeof stddev !== 'number' || !Number.isFinite(stddev) || !(stddev > 0)) {
    throw new CudaArgumentError(
      `${call}: stddev must be a finite number > 0, got ${String(stddev)}`,
    );
  }
}

/** Checks a Poisson rate (for the 'philox' kind, `max` is `MAX_PHILOX_LAMBDA`). */
export function checkLambda(call: string, lambda: unknown, max = Infinity): void {
  if (typeof lambda !== 'number' || !Number.isFinite(lambda) || !(lambda > 0)) {
    throw new CudaArgumentError(
      `${call}: lambda must be a finite number > 0, got ${String(lambda)}`,
    );
  }
  if (lambda > max) {
    throw new CudaArgumentError(
      `${call}: lambda must be at most ${max} for this generator (its counts are uint32), got ${lambda}`,
    );
  }
}

/**
 * Output pointers handed to cuRAND directly are aligned to this many bytes; a misaligned view
 * (e.g. `slice(1, n)` of a float32 array) is filled through an aligned temporary instead,
 * because cuRAND's kernels may store pairs or quadruples of values at once.
 */
export const OUTPUT_ALIGNMENT = 16;

/**
 * How one generation is split into cuRAND calls. cuRAND's pseudorandom normal and log-normal
 * generation (Box-Muller) needs an even count: the even `body` is generated first (into the
 * output, or into a temporary when the output is misaligned), then an odd last element is
 * the first of a `tail` pair generated into scratch and copied in. The calls, and so the
 * numbers, do not depend on where the output lies.
 */
export interface GenerationPlan {
  /** Elements of the first call (even when pairs are required). */
  body: number;
  /** 1 when an odd last element comes from a separate 2-element call, else 0. */
  tail: number;
  /** Whether the body is generated straight into the output. */
  direct: boolean;
  /** Bytes of device scratch needed (0: none). */
  scratchBytes: number;
  /** Where the tail pair lies in the scratch. */
  tailByteOffset: number;
}

/**
 * Plans a generation of `length` elements of `elementBytes` into an output that is
 * `aligned` (to OUTPUT_ALIGNMENT) or not; `pairs` for normal and log-normal generation.
 * Writes into `into` (reused on the hot path, so a call allocates nothing) and returns it.
 */
export function planGeneration(
  length: number,
  elementBytes: number,
  aligned: boolean,
  pairs: boolean,
  into: GenerationPlan = { body: 0, tail: 0, direct: true, scratchBytes: 0, tailByteOffset: 0 },
): GenerationPlan {
  const tail = pairs ? length % 2 : 0;
  const body = length - tail;
  const direct = aligned || body === 0;
  const bodyBytes = direct ? 0 : alignUp(body * elementBytes, OUTPUT_ALIGNMENT);
  into.body = body;
  into.tail = tail;
  into.direct = direct;
  into.tailByteOffset = bodyBytes;
  into.scratchBytes = bodyBytes + (tail === 1 ? 2 * elementBytes : 0);
  return into;
}

function alignUp(value: number, alignment: number): number {
  return Math.ceil(value / alignment) * alignment;
}
