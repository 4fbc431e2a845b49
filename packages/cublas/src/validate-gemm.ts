/**
 * The checks of cuBLAS's products C = alpha op(A) op(B) + beta C (gemm, matmul, gemmEx): the
 * operands' dtypes, the transposes and scalars, the product's shape, and that C overlaps
 * neither A nor B.
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

/** m, n, k and the leading dimensions of a gemm: C (m x n) = op(A) (m x k) op(B) (k x n). */
export interface GemmShape {
  m: number;
  n: number;
  k: number;
  lda: number;
  ldb: number;
  ldc: number;
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
interface ProductScalars {
  transA: boolean;
  transB: boolean;
  alpha: number;
  beta: number;
}

/** A validated gemm: its dtype, dimensions and scalars. */
export interface CheckedGemm extends GemmShape, ProductScalars {
  dtype: FloatDType;
}

/** A validated gemmEx: cudaDataType_t of each operand, dimensions and scalars. */
export interface CheckedGemmEx extends GemmShape, ProductScalars {
  aType: number;
  bType: number;
  cType: number;
}

/** A new object for `checkGemm` to fill. */
export function newCheckedGemm(): CheckedGemm {
  return { dtype: 'float32', ...newProduct() };
}

/** A new object for `checkGemmEx` to fill. */
export function newCheckedGemmEx(): CheckedGemmEx {
  return { aType: 0, bType: 0, cType: 0, ...newProduct() };
}

function newProduct(): GemmShape & ProductScalars {
  return {
    transA: false,
    transB: false,
    alpha: 1,
    beta: 0,
    m: 0,
    n: 0,
    k: 0,
    lda: 0,
    ldb: 0,
    ldc: 0,
  };
}

/** A product's transposes and scalars from its options, with their defaults. */
export function productScalars(call: string, options: ProductOptions, out: ProductScalars): void {
  assertOptions(call, options);
  out.transA = booleanOption(call, 'transA', options.transA);
  out.transB = booleanOption(call, 'transB', options.transB);
  out.alpha = numberOption(call, 'alpha', options.alpha, 1);
  out.beta = numberOption(call, 'beta', options.beta, 0);
}

/**
 * Fills `out`'s m, n and k from op(A) op(B), failing unless the inner dimensions agree; given
 * `lc`, also its leading dimensions, failing unless C's matrices are m x n (`result` names
 * them in that message: `c is`, `c's matrices are`).
 */
export function productShape(
  call: string,
  la: MatrixLayout,
  lb: MatrixLayout,
  lc: MatrixLayout | undefined,
  result: string,
  out: GemmShape & ProductScalars,
): void {
  const { transA, transB } = out;
  const m = transA ? la.columns : la.rows;
  const k = transA ? la.rows : la.columns;
  const kb = transB ? lb.columns : lb.rows;
  const n = transB ? lb.rows : lb.columns;
  if (k !== kb) {
    const [opA, opB] = [v.opName('a', transA), v.opName('b', transB)];
    v.fail(call, `inner dimensions differ: ${opA} is ${m} x ${k}, ${opB} is ${kb} x ${n}`);
  }
  if (lc !== undefined && (lc.rows !== m || lc.columns !== n)) {
    const [opA, opB] = [v.opName('a', transA), v.opName('b', transB)];
    v.fail(call, `${result} ${lc.rows} x ${lc.columns}, but ${opA} * ${opB} is ${m} x ${n}`);
  }
  out.m = m;
  out.n = n;
  out.k = k;
  out.lda = la.leadingDimension;
  out.ldb = lb.leadingDimension;
  out.ldc = lc === undefined ? 0 : lc.leadingDimension;
}

/**
 * The shape of C = op(A) op(B) for `a`, `b`, `c` (1-D or 2-D with contiguous columns), once
 * C is found to share no byte with A or B; dtypes and options are checked before.
 */
function gemmShape<T extends GemmShape & ProductScalars>(
  call: string,
  a: Operand,
  b: Operand,
  c: Operand,
  out: T,
): T {
  const la = v.matrixLayout(call, 'a', a, 2, v.layoutA);
  const lb = v.matrixLayout(call, 'b', b, 2, v.layoutB);
  const lc = v.matrixLayout(call, 'c', c, 2, v.layoutC);
  productShape(call, la, lb, lc, 'c is', out);
  if (c.buffer === a.buffer || c.buffer === b.buffer) {
    operandMatrixFootprint(v.written, c, lc);
    if (c.buffer === a.buffer)
      assertApart(call, 'c', v.written, 'a', operandMatrixFootprint(v.read, a, la));
    if (c.buffer === b.buffer)
      assertApart(call, 'c', v.written, 'b', operandMatrixFootprint(v.read, b, lb));
  }
  return out;
}

/** Everything `gemm` checks before its native call: arrays, dtypes, options, shapes. */
export function checkGemm(
  call: string,
  a: unknown,
  b: unknown,
  c: unknown,
  options: ProductOptions = v.NO_OPTIONS,
  out: CheckedGemm = newCheckedGemm(),
): CheckedGemm {
  out.dtype = v.floatOperands(call, 'abc', a, b, c);
  productScalars(call, options, out);
  return gemmShape(call, a as Operand, b as Operand, c as Operand, out);
}

/** The cudaDataType_t of each dtype `gemmEx` accepts (library_types.h). */
const GEMM_EX_DATA_TYPES: Readonly<Partial<Record<DType, number>>> = {
  float32: 0, // CUDA_R_32F
  float16: 2, // CUDA_R_16F
  bfloat16: 14, // CUDA_R_16BF
};

/**
 * Everything `gemmEx` checks before its native call, as `checkGemm` but for the dtypes: A and
 * B both float16, both bfloat16 or both float32, C float32 or theirs (CUBLAS_COMPUTE_32F's
 * combinations), as cudaDataType_t.
 */
export function checkGemmEx(
  call: string,
  a: unknown,
  b: unknown,
  c: unknown,
  options: ProductOptions = v.NO_OPTIONS,
  out: CheckedGemmEx = newCheckedGemmEx(),
): CheckedGemmEx {
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
  out.aType = out.bType = GEMM_EX_DATA_TYPES[input]!;
  out.cType = GEMM_EX_DATA_TYPES[c.dtype]!;
  productScalars(call, options, out);
  return gemmShape(call, a, b, c, out);
}

/** What `matmul` allocates: the result's dtype and shape. */
export interface CheckedMatmul {
  dtype: FloatDType;
  m: number;
  n: number;
}

// Scratch of checkMatmul, whose result has no room for the scalars and k.
const matmulProduct = newProduct();

/** What `matmul` checks before allocating its result; returns the result's dtype and shape. */
export function checkMatmul(
  call: string,
  a: unknown,
  b: unknown,
  options: ProductOptions = v.NO_OPTIONS,
  out: CheckedMatmul = { dtype: 'float32', m: 0, n: 0 },
): CheckedMatmul {
  out.dtype = v.floatOperands(call, 'ab', a, b);
  productScalars(call, options, matmulProduct);
  const la = v.matrixLayout(call, 'a', a as Operand, 2, v.layoutA);
  const lb = v.matrixLayout(call, 'b', b as Operand, 2, v.layoutB);
  productShape(call, la, lb, undefined, '', matmulProduct);
  out.m = matmulProduct.m;
  out.n = matmulProduct.n;
  return out;
}
