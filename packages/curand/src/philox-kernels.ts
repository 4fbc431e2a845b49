/**
 * The 'philox' kind's kernels (src/philox.cu): loaded from the prebuilt fat binary once per
 * context, at the first generation there, and kept for the process; launched with the
 * generator's (seed, offset) as arguments on the caller's stream.
 */
import {
  type Context,
  type DeviceArray,
  type DType,
  type Kernel,
  type KernelParameter,
  launch,
  Module,
  ModuleLoadError,
  type Stream,
} from '@cuda-tasks/cudadrv';
import { loadCachedModule } from '@cuda-tasks/task-runtime';
import type { CounterDistribution } from './counter.js';
import { PHILOX_FATBIN_BASE64, PHILOX_SOURCE } from './philox-fatbin.generated.js';

/** One kernel per (distribution, dtype) the kind fills. */
interface PhiloxKernels {
  readonly module: Module;
  readonly bits: Kernel;
  readonly poisson: Kernel;
  readonly uniform: Readonly<Record<'float32' | 'float64', Kernel>>;
  readonly normal: Readonly<Record<'float32' | 'float64', Kernel>>;
  readonly logNormal: Readonly<Record<'float32' | 'float64', Kernel>>;
}

// Per context; a module holds only code, so a second loaded copy of this package loads its own.
const loaded = new Map<Context, PhiloxKernels>();
let image: Uint8Array | undefined;

function parameters(pointer: KernelParameter): KernelParameter[] {
  // (out, n, rows, ld, offset, seed, a, b)
  return [pointer, 'uint64', 'uint64', 'uint64', 'uint64', 'uint64', 'float64', 'float64'];
}

/**
 * The fat binary's module in `context`. Where the driver cannot load it (a driver older than
 * the CUDA 13 toolkit that built it, or a GPU that has neither its SASS nor a PTX JIT it can
 * run), the same source is compiled with NVRTC for the GPU instead, through the task
 * runtime's compile cache (the kit's one NVRTC cache): tens to hundreds of milliseconds the
 * first time, read from the disk cache in later processes.
 */
function loadModule(context: Context): Module {
  image ??= new Uint8Array(Buffer.from(PHILOX_FATBIN_BASE64, 'base64'));
  try {
    return Module.fromCubin(image, { context });
  } catch (error) {
    if (!ModuleLoadError.isInstance(error)) throw error;
    return loadCachedModule(PHILOX_SOURCE, context, 'philox.cu');
  }
}

/** @internal The kernels of `context`, loaded at the first call there. */
export function philoxKernels(context: Context): PhiloxKernels {
  let kernels = loaded.get(context);
  if (kernels === undefined || kernels.module.disposed) {
    const module = loadModule(context);
    const f32 = parameters('float32*');
    const f64 = parameters('float64*');
    kernels = {
      module,
      bits: module.kernel('curand_philox_bits', parameters('uint32*')),
      poisson: module.kernel('curand_philox_poisson', parameters('uint32*')),
      uniform: {
        float32: module.kernel('curand_philox_uniform_f32', f32),
        float64: module.kernel('curand_philox_uniform_f64', f64),
      },
      normal: {
        float32: module.kernel('curand_philox_normal_f32', f32),
        float64: module.kernel('curand_philox_normal_f64', f64),
      },
      logNormal: {
        float32: module.kernel('curand_philox_log_normal_f32', f32),
        float64: module.kernel('curand_philox_log_normal_f64', f64),
      },
    };
    loaded.set(context, kernels);
  }
  return kernels;
}

/** The kernel of `distribution` for `dtype` (checked by the caller). */
function kernelOf(kernels: PhiloxKernels, distribution: CounterDistribution, dtype: DType): Kernel {
  switch (distribution) {
    case 'bits':
      return kernels.bits;
    case 'poisson':
      return kernels.poisson;
    default:
      return kernels[distribution][dtype as 'float32' | 'float64'];
  }
}

const BLOCK = 256;
/** Blocks at most (grid-stride loops cover the rest; the numbers do not depend on it). */
const MAX_GRID = 4096;
// Reused by every launch (the event loop's thread issues one at a time): a launch allocates nothing.
const config: { grid: number; block: number; stream: Stream | undefined } = {
  grid: 1,
  block: BLOCK,
  stream: undefined,
};

/**
 * Fills `array` (contiguous, or a 2-D column-major block: `rows` and `ld` its first dimension
 * and leading dimension, equal when contiguous) with `distribution` on `stream`, drawing from
 * output `offset` of `seed`'s sequence; `a` and `b` are its parameters.
 */
export function launchPhilox(
  distribution: CounterDistribution,
  array: DeviceArray,
  stream: Stream,
  rows: number,
  ld: number,
  offset: number | bigint,
  seed: number | bigint,
  a: number,
  b: number,
): void {
  const kernel = kernelOf(philoxKernels(stream.context), distribution, array.dtype);
  const length = array.length;
  // Elements per thread group: 4 (bits, float32 uniform and normal), 2 (float64 ones), 1 (Poisson).
  const perGroup =
    distribution === 'poisson' ? 1 : distribution === 'bits' || array.dtype === 'float32' ? 4 : 2;
  config.grid = Math.max(1, Math.min(MAX_GRID, Math.ceil(length / perGroup / BLOCK)));
  config.stream = stream;
  try {
    launch(kernel, config, array, length, rows, ld, offset, seed, a, b);
  } finally {
    config.stream = undefined;
  }
}
