import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CudaArgumentError, CudaError } from './errors.js';
import { libraryErrors } from './library-errors.js';

const byName = { LIB_STATUS_SUCCESS: 0, LIB_STATUS_BAD_VALUE: 3, LIB_STATUS_BROKEN: 7 } as const;
const byValue = { 0: 'LIB_STATUS_SUCCESS', 3: 'LIB_STATUS_BAD_VALUE', 7: 'LIB_STATUS_BROKEN' };

function made(extra: Partial<Parameters<typeof libraryErrors>[0]> = {}) {
  return libraryErrors({
    library: 'libFoo',
    className: 'FooError',
    markerKey: '@test/FooError',
    statuses: byName,
    unknownPrefix: 'LIB_STATUS_UNKNOWN_',
    messages: { LIB_STATUS_BAD_VALUE: 'a bad value', 7: 'it broke' },
    ...extra,
  } as never);
}

function thrownBy(run: () => void): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('libraryErrors: the error class it makes', () => {
  it('is a CudaError subclass named className, with code, status, call and the message', () => {
    const { ErrorClass } = made();
    const error = new ErrorClass(3, 'LIB_STATUS_BAD_VALUE', 'fooRun', 'a bad value');
    expect(error).toBeInstanceOf(ErrorClass);
    expect(error).toBeInstanceOf(CudaError);
    expect(ErrorClass.name).toBe('FooError');
    expect(error.name).toBe('FooError');
    expect(error.constructor).toBe(ErrorClass);
    expect([error.code, error.status, error.call]).toEqual([3, 'LIB_STATUS_BAD_VALUE', 'fooRun']);
    expect(error.message).toBe('fooRun failed: LIB_STATUS_BAD_VALUE (3): a bad value');
    expect(String(error.stack).split('\n')[0]).toBe(
      'FooError: fooRun failed: LIB_STATUS_BAD_VALUE (3): a bad value',
    );
  });

  it('isInstance is true for its errors and its subclasses, also from another loaded copy', () => {
    const first = made();
    const second = made(); // what a second loaded copy of the library would make
    const fromSecond = second.error(7, 'fooRun');
    expect(first.ErrorClass).not.toBe(second.ErrorClass);
    expect(fromSecond).not.toBeInstanceOf(first.ErrorClass);
    expect(first.ErrorClass.isInstance(fromSecond)).toBe(true);
    expect(CudaError.isInstance(fromSecond)).toBe(true);
    class Narrower extends first.ErrorClass {}
    expect(first.ErrorClass.isInstance(new Narrower(1, 'S', 'c', 'm'))).toBe(true);
    expect(first.ErrorClass.isInstance(new CudaError(1, 'S', 'c', 'm'))).toBe(false);
    const other = libraryErrors({
      library: 'libBar',
      className: 'BarError',
      markerKey: '@test/BarError',
      statuses: byName,
      unknownPrefix: 'X_',
    });
    expect(first.ErrorClass.isInstance(other.error(3, 'barRun'))).toBe(false);
    expect(first.ErrorClass.isInstance(null)).toBe(false);
    expect(first.ErrorClass.isInstance('FooError')).toBe(false);
  });
});

describe('libraryErrors: names and messages', () => {
  it('reads the table either way round, and names unknown statuses by number', () => {
    const fromNames = made();
    const fromValues = made({ statuses: byValue });
    for (const errors of [fromNames, fromValues]) {
      expect(errors.statusName(0)).toBe('LIB_STATUS_SUCCESS');
      expect(errors.statusName(3)).toBe('LIB_STATUS_BAD_VALUE');
      expect(errors.statusName(7)).toBe('LIB_STATUS_BROKEN');
      expect(errors.statusName(42)).toBe('LIB_STATUS_UNKNOWN_42');
    }
  });

  it('any table: every entry is named as listed, either way round; anything else by number', () => {
    const table = fc.uniqueArray(
      fc.record({
        value: fc.integer({ min: -5, max: 5000 }),
        name: fc.stringMatching(/^[A-Z_]{1,12}$/),
      }),
      { selector: (entry) => entry.value, maxLength: 20 },
    );
    fc.assert(
      fc.property(table, fc.integer({ min: -10, max: 6000 }), (entries, probe) => {
        const names = Object.fromEntries(entries.map((e) => [e.name, e.value]));
        const values = Object.fromEntries(entries.map((e) => [e.value, e.name]));
        // Two entries with one name: the name -> value form keeps the last value only.
        const expected = new Map<number, string>();
        for (const e of entries) expected.set(e.value, e.name);
        const viaValues = made({ statuses: values });
        for (const [value, name] of expected) expect(viaValues.statusName(value)).toBe(name);
        const viaNames = made({ statuses: names });
        for (const [name, value] of Object.entries(names)) {
          expect(viaNames.statusName(value)).toBe(name);
        }
        const listed = expected.get(probe);
        expect(viaValues.statusName(probe)).toBe(listed ?? `LIB_STATUS_UNKNOWN_${probe}`);
      }),
      { seed: 33, numRuns: 200 },
    );
  });

  it('messages by name or by number, else "unknown <library> status"', () => {
    const errors = made();
    expect(errors.statusMessage(3)).toBe('a bad value');
    expect(errors.statusMessage(7)).toBe('it broke');
    expect(errors.statusMessage(0)).toBe('unknown libFoo status');
    expect(errors.statusMessage(99)).toBe('unknown libFoo status');
    expect(made({ messages: undefined }).statusMessage(3)).toBe('unknown libFoo status');
  });

  it("asks the library's own lookups first and falls back when they answer undefined", () => {
    const errors = made({
      nativeName: (status) => (status === 3 ? 'NATIVE_BAD_VALUE' : undefined),
      nativeMessage: (status) => (status === 7 ? 'native text' : undefined),
    });
    expect(errors.statusName(3)).toBe('NATIVE_BAD_VALUE');
    expect(errors.statusName(7)).toBe('LIB_STATUS_BROKEN');
    expect(errors.statusMessage(7)).toBe('native text');
    expect(errors.statusMessage(3)).toBe('a bad value');
    expect(errors.error(3, 'fooRun').message).toBe(
      'fooRun failed: NATIVE_BAD_VALUE (3): a bad value',
    );
  });
});

describe('libraryErrors: check', () => {
  it('passes 0 and throws the error of any other status, naming the call', () => {
    const errors = made();
    expect(errors.check(0, 'fooCreate')).toBeUndefined();
    const error = thrownBy(() => errors.check(7, 'fooRun'));
    expect(errors.ErrorClass.isInstance(error)).toBe(true);
    expect(error).toBeInstanceOf(errors.ErrorClass);
    expect(error).toMatchObject({ code: 7, status: 'LIB_STATUS_BROKEN', call: 'fooRun' });
    expect((error as Error).message).toBe('fooRun failed: LIB_STATUS_BROKEN (7): it broke');
    const unknown = thrownBy(() => errors.check(-2, 'fooRun'));
    expect((unknown as Error).message).toBe(
      'fooRun failed: LIB_STATUS_UNKNOWN_-2 (-2): unknown libFoo status',
    );
  });

  it('works unbound (destructured), as the libraries export it', () => {
    const { check, statusName, statusMessage, error } = made();
    expect(() => check(3, 'fooRun')).toThrow('fooRun failed: LIB_STATUS_BAD_VALUE (3)');
    expect(statusName(3)).toBe('LIB_STATUS_BAD_VALUE');
    expect(statusMessage(3)).toBe('a bad value');
    expect(error(3, 'x').call).toBe('x');
  });
});

describe("libraryErrors: the library's own error class", () => {
  class SolverError extends CudaError {
    static override readonly isInstance = (value: unknown): value is SolverError =>
      value instanceof SolverError;
    readonly info: number | undefined;
    constructor(code: number, status: string, call: string, message: string, info?: number) {
      super(code, status, call, message);
      this.name = 'SolverError';
      this.info = info;
    }
  }

  it('error and check construct that class', () => {
    const errors = libraryErrors({
      library: 'libSolver',
      errorClass: SolverError,
      statuses: byValue,
      unknownPrefix: 'LIB_STATUS_',
    });
    expect(errors.ErrorClass).toBe(SolverError);
    const error = thrownBy(() => errors.check(3, 'solve'));
    expect(error).toBeInstanceOf(SolverError);
    expect(error).toMatchObject({ name: 'SolverError', code: 3, info: undefined });
    expect(errors.error(9, 'solve').status).toBe('LIB_STATUS_9');
  });
});

describe('libraryErrors: a wrong spec is a CudaArgumentError', () => {
  const base = {
    library: 'libFoo',
    className: 'FooError',
    markerKey: '@test/FooError',
    statuses: byName,
    unknownPrefix: 'LIB_',
  };
  it.each([
    ['no className', { ...base, className: undefined }, /className must be an identifier/],
    ['a className with a space', { ...base, className: 'Foo Error' }, /className/],
    ['no markerKey', { ...base, markerKey: '' }, /markerKey must be a non-empty string/],
    ['both kinds of class', { ...base, errorClass: CudaError }, /either errorClass or className/],
    [
      'an errorClass that is no CudaError',
      { ...base, className: undefined, markerKey: undefined, errorClass: TypeError },
      /errorClass must be a subclass of CudaError/,
    ],
    ['no library', { ...base, library: '' }, /library must name the library/],
    ['no unknownPrefix', { ...base, unknownPrefix: undefined }, /unknownPrefix must be a string/],
    ['no statuses', { ...base, statuses: null }, /statuses must be an object/],
    ['a statuses entry of neither form', { ...base, statuses: { A: 'B' } }, /statuses entry A: B/],
  ])('%s', (_what, spec, message) => {
    const error = thrownBy(() => libraryErrors(spec as never));
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect((error as Error).message).toMatch(message);
  });
});
