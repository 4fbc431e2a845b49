import {
  CaptureError,
  type Context,
  CudaArgumentError,
  copyDeviceToDevice,
  currentContext,
  currentStream,
  DeviceArray,
  DeviceBuffer,
  DisposedError,
  type DType,
  resolveStream,
  type Stream,
  type StreamOption,
} from '@cuda-tasks/cudadrv';
import { assertSameContext, beginOperation, endOperation } from '@cuda-tasks/cudadrv/internal';
import { GeneratorCore } from './core.js';
import { check } from './errors.js';
import { curand } from './ffi/curand.js';
import { defaultCore } from './handle.js';
import { BITS, type Generation, LOG_NORMAL, NORMAL, POISSON, UNIFORM } from './routines.js';
import { nextSeed } from './seeds.js';
import {
  checkLambda,
  checkNormalParameters,
  checkTarget,
  type GenerationPlan,
  type GeneratorKind,
  type GeneratorOrdering,
  OUTPUT_ALIGNMENT,
  orderingOf,
  planGeneration,
  rngTypeOf,
  type TargetLayout,
  toUint64,
} from './validation.js';

/** The floating-point dtypes that uniform, normal and log-normal generation fill. */
export type FloatDType = 'float32' | 'float64';

/** Options for `new Generator(...)`. */
export interface GeneratorOptions {
  /** The algorithm (default `'philox'`, Philox-4x32-10). */
  kind?: GeneratorKind;
  /**
   * The seed (a non-negative integer, or a BigInt below 2^64). Omitted: the next seed of the
   * process's seed sequence (see `setDefaultSeed`), so two unseeded generators differ.
   */
  seed?: number | bigint;
  /** Where in the seed's sequence to start (default 0). */
  offset?: number | bigint;
  /** The ordering of results (default: cuRAND's default ordering). */
  ordering?: GeneratorOrdering;
  /** The context that owns the generator's device state (default: the current device's). */
  context?: Context;
}

/** Parameters of a normal distribution (for log-normal: of the underlying normal). */
export interface NormalOptions extends StreamOption {
  /** Mean (default 0). */
  mean?: number;
  /** Standard deviation, > 0 (default 1). */
  stddev?: number;
}

const generatorBrand = Symbol.for('@cuda-tasks/curand/Generator');
/** Passed to the constructor by `defaultGenerator()` only; not exported. */
const TASK_DEFAULT: unique symbol = Symbol('the current task default generator');

const finalizer = new FinalizationRegistry<GeneratorCore>((core) => {
  try {
    core.destroy();
  } catch {
    // Process teardown or a sticky error: the context's memory goes with it.
  }
});

const ALIGNMENT_MASK = BigInt(OUTPUT_ALIGNMENT - 1);
// Reused by every generation (the event loop's thread runs one at a time).
const plan: GenerationPlan = { body: 0, tail: 0, direct: true, scratchBytes: 0, tailByteOffset: 0 };

/**
 * A cuRAND pseudorandom generator that follows the stream of whoever uses it: each call runs
 * on the current task's stream (or `{ stream }`), and the generator is bound to that stream
 * lazily (curandSetStream only when the stream changes).
 *
 * Its state advances in stream order. When it is used from another stream than last time,
 * the new stream is first ordered after the old one on the GPU (the host never waits), the
 * same hand-off as a DeviceArray's: so a generator with an explicit seed gives the same
 * numbers whichever tasks or streams use it, as long as the calls are issued in the same
 * order. Two concurrent tasks sharing one generator are therefore serialized on the GPU for
 * its calls, in the order the host issued them; give each task its own generator (or use the
 * task's default generator, `rand`/`randn`) to keep them independent.
 *
 * @example
 * using generator = new Generator({ kind: 'philox', seed: 42 });
 * const x = DeviceArray.empty('float32', 1_000_000);
 * generator.normal(x, { mean: 2, stddev: 3 });
 * const values = await x.toHost();
 */
export class Generator {
  readonly [generatorBrand] = true;
  /** The algorithm. */
  readonly kind: GeneratorKind;
  /** The native generator; undefined for `defaultGenerator()`, which resolves per call. */
  readonly #core: GeneratorCore | undefined;

  /**
   * Creates a generator in the current device's context (or `options.context`). Creating one
   * allocates its device state: keep generators and reuse them, or use `defaultGenerator()`.
   */
  constructor(options?: GeneratorOptions);
  constructor(options: GeneratorOptions | typeof TASK_DEFAULT = {}) {
    if (options === TASK_DEFAULT) {
      this.kind = 'philox';
      this.#core = undefined;
      return;
    }
    if (typeof options !== 'object' || options === null) {
      throw new CudaArgumentError(`Generator: options must be an object, got ${String(options)}`);
    }
    const kind = options.kind ?? 'philox';
    rngTypeOf(kind);
    const seed = options.seed === undefined ? undefined : toUint64(options.seed, 'Generator: seed');
    const offset =
      options.offset === undefined ? 0n : toUint64(options.offset, 'Generator: offset');
    const ordering = options.ordering === undefined ? undefined : orderingOf(options.ordering);
    const context = options.context ?? currentContext();
    this.kind = kind;
    this.#core = GeneratorCore.create(context, kind, seed ?? nextSeed(), offset, ordering);
    finalizer.register(this, this.#core, this);
    if (options.context === undefined) this.#core.prepareOn(currentStream());
  }

  /** @internal The view behind `defaultGenerator()`. */
  static taskDefault(): Generator {
    return new Generator(TASK_DEFAULT as unknown as GeneratorOptions);
  }

  /** True for a Generator of any loaded copy of this package. */
  static isInstance(value: unknown): value is Generator {
    return typeof value === 'object' && value !== null && generatorBrand in value;
  }

  /** True for `defaultGenerator()`, which stands for the current task's default generator. */
  get isTaskDefault(): boolean {
    return this.#core === undefined;
  }

  /**
   * The raw `curandGenerator_t`, for routines of `@cuda-tasks/curand/ffi` that this class
   * does not wrap (for `defaultGenerator()`: the current task's). Reading it binds the
   * generator to the current stream (ordered after its previous one): call the routine on
   * that stream, and read `handle` again inside `withStream(other, ...)` to use another one,
   * rather than calling curandSetStream yourself (the binding would go out of step).
   */
  get handle(): bigint {
    return this.#resolve(currentStream()).handle;
  }

  /** The seed last set (for `defaultGenerator()`: the current task's generator's). */
  get seed(): bigint {
    return (this.#core ?? defaultCore(currentStream())).seed;
  }

  /** Whether `dispose()` has been called (never true for `defaultGenerator()`). */
  get disposed(): boolean {
    return this.#core?.destroyed ?? false;
  }

  /**
   * Fills a float32 or float64 array with uniform values in (0, 1] (cuRAND excludes 0 and
   * includes 1). Returns the array.
   * @example generator.uniform(DeviceArray.empty('float64', [100, 100]));
   */
  uniform<D extends FloatDType>(array: DeviceArray<D>, options: StreamOption = {}): DeviceArray<D> {
    const layout = this.#check('Generator.uniform', array, UNIFORM.dtypes);
    return this.#generate(UNIFORM, array, layout, options.stream, 0, 0);
  }

  /**
   * Fills a float32 or float64 array with normal values of `mean` (default 0) and `stddev`
   * (default 1). Any length works: cuRAND needs an even count, so an odd last element is
   * generated through a 2-element scratch buffer and copied in, ordered on the stream.
   * @example generator.normal(x, { mean: 2, stddev: 3 });
   */
  normal<D extends FloatDType>(array: DeviceArray<D>, options: NormalOptions = {}): DeviceArray<D> {
    const mean = options.mean ?? 0;
    const stddev = options.stddev ?? 1;
    checkNormalParameters('Generator.normal', mean, stddev);
    const layout = this.#check('Generator.normal', array, NORMAL.dtypes);
    return this.#generate(NORMAL, array, layout, options.stream, mean, stddev);
  }

  /**
   * Fills a float32 or float64 array with log-normal values: `exp(y)` where `y` is normal with
   * `mean` (default 0) and `stddev` (default 1). Any length works (see `normal`).
   * @example generator.logNormal(x, { mean: 0, stddev: 0.5 });
   */
  logNormal<D extends FloatDType>(
    array: DeviceArray<D>,
    options: NormalOptions = {},
  ): DeviceArray<D> {
    const mean = options.mean ?? 0;
    const stddev = options.stddev ?? 1;
    checkNormalParameters('Generator.logNormal', mean, stddev);
    const layout = this.#check('Generator.logNormal', array, LOG_NORMAL.dtypes);
    return this.#generate(LOG_NORMAL, array, layout, options.stream, mean, stddev);
  }

  /**
   * Fills a uint32 array with Poisson counts of rate `lambda` > 0. Not inside a graph capture
   * (a CaptureError, before any native call): cuRAND may prepare a distribution table for the
   * call in device memory of its own, outside the stream, which a replay cannot rely on.
   * @example generator.poisson(DeviceArray.empty('uint32', 1000), 4);
   */
  poisson(
    array: DeviceArray<'uint32'>,
    lambda: number,
    options: StreamOption = {},
  ): DeviceArray<'uint32'> {
    checkLambda('Generator.poisson', lambda);
    const layout = this.#check('Generator.poisson', array, POISSON.dtypes);
    const stream = resolveStream(options.stream);
    if (stream.capturing) {
      throw new CaptureError(
        'curandGeneratePoisson',
        `Generator.poisson cannot be captured (${stream} is capturing a graph): cuRAND may prepare a distribution table for the call in device memory of its own, allocated and filled outside the stream, which a replay cannot rely on. Generate Poisson counts outside the capture; uniform, normal, log-normal and raw bits can be captured`,
      );
    }
    return this.#generate(POISSON, array, layout, stream, lambda, 0);
  }

  /**
   * Fills a uint32 array with uniformly distributed 32-bit integers (the generator's raw
   * output, `curandGenerate`).
   */
  bits(array: DeviceArray<'uint32'>, options: StreamOption = {}): DeviceArray<'uint32'> {
    const layout = this.#check('Generator.bits', array, BITS.dtypes);
    return this.#generate(BITS, array, layout, options.stream, 0, 0);
  }

  /**
   * Reseeds the generator and restarts its sequence at offset 0: afterwards it gives what
   * `new Generator({ kind, seed })` would. For `defaultGenerator()`, reseeds the current
   * task's default generator (for `options.stream`'s context).
   */
  setSeed(seed: number | bigint, options: StreamOption = {}): void {
    const value = toUint64(seed, 'Generator.setSeed: seed');
    this.#assertUsable();
    const stream = resolveStream(options.stream);
    const core = this.#resolve(stream);
    core.setSeed(value);
    core.prepareOn(stream);
  }

  /** Moves to `offset` in the current seed's sequence (skipping ahead costs nothing). */
  setOffset(offset: number | bigint, options: StreamOption = {}): void {
    const value = toUint64(offset, 'Generator.setOffset: offset');
    this.#assertUsable();
    const stream = resolveStream(options.stream);
    const core = this.#resolve(stream);
    core.setOffset(value);
    core.prepareOn(stream);
  }

  /**
   * Sets up the generator's starting state on the device now (curandGenerateSeeds, ordered on
   * the current stream or `options.stream`) instead of at its next generation. The
   * constructor, `setSeed` and `setOffset` already do it unless the stream is capturing a
   * graph; a generation inside a capture needs it done (a CaptureError says so otherwise), so
   * call this before `capture()` for a generator seeded inside one.
   * @example
   * generator.setSeed(7);
   * generator.prepare();
   * const graph = await capture(() => generator.normal(x));
   */
  prepare(options: StreamOption = {}): void {
    this.#assertUsable();
    const stream = resolveStream(options.stream);
    if (stream.capturing) {
      throw new CaptureError(
        'curandGenerateSeeds',
        `Generator.prepare cannot run inside a capture (${stream} is capturing a graph): cuRAND sets up the starting state with calls a capture forbids. Call it before capture()`,
      );
    }
    this.#resolve(stream).prepareState();
  }

  /**
   * Destroys the native generator (its device memory is freed once work in flight is done).
   * Safe to call twice; does nothing for `defaultGenerator()`, which the task runtime owns.
   */
  dispose(): void {
    const core = this.#core;
    if (core === undefined || core.destroyed) return;
    finalizer.unregister(this);
    core.destroy();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  /** `Generator(...)`: the kind and whether it is the task default. */
  toString(): string {
    return this.#core === undefined
      ? 'Generator(task default, philox)'
      : `Generator(${this.kind}${this.#core.destroyed ? ', disposed' : ''})`;
  }

  #assertUsable(): void {
    if (this.#core?.destroyed) throw new DisposedError('Generator');
  }

  /** Checks the generator and the output array before any native call. */
  #check(operation: string, array: DeviceArray, dtypes: readonly DType[]): TargetLayout {
    this.#assertUsable();
    if (!DeviceArray.isInstance(array)) {
      throw new CudaArgumentError(`${operation}: the output must be a DeviceArray`);
    }
    return checkTarget(operation, array, dtypes);
  }

  /** The native generator for `stream`, bound to it. */
  #resolve(stream: Stream): GeneratorCore {
    const core = this.#core;
    if (core === undefined) return defaultCore(stream);
    if (core.destroyed) throw new DisposedError('Generator');
    if (stream.context !== core.context) {
      throw new CudaArgumentError(
        `Generator: it belongs to device ${core.context.device.ordinal}'s context and cannot run on a stream of device ${stream.context.device.ordinal}; create one generator per device`,
      );
    }
    core.bind(stream);
    return core;
  }

  #generate<A extends DeviceArray>(
    generation: Generation,
    array: A,
    layout: TargetLayout,
    requestedStream: Stream | undefined,
    first: number,
    second: number,
  ): A {
    const stream = resolveStream(requestedStream);
    assertSameContext(generation.operation, 'the output', array, stream);
    const core = this.#resolve(stream);
    if (array.length === 0) return array;
    if (core.statePending && stream.capturing) {
      throw new CaptureError(
        generation.routines[array.dtype]!,
        `${generation.operation}: the generator's starting state is not set up (it was created, reseeded or moved to a new offset inside the capture), and cuRAND sets it up at the first generation with calls that ${stream} cannot capture. Create, seed or set the offset of the generator before capture(), or call generator.prepare() there`,
      );
    }
    if (layout === 'contiguous') {
      fillContiguous(core, generation, array, stream, first, second);
      return array;
    }
    // A 2-D block of a larger matrix: generate densely, then one 2-D copy into place.
    const temporary = DeviceArray.empty(array.dtype, array.shape, { stream });
    try {
      fillContiguous(core, generation, temporary, stream, first, second);
      array.copyFrom(temporary, { stream });
    } finally {
      temporary.dispose();
    }
    return array;
  }
}

/**
 * Fills a contiguous array following `planGeneration`: everything is ordered on `stream`
 * (scratch allocated and freed there, copies issued there), and the host never waits.
 */
function fillContiguous(
  core: GeneratorCore,
  generation: Generation,
  array: DeviceArray,
  stream: Stream,
  first: number,
  second: number,
): void {
  const elementBytes = array.elementBytes;
  const pointer = array.useOn(stream);
  const aligned = (pointer & ALIGNMENT_MASK) === 0n;
  planGeneration(array.length, elementBytes, aligned, generation.pairs, plan);
  stream.context.makeCurrent();
  if (plan.scratchBytes === 0) {
    issue(core, generation, array.dtype, pointer, plan.body, stream, first, second);
    return;
  }
  const { body, tail, direct, tailByteOffset } = plan;
  const scratch = DeviceBuffer.allocate(plan.scratchBytes, { stream });
  let done = false;
  try {
    const scratchPointer = scratch.useOn(stream);
    const byteOffset = array.offset * elementBytes;
    if (body > 0) {
      if (direct) {
        issue(core, generation, array.dtype, pointer, body, stream, first, second);
      } else {
        issue(core, generation, array.dtype, scratchPointer, body, stream, first, second);
        copyDeviceToDevice(
          { buffer: array.buffer, byteOffset },
          { buffer: scratch, byteOffset: 0 },
          body * elementBytes,
          { stream },
        );
      }
    }
    if (tail === 1) {
      const tailPointer = scratchPointer + BigInt(tailByteOffset);
      issue(core, generation, array.dtype, tailPointer, 2, stream, first, second);
      copyDeviceToDevice(
        { buffer: array.buffer, byteOffset: byteOffset + body * elementBytes },
        { buffer: scratch, byteOffset: tailByteOffset },
        elementBytes,
        { stream },
      );
    }
    done = true;
  } finally {
    // Freed on the stream after the copies: no host wait.
    if (done) scratch.dispose();
    else disposeQuietly(scratch);
  }
}

/**
 * Frees a scratch buffer after a failed call: a failure there (a capture the failed call
 * invalidated, say) must not hide the error that is on its way up.
 */
function disposeQuietly(buffer: DeviceBuffer): void {
  try {
    buffer.dispose();
  } catch {
    // The first error is the one to report.
  }
}

/** One cuRAND generation call, wrapped for the operation observer. */
function issue(
  core: GeneratorCore,
  generation: Generation,
  dtype: DType,
  pointer: bigint,
  count: number,
  stream: Stream,
  first: number,
  second: number,
): void {
  const api = curand();
  const handle = core.handle;
  const routine = generation.routines[dtype]!;
  const token = beginOperation(generation.operation, stream);
  const status =
    generation.parameters === 0
      ? api[routine](handle, pointer, count)
      : generation.parameters === 1
        ? api[routine](handle, pointer, count, first)
        : api[routine](handle, pointer, count, first, second);
  endOperation(token);
  check(status, routine);
  core.statePending = false;
}
