import { CudaArgumentError, DisposedError } from '@cuda-tasks/cudadrv';
import { hostOnlyArray, thrown } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { elementwise } from './elementwise.js';
import { add, arange, axpby, div, fill, map, maximum } from './ops.js';
import { reduction } from './reduction.js';
import { argmax, max, mean, sum } from './reductions.js';
import { topk } from './topk.js';

// No GPU or driver here: any native call (the current-stream lookup, a compile, an
// allocation) would throw CudaUnavailableError. A CudaArgumentError therefore shows that the
// check ran before anything native.

const f32 = (shape: number[] = [8]) => hostOnlyArray('float32', shape);

function argumentError(fn: () => unknown, message: RegExp): void {
  const error = thrown(fn);
  expect(error).toBeInstanceOf(CudaArgumentError);
  expect(error.message).toMatch(message);
}

describe('elementwise calls', () => {
  const product = elementwise('x: float32, y: T -> z: T', 'z = x * y');

  it('mismatched shapes, dtypes, counts and kinds', () => {
    argumentError(() => product(f32([8]), f32([9])), /input y has shape \[9\], x has \[8\]/);
    argumentError(() => product(f32([2, 4]), f32([4, 2])), /has shape \[4, 2\], x has \[2, 4\]/);
    argumentError(
      () => product(hostOnlyArray('float64', [8]), f32()),
      /input x must be float32, got float64/,
    );
    argumentError(
      () => product(f32(), f32(), hostOnlyArray('float64', [8])),
      /output z is float64 but T is already float32/,
    );
    argumentError(() => product(f32(), f32(), f32([7])), /output z has shape \[7\]/);
    argumentError(() => product(f32()), /takes 2 inputs \(x, y\)/);
    argumentError(() => product(f32(), f32(), f32(), f32()), /got 4 arguments/);
    argumentError(
      () => product(f32(), 'two' as never),
      /input y must be a DeviceArray or a number, got "two"/,
    );
    argumentError(() => product(2, 3), /no array argument to take the shape from/);
    argumentError(() => product(f32(), 2), /cannot tell T/);
  });

  it('scalars out of range for integer types', () => {
    const shift = elementwise('x: int32, s: int32 -> y: int32', 'y = x + s');
    argumentError(() => shift(hostOnlyArray('int32', [4]), 1.5), /expected an integer/);
    argumentError(() => shift(hostOnlyArray('int32', [4]), 2 ** 31), /expected an integer/);
  });

  it('disposed and strided arrays', () => {
    expect(
      thrown(() => product(hostOnlyArray('float32', [8], { disposed: true }), f32())),
    ).toBeInstanceOf(DisposedError);
    argumentError(
      () =>
        product(
          hostOnlyArray('float32', [2, 2], { strides: [1, 4] }),
          hostOnlyArray('float32', [2, 2]),
        ),
      /strided view/,
    );
  });

  it('source() checks as a call does, and reports the options object in its count', () => {
    argumentError(() => product.source(f32([3]), f32([4])), /has shape/);
    expect(product.source(f32(), f32(), {})).toContain('ct_elementwise');
  });
});

describe('ready-made element-wise operations', () => {
  it('map', () => {
    argumentError(() => map(f32(), 'sine' as never), /unknown function "sine"/);
    argumentError(
      () => map(hostOnlyArray('int32', [4]), 'sin'),
      /map sin: x is int32; supported: float32, float64, float16, bfloat16/,
    );
    argumentError(() => map(f32([4]), 'sin', f32([5])), /output y has shape \[5\]/);
    argumentError(
      () => map(f32([4]), 'abs', hostOnlyArray('float64', [4])),
      /output y must be float32/,
    );
    argumentError(
      () => map(hostOnlyArray('uint8', [4]), 'abs'),
      /supported: float32, float64, int32/,
    );
    argumentError(() => map(7 as never, 'sin'), /x must be a DeviceArray, got 7/);
  });

  it('binary operations, axpby, fill, arange', () => {
    argumentError(() => add(f32([4]), f32([5])), /has shape \[5\], x has \[4\]/);
    argumentError(
      () => div(f32(), hostOnlyArray('float64', [8])),
      /input y must be float32, got float64/,
    );
    argumentError(() => maximum(1, 2), /x or y must be a DeviceArray/);
    argumentError(() => add(hostOnlyArray('int32', [3]), 0.5), /expected an integer/);
    argumentError(
      () => add(hostOnlyArray('uint32', [3]), 1),
      /supported: float32, float64, int32, float16, bfloat16/,
    );
    argumentError(
      () => axpby(1, hostOnlyArray('int32', [3]), 1, hostOnlyArray('int32', [3])),
      /axpby: x is int32/,
    );
    argumentError(() => axpby(1, f32([3]), 1, f32([4])), /input y has shape \[4\]/);
    argumentError(() => axpby('1' as never, f32(), 1, f32()), /a must be a number/);
    argumentError(() => fill(hostOnlyArray('int32', [3]), Number.NaN), /expected an integer/);
    argumentError(() => arange(0, 10, 0), /step must not be 0/);
    argumentError(() => arange(Number.POSITIVE_INFINITY), /finite/);
    argumentError(() => arange(0, 3e9), /do not fit in int32/);
    argumentError(() => arange(4, { dtype: 'uint8' }), /supported/);
  });
});

describe('topk', () => {
  it('rejects bad k, axes, dtypes and outputs', () => {
    argumentError(() => topk(f32([10]), 0), /k must be an integer in 1..1024/);
    argumentError(() => topk(f32([2000]), 1025), /k must be an integer in 1..1024/);
    argumentError(() => topk(f32([10]), 11), /more than the 10 elements along axis 0/);
    argumentError(() => topk(f32([10, 3]), 4), /more than the 3 elements along axis 1/);
    argumentError(() => topk(f32([10, 3]), 4, { axis: 2 }), /axis must be 0 or 1/);
    argumentError(() => topk(f32([10]), 4, { axis: 1 }), /axis must be 0/);
    argumentError(
      () => topk(hostOnlyArray('float16', [10]), 4),
      /supported: float32, float64, int32/,
    );
    argumentError(() => topk(f32([2, 2, 2]), 1), /vector or a matrix/);
    argumentError(
      () => topk(f32([10, 3]), 2, { values: f32([2, 3]) }),
      /values must have shape \[10, 2\]/,
    );
    argumentError(
      () => topk(f32([10, 3]), 2, { axis: 0, indices: hostOnlyArray('float32', [2, 3]) as never }),
      /indices must be int32/,
    );
    argumentError(
      () => topk(f32([10]), 2, { largest: 'yes' as never }),
      /largest must be a boolean/,
    );
  });
});

describe('reductions', () => {
  it('ready-made: dtypes, axes, outputs, empty inputs without an identity', () => {
    argumentError(
      () => sum(hostOnlyArray('float16', [4])),
      /sum: x is float16; supported: float32, float64, int32/,
    );
    argumentError(() => sum(f32([4, 4]), { axis: 2 }), /axis must be 0, 1 or -1/);
    argumentError(() => sum(f32([2, 2, 2]), { axis: 0 }), /needs a vector or a matrix/);
    argumentError(() => sum(f32([4, 3]), { axis: 0, out: f32([4]) }), /must hold 3 elements/);
    argumentError(
      () => sum(f32([4, 3]), { out: hostOnlyArray('float64', [1]) }),
      /output y must be float32, got float64/,
    );
    argumentError(
      () => mean(hostOnlyArray('int32', [4]), { out: hostOnlyArray('int32', [1]) }),
      /must be float64, got int32/,
    );
    argumentError(() => argmax(f32([4]), { out: f32([1]) as never }), /must be int32/);
    argumentError(() => max(f32([0])), /reducing zero elements has no result/);
    argumentError(() => argmax(f32([0, 5]), { axis: 0 }), /reducing zero elements/);
    argumentError(() => sum(3 as never), /x must be a DeviceArray, got 3/);
  });

  it('user reductions: definitions and calls', () => {
    const parts = { map: 'x', reduce: 'a + b', identity: '0' };
    argumentError(
      () => reduction('x: float32 -> y: float32, z: float32', parts),
      /at most 1 output/,
    );
    argumentError(() => reduction('a: float32 -> y: float32', parts), /"a" is reserved/);
    argumentError(
      () => reduction('x: float32 -> y: float32', { ...parts, map: '' }),
      /map must be a non-empty string/,
    );
    argumentError(
      () => reduction('x: float32 -> y: float32', { ...parts, post: 'a + 1' }),
      /post never assigns the output y/,
    );
    argumentError(
      () => reduction('x: float32 -> y: float32', { ...parts, accumulate: 'float128' as never }),
      /unknown accumulate dtype/,
    );
    const dot = reduction('x: T, w: T -> y: T', { map: 'x * w', reduce: 'a + b', identity: '0' });
    argumentError(() => dot(f32([4]), f32([5])), /input w has shape \[5\], x has \[4\]/);
    argumentError(
      () => dot(f32([4]), hostOnlyArray('float64', [4])),
      /input w is float64 but T is already float32/,
    );
    argumentError(() => dot(2, 3), /at least one input must be a DeviceArray/);
    argumentError(() => dot(f32([4])), /takes 2 inputs/);
    expect(dot.source(f32([4]), 2)).toContain('ct_reduce_blocks');
  });
});
