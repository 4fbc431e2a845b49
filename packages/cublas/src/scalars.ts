import { ffiValue } from '@cuda-tasks/cudadrv';
import { koffi } from '@cuda-tasks/cudadrv/ffi';

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
  readonly #f32: Float32Array;
  readonly #f64: Float64Array;

  constructor() {
    const k = koffi();
    const pointer = k.alloc('double', 2) as bigint;
    const bytes = k.view(pointer, 16);
    this.#f32 = new Float32Array(bytes);
    this.#f64 = new Float64Array(bytes);
    this.alpha = ffiValue(pointer);
    this.beta = ffiValue(pointer + 8n);
  }

  /** Writes alpha and beta as `float` (float32 routines, and gemmEx's 32F compute). */
  float32(alpha: number, beta = 0): this {
    this.#f32[0] = alpha;
    this.#f32[2] = beta;
    return this;
  }

  /** Writes alpha and beta as `double`. */
  float64(alpha: number, beta = 0): this {
    this.#f64[0] = alpha;
    this.#f64[1] = beta;
    return this;
  }

  /** Writes alpha and beta in the routine's precision. */
  set(dtype: string, alpha: number, beta = 0): this {
    return dtype === 'float64' ? this.float64(alpha, beta) : this.float32(alpha, beta);
  }
}

let arena: ScalarArena | undefined;

/** @internal The process's scalar arena (created on first use). */
export function scalars(): ScalarArena {
  return (arena ??= new ScalarArena());
}
