/**
 * The checks of cuBLAS's products C = alpha op(A) op(B) + beta C (gemm, matmul, gemmEx): the
 * operands' dtypes, the product's shape, the transposes and scalars, and that C overlaps
 * neither A nor B. Built from the operand rules of `validate.ts`.
 */
import {
  assertApart,
  assertOperand,
  assertOptions,
  booleanOption,
  type DType,
  type FloatDType,
  type MatrixLayout,
  numberOption,
  type Operand,
  operandMatrixFootprint,
} from '@cuda-tasks/cudadrv';
import * as v from './validate.js';

/** The dtypes `gemmEx` takes for A and B. */
export type GemmExInputDType = 'float16' | 'bfloat16' | 'float32';

/** The m, n and k of a product op(A) (m x k) op(B) (k x n). */
export interface ProductShape {
  m: number;
  n: number;
  k: number;
}

/** m, n, k and the leading dimensions of a gemm: C (m x n) = op(A) (m x k) op(B) (k x n). */
export interface GemmShape extends ProductShape {
  lda: number;
  ldb: number;
  ldc: number;
}

export function opName(name: string, transpose: boolean): string {
  return transpose ? `${name}^T` : name;
}

/** The m, n and k of `op(a) * op(b)`, checking that the inner dimensions agree. */
export function productShape<T extends ProductShape>(
  call: string,
  a: MatrixLayout,
  b: MatrixLayout,
  transA: boolean,
  transB: boolean,
  out: T,
): T {
  const m = transA ? a.columns : a.rows;
  const k = transA ? a.rows : a.columns;
  const kb = transB ? b.columns : b.rows;
  const n = transB ? b.rows : b.columns;
  if (k !== kb) {
    v.fail(
      call,
      `inner dimensions differ: ${opName('a', transA)} is ${m} x ${k}, ${opName('b', transB)} is ${kb} x ${n}`,
    );
  }
  out.m = m;
  out.n = n;
  out.k = k;
  return out;
}

/**
 * The m, n, k and leading dimensions of C = op(A) op(B) from the operands' layouts; fails
 * unless C's matrices are m x n (`result` names them in that message: `c is`, `c's matrices are`).
 */
export function productLayoutShape<T extends GemmShape>(
  call: string,
  la: MatrixLayout,
  lb: MatrixLayout,
  lc: MatrixLayout,
  transA: boolean,
  transB: boolean,
  result: string,
  out: T,
): T {
  const { m, n } = productShape(call, la, lb, transA, transB, out);
  if (lc.rows !== m || lc.columns !== n) {
    v.fail(
      call,
      `${result} ${lc.rows} x ${lc.columns}, but ${opName('a', transA)} * ${opName('b', transB)} is ${m} x ${n}`,
    );
  }
  out.lda = la.leadingDimension;
  out.ldb = lb.leadingDimension;
  out.ldc = lc.leadingDimension;
  return out;
}

/**
 * The cuBLAS dimensions of C = alpha op(A) op(B) + beta C for `a`, `b`, `c` (1-D or 2-D with
 * contiguous columns), C sharing no byte with A or B; dtypes are checked by the caller.
 */
export function gemmShape<T extends GemmShape>(
  call: string,
  a: Operand,
  b: Operand,
  c: Operand,
  transA: boolean,
  transB: boolean,
  out: T,
): T {
  const la = v.matrixLayout(call, 'a', a, 2, v.layoutA);
  const lb = v.matrixLayout(call, 'b', b, 2, v.layoutB);
  const lc = v.matrixLayout(call, 'c', c, 2, v.layoutC);
  productLayoutShape(call, la, lb, lc, transA, transB, 'c is', out);
  if (c.buffer === a.buffer || c.buffer === b.buffer) {
    operandMatrixFootprint(v.written, c, lc);
    if (c.buffer === a.buffer)
      assertApart(call, 'c', v.written, 'a', operandMatrixFootprint(v.read, a, la));
    if (c.buffer === b.buffer)
      assertApart(call, 'c', v.written, 'b', operandMatrixFootprint(v.read, b, lb));
  }
  return out;
}

/** Options every gemm-like call takes (scalars and transposes). */
export interface ProductOptions {
  /** Use A^T instead of A (default false). */
  transA?: boolean;
  /** Use B^T instead of B (default false). */
  transB?: boolean;
  /** Scales the product (default 1). */
  alpha?: number;
  /** Scales C before adding (default 0: C is only written). */
  beta?: number;
}

/** A product's transposes and scalars, as checked from its options. */
export interface ProductScalars {
  transA: boolean;
  transB: boolean;
  alpha: number;
  beta: number;
}

/** A product's transposes and scalars from its options, with their defaults. */
export function productScalars<T extends ProductScalars>(
  call: string,
  options: ProductOptions,
  out: T,
): T {
  assertOptions(call, options);
  out.transA = booleanOption(call, 'transA', options.transA);
  out.transB = booleanOption(call, 'transB', options.transB);
  out.alpha = numberOption(call, 'alpha', options.alpha, 1);
  out.beta = numberOption(call, 'beta', options.beta, 0);
  return out;
}

/** The first checks of a float product (gemm, gemmStridedBatched): A, B, C and one dtype, options. */
export function floatProduct<T extends ProductScalars & { dtype: FloatDType }>(
  call: string,
  a: unknown,
  b: unknown,
  c: unknown,
  options: ProductOptions,
  out: T,
): T {
  out.dtype = v.floatOperands(call, 'abc', a, b, c);
  return productScalars(call, options, out);
}

/** A product's scalars and shape before a check fills them in. */
export const DEFAULT_SCALARS: Readonly<ProductScalars> = {
  transA: false,
  transB: false,
  alpha: 1,
  beta: 0,
};
export const NO_SHAPE: Readonly<GemmShape> = { m: 0, n: 0, k: 0, lda: 0, ldb: 0, ldc: 0 };

/** A validated gemm: its dtype, dimensions and scalars. */
export interface CheckedGemm extends GemmShape, ProductScalars {
  dtype: FloatDType;
}

/** The cudaDataType_t of gemmEx's operands. */
export interface GemmExTypes {
  aType: number;
  bType: number;
  cType: number;
}

/** A validated gemmEx: cudaDataType_t of each operand, dimensions and scalars. */
export interface CheckedGemmEx extends GemmShape, GemmExTypes, ProductScalars {}

/** A new object for `checkGemm` to fill. */
export function newCheckedGemm(): CheckedGemm {
  return { dtype: 'float32', ...DEFAULT_SCALARS, ...NO_SHAPE };
}

/** A new object for `checkGemmEx` to fill. */
export function newCheckedGemmEx(): CheckedGemmEx {
  return { aType: 0, bType: 0, cType: 0, ...DEFAULT_SCALARS, ...NO_SHAPE };
}

/** The cudaDataType_t of each dtype `gemmEx` accepts (library_types.h). */
const GEMM_EX_DATA_TYPES: Readonly<Partial<Record<DType, number>>> = {
  float32: 0, // CUDA_R_32F
  float16: 2, // CUDA_R_16F
  bfloat16: 14, // CUDA_R_16BF
};

/**
 * Everything a product checks before its native call, in order: arrays, dtypes, options,
 * shapes. gemm: A, B, C of one float dtype. gemmEx (`ex`): A and B both float16, both bfloat16
 * or both float32, C float32 or theirs (CUBLAS_COMPUTE_32F's combinations), as cudaDataType_t.
 */
function product<T extends CheckedGemm | CheckedGemmEx>(
  call: string,
  a: unknown,
  b: unknown,
  c: unknown,
  options: ProductOptions,
  out: T,
  ex: boolean,
): T {
  if (!ex) floatProduct(call, a, b, c, options, out as CheckedGemm);
  else {
    assertOperand(call, 'a', a);
    assertOperand(call, 'b', b);
    assertOperand(call, 'c', c);
    const input = a.dtype;
    if (b.dtype !== input || (input !== 'float16' && input !== 'bfloat16' && input !== 'float32')) {
      v.fail(
        call,
        `a and b must both be float16, both bfloat16 or both float32, got a: ${input}, b: ${b.dtype}`,
      );
    }
    if (c.dtype !== 'float32' && c.dtype !== input) {
      v.fail(call, `c must be float32 or ${input} (like a and b), got ${c.dtype}`);
    }
    const types = out as CheckedGemmEx;
    types.aType = types.bType = GEMM_EX_DATA_TYPES[input]!;
    types.cType = GEMM_EX_DATA_TYPES[c.dtype]!;
    productScalars(call, options, out);
  }
  return gemmShape(call, a as Operand, b as Operand, c as Operand, out.transA, out.transB, out);
}

/** Everything `gemm` checks before its native call. */
export function checkGemm(
  call: string,
  a: unknown,
  b: unknown,
  c: unknown,
  options: ProductOptions = v.NO_OPTIONS,
  out: CheckedGemm = newCheckedGemm(),
): CheckedGemm {
  return product(call, a, b, c, options, out, false);
}

/** Everything `gemmEx` checks before its native call. */
export function checkGemmEx(
  call: string,
  a: unknown,
  b: unknown,
  c: unknown,
  options: ProductOptions = v.NO_OPTIONS,
  out: CheckedGemmEx = newCheckedGemmEx(),
): CheckedGemmEx {
  return product(call, a, b, c, options, out, true);
}

/** What `matmul` allocates: the result's dtype and shape. */
export interface CheckedMatmul {
  dtype: FloatDType;
  m: number;
  n: number;
}

// Scratch of checkMatmul, whose result has no room for them.
const matmulScalars: ProductScalars = { ...DEFAULT_SCALARS };
const matmulShape: ProductShape = { m: 0, n: 0, k: 0 };

/** What `matmul` checks before allocating its result; returns the result's dtype and shape. */
export function checkMatmul(
  call: string,
  a: unknown,
  b: unknown,
  options: ProductOptions = v.NO_OPTIONS,
  out: CheckedMatmul = { dtype: 'float32', m: 0, n: 0 },
): CheckedMatmul {
  out.dtype = v.floatOperands(call, 'ab', a, b);
  const { transA, transB } = productScalars(call, options, matmulScalars);
  const la = v.matrixLayout(call, 'a', a as Operand, 2, v.layoutA);
  const lb = v.matrixLayout(call, 'b', b as Operand, 2, v.layoutB);
  const { m, n } = productShape(call, la, lb, transA, transB, matmulShape);
  out.m = m;
  out.n = n;
  return out;
}
