import { CudaArgumentError, DisposedError } from '@cuda-tasks/cudadrv';
import { hostOnlyArray, standInStream, thrown } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkOperands, checkOutputApart } from './arguments.js';
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
      () => mean(hostOnlyArray('int32', [4]), { out: hostOnlyArray('int32', [1]) as never }),
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
    argumentError(() => reduction('x: float32 -> a: float32', parts), /output a: reserved/);
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

describe('options a call does not take are refused, not ignored', () => {
  // A misspelt option left unread would compute something else (a result written to a new
  // array rather than to `out`, the largest rather than the smallest) without a word.
  it('names the option, the one it most likely misspells, and those the call takes', () => {
    argumentError(
      () => sum(f32([4]), { output: f32([1]) } as never),
      /sum: unknown option "output"; sum takes out, axis, stream/,
    );
    argumentError(
      () => mean(f32([4, 3]), { Axis: 0 } as never),
      /mean: unknown option "Axis" \(did you mean axis\?\)/,
    );
    argumentError(
      () => topk(f32([10]), 3, { smallest: true } as never),
      /topk: unknown option "smallest"; topk takes axis, largest, values, indices, stream/,
    );
    argumentError(() => topk(f32([10]), 3, { larget: false } as never), /did you mean largest\?/);
    argumentError(() => map(f32(), 'sin', { strem: undefined } as never), /did you mean stream\?/);
    argumentError(() => add(f32(), f32(), f32(), { out: f32() } as never), /unknown option "out"/);
    argumentError(() => fill(f32(), 1, { value: 2 } as never), /unknown option "value"/);
    argumentError(
      () => arange(4, { dtyp: 'float64' } as never),
      /arange: unknown option "dtyp" \(did you mean dtype\?\)/,
    );
    const product = elementwise('x: float32, y: float32 -> z: float32', 'z = x * y');
    argumentError(() => product(f32(), f32(), { steam: 1 } as never), /did you mean stream\?/);
    const total = reduction('x: float32 -> y: float32', {
      map: 'x',
      reduce: 'a + b',
      identity: '0',
    });
    argumentError(() => total(f32([4, 2]), { axes: 0 } as never), /did you mean axis\?/);
  });

  it('a typed array where the output or options go is refused too', () => {
    argumentError(() => sum(f32([4]), new Float32Array(1) as never), /sum: unknown option "0"/);
  });

  it("fast-check: every name outside a call's list is refused; the listed ones pass this check", () => {
    const lists: [string, readonly string[], (options: object) => unknown][] = [
      ['sum', ['out', 'axis', 'stream'], (o) => sum(f32([4]), o as never)],
      [
        'topk',
        ['axis', 'largest', 'values', 'indices', 'stream'],
        (o) => topk(f32([8]), 2, o as never),
      ],
      ['map sin', ['stream'], (o) => map(f32(), 'sin', o as never)],
    ];
    fc.assert(
      fc.property(
        fc.constantFrom(...lists),
        fc.string({ minLength: 1, maxLength: 12 }),
        ([call, known, fn], name) => {
          const error = thrown(() => fn({ [name]: undefined }));
          const unknown = new RegExp(`^${call}: unknown option`);
          if (known.includes(name)) {
            // Past the options check, the call stops later (no GPU here), never at it.
            expect(error.message).not.toMatch(unknown);
          } else {
            expect(error).toBeInstanceOf(CudaArgumentError);
            expect(error.message).toMatch(unknown);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('checkOperands: outputs against inputs, other outputs and the stream', () => {
  const stream = standInStream();
  const labels = ['input x', 'input y', 'output z', 'output w'];
  /** The call's arguments as elementwise passes them: inputs, then outputs, in one list. */
  const check = (args: unknown[], inPlace = true) =>
    checkOperands('k', labels, args, 2, args, 2, args.length, stream, inPlace);

  it('refuses an output shifted one element into an input, naming both', () => {
    const parent = hostOnlyArray('float32', [9], { byteLength: 36 });
    argumentError(
      () => check([parent.slice(0, 8), 2, parent.slice(1, 8)]),
      /k: output z overlaps input x in memory \(elements 1\.\.8 and 0\.\.7 of one buffer\)/,
    );
  });

  it('allows exactly the same elements in place (elementwise), refuses them for reductions', () => {
    const x = hostOnlyArray('float32', [8], { byteLength: 32 });
    expect(check([x, 2, x])).toBeUndefined();
    expect(check([x, 2, x.reshape([2, 4])])).toBeUndefined();
    argumentError(() => check([x, 2, x], false), /output z overlaps input x/);
  });

  it('refuses two outputs over one memory, even exactly the same', () => {
    const x = hostOnlyArray('float32', [8], { byteLength: 32 });
    const out = hostOnlyArray('float32', [8], { byteLength: 32 });
    argumentError(() => check([x, 2, out, out]), /output w overlaps output z/);
  });

  it('refuses an array of another context than the stream', () => {
    const foreign = hostOnlyArray('float32', [8], {
      byteLength: 32,
      context: { device: { ordinal: 1 }, toString: () => 'Context(device 1)' },
    });
    const x = hostOnlyArray('float32', [8], { byteLength: 32 });
    argumentError(() => check([foreign, 2, x]), /k: input x lives in Context\(device 1\)/);
    argumentError(() => check([x, 2, foreign]), /k: output z lives in Context\(device 1\)/);
  });

  it('property: refused iff the element ranges truly overlap (in place: unless identical)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(24), fc.integer({ min: 0, max: 8 })), {
          minLength: 3,
          maxLength: 4,
        }),
        fc.boolean(),
        fc.boolean(),
        (views, inPlace, yNumber) => {
          const parent = hostOnlyArray('float32', [32], { byteLength: 128 });
          const arrays = views.map(([start, length]) => parent.slice(start, length));
          const args: unknown[] = [...arrays];
          if (yNumber) args[1] = 2;
          // The reference: element sets, one by one.
          const elements = (j: number) => {
            const [start, length] = views[j]!;
            return Array.from({ length }, (_, i) => start + i);
          };
          const meet = (j: number, k: number) => elements(j).some((e) => elements(k).includes(e));
          const same = (j: number, k: number) =>
            views[j]![0] === views[k]![0] && views[j]![1] === views[k]![1];
          let expected = false;
          for (let j = 2; j < args.length; j++) {
            for (let k = 0; k < 2; k++) {
              if (typeof args[k] === 'number') continue;
              if (meet(j, k) && !(inPlace && same(j, k))) expected = true;
            }
            for (let k = 2; k < j; k++) if (meet(j, k)) expected = true;
          }
          let error: unknown;
          try {
            check(args, inPlace);
          } catch (caught) {
            error = caught;
          }
          expect(error instanceof CudaArgumentError).toBe(expected);
          if (error !== undefined) expect((error as Error).message).toMatch(/overlaps/);
          // Accepted arguments pass unchanged.
          expect(args.slice(2)).toEqual(arrays.slice(2));
        },
      ),
      { numRuns: 1000, seed: 17 },
    );
  });

  it('checkOutputApart compares bytes across dtypes of one buffer', () => {
    const parent = hostOnlyArray('float32', [8], { byteLength: 32 });
    const doubles = hostOnlyArray('float64', [4], { byteLength: 32 });
    // A float64 view over the same stand-in buffer: elements 1..2 are bytes 8..23.
    const wide = Object.assign(Object.create(Object.getPrototypeOf(doubles)), doubles, {
      buffer: parent.buffer,
    });
    const late = parent.slice(6, 2); // bytes 24..31
    expect(
      checkOutputApart('k', 'output z', late, 'input x', wide.slice(1, 2), true),
    ).toBeUndefined();
    argumentError(
      () =>
        checkOutputApart('k', 'output z', parent.slice(5, 2), 'input x', wide.slice(1, 2), true),
      /output z overlaps input x/,
    );
  });
});

// The calls themselves check their operands after resolving the stream.
describe('calls with overlapping operands', () => {
  const stream = standInStream();
  const product = elementwise('x: float32, y: T -> z: T', 'z = x * y');

  it('elementwise: an output one element into an input is refused', () => {
    const parent = hostOnlyArray('float32', [9], { byteLength: 36 });
    argumentError(
      () => product(parent.slice(0, 8), 2, parent.slice(1, 8), { stream }),
      /output z overlaps input x/,
    );
  });

  it('elementwise: an array of another context is refused', () => {
    const foreign = hostOnlyArray('float32', [8], {
      byteLength: 32,
      context: { device: { ordinal: 1 } },
    });
    const y = hostOnlyArray('float32', [8], { byteLength: 32 });
    argumentError(() => product(foreign, y, { stream }), /input x lives in/);
  });

  it('topk: outputs over x, or an x of another context, are refused', () => {
    const x = hostOnlyArray('float32', [8], { byteLength: 32 });
    const indices = hostOnlyArray('int32', [2], { byteLength: 8 });
    argumentError(
      () => topk(x, 2, { values: x.slice(6, 2), indices, stream }),
      /topk: values overlaps x/,
    );
    const foreign = hostOnlyArray('float32', [8], {
      byteLength: 32,
      context: { device: { ordinal: 1 } },
    });
    argumentError(() => topk(foreign, 2, { stream }), /topk: x lives in/);
  });

  it('reduction: an output inside the input is refused', () => {
    const x = hostOnlyArray('float32', [8], { byteLength: 32 });
    argumentError(() => sum(x, { out: x.slice(0, 1), stream }), /overlaps/);
  });
});
