import { CudaArgumentError } from '@cuda-tasks/cudadrv';
import { thrown } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { ELEMENTWISE_RESERVED, elementwise } from './elementwise.js';
import { assigns, parseSignature, reads } from './signature.js';

const NONE = { inputs: {}, outputs: {} };

describe('parseSignature', () => {
  it('reads inputs, outputs, dtypes and type variables', () => {
    const signature = parseSignature(
      ' x: float32,  y :T ->\n z: T, w: int32 ',
      'test',
      ELEMENTWISE_RESERVED,
    );
    expect(signature.text).toBe('x: float32, y :T -> z: T, w: int32');
    expect(signature.inputs).toEqual([
      { name: 'x', type: { dtype: 'float32' } },
      { name: 'y', type: { variable: 0 } },
    ]);
    expect(signature.outputs).toEqual([
      { name: 'z', type: { variable: 0 } },
      { name: 'w', type: { dtype: 'int32' } },
    ]);
    expect(signature.variables).toEqual(['T']);
    expect(parseSignature('-> y: float64', 'test', NONE).inputs).toEqual([]);
  });

  it.each([
    ['x: float32, y: float32', /expected "inputs -> outputs"/],
    ['x: float32 -> y: float32 -> z: float32', /expected "inputs -> outputs"/],
    ['x float32 -> y: float32', /is not "name: type"/],
    ['x: float32 ->', /no output/],
    ['x: float33 -> y: float32', /unknown dtype "float33" for x/],
    ['x: double -> y: float32', /unknown dtype "double"/],
    ['x: float32 -> y: t', /unknown dtype "t"/],
    ['x: float32, x: float32 -> y: float32', /"x" is declared twice/],
    ['x: float32 -> x: float32', /"x" is declared twice/],
    ['i: float32 -> y: float32', /input i: reserved, the body's element index is named i/],
    ['x: float32 -> float: float32', /output float: a C\/C\+\+ keyword cannot name a parameter/],
    ['ct_x: float32 -> y: float32', /input ct_x: names starting with ct_ are reserved/],
    ['2x: float32 -> y: float32', /input "2x": not a name/],
    ['x: float32 -> threadIdx: float32', /output threadIdx: a CUDA built-in variable/],
  ])('rejects %j', (text, message) => {
    const error = thrown(() => parseSignature(text, 'test', ELEMENTWISE_RESERVED));
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toMatch(message);
  });

  it('rejects a non-string signature and too many parameters', () => {
    expect(() => parseSignature(42, 'test', NONE)).toThrow(/must be a string/);
    const many = Array.from({ length: 13 }, (_, i) => `x${i}: float32`).join(', ');
    expect(() => parseSignature(`${many} -> y: float32`, 'test', NONE)).toThrow(/at most 13/);
  });
});

describe('elementwise rejects bad kernels when made, before anything native', () => {
  it('an output the body never assigns', () => {
    expect(() => elementwise('x: float32 -> y: float32, z: float32', 'y = x')).toThrow(
      /never assigns the output z/,
    );
    // A comparison is not an assignment.
    expect(() => elementwise('x: float32 -> y: float32', 'if (y == x) {}')).toThrow(
      /never assigns the output y/,
    );
  });

  it('an empty body, bad syntax, an unknown dtype, a duplicate name', () => {
    expect(() => elementwise('x: float32 -> y: float32', '  ')).toThrow(/non-empty string/);
    expect(() => elementwise('x: float32 y: float32', 'y = x')).toThrow(CudaArgumentError);
    expect(() => elementwise('x: float128 -> y: float32', 'y = x')).toThrow(/unknown dtype/);
    expect(() => elementwise('x: float32, x: int32 -> y: float32', 'y = x')).toThrow(/twice/);
  });
});

describe('assigns / reads', () => {
  it('tells assignments from comparisons and reads', () => {
    expect(assigns('y = x', 'y')).toBe(true);
    expect(assigns('y += x', 'y')).toBe(true);
    expect(assigns('y <<= 1', 'y')).toBe(true);
    expect(assigns('if (y == x) {}', 'y')).toBe(false);
    expect(assigns('z = y <= x', 'y')).toBe(false);
    expect(assigns('yy = x', 'y')).toBe(false);
    expect(reads('y = x', 'y')).toBe(false);
    expect(reads('y += x', 'y')).toBe(true);
    expect(reads('y = y * 2', 'y')).toBe(true);
  });
});
