import { DeviceArray } from '@cuda-tasks/cudadrv';
import { roundTo } from '@cuda-tasks/testing';
import type { SolverDType } from '../src/validate.js';

/** Both dtypes the GPU tests run for. */
export const SOLVER_DTYPES: readonly SolverDType[] = ['float32', 'float64'];

/** Bounds for relative errors, per dtype (float32: about 1e-7 unit roundoff, float64: 1e-16). */
export const TOLERANCE: Record<
  SolverDType,
  { residual: number; reconstruction: number; orthogonality: number; values: number }
> = {
  // ||A X - B|| / (||A|| ||X||), ||rebuilt - A|| / ||A||, ||Q^T Q - I||, |w - w_ref| / max|w_ref|.
  float32: { residual: 1e-5, reconstruction: 1e-4, orthogonality: 5e-4, values: 2e-5 },
  float64: { residual: 1e-12, reconstruction: 1e-12, orthogonality: 1e-11, values: 1e-12 },
};

/**
 * Copies a float64 host matrix to the device as `dtype`; also returns the values the device
 * holds (rounded to float32 for float32), which the references must use.
 */
export function upload<D extends SolverDType>(
  dtype: D,
  data: Float64Array,
  shape: number[],
): { array: DeviceArray<D>; host: Float64Array } {
  const host = roundTo(dtype, data);
  const array = DeviceArray.fromHost<D>(
    dtype === 'float32' ? Float32Array.from(data) : Float64Array.from(data),
    shape,
  );
  return { array, host };
}

/** The array's elements on the host as float64 (column-major; views come back compacted). */
export async function download(array: DeviceArray): Promise<Float64Array> {
  return Float64Array.from((await array.toHost()) as ArrayLike<number>);
}
