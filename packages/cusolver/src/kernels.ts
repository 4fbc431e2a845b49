/**
 * Two small device helpers the solvers need around cuSOLVER: zeroing one strict triangle of a
 * matrix (R of a QR factorization, a Cholesky factor) and transposing a matrix (SVD of a wide
 * matrix). Compiled on first use through the task runtime's compile cache (the kit's one NVRTC
 * cache, in memory and on disk, shared with the kernels package) and kept for the process.
 */
import {
  type Context,
  DeviceArray,
  type Kernel,
  launch,
  type Module,
  type Stream,
} from '@cuda-tasks/cudadrv';
import { loadCachedModule } from '@cuda-tasks/task-runtime';
import type { FloatDType } from './validate.js';

const SOURCE = `
// Helpers for @cuda-tasks/cusolver: zero one strict triangle of a matrix, transpose a matrix.
// Column-major; grid.y walks columns, grid.x * block.x walks rows (both grid-stride loops).
template <typename T>
__device__ void zeroTriangle(T *a, int rows, int columns, long long lda, int upper) {
  for (int j = blockIdx.y; j < columns; j += gridDim.y) {
    // upper != 0: zero rows 0..j-1 (strictly above the diagonal); else rows j+1..rows-1.
    int begin = upper ? 0 : j + 1;
    int end = upper ? (j < rows ? j : rows) : rows;
    for (int i = begin + blockIdx.x * blockDim.x + threadIdx.x; i < end;
         i += blockDim.x * gridDim.x) {
      a[(long long)j * lda + i] = T(0);
    }
  }
}

template <typename T>
__device__ void transpose(T *out, long long ldOut, const T *in, long long ldIn, int rows,
                          int columns) {
  // in is rows x columns, out is columns x rows: out(j, i) = in(i, j).
  for (int j = blockIdx.y; j < columns; j += gridDim.y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += blockDim.x * gridDim.x) {
      out[(long long)i * ldOut + j] = in[(long long)j * ldIn + i];
    }
  }
}

extern "C" __global__ void cusolver_zero_triangle_f32(float *a, int rows, int columns,
                                                      long long lda, int upper) {
  zeroTriangle(a, rows, columns, lda, upper);
}
extern "C" __global__ void cusolver_zero_triangle_f64(double *a, int rows, int columns,
                                                      long long lda, int upper) {
  zeroTriangle(a, rows, columns, lda, upper);
}
extern "C" __global__ void cusolver_transpose_f32(float *out, long long ldOut, const float *in,
                                                  long long ldIn, int rows, int columns) {
  transpose(out, ldOut, in, ldIn, rows, columns);
}
extern "C" __global__ void cusolver_transpose_f64(double *out, long long ldOut, const double *in,
                                                  long long ldIn, int rows, int columns) {
  transpose(out, ldOut, in, ldIn, rows, columns);
}
`;

interface HelperKernels {
  module: Module;
  zeroTriangle: Record<FloatDType, Kernel>;
  transpose: Record<FloatDType, Kernel>;
}

// The kernels of each context's module (the compile cache keeps the module loaded).
const compiled = new Map<Context, HelperKernels>();

function kernels(context: Context): HelperKernels {
  let helpers = compiled.get(context);
  if (helpers === undefined || helpers.module.disposed) {
    const module = loadCachedModule(SOURCE, context, 'cusolver-helpers.cu');
    const zero = ['int32', 'int32', 'int64', 'int32'] as const;
    const dims = ['int64', 'int32', 'int32'] as const;
    helpers = {
      module,
      zeroTriangle: {
        float32: module.kernel('cusolver_zero_triangle_f32', ['float32*', ...zero]),
        float64: module.kernel('cusolver_zero_triangle_f64', ['float64*', ...zero]),
      },
      transpose: {
        float32: module.kernel('cusolver_transpose_f32', [
          'float32*',
          'int64',
          'float32*',
          ...dims,
        ]),
        float64: module.kernel('cusolver_transpose_f64', [
          'float64*',
          'int64',
          'float64*',
          ...dims,
        ]),
      },
    };
    compiled.set(context, helpers);
  }
  return helpers;
}

const BLOCK = 256;
const MAX_GRID_X = 64;
const MAX_GRID_Y = 65535;

function grid(rows: number, columns: number): [number, number] {
  return [
    Math.max(1, Math.min(MAX_GRID_X, Math.ceil(rows / BLOCK))),
    Math.max(1, Math.min(MAX_GRID_Y, columns)),
  ];
}

/**
 * Sets the strict `part` triangle of a 2-D column-major array to zero, in place, on `stream`:
 * `'upper'` zeroes the elements above the diagonal (i < j), `'lower'` those below (i > j).
 */
export function zeroTriangle(
  array: DeviceArray<FloatDType>,
  part: 'upper' | 'lower',
  stream: Stream,
): void {
  const rows = array.rows;
  const columns = array.columns;
  const leadingDimension = columns > 1 ? array.leadingDimension : Math.max(1, rows);
  launch(
    kernels(stream.context).zeroTriangle[array.dtype as FloatDType],
    { grid: grid(rows, columns), block: BLOCK, stream },
    array,
    rows,
    columns,
    leadingDimension,
    part === 'upper' ? 1 : 0,
  );
}

/** A new contiguous array holding the transpose of a 2-D column-major array, on `stream`. */
export function transpose<D extends FloatDType>(
  source: DeviceArray<D>,
  stream: Stream,
): DeviceArray<D> {
  const rows = source.rows;
  const columns = source.columns;
  const out = DeviceArray.empty(source.dtype, [columns, rows], { stream });
  try {
    launch(
      kernels(stream.context).transpose[source.dtype as FloatDType],
      { grid: grid(rows, columns), block: BLOCK, stream },
      out,
      Math.max(1, columns),
      source,
      columns > 1 ? source.leadingDimension : Math.max(1, rows),
      rows,
      columns,
    );
  } catch (error) {
    out.dispose();
    throw error;
  }
  return out;
}
