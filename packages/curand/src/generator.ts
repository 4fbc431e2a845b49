import {
  assertArray,
  assertOptions,
  assertSameContext,
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
  type FloatDType,
  resolveStream,
  type Stream,
  type StreamOption,
} from '@cuda-tasks/cudadrv';
import { contextOption, NO_OPTIONS, STREAM_ONLY } from '@cuda-tasks/cudadrv/internal';
import { IssueEnvelope } from '@cuda-tasks/task-runtime';
import { GeneratorCore } from './core.js';
import { type CounterDistribution, CounterState, outputsConsumed } from './counter.js';
import { check } from './errors.js';
import { curand } from './ffi/curand.js';
import { defaultCore, defaultCounter } from './handle.js';
import { launchPhilox } from './philox-kernels.js';
import { BITS, type Generation, LOG_NORMAL, NORMAL, POISSON, UNIFORM } from './routines.js';
import { nextSeed } from './seeds.js';
import {
  type CurandKind,
  checkKind,
  checkLambda,
  checkNormalParameters,
  checkTarget,
  type GenerationPlan,
  type GeneratorKind,
  type GeneratorOrdering,
  MAX_PHILOX_LAMBDA,
  OUTPUT_ALIGNMENT,
  orderingOf,
  planGeneration,
  type TargetLayout,
  toUint64,
} from './validation.js';

// The floating-point dtypes uniform, normal and log-normal generation fill: cudadrv's type,
// re-exported from this package's entry for its users.
export type { FloatDType };

/** The options of the Generator's calls (see cudadrv's `assertOptions`). */
const GENERATOR_OPTIONS: readonly string[] = Object.freeze([
  'kind',
  'seed',
  'offset',
  'ordering',
  'context',
]);
const NORMAL_OPTIONS: readonly string[] = Object.freeze(['mean', 'stddev', 'stream']);

/** Options for `new Generator(...)`. */
export interface GeneratorOptions {
  /**
   * The algorithm (default `'philox'`: this package's counter-based Philox4x32-10, no device
   * state; `'curand-philox'`, `'xorwow'` and `'mrg32k3a'` are cuRAND's generators).
   */
  kind?: GeneratorKind;
  /**
   * The seed (a non-negative integer, or a BigInt below 2^64). Omitted: the next seed of the
   * process's seed sequence (see `setDefaultSeed`), so two unseeded generators differ.
   */
  seed?: number | bigint;
  /**
   * Where in the seed's sequence to start (default 0). For `'philox'`: the index of the first
   * 32-bit output the next call draws (see `Generator.offset`).
   */
  offset?: number | bigint;
  /** cuRAND kinds only: the ordering of results (default: cuRAND's default ordering). */
  ordering?: GeneratorOrdering;
  /**
   * cuRAND kinds only: the context that owns the generator's device state (default: the
   * current device's). A `'philox'` generator has none and runs on any device.
   */
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
 * A pseudorandom generator that follows the stream of whoever uses it: each call runs on the
 * current task's stream (or `{ stream }`).
 *
 * **`'philox'` (the default)** is counter-based, as PyTorch's CUDA generator: the generator is
 * a seed and an offset on the host, and each call launches this package's Philox4x32-10
 * kernel with them on the stream, advancing the offset when the call is issued. Creating,
 * seeding, moving the offset and disposing make no driver call and never wait for the GPU;
 * two tasks or streams using one generator need no GPU-side hand-off, and the numbers depend
 * only on the order in which calls are issued. It is not captured into graphs (a
 * CaptureError says so): a captured call would hold its (seed, offset), and every replay
 * would draw the same numbers; a generator of kind `'curand-philox'`, created before the
 * capture, keeps its state on the device and draws new numbers at each replay. The j-th output of a
 * seed is the j-th `curand(&s)` of cuRAND's device API after `curand_init(seed, 0, 0, &s)`
 * (see the package README for the sequence and each distribution's formula).
 *
 * **cuRAND's generators** (`'curand-philox'`, `'xorwow'`, `'mrg32k3a'`) hold a native
 * generator with device state that advances in stream order: when it is used from another
 * stream than last time, the new stream is first ordered after the old one on the GPU (the
 * host never waits). Creating or reseeding one sets its state up with calls that wait for the
 * whole GPU to drain.
 *
 * @example
 * using generator = new Generator({ seed: 42 });
 * const x = DeviceArray.empty('float32', 1_000_000);
 * generator.normal(x, { mean: 2, stddev: 3 });
 * const values = await x.toHost();
 */
export class Generator {
  readonly [generatorBrand] = true;
  /** The algorithm. */
  readonly kind: GeneratorKind;
  /** cuRAND kinds: the native generator. */
  readonly #core: GeneratorCore | undefined;
  /** 'philox': the seed and offset. Both undefined: `defaultGenerator()`, resolved per call. */
  readonly #counter: CounterState | undefined;
  #disposed = false;

  /**
   * Creates a generator. `'philox'` (the default): a seed and an offset, no native call.
   * cuRAND kinds: a native generator in the current device's context (or `options.context`)
   * whose state setup waits for the GPU to drain: keep those and reuse them.
   */
  constructor(options?: GeneratorOptions);
  constructor(options: GeneratorOptions | typeof TASK_DEFAULT = NO_OPTIONS) {
    if (options === TASK_DEFAULT) {
      this.kind = 'philox';
      this.#core = undefined;
      this.#counter = undefined;
      return;
    }
    // An object of known options only: a misspelt one (`{ seeed: 7 }`), ignored, would give
    // another sequence.
    assertOptions('Generator', options, GENERATOR_OPTIONS);
    contextOption('Generator', options.context);
    const kind = checkKind(options.kind ?? 'philox');
    const seed = options.seed === undefined ? undefined : toUint64(options.seed, 'Generator: seed');
    const offset =
      options.offset === undefined ? 0n : toUint64(options.offset, 'Generator: offset');
    const ordering = options.ordering === undefined ? undefined : orderingOf(options.ordering);
    this.kind = kind;
    if (kind === 'philox') {
      if (ordering !== undefined) {
        throw new CudaArgumentError(
          `Generator: ordering applies to cuRAND's generators; the 'philox' kind has one order (use kind 'curand-philox' for cuRAND's Philox with an ordering)`,
        );
      }
      this.#core = undefined;
      this.#counter = new CounterState(seed ?? nextSeed(), offset);
      return;
    }
    const context = options.context ?? currentContext();
    this.#counter = undefined;
    this.#core = GeneratorCore.create(
      context,
      kind as CurandKind,
      seed ?? nextSeed(),
      offset,
      ordering,
    );
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
    return this.#core === undefined && this.#counter === undefined;
  }

  /**
   * The raw `curandGenerator_t`, for routines of `@cuda-tasks/curand/ffi` that this class
   * does not wrap. Reading it binds the generator to the current stream (ordered after its
   * previous one): call the routine on that stream, and read `handle` again inside
   * `withStream(other, ...)` to use another one, rather than calling curandSetStream yourself
   * (the binding would go out of step). For `defaultGenerator()`: the current task's cuRAND
   * generator, as `handle()` gives it (not the one `rand`/`randn` draw from; its creation
   * waits for the GPU). A `'philox'` generator has no native generator: a CudaArgumentError.
   */
  get handle(): bigint {
    if (this.#counter !== undefined) {
      throw new CudaArgumentError(
        `Generator.handle: a 'philox' generator is counter-based and has no curandGenerator_t; create one of kind 'curand-philox' for cuRAND's routines`,
      );
    }
    const core = this.#resolve(currentStream());
    // Raw calls on it are not declared: its hand-offs are ordered on the GPU from now on.
    if (core === this.#core) core.handleGivenOut();
    return core.handle;
  }

  /** The seed last set (for `defaultGenerator()`: the current task's generator's). */
  get seed(): bigint {
    this.#assertUsable();
    return (this.#core ?? this.#counter ?? defaultCounter(currentStream())).seed;
  }

  /**
   * `'philox'` (and `defaultGenerator()`, for the current task): the index of the 32-bit
   * output the next call starts from. Each call moves it on by the outputs it consumes:
   * `bits`, `uniform` float32 and `poisson` 1 per element; `uniform` float64 2 per element;
   * `normal` and `logNormal` float32 2 per pair of elements and float64 4 per pair (an odd
   * length counts a whole last pair). Undefined for cuRAND's kinds.
   */
  get offset(): bigint | undefined {
    if (this.#core !== undefined) return undefined;
    this.#assertUsable();
    return (this.#counter ?? defaultCounter(currentStream())).offset;
  }

  /** Whether `dispose()` has been called (never true for `defaultGenerator()`). */
  get disposed(): boolean {
    return this.#core?.destroyed ?? this.#disposed;
  }

  /**
   * Fills a float32 or float64 array with uniform values in (0, 1] (cuRAND excludes 0 and
   * includes 1). Returns the array.
   * @example generator.uniform(DeviceArray.empty('float64', [100, 100]));
   */
  uniform<D extends FloatDType>(
    array: DeviceArray<D>,
    options: StreamOption = NO_OPTIONS,
  ): DeviceArray<D> {
    assertOptions('Generator.uniform', options, STREAM_ONLY);
    const layout = this.#check('Generator.uniform', array, UNIFORM.dtypes);
    if (this.#core === undefined)
      return this.#draw(UNIFORM, 'uniform', array, layout, options.stream, 0, 0);
    return this.#generate(UNIFORM, array, layout, options.stream, 0, 0);
  }

  /**
   * Fills a float32 or float64 array with normal values of `mean` (default 0) and `stddev`
   * (default 1). Any length works: cuRAND needs an even count, so an odd last element is
   * generated through a 2-element scratch buffer and copied in, ordered on the stream.
   * @example generator.normal(x, { mean: 2, stddev: 3 });
   */
  normal<D extends FloatDType>(
    array: DeviceArray<D>,
    options: NormalOptions = NO_OPTIONS,
  ): DeviceArray<D> {
    assertOptions('Generator.normal', options, NORMAL_OPTIONS);
    const mean = options.mean ?? 0;
    const stddev = options.stddev ?? 1;
    checkNormalParameters('Generator.normal', mean, stddev);
    const layout = this.#check('Generator.normal', array, NORMAL.dtypes);
    if (this.#core === undefined) {
      return this.#draw(NORMAL, 'normal', array, layout, options.stream, mean, stddev);
    }
    return this.#generate(NORMAL, array, layout, options.stream, mean, stddev);
  }

  /**
   * Fills a float32 or float64 array with log-normal values: `exp(y)` where `y` is normal with
   * `mean` (default 0) and `stddev` (default 1). Any length works (see `normal`).
   * @example generator.logNormal(x, { mean: 0, stddev: 0.5 });
   */
  logNormal<D extends FloatDType>(
    array: DeviceArray<D>,
    options: NormalOptions = NO_OPTIONS,
  ): DeviceArray<D> {
    assertOptions('Generator.logNormal', options, NORMAL_OPTIONS);
    const mean = options.mean ?? 0;
    const stddev = options.stddev ?? 1;
    checkNormalParameters('Generator.logNormal', mean, stddev);
    const layout = this.#check('Generator.logNormal', array, LOG_NORMAL.dtypes);
    if (this.#core === undefined) {
      return this.#draw(LOG_NORMAL, 'logNormal', array, layout, options.stream, mean, stddev);
    }
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
    options: StreamOption = NO_OPTIONS,
  ): DeviceArray<'uint32'> {
    assertOptions('Generator.poisson', options, STREAM_ONLY);
    checkLambda(
      'Generator.poisson',
      lambda,
      this.#core === undefined ? MAX_PHILOX_LAMBDA : Infinity,
    );
    const layout = this.#check('Generator.poisson', array, POISSON.dtypes);
    if (this.#core === undefined) {
      return this.#draw(POISSON, 'poisson', array, layout, options.stream, lambda, 0);
    }
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
  bits(array: DeviceArray<'uint32'>, options: StreamOption = NO_OPTIONS): DeviceArray<'uint32'> {
    assertOptions('Generator.bits', options, STREAM_ONLY);
    const layout = this.#check('Generator.bits', array, BITS.dtypes);
    if (this.#core === undefined)
      return this.#draw(BITS, 'bits', array, layout, options.stream, 0, 0);
    return this.#generate(BITS, array, layout, options.stream, 0, 0);
  }

  /**
   * Reseeds the generator and restarts its sequence at offset 0: afterwards it gives what
   * `new Generator({ kind, seed })` would. For `defaultGenerator()`, reseeds the current
   * task's default generator (for `options.stream`'s context). `'philox'`: host-side only.
   */
  setSeed(seed: number | bigint, options: StreamOption = NO_OPTIONS): void {
    const value = toUint64(seed, 'Generator.setSeed: seed');
    assertOptions('Generator.setSeed', options, STREAM_ONLY);
    this.#assertUsable();
    if (this.#counter !== undefined) {
      this.#counter.setSeed(value);
      return;
    }
    const stream = resolveStream(options.stream);
    if (this.#core === undefined) {
      defaultCounter(stream).setSeed(value);
      return;
    }
    const core = this.#resolve(stream);
    core.setSeed(value);
    core.prepareOn(stream);
  }

  /**
   * Moves to `offset` in the current seed's sequence (skipping ahead costs nothing). For
   * `'philox'`: the index of the 32-bit output the next call starts from (see `offset`).
   */
  setOffset(offset: number | bigint, options: StreamOption = NO_OPTIONS): void {
    const value = toUint64(offset, 'Generator.setOffset: offset');
    assertOptions('Generator.setOffset', options, STREAM_ONLY);
    this.#assertUsable();
    if (this.#counter !== undefined) {
      this.#counter.setOffset(value);
      return;
    }
    const stream = resolveStream(options.stream);
    if (this.#core === undefined) {
      defaultCounter(stream).setOffset(value);
      return;
    }
    const core = this.#resolve(stream);
    core.setOffset(value);
    core.prepareOn(stream);
  }

  /**
   * cuRAND kinds: sets up the generator's starting state on the device now
   * (curandGenerateSeeds, ordered on the current stream or `options.stream`) instead of at its
   * next generation. The constructor, `setSeed` and `setOffset` already do it unless the
   * stream is capturing a graph; a generation inside a capture needs it done (a CaptureError
   * says so otherwise), so call this before `capture()` for a generator seeded inside one.
   * `'philox'` has no device state: nothing to do.
   * @example
   * generator.setSeed(7);
   * generator.prepare();
   * const graph = await capture(() => generator.normal(x));
   */
  prepare(options: StreamOption = NO_OPTIONS): void {
    assertOptions('Generator.prepare', options, STREAM_ONLY);
    this.#assertUsable();
    if (this.#core === undefined) return;
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
   * Disposes of the generator: cuRAND kinds destroy the native generator (its device memory
   * is freed once work in flight is done); `'philox'` only refuses further calls. Safe to call
   * twice; does nothing for `defaultGenerator()`, which the task runtime owns.
   */
  dispose(): void {
    if (this.#counter !== undefined) {
      this.#disposed = true;
      return;
    }
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
    return this.isTaskDefault
      ? 'Generator(task default, philox)'
      : `Generator(${this.kind}${this.disposed ? ', disposed' : ''})`;
  }

  #assertUsable(): void {
    if (this.disposed) throw new DisposedError('Generator');
  }

  /** Checks the generator and the output array before any native call. */
  #check(call: string, array: DeviceArray, dtypes: readonly DType[]): TargetLayout {
    this.#assertUsable();
    assertArray(call, 'the output', array);
    return checkTarget(call, array, dtypes);
  }

  /** The native generator for `stream`, bound to it (the task's cuRAND one for the default). */
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

  /**
   * A 'philox' generation: one launch writing straight into the target (contiguous, or a 2-D
   * block given by its rows and leading dimension) with the generator's (seed, offset), then
   * the offset moves on. Allocates nothing.
   */
  #draw<A extends DeviceArray>(
    generation: Generation,
    distribution: CounterDistribution,
    array: A,
    layout: TargetLayout,
    requestedStream: Stream | undefined,
    a: number,
    b: number,
  ): A {
    const stream = resolveStream(requestedStream);
    assertSameContext(generation.operation, 'the output', array, stream);
    if (stream.capturing) {
      throw new CaptureError(
        'philox',
        `${generation.operation}: a counter-based 'philox' generator${this.#counter === undefined ? ' (the task default generator of rand, randn and defaultGenerator())' : ''} cannot be captured (${stream} is capturing a graph): the captured call would hold its seed and offset, and every replay would draw the same numbers. Draw outside the capture, or create a generator of kind 'curand-philox' before capture() and pass it (its state lives on the device and advances at each replay)`,
      );
    }
    const counter = this.#counter ?? defaultCounter(stream);
    const length = array.length;
    if (length === 0) return array;
    const contiguous = layout === 'contiguous';
    launchPhilox(
      distribution,
      array,
      stream,
      contiguous ? length : array.rows,
      contiguous ? length : array.leadingDimension,
      counter.offsetArgument,
      counter.seedArgument,
      a,
      b,
    );
    counter.advance(outputsConsumed(distribution, array.dtype, length));
    return array;
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

/**
 * The issue envelope of every cuRAND generation (the task runtime's kit), for its trace and
 * its status check: a generator binds its handle itself (`#resolve`: the task's default one
 * through its HandleCache, one of your own through its StreamBinding), before the output is
 * declared used, as the envelope's order has it.
 */
const random = new IssueEnvelope<never>({ name: 'curand', check });

/** One cuRAND generation call, inside the envelope's trace and status check. */
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
  const token = random.begin(stream, generation.operation);
  core.used();
  const status =
    generation.parameters === 0
      ? api[routine](handle, pointer, count)
      : generation.parameters === 1
        ? api[routine](handle, pointer, count, first)
        : api[routine](handle, pointer, count, first, second);
  random.end(token, status, routine);
  core.statePending = false;
}
