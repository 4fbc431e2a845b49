/**
 * The library's own kernel, compiled with NVRTC once per context: multiply an interleaved
 * complex float32 array by a real factor, in place (normalizes inverse transforms).
 */
import {
  assertOptions,
  assertSameContext,
  type Context,
  CudaArgumentError,
  type DeviceArray,
  type Kernel,
  launch,
  Module,
  packageOf,
  processState,
  resolveStream,
  type StreamOption,
  streamOption,
} from '@cuda-tasks/cudadrv';
import { assertComplexArray } from './validate.js';

const SOURCE = `
struct alignas(8) ComplexFloat { float re; float im; };

extern "C" __global__ void scale_complex(ComplexFloat *data, float factor,
                                         unsigned long long count) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    ComplexFloat value = data[i];
    value.re *= factor;
    value.im *= factor;
    data[i] = value;
  }
}
`;

// Process-wide: two loaded copies of this module share the compiled kernels.
const kernels: Map<Context, Kernel> = processState(
  packageOf(import.meta.url, '@cuda-tasks/examples'),
  'user-library/scale-kernels',
  () => new Map<Context, Kernel>(),
);

/** The kernel for `context`, compiled on first use (tens of milliseconds, once). */
function scaleKernel(context: Context): Kernel {
  let kernel = kernels.get(context);
  if (kernel === undefined) {
    const module = Module.compile(SOURCE, { context, name: 'scale_complex.cu' });
    kernel = module.kernel('scale_complex', ['float32*', 'float32', 'uint64']);
    kernels.set(context, kernel);
  }
  return kernel;
}

const BLOCK = 256;
/** Enough blocks to fill the GPU; the kernel loops over the rest. */
const MAX_GRID = 4096;

/**
 * Multiplies every complex element of `x` (float32, interleaved re, im; contiguous) by the
 * real `factor`, in place, on the current stream (or `{ stream }`). Returns `x`.
 * @example
 * const y = fft(x, { inverse: true, normalize: false });
 * scaleComplex(y, 1 / n); // what normalize: true does
 */
export function scaleComplex<A extends DeviceArray<'float32'>>(
  x: A,
  factor: number,
  options: StreamOption = {},
): A {
  assertComplexArray(x, 'scaleComplex', 'x');
  if (typeof factor !== 'number' || !Number.isFinite(factor)) {
    throw new CudaArgumentError(`scaleComplex: factor must be a finite number, got ${factor}`);
  }
  assertOptions('scaleComplex', options);
  const stream = resolveStream(streamOption('scaleComplex', options.stream));
  assertSameContext('scaleComplex', 'x', x, stream);
  const count = x.length / 2;
  if (count === 0) return x;
  const grid = Math.min(Math.ceil(count / BLOCK), MAX_GRID);
  launch(scaleKernel(stream.context), { grid, block: BLOCK, stream }, x, factor, count);
  return x;
}
