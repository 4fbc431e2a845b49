import type { Stream } from '@cuda-tasks/cudadrv';
import { columnMajorStrides, STAND_IN_CONTEXT } from './host-only-array.js';

/** The brand a Stream carries (on its prototype), which `resolveStream` checks. */
const STREAM_BRAND = Symbol.for('@cuda-tasks/Stream');

/**
 * `double` marked as a Stream (the brand `resolveStream` checks) and typed as one: a test
 * double's fields stand in for what the code under test reads.
 */
export function streamDouble(double: object): Stream {
  return Object.assign(double, { [STREAM_BRAND]: true }) as unknown as Stream;
}

/**
 * A stream stand-in for library calls tested without a GPU: the calls read only its context
 * (whose `makeCurrent` does nothing), its handles and its usability before the native call.
 */
export function standInStream(): Stream {
  return streamDouble({
    context: STAND_IN_CONTEXT,
    ffiHandle: 0,
    handle: 0n,
    disposed: false,
    assertUsable() {},
  });
}

/**
 * A dense column-major float32 operand shaped like a DeviceArray (enough for the library
 * packages' argument checks), whose uses on a stream (`ffiAddressOn`, `useOn`) are counted:
 * `uses()` tells whether a call declared it used. Cast `array` to the call's parameter type.
 */
export function recordingOperand(shape: readonly number[]): { array: unknown; uses(): number } {
  let uses = 0;
  const length = shape.reduce((product, dimension) => product * dimension, 1);
  const array = {
    dtype: 'float32',
    shape: [...shape],
    strides: columnMajorStrides(shape),
    offset: 0,
    length,
    disposed: false,
    buffer: { byteLength: length * 4, disposed: false, context: STAND_IN_CONTEXT },
    pointer: 0x10_0000n,
    ffiAddressOn: () => {
      uses++;
      return 0x10_0000;
    },
    useOn: () => {
      uses++;
      return 0x10_0000n;
    },
  };
  return { array, uses: () => uses };
}
