import { streamDouble, thrown } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CudaArgumentError } from './errors.js';
import {
  assertOptions,
  booleanOption,
  numberOption,
  renamedBooleanOption,
  streamOption,
} from './options-checks.js';

/** The message of the CudaArgumentError `fn` throws (fails the test if it throws none). */
function refusal(fn: () => unknown): string {
  const error = thrown(fn);
  expect(error).toBeInstanceOf(CudaArgumentError);
  expect(error).toBeInstanceOf(TypeError);
  return error.message;
}

describe('assertOptions', () => {
  it('takes an object or undefined', () => {
    for (const options of [undefined, {}, { stream: undefined }, Object.freeze({}), []]) {
      expect(() => assertOptions('lu', options)).not.toThrow();
    }
  });

  it.each([
    ['upper', 'lu: options must be an object, got "upper"'],
    [null, 'lu: options must be an object, got null'],
    [true, 'lu: options must be an object, got true'],
    [3, 'lu: options must be an object, got 3'],
    [3n, 'lu: options must be an object, got 3n'],
  ])('refuses %s', (options, message) => {
    expect(refusal(() => assertOptions('lu', options))).toBe(message);
  });

  it('given the names a call takes, refuses any other, naming a near one', () => {
    const known = ['transA', 'transB', 'alpha', 'beta', 'stream'];
    for (const options of [{}, { transA: true, beta: 0 }, { stream: undefined }]) {
      expect(() => assertOptions('gemm', options, known)).not.toThrow();
    }
    expect(refusal(() => assertOptions('gemm', { transa: true }, known))).toBe(
      'gemm: unknown option "transa" (did you mean transA?); gemm takes transA, transB, alpha, beta, stream',
    );
    expect(refusal(() => assertOptions('gemm', { transA: true, gamma: 1 }, known))).toBe(
      'gemm: unknown option "gamma"; gemm takes transA, transB, alpha, beta, stream',
    );
    // A letter dropped, added, changed or two swapped names the option; two as near, neither.
    for (const misspelt of ['strem', 'streams', 'stram', 'sterams', 'aplha', 'alpah']) {
      expect(refusal(() => assertOptions('gemm', { [misspelt]: 1 }, known))).toMatch(
        /\(did you mean (stream|alpha)\?\)/,
      );
    }
    expect(refusal(() => assertOptions('gemm', { trans: true }, known))).toBe(
      'gemm: unknown option "trans"; gemm takes transA, transB, alpha, beta, stream',
    );
    // Any name outside the list is refused, whatever its value (undefined included).
    fc.assert(
      fc.property(
        fc.string({ minLength: 1 }).filter((name) => !known.includes(name) && name !== '__proto__'),
        fc.anything(),
        (name, value) => {
          expect(refusal(() => assertOptions('gemm', { [name]: value }, known))).toContain(
            `unknown option ${JSON.stringify(name)}`,
          );
        },
      ),
      { numRuns: 200 },
    );
  });
});

/**
 * The rule of a typed option, for any value: the value when it has the option's type, the
 * fallback when it is undefined, else a refusal that names the call, the option and the type.
 */
function obeysTheRule(
  read: (value: unknown, fallback: never) => unknown,
  type: string,
  fallback: fc.Arbitrary<unknown>,
  refused: RegExp,
): void {
  fc.assert(
    fc.property(fc.anything(), fallback, (value, given) => {
      const otherwise = given as never;
      if (value === undefined) expect(read(value, otherwise)).toBe(otherwise);
      else if (typeof value === type) expect(read(value, otherwise)).toBe(value);
      else expect(refusal(() => read(value, otherwise))).toMatch(refused);
    }),
  );
}

describe('booleanOption and numberOption', () => {
  it.each([
    [
      'booleanOption',
      (value: unknown, fallback: never) => booleanOption('gemm', 'transA', value, fallback),
      'boolean',
      fc.boolean(),
      /^gemm: option transA must be true or false, got /,
    ],
    [
      'numberOption',
      (value: unknown, fallback: never) => numberOption('gemm', 'alpha', value, fallback),
      'number',
      fc.double(),
      /^gemm: option alpha must be a number, got /,
    ],
  ] as const)(
    '%s is the value of its type, the fallback for undefined, else a refusal (any value)',
    (_, read, type, fallback, refused) => {
      obeysTheRule(read, type, fallback, refused);
    },
  );
});

describe('booleanOption', () => {
  it('defaults to false and names the value it refuses', () => {
    expect(booleanOption('svd', 'full', undefined)).toBe(false);
    expect(refusal(() => booleanOption('svd', 'full', 'yes'))).toBe(
      'svd: option full must be true or false, got "yes"',
    );
    expect(refusal(() => booleanOption('svd', 'full', null))).toBe(
      'svd: option full must be true or false, got null',
    );
    expect(refusal(() => booleanOption('svd', 'full', { on: true }))).toBe(
      'svd: option full must be true or false, got Object',
    );
    expect(refusal(() => booleanOption('svd', 'full', Object.create(null)))).toBe(
      'svd: option full must be true or false, got an object',
    );
  });
});

describe('renamedBooleanOption', () => {
  const flag = fc.option(fc.boolean(), { nil: undefined });

  it('takes either spelling; both given must agree (every combination)', () => {
    fc.assert(
      fc.property(flag, flag, fc.boolean(), (value, old, fallback) => {
        const read = () => renamedBooleanOption('gemv', 'transA', value, 'trans', old, fallback);
        if (value !== undefined && old !== undefined && value !== old) {
          expect(refusal(read)).toBe(
            `gemv: option transA is ${value} but trans (its deprecated spelling) is ${old}: pass transA only`,
          );
        } else {
          expect(read()).toBe(value ?? old ?? fallback);
        }
      }),
    );
  });

  it('refuses a bad value under either name', () => {
    expect(refusal(() => renamedBooleanOption('luSolve', 'transA', 1, 'transpose', true))).toBe(
      'luSolve: option transA must be true or false, got 1',
    );
    expect(refusal(() => renamedBooleanOption('luSolve', 'transA', true, 'transpose', 'y'))).toBe(
      'luSolve: option transpose must be true or false, got "y"',
    );
  });
});

describe('numberOption', () => {
  it('names the value it refuses', () => {
    expect(refusal(() => numberOption('gemm', 'beta', '2', 0))).toBe(
      'gemm: option beta must be a number, got "2"',
    );
  });
});

describe('streamOption', () => {
  it('passes undefined and a Stream through, and refuses what is not a Stream', () => {
    const stream = streamDouble({ context: {} });
    expect(streamOption('qr', undefined)).toBeUndefined();
    expect(streamOption('qr', stream)).toBe(stream);
    expect(refusal(() => streamOption('qr', null))).toBe(
      'qr: option stream must be a Stream, got null',
    );
    expect(refusal(() => streamOption('qr', 0x1234n))).toBe(
      'qr: option stream must be a Stream, got 4660n',
    );
    expect(refusal(() => streamOption('qr', 'default'))).toBe(
      'qr: option stream must be a Stream, got "default"',
    );
    expect(refusal(() => streamOption('qr', { context: {} }))).toBe(
      'qr: option stream must be a Stream, got Object',
    );
  });
});
