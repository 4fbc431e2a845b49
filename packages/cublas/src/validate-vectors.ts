/** The checks of cuBLAS's gemv and vector routines (axpy, dot, nrm2, asum, iamax, scal). */
import {
  assertApart,
  assertOptions,
  type FloatDType,
  numberOption,
  type Operand,
  operandMatrixFootprint,
  operandVectorFootprint,
  renamedBooleanOption,
  type VectorLayout,
} from '@cuda-tasks/cudadrv';
import * as v from './validate.js';

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

/** A validated one-vector routine (nrm2, asum, iamax, scal). */
export interface CheckedVector {
  dtype: FloatDType;
  n: number;
  incx: number;
}

/** A validated two-vector routine (axpy, dot). */
export interface CheckedVectorPair extends CheckedVector {
  incy: number;
}

/** A validated gemv: A is m x n as stored, x and y are vectors. */
export interface CheckedGemv extends CheckedVectorPair {
  trans: boolean;
  alpha: number;
  beta: number;
  m: number;
  lda: number;
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

/** Fails when `y`, written, shares a byte with vector `x` (read), of one buffer. */
function assertVectorsApart(
  call: string,
  y: Operand,
  vy: VectorLayout,
  x: Operand,
  vx: VectorLayout,
) {
  operandVectorFootprint(v.written, y, vy);
  assertApart(call, 'y', v.written, 'x', operandVectorFootprint(v.read, x, vx));
}

/** Everything `gemv` checks before its native call: y = alpha op(A) x + beta y. */
export function checkGemv(
  call: string,
  a: unknown,
  x: unknown,
  y: unknown,
  options: GemvOptions = v.NO_OPTIONS,
  out: CheckedGemv = newCheckedGemv(),
): CheckedGemv {
  out.dtype = v.floatOperands(call, 'axy', a, x, y);
  assertOptions(call, options);
  const trans = renamedBooleanOption(call, 'transA', options.transA, 'trans', options.trans);
  out.alpha = numberOption(call, 'alpha', options.alpha, 1);
  out.beta = numberOption(call, 'beta', options.beta, 0);
  const la = v.matrixLayout(call, 'a', a as Operand, 2, v.layoutA);
  const vx = v.vectorLayout(call, 'x', x as Operand, v.layoutX);
  const vy = v.vectorLayout(call, 'y', y as Operand, v.layoutY);
  const rows = trans ? la.columns : la.rows;
  const columns = trans ? la.rows : la.columns;
  if (vx.length !== columns) {
    v.fail(call, `x has ${vx.length} elements, ${v.opName('a', trans)} has ${columns} columns`);
  }
  if (vy.length !== rows) {
    v.fail(call, `y has ${vy.length} elements, ${v.opName('a', trans)} has ${rows} rows`);
  }
  if ((y as Operand).buffer === (a as Operand).buffer) {
    operandVectorFootprint(v.written, y as Operand, vy);
    assertApart(call, 'y', v.written, 'a', operandMatrixFootprint(v.read, a as Operand, la));
  }
  if ((y as Operand).buffer === (x as Operand).buffer) {
    assertVectorsApart(call, y as Operand, vy, x as Operand, vx);
  }
  out.trans = trans;
  out.m = la.rows;
  out.n = la.columns;
  out.lda = la.leadingDimension;
  out.incx = vx.increment;
  out.incy = vy.increment;
  return out;
}

/** Everything a one-vector routine (nrm2, asum, iamax, scal) checks. */
export function checkVector(
  call: string,
  x: unknown,
  out: CheckedVector = { dtype: 'float32', n: 0, incx: 0 },
): CheckedVector {
  out.dtype = v.floatOperands(call, 'x', x);
  const vx = v.vectorLayout(call, 'x', x as Operand, v.layoutX);
  out.n = vx.length;
  out.incx = vx.increment;
  return out;
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
  out.dtype = v.floatOperands(call, 'xy', x, y);
  const vx = v.vectorLayout(call, 'x', x as Operand, v.layoutX);
  const vy = v.vectorLayout(call, 'y', y as Operand, v.layoutY);
  if (vx.length !== vy.length) v.fail(call, `x has ${vx.length} elements, y has ${vy.length}`);
  if (writesY && (x as Operand).buffer === (y as Operand).buffer) {
    assertVectorsApart(call, y as Operand, vy, x as Operand, vx);
  }
  out.n = vx.length;
  out.incx = vx.increment;
  out.incy = vy.increment;
  return out;
}
