import { koffi } from '@cuda-tasks/cudadrv/ffi';
import { ffiValue } from '@cuda-tasks/cudadrv/internal';

/** The C type of a routine's host scalars: `float` ('float32') or `double` ('float64'). */
export type ScalarType = 'float32' | 'float64';

/** Where the arena keeps alpha and beta of one scalar type. */
interface Slots {
  readonly values: Float32Array | Float64Array;
  /** The index of beta in `values` (8 bytes after alpha, as for `double`). */
  readonly beta: number;
}

/**
 * A reused native arena for the host scalars (alpha, beta) that cuBLAS reads in host pointer
 * mode, so a call allocates nothing: write the values, pass the slot addresses. cuBLAS reads
 * host scalars before the call returns, so the next call may overwrite them. Only the event
 * loop's thread uses it.
 */
export class ScalarArena {
  /** Address of the alpha slot (8 bytes), as `ffiValue` gives it. */
  readonly alpha: number | bigint;
  /** Address of the beta slot (8 bytes), as `ffiValue` gives it. */
  readonly beta: number | bigint;
  readonly #slots: Readonly<Record<ScalarType, Slots>>;

  constructor() {
    const k = koffi();
    const pointer = k.alloc('double', 2) as bigint;
    const bytes = k.view(pointer, 16);
    this.#slots = {
      float32: { values: new Float32Array(bytes), beta: 2 },
      float64: { values: new Float64Array(bytes), beta: 1 },
    };
    this.alpha = ffiValue(pointer);
    this.beta = ffiValue(pointer + 8n);
  }

  /** Writes alpha and beta as `float` (float32 routines, and gemmEx's 32F compute). */
  float32(alpha: number, beta = 0): this {
    return this.set('float32', alpha, beta);
  }

  /** Writes alpha and beta as `double`. */
  float64(alpha: number, beta = 0): this {
    return this.set('float64', alpha, beta);
  }

  /** Writes alpha and beta as the routine's scalar type. */
  set(type: ScalarType, alpha: number, beta = 0): this {
    const slots = this.#slots[type];
    slots.values[0] = alpha;
    slots.values[slots.beta] = beta;
    return this;
  }
}

let arena: ScalarArena | undefined;

/** @internal The process's scalar arena (created on first use). */
export function scalars(): ScalarArena {
  return (arena ??= new ScalarArena());
}
