import { DeviceArray, type DeviceBuffer, type DType } from '@cuda-tasks/cudadrv';

/**
 * A real DeviceArray over a stand-in buffer with no device memory: its dtype, shape, strides
 * and disposed state behave as usual, so argument checks can be tested without a GPU. Any
 * native call made with it would fail, which is what the unit tests rely on.
 */
export function hostOnlyArray<D extends DType>(
  dtype: D,
  shape: readonly number[],
  options: {
    strides?: readonly number[];
    disposed?: boolean;
    /** The stand-in buffer's size (default 0: no size at all); range checks read it. */
    byteLength?: number;
  } = {},
): DeviceArray<D> {
  const buffer = {
    byteLength: options.byteLength ?? 0,
    address: 0,
    disposed: options.disposed ?? false,
  } as unknown as DeviceBuffer;
  return new DeviceArray(
    buffer,
    dtype,
    shape,
    options.strides ?? columnMajorStrides(shape),
    0,
    false,
  );
}

/** The element strides of a dense column-major array of `shape` (the first dimension varies fastest). */
export function columnMajorStrides(shape: readonly number[]): number[] {
  const strides: number[] = [];
  let stride = 1;
  for (const dimension of shape) {
    strides.push(stride);
    stride *= dimension;
  }
  return strides;
}
