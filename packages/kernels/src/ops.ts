/**
 * Ready-made element-wise operations: unary math through `map`, binary arithmetic, `axpby`,
 * `fill` and `arange`. Each is an `ElementwiseProgram` per (operation, dtype), made on first
 * use; a call allocates nothing but a missing output.
 */
import {
  assertOptions,
  CudaArgumentError,
  DeviceArray,
  type DType,
  describeValue,
  type Shape,
} from '@cuda-tasks/cudadrv';
import {
  type CallOptions,
  checkArray,
  checkDType,
  clearList,
  isOptions,
  STREAM_OPTIONS,
} from './arguments.js';
import { isInteger } from './ctypes.js';
import { ElementwiseProgram } from './elementwise.js';

/** The dtypes the ready-made element-wise operations take. */
export const ELEMENTWISE_DTYPES: readonly DType[] = [
  'float32',
  'float64',
  'int32',
  'float16',
  'bfloat16',
];
const FLOAT_DTYPES: readonly DType[] = ['float32', 'float64', 'float16', 'bfloat16'];

/** The functions `map` applies. */
export type UnaryFunction = 'sin' | 'cos' | 'exp' | 'log' | 'sqrt' | 'abs' | 'tanh';

// Per function: the float (float32 and the half types, which compute in float) and double
// expressions, and the int32 one where it makes sense.
const UNARY: Readonly<Record<UnaryFunction, { float: string; double: string; int?: string }>> = {
  sin: { float: 'sinf(x)', double: 'sin(x)' },
  cos: { float: 'cosf(x)', double: 'cos(x)' },
  exp: { float: 'expf(x)', double: 'exp(x)' },
  log: { float: 'logf(x)', double: 'log(x)' },
  sqrt: { float: 'sqrtf(x)', double: 'sqrt(x)' },
  tanh: { float: 'tanhf(x)', double: 'tanh(x)' },
  // Unsigned negation: abs(INT_MIN) wraps to INT_MIN (as in NumPy) instead of overflowing.
  abs: {
    float: 'fabsf(x)',
    double: 'fabs(x)',
    int: '(int)(x < 0 ? 0u - (unsigned int)x : (unsigned int)x)',
  },
};

/** The binary operations. */
export type BinaryOperation = 'add' | 'sub' | 'mul' | 'div' | 'maximum' | 'minimum';

// Integers wrap (unsigned arithmetic: signed overflow is undefined in C); division truncates.
// maximum/minimum propagate NaN, as NumPy's do.
const BINARY: Readonly<Record<BinaryOperation, { float: string; int: string }>> = {
  add: { float: 'x + y', int: '(int)((unsigned int)x + (unsigned int)y)' },
  sub: { float: 'x - y', int: '(int)((unsigned int)x - (unsigned int)y)' },
  mul: { float: 'x * y', int: '(int)((unsigned int)x * (unsigned int)y)' },
  div: { float: 'x / y', int: 'x / y' },
  maximum: { float: '(x > y || x != x) ? x : y', int: 'x > y ? x : y' },
  minimum: { float: '(x < y || x != x) ? x : y', int: 'x < y ? x : y' },
};

type ProgramTable = Record<string, Partial<Record<DType, ElementwiseProgram>>>;
const unaryPrograms: ProgramTable = {};
const binaryPrograms: ProgramTable = {};
const axpbyPrograms: Partial<Record<DType, ElementwiseProgram>> = {};
const fillPrograms: Partial<Record<DType, ElementwiseProgram>> = {};
const arangePrograms: Partial<Record<DType, ElementwiseProgram>> = {};

// Reused argument lists (a call fills them, runs, and clears them).
const one: unknown[] = [undefined];
const two: unknown[] = [undefined, undefined];
const four: unknown[] = [undefined, undefined, undefined, undefined];
const out: unknown[] = [undefined];

/** `(out?, options?)` after the operands: an output array and/or `{ stream }`. */
function trailing(
  outOrOptions: DeviceArray | CallOptions | undefined,
  options: CallOptions | undefined,
): CallOptions | undefined {
  if (
    outOrOptions !== undefined &&
    !DeviceArray.isInstance(outOrOptions) &&
    isOptions(outOrOptions)
  ) {
    out[0] = undefined;
    return outOrOptions;
  }
  out[0] = outOrOptions;
  return options;
}

function run(program: ElementwiseProgram, inputs: unknown[], options: CallOptions | undefined) {
  try {
    // A misspelt or unknown option is refused, not ignored.
    assertOptions(program.call, options, STREAM_OPTIONS);
    return program.run(inputs, out, options?.stream) as DeviceArray;
  } finally {
    clearList(inputs, undefined);
    out[0] = undefined;
  }
}

/** Keeps `program` in `table` under `dtype`; returns it. */
function remember(
  table: Partial<Record<DType, ElementwiseProgram>>,
  dtype: DType,
  program: ElementwiseProgram,
): ElementwiseProgram {
  table[dtype] = program;
  return program;
}

/**
 * Applies `fn` to every element: `sin`, `cos`, `exp`, `log`, `sqrt`, `tanh` (float32, float64,
 * float16, bfloat16) and `abs` (also int32). The output is allocated when not given; pass `x`
 * itself to work in place.
 * @example
 * map(c, 'sin', c); // c = sin(c), in place
 * const roots = map(x, 'sqrt');
 */
export function map<D extends DType>(
  x: DeviceArray<D>,
  fn: UnaryFunction,
  out?: DeviceArray<D> | CallOptions,
  options?: CallOptions,
): DeviceArray<D> {
  // The last (function, dtype) seen skips the checks that found its program.
  const program =
    fn === lastMap.fn && DeviceArray.isInstance(x) && x.dtype === lastMap.dtype
      ? lastMap.program!
      : mapProgram(x, fn);
  const stream = trailing(out, options);
  one[0] = x;
  return run(program, one, stream) as DeviceArray<D>;
}

/** The last `map` call's function and dtype, and their program. */
const lastMap: {
  fn: UnaryFunction | undefined;
  dtype: DType | undefined;
  program: ElementwiseProgram | undefined;
} = { fn: undefined, dtype: undefined, program: undefined };

/** Checks `map`'s function and array; returns their program (and remembers it). */
function mapProgram(x: DeviceArray, fn: UnaryFunction): ElementwiseProgram {
  const expressions = typeof fn === 'string' && Object.hasOwn(UNARY, fn) ? UNARY[fn] : undefined;
  if (expressions === undefined) {
    throw new CudaArgumentError(
      `map: unknown function ${describeValue(fn)}; expected one of ${Object.keys(UNARY).join(', ')}`,
    );
  }
  // Messages name the function, built only when one is thrown (a call allocates nothing).
  const array = DeviceArray.isInstance(x) ? x : checkArray(x, `map ${fn}`, 'x');
  const dtype = array.dtype;
  const allowed = expressions.int === undefined ? FLOAT_DTYPES : ELEMENTWISE_DTYPES;
  if (!allowed.includes(dtype)) checkDType(dtype, allowed, `map ${fn}`, 'x');
  const program = unaryProgram(fn, dtype);
  lastMap.fn = fn;
  lastMap.dtype = dtype;
  lastMap.program = program;
  return program;
}

/** @internal The program of `map(x, fn)` for `dtype` (made on first use). */
export function unaryProgram(fn: UnaryFunction, dtype: DType): ElementwiseProgram {
  // Looked up first: making the program (and a closure) only the first time.
  return unaryPrograms[fn]?.[dtype] ?? makeUnaryProgram(fn, dtype);
}

function makeUnaryProgram(fn: UnaryFunction, dtype: DType): ElementwiseProgram {
  const expressions = UNARY[fn];
  const body = isInteger(dtype)
    ? expressions.int!
    : dtype === 'float64'
      ? expressions.double
      : expressions.float;
  return remember(
    (unaryPrograms[fn] ??= {}),
    dtype,
    new ElementwiseProgram(`x: ${dtype} -> y: ${dtype}`, `y = ${body}`, { name: `map ${fn}` }),
  );
}

function binary<D extends DType>(
  operation: BinaryOperation,
  x: DeviceArray<D> | number,
  y: DeviceArray<D> | number,
  outOrOptions: DeviceArray<D> | CallOptions | undefined,
  options: CallOptions | undefined,
): DeviceArray<D> {
  const arrayOperand = DeviceArray.isInstance(x) ? x : DeviceArray.isInstance(y) ? y : undefined;
  const given = DeviceArray.isInstance(outOrOptions) ? outOrOptions : undefined;
  const dtype = (arrayOperand ?? given)?.dtype;
  if (dtype === undefined) {
    throw new CudaArgumentError(
      `${operation}: x or y must be a DeviceArray (got ${describeValue(x)} and ${describeValue(y)})`,
    );
  }
  // A program exists only for a dtype that passed the check.
  let program = binaryPrograms[operation]?.[dtype];
  if (program === undefined) {
    checkDType(dtype, ELEMENTWISE_DTYPES, operation, arrayOperand === x ? 'x' : 'y');
    program = makeBinaryProgram(operation, dtype);
  }
  const stream = trailing(outOrOptions, options);
  two[0] = x;
  two[1] = y;
  return run(program, two, stream) as DeviceArray<D>;
}

/** @internal The program of a binary operation for `dtype` (made on first use). */
export function binaryProgram(operation: BinaryOperation, dtype: DType): ElementwiseProgram {
  return binaryPrograms[operation]?.[dtype] ?? makeBinaryProgram(operation, dtype);
}

function makeBinaryProgram(operation: BinaryOperation, dtype: DType): ElementwiseProgram {
  const body = BINARY[operation][isInteger(dtype) ? 'int' : 'float'];
  return remember(
    (binaryPrograms[operation] ??= {}),
    dtype,
    new ElementwiseProgram(`x: ${dtype}, y: ${dtype} -> z: ${dtype}`, `z = ${body}`, {
      name: operation,
    }),
  );
}

/**
 * The signature of the binary operations (`add`, `sub`, `mul`, `div`, `maximum`, `minimum`):
 * `x` and `y` arrays of one shape and dtype, or one of them a number; the result written to
 * `out` (a new array when it is left out), on the stream of the options (default: the
 * current one).
 */
export type BinaryOperator = <D extends DType>(
  x: DeviceArray<D> | number,
  y: DeviceArray<D> | number,
  out?: DeviceArray<D> | CallOptions,
  options?: CallOptions,
) => DeviceArray<D>;

/**
 * `x + y` element by element (arrays of one shape and dtype, or one of them a number).
 * int32 wraps on overflow.
 * @example const z = add(x, y); add(x, 1, x); // x += 1
 */
export const add: BinaryOperator = (x, y, out, options) => binary('add', x, y, out, options);

/** `x - y` element by element (see `add`). */
export const sub: BinaryOperator = (x, y, out, options) => binary('sub', x, y, out, options);

/** `x * y` element by element (see `add`). */
export const mul: BinaryOperator = (x, y, out, options) => binary('mul', x, y, out, options);

/**
 * `x / y` element by element (see `add`); int32 divides as C does (truncating toward zero; a
 * division by zero gives an unspecified value, no error).
 */
export const div: BinaryOperator = (x, y, out, options) => binary('div', x, y, out, options);

/** The larger of `x` and `y` element by element; NaN if either is NaN (see `add`). */
export const maximum: BinaryOperator = (x, y, out, options) =>
  binary('maximum', x, y, out, options);

/** The smaller of `x` and `y` element by element; NaN if either is NaN (see `add`). */
export const minimum: BinaryOperator = (x, y, out, options) =>
  binary('minimum', x, y, out, options);

/**
 * `a * x + b * y` element by element, `a` and `b` numbers (float32, float64, float16,
 * bfloat16; for the half types `a` and `b` stay float32 and the sum is rounded once).
 * @example axpby(2, x, -1, y, y); // y = 2x - y
 */
export function axpby<D extends DType>(
  a: number,
  x: DeviceArray<D>,
  b: number,
  y: DeviceArray<D>,
  out?: DeviceArray<D> | CallOptions,
  options?: CallOptions,
): DeviceArray<D> {
  const array = checkArray(x, 'axpby', 'x');
  const dtype = array.dtype;
  checkDType(dtype, FLOAT_DTYPES, 'axpby', 'x');
  for (const [label, value] of [
    ['a', a],
    ['b', b],
  ] as const) {
    if (typeof value !== 'number')
      throw new CudaArgumentError(`axpby: ${label} must be a number, got ${describeValue(value)}`);
  }
  const stream = trailing(out, options);
  four[0] = a;
  four[1] = x;
  four[2] = b;
  four[3] = y;
  return run(axpbyProgram(dtype), four, stream) as DeviceArray<D>;
}

/** @internal The program of `axpby` for `dtype` (made on first use). */
export function axpbyProgram(dtype: DType): ElementwiseProgram {
  const found = axpbyPrograms[dtype];
  if (found !== undefined) return found;
  const coefficient = dtype === 'float64' ? 'float64' : 'float32';
  return remember(
    axpbyPrograms,
    dtype,
    new ElementwiseProgram(
      `a: ${coefficient}, x: ${dtype}, b: ${coefficient}, y: ${dtype} -> z: ${dtype}`,
      'z = a * x + b * y',
      { name: 'axpby' },
    ),
  );
}

/**
 * Sets every element of `out` to `value` (rounded to the dtype; integers must be in range).
 * Returns `out`.
 * @example fill(x, 0.5);
 */
export function fill<D extends DType>(
  out: DeviceArray<D>,
  value: number,
  options?: CallOptions,
): DeviceArray<D> {
  const array = checkArray(out, 'fill', 'out');
  const dtype = array.dtype;
  checkDType(dtype, ELEMENTWISE_DTYPES, 'fill', 'out');
  trailing(array, undefined);
  one[0] = value;
  return run(fillProgram(dtype), one, options) as DeviceArray<D>;
}

/** @internal The program of `fill` for `dtype` (made on first use). */
export function fillProgram(dtype: DType): ElementwiseProgram {
  return (
    fillPrograms[dtype] ??
    remember(
      fillPrograms,
      dtype,
      new ElementwiseProgram(`v: ${dtype} -> y: ${dtype}`, 'y = v', { name: 'fill' }),
    )
  );
}

const ARANGE_OPTIONS: readonly string[] = Object.freeze(['dtype', 'stream']);

/** Options of `arange`. */
export interface ArangeOptions extends CallOptions {
  /** The dtype (default: int32 when start, stop and step are integers, else float32). */
  dtype?: DType;
}

/**
 * Evenly spaced values `start, start + step, ...` below `stop` (above it for a negative step),
 * as NumPy's `arange`: `arange(stop)` or `arange(start, stop, step = 1)`. Each value is
 * computed as `start + i * step` in float64 (two roundings, no FMA), then converted to the dtype.
 * @example
 * arange(5); // int32 [0, 1, 2, 3, 4]
 * arange(0, 1, 0.25, { dtype: 'float64' }); // [0, 0.25, 0.5, 0.75]
 */
export function arange(
  startOrStop: number,
  stopOrOptions?: number | ArangeOptions,
  step?: number,
  options?: ArangeOptions,
): DeviceArray {
  let start = 0;
  let stop: number;
  let increment = 1;
  let settings: ArangeOptions | undefined = options;
  if (typeof stopOrOptions === 'number') {
    start = startOrStop;
    stop = stopOrOptions;
    if (step !== undefined) increment = step;
  } else {
    stop = startOrStop;
    settings = stopOrOptions;
  }
  assertOptions('arange', settings, ARANGE_OPTIONS);
  for (const [label, value] of [
    ['start', start],
    ['stop', stop],
    ['step', increment],
  ] as const) {
    if (typeof value !== 'number' || !Number.isFinite(value))
      throw new CudaArgumentError(
        `arange: ${label} must be a finite number, got ${describeValue(value)}`,
      );
  }
  if (increment === 0) throw new CudaArgumentError('arange: step must not be 0');
  const integral = Number.isInteger(start) && Number.isInteger(stop) && Number.isInteger(increment);
  const dtype = settings?.dtype ?? (integral ? 'int32' : 'float32');
  checkDType(dtype, ELEMENTWISE_DTYPES, 'arange', 'dtype');
  const length = Math.max(0, Math.ceil((stop - start) / increment));
  if (isInteger(dtype) && length > 0) {
    const last = start + (length - 1) * increment;
    const [low, high] = dtype === 'int32' ? [-(2 ** 31), 2 ** 31 - 1] : [0, 0];
    if (Math.min(start, last) < low || Math.max(start, last) > high) {
      throw new CudaArgumentError(`arange: values ${start}..${last} do not fit in ${dtype}`);
    }
  }
  const shape: Shape = [length];
  const result = DeviceArray.empty(
    dtype,
    shape,
    settings?.stream ? { stream: settings.stream } : {},
  );
  two[0] = start;
  two[1] = increment;
  out[0] = result;
  try {
    return arangeProgram(dtype).run(two, out, settings?.stream) as DeviceArray;
  } catch (error) {
    result.dispose();
    throw error;
  } finally {
    clearList(two, undefined);
    out[0] = undefined;
  }
}

/** @internal The program of `arange` for `dtype` (made on first use). */
export function arangeProgram(dtype: DType): ElementwiseProgram {
  return (
    arangePrograms[dtype] ??
    remember(
      arangePrograms,
      dtype,
      new ElementwiseProgram(
        `start: float64, step: float64 -> y: ${dtype}`,
        // Not contracted into an FMA: the values are exactly start + i * step as float64
        // computes it (what NumPy gives), then converted.
        'y = __dadd_rn(start, __dmul_rn((double)i, step))',
        { name: 'arange' },
      ),
    )
  );
}
