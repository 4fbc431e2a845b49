import type { Context, Stream } from '@cuda-tasks/cudadrv';
import { StreamBinding } from '@cuda-tasks/task-runtime';
import { check } from './errors.js';
import { curand } from './ffi/curand.js';
import { type CurandKind, rngTypeOf } from './validation.js';

/**
 * @internal One native cuRAND generator and the stream bookkeeping around it, shared by user
 * `Generator`s and the tasks' default generators.
 *
 * A generator's state lives on the device and every generation advances it, so its work must
 * run in the order it was issued even when it moves between streams: binding to a new stream
 * first makes that stream wait (on the GPU) for the generator's work on the previous one. The
 * task runtime's `StreamBinding` does that (an ordered binding), for user `Generator`s; the
 * tasks' default generators are bound by the runtime's HandleCache, which uses the same rules.
 */
export class GeneratorCore {
  /** The `curandGenerator_t`. */
  readonly handle: bigint;
  readonly context: Context;
  readonly kind: CurandKind;
  /** The seed last set (see `setSeed`). */
  seed: bigint;
  /** For default generators: the seed sequence's epoch the seed was drawn in. */
  epoch = 0;
  /**
   * Whether cuRAND has still to set up the generator's starting state on the device (after
   * creation, a new seed or a new offset). cuRAND does it at the next generation, with calls
   * a graph capture forbids; `prepareState` does it ahead.
   */
  statePending = true;
  readonly #binding: StreamBinding;
  #destroyed = false;

  private constructor(handle: bigint, context: Context, kind: CurandKind) {
    this.handle = handle;
    this.context = context;
    this.kind = kind;
    this.seed = 0n;
    this.#binding = new StreamBinding({
      context,
      setStream: (stream) => this.setNativeStream(stream),
      ordered: true,
      // Every call that issues the generator's work declares its use (`used`), so that a move
      // to another stream after a task awaited its stream costs no event and no wait.
      declaresUses: true,
    });
  }

  /**
   * Creates a generator of `kind` in `context`, seeded with `seed` at `offset`, with the
   * given `curandOrdering_t` (undefined: cuRAND's default).
   */
  static create(
    context: Context,
    kind: CurandKind,
    seed: bigint,
    offset: bigint,
    ordering: number | undefined,
  ): GeneratorCore {
    const rngType = rngTypeOf(kind);
    context.makeCurrent();
    const api = curand();
    const out: (bigint | null)[] = [null];
    check(api.curandCreateGenerator(out, rngType), 'curandCreateGenerator');
    const core = new GeneratorCore(out[0] as bigint, context, kind);
    try {
      if (ordering !== undefined) {
        check(api.curandSetGeneratorOrdering(core.handle, ordering), 'curandSetGeneratorOrdering');
      }
      core.setSeed(seed);
      if (offset !== 0n) core.setOffset(offset);
    } catch (error) {
      core.destroy();
      throw error;
    }
    return core;
  }

  /** The stream the generator is bound to (undefined before its first use). */
  get stream(): Stream | undefined {
    return this.#binding.stream;
  }

  get destroyed(): boolean {
    return this.#destroyed;
  }

  /**
   * Binds the generator to `stream` for the next generation: nothing when it already is
   * (the hot path is one comparison); otherwise orders `stream` after the generator's work
   * on its previous stream, then calls curandSetStream unless cuRAND still has `stream` (a
   * pooled stream that came back to the generator).
   */
  bind(stream: Stream): void {
    if (stream === this.#binding.stream) return;
    stream.assertUsable();
    this.#binding.bind(stream);
  }

  /**
   * The bound `stream` stops being the generator's (it went back to the task runtime's pool,
   * where another task may take it): records an event there that the next stream will wait
   * for, so that the next stream does not wait for that other task's work.
   */
  release(stream: Stream): void {
    if (this.#binding.stream !== stream || this.#destroyed) return;
    this.#binding.release();
  }

  /**
   * Declares a use of the generator on its bound stream: call it right before each native
   * call that issues its work (see `StreamBinding.use`).
   */
  used(): void {
    this.#binding.use();
  }

  /**
   * The raw handle was given out: its work may be issued without `used()`, so every move to
   * another stream is ordered on the GPU from now on.
   */
  handleGivenOut(): void {
    this.#binding.endDeclaredUses();
  }

  /** @internal curandSetStream: cuRAND issues the generator's work on `stream` from now on. */
  setNativeStream(stream: Stream): void {
    check(curand().curandSetStream(this.handle, stream.handle), 'curandSetStream');
  }

  /**
   * Sets the seed and restarts the sequence at offset 0. Host-side only: cuRAND regenerates
   * the device state at the next generation, ordered on the stream that runs it.
   */
  setSeed(seed: bigint): void {
    const api = curand();
    check(
      api.curandSetPseudoRandomGeneratorSeed(this.handle, seed),
      'curandSetPseudoRandomGeneratorSeed',
    );
    check(api.curandSetGeneratorOffset(this.handle, 0n), 'curandSetGeneratorOffset');
    this.seed = seed;
    this.statePending = true;
  }

  /** Skips ahead to `offset` in the sequence of the current seed. */
  setOffset(offset: bigint): void {
    check(curand().curandSetGeneratorOffset(this.handle, offset), 'curandSetGeneratorOffset');
    this.statePending = true;
  }

  /**
   * Sets up the starting state now (curandGenerateSeeds) on the bound stream, rather than at
   * the next generation: a generation inside a graph capture needs it done before. The caller
   * binds the generator to a stream that is not capturing first.
   */
  prepareState(): void {
    if (!this.statePending) return;
    this.context.makeCurrent();
    this.used();
    check(curand().curandGenerateSeeds(this.handle), 'curandGenerateSeeds');
    this.statePending = false;
  }

  /**
   * Sets up the starting state on `stream` now, when cuRAND has it pending and `stream` can
   * run it (it is not capturing a graph and belongs to the generator's context): binds first,
   * so that the setup is ordered after the generator's earlier work. Otherwise nothing: inside
   * a capture cuRAND could not, and the next generation outside one does it.
   */
  prepareOn(stream: Stream): void {
    if (!this.statePending || stream.capturing || stream.context !== this.context) return;
    this.bind(stream);
    this.prepareState();
  }

  /**
   * Destroys the native generator (curandDestroyGenerator frees its device state with
   * cudaFree, which waits for work in flight). Safe to call twice.
   */
  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    try {
      this.context.makeCurrent();
      check(curand().curandDestroyGenerator(this.handle), 'curandDestroyGenerator');
    } finally {
      this.#binding.dispose();
    }
  }
}
