/**
 * The checks of cuBLAS's matrix-vector product (gemv) and vector routines (axpy, dot, nrm2,
 * asum, iamax, scal). Built from the operand rules of `validate.ts`.
 */
import {
  assertApart,
  assertOptions,
  type FloatDType,
  numberOption,
  type Operand,
  operandMatrixFootprint,
  operandVectorFootprint,
  renamedBooleanOption,
} from '@cuda-tasks/cudadrv';
import {
  fail,
  floatOperands,
  layoutA,
  layoutX,
  layoutY,
  matrixLayout,
  NO_OPTIONS,
  read,
  vectorLayout,
  written,
} from './validate.js';
import { opName } from './validate-gemm.js';

/** Options of `gemv`. */
export interface GemvOptions {
  /** Use A^T instead of A (default false). */
  transA?: boolean;
  /**
   * Use A^T instead of A.
   * @deprecated Spelled `transA` across the libraries; `trans` is still taken (given with
   * `transA`, both must agree) and goes in the next minor release.
   */
  trans?: boolean;
  /** Scales A x (default 1). */
  alpha?: number;
  /** Scales y before adding (default 0). */
  beta?: number;
}

/** A validated gemv: A is m x n as stored, x and y are vectors. */
export interface CheckedGemv {
  dtype: FloatDType;
  trans: boolean;
  alpha: number;
  beta: number;
  m: number;
  n: number;
  lda: number;
  incx: number;
  incy: number;
}

/** A new object for `checkGemv` to fill. */
export function newCheckedGemv(): CheckedGemv {
  return {
    dtype: 'float32',
    trans: false,
    alpha: 1,
    beta: 0,
    m: 0,
    n: 0,
    lda: 0,
    incx: 0,
    incy: 0,
  };
}

/** Everything `gemv` checks before its native call: y = alpha op(A) x + beta y. */
export function checkGemv(
  call: string,
  a: unknown,
  x: unknown,
  y: unknown,
  options: GemvOptions = NO_OPTIONS,
  out: CheckedGemv = newCheckedGemv(),
): CheckedGemv {
  out.dtype = floatOperands(call, 'axy', a, x, y);
  return gemvShape(call, a as Operand, x as Operand, y as Operand, options, out);
}

/** gemv's options, shapes and overlap, once its operands passed. */
function gemvShape(
  call: string,
  a: Operand,
  x: Operand,
  y: Operand,
  options: GemvOptions,
  out: CheckedGemv,
): CheckedGemv {
  assertOptions(call, options);
  const trans = renamedBooleanOption(call, 'transA', options.transA, 'trans', options.trans);
  out.alpha = numberOption(call, 'alpha', options.alpha, 1);
  out.beta = numberOption(call, 'beta', options.beta, 0);
  const la = matrixLayout(call, 'a', a, 2, layoutA);
  const vx = vectorLayout(call, 'x', x, layoutX);
  const vy = vectorLayout(call, 'y', y, layoutY);
  const rows = trans ? la.columns : la.rows;
  const columns = trans ? la.rows : la.columns;
  if (vx.length !== columns) {
    fail(call, `x has ${vx.length} elements, ${opName('a', trans)} has ${columns} columns`);
  }
  if (vy.length !== rows) {
    fail(call, `y has ${vy.length} elements, ${opName('a', trans)} has ${rows} rows`);
  }
  if (y.buffer === a.buffer || y.buffer === x.buffer) {
    operandVectorFootprint(written, y, vy);
    if (y.buffer === a.buffer)
      assertApart(call, 'y', written, 'a', operandMatrixFootprint(read, a, la));
    if (y.buffer === x.buffer)
      assertApart(call, 'y', written, 'x', operandVectorFootprint(read, x, vx));
  }
  out.trans = trans;
  out.m = la.rows;
  out.n = la.columns;
  out.lda = la.leadingDimension;
  out.incx = vx.increment;
  out.incy = vy.increment;
  return out;
}

/** A validated one-vector routine (nrm2, asum, iamax, scal). */
export interface CheckedVector {
  dtype: FloatDType;
  n: number;
  incx: number;
}

/** Everything a one-vector routine (nrm2, asum, iamax, scal) checks. */
export function checkVector(
  call: string,
  x: unknown,
  out: CheckedVector = { dtype: 'float32', n: 0, incx: 0 },
): CheckedVector {
  out.dtype = floatOperands(call, 'x', x);
  const vx = vectorLayout(call, 'x', x as Operand, layoutX);
  out.n = vx.length;
  out.incx = vx.increment;
  return out;
}

/** A validated two-vector routine (axpy, dot). */
export interface CheckedVectorPair extends CheckedVector {
  incy: number;
}

/**
 * Everything a two-vector routine (axpy, dot) checks: two vectors of one length and dtype;
 * with `writesY` (axpy), that y shares no byte with x.
 */
export function checkVectorPair(
  call: string,
  x: unknown,
  y: unknown,
  out: CheckedVectorPair = { dtype: 'float32', n: 0, incx: 0, incy: 0 },
  writesY = false,
): CheckedVectorPair {
  out.dtype = floatOperands(call, 'xy', x, y);
  const vx = vectorLayout(call, 'x', x as Operand, layoutX);
  const vy = vectorLayout(call, 'y', y as Operand, layoutY);
  if (vx.length !== vy.length) {
    fail(call, `x has ${vx.length} elements, y has ${vy.length}`);
  }
  if (writesY && (x as Operand).buffer === (y as Operand).buffer) {
    operandVectorFootprint(written, y as Operand, vy);
    assertApart(call, 'y', written, 'x', operandVectorFootprint(read, x as Operand, vx));
  }
  out.n = vx.length;
  out.incx = vx.increment;
  out.incy = vy.increment;
  return out;
}
