import { DeviceArray, type DeviceBuffer, type DType } from '@cuda-tasks/cudadrv';

/**
 * The context of `standInStream()`, and by default of `hostOnlyArray`'s and
 * `recordingOperand`'s memory: the operand checks find them on the stand-in stream's context.
 */
export const STAND_IN_CONTEXT = Object.freeze({
  makeCurrent() {},
  device: { ordinal: 0 },
  toString: () => 'Context(device 0)',
});

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
    /** The context the memory belongs to (default: `standInStream()`'s). */
    context?: object;
  } = {},
): DeviceArray<D> {
  const buffer = {
    byteLength: options.byteLength ?? 0,
    address: 0,
    disposed: options.disposed ?? false,
    context: options.context ?? STAND_IN_CONTEXT,
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
