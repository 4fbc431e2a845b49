import { CudaArgumentError, DisposedError, type DType } from '@cuda-tasks/cudadrv';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { matrixLayout, type OperandLike, vectorLayout } from './validate.js';
import { checkStridedBatched } from './validate-batched.js';
import { checkGemm, checkGemmEx, checkMatmul } from './validate-gemm.js';
import { checkGemv, checkVector, checkVectorPair } from './validate-vectors.js';

const BYTES: Record<string, number> = { float32: 4, float64: 8, float16: 2, bfloat16: 2, int32: 4 };

interface FakeOptions {
  dtype?: DType;
  strides?: number[];
  offset?: number;
  /** Elements in the buffer (default: exactly what the view reaches). */
  capacity?: number;
  disposed?: boolean;
}

/** A plain object shaped like a DeviceArray (no device memory behind it). */
function fake(shape: number[], options: FakeOptions = {}): OperandLike {
  const dtype = options.dtype ?? 'float32';
  const strides = options.strides ?? columnMajor(shape);
  const offset = options.offset ?? 0;
  const reach = shape.some((d) => d === 0)
    ? 0
    : shape.reduce((sum, d, i) => sum + (d - 1) * strides[i]!, 0) + 1;
  const capacity = options.capacity ?? offset + reach;
  return {
    dtype,
    shape,
    strides,
    offset,
    disposed: options.disposed ?? false,
    buffer: { byteLength: capacity * BYTES[dtype]! },
  };
}

function columnMajor(shape: number[]): number[] {
  const strides: number[] = [];
  let stride = 1;
  for (const d of shape) {
    strides.push(stride);
    stride *= d;
  }
  return strides;
}

function argumentError(fn: () => unknown, pattern?: RegExp): void {
  let thrown: unknown;
  try {
    fn();
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(CudaArgumentError);
  expect(thrown).not.toBeInstanceOf(DisposedError);
  if (pattern) expect((thrown as Error).message).toMatch(pattern);
}

describe('matrixLayout', () => {
  it('reads rows, columns and the leading dimension of a dense matrix', () => {
    expect(matrixLayout('t', 'a', fake([3, 4]))).toEqual({
      rows: 3,
      columns: 4,
      leadingDimension: 3,
    });
  });

  it('uses the parent leading dimension of a block view', () => {
    // a 10 x 8 parent, block of 4 x 3 starting at (2, 1)
    const block = fake([4, 3], { strides: [1, 10], offset: 12, capacity: 80 });
    expect(matrixLayout('t', 'a', block)).toEqual({ rows: 4, columns: 3, leadingDimension: 10 });
  });

  it('treats a 1-D array as one column', () => {
    expect(matrixLayout('t', 'a', fake([5]))).toEqual({ rows: 5, columns: 1, leadingDimension: 5 });
  });

  it('gives empty matrices a leading dimension of at least 1', () => {
    expect(matrixLayout('t', 'a', fake([0, 5])).leadingDimension).toBe(1);
    expect(matrixLayout('t', 'a', fake([0])).leadingDimension).toBe(1);
    expect(matrixLayout('t', 'a', fake([3, 0])).leadingDimension).toBe(3);
  });

  it('ignores the column stride of a single column', () => {
    // a column view of a 7 x 3 matrix keeps the parent's column stride 7, never used
    expect(matrixLayout('t', 'a', fake([7, 1], { strides: [1, 7] })).leadingDimension).toBe(7);
    expect(
      matrixLayout('t', 'a', fake([7, 1], { strides: [1, 2], capacity: 7 })).leadingDimension,
    ).toBe(7);
  });

  it('rejects a row stride other than 1', () => {
    argumentError(
      () => matrixLayout('t', 'a', fake([3, 3], { strides: [2, 6], capacity: 100 })),
      /strides\[0\] === 1/,
    );
  });

  it('rejects a leading dimension below the row count', () => {
    argumentError(
      () => matrixLayout('t', 'a', fake([4, 3], { strides: [1, 3], capacity: 100 })),
      /leading dimension 3, less than its 4 rows/,
    );
  });

  it('rejects arrays of the wrong rank', () => {
    argumentError(() => matrixLayout('t', 'a', fake([2, 2, 2])), /gemmStridedBatched/);
    argumentError(() => matrixLayout('t', 'a', fake([2, 2]), 3), /3-D/);
  });

  it('rejects a view reaching beyond its buffer', () => {
    argumentError(
      () => matrixLayout('t', 'a', fake([4, 4], { capacity: 15 })),
      /beyond the 15 elements/,
    );
  });

  it('rejects dimensions beyond a 32-bit int', () => {
    const huge = fake([2 ** 31, 1], { strides: [1, 2 ** 31] });
    argumentError(() => matrixLayout('t', 'a', huge), /32-bit int/);
  });
});

describe('vectorLayout', () => {
  it('reads length and increment of 1-D arrays and strided views', () => {
    expect(vectorLayout('t', 'x', fake([6]))).toEqual({ length: 6, increment: 1 });
    expect(vectorLayout('t', 'x', fake([6], { strides: [3] }))).toEqual({
      length: 6,
      increment: 3,
    });
  });

  it('accepts one-column and one-row 2-D views', () => {
    expect(vectorLayout('t', 'x', fake([5, 1]))).toEqual({ length: 5, increment: 1 });
    // a row of a 10 x 4 matrix: stride between elements is the leading dimension
    expect(vectorLayout('t', 'x', fake([1, 4], { strides: [1, 10] }))).toEqual({
      length: 4,
      increment: 10,
    });
  });

  it('rejects matrices and higher ranks', () => {
    argumentError(() => vectorLayout('t', 'x', fake([2, 3])), /must be a vector/);
    argumentError(() => vectorLayout('t', 'x', fake([2, 1, 1])), /must be a vector/);
  });

  it('rejects zero and negative increments for more than one element', () => {
    argumentError(
      () => vectorLayout('t', 'x', fake([3], { strides: [0], capacity: 3 })),
      /positive/,
    );
    argumentError(
      () => vectorLayout('t', 'x', fake([3], { strides: [-1], capacity: 3 })),
      /positive/,
    );
  });

  it('accepts any increment for a single element', () => {
    expect(vectorLayout('t', 'x', fake([1], { strides: [0], capacity: 1 }))).toEqual({
      length: 1,
      increment: 1,
    });
  });

  it('rejects a strided view reaching beyond its buffer', () => {
    argumentError(() => vectorLayout('t', 'x', fake([4], { strides: [2], capacity: 6 })), /beyond/);
  });
});

describe('checkGemm', () => {
  it('derives m, n, k and leading dimensions without transposes', () => {
    const g = checkGemm('gemm', fake([4, 3]), fake([3, 5]), fake([4, 5]));
    expect(g).toMatchObject({ dtype: 'float32', m: 4, n: 5, k: 3, lda: 4, ldb: 3, ldc: 4 });
    expect(g).toMatchObject({ transA: false, transB: false, alpha: 1, beta: 0 });
  });

  it('derives the dimensions of every transpose combination', () => {
    const m = 4;
    const n = 5;
    const k = 3;
    const cases = [
      { transA: false, transB: false, a: [m, k], b: [k, n] },
      { transA: true, transB: false, a: [k, m], b: [k, n] },
      { transA: false, transB: true, a: [m, k], b: [n, k] },
      { transA: true, transB: true, a: [k, m], b: [n, k] },
    ];
    for (const { transA, transB, a, b } of cases) {
      const g = checkGemm(
        'gemm',
        fake(a, { dtype: 'float64' }),
        fake(b, { dtype: 'float64' }),
        fake([m, n], { dtype: 'float64' }),
        {
          transA,
          transB,
          alpha: 2,
          beta: -1,
        },
      );
      expect(g).toMatchObject({
        dtype: 'float64',
        m,
        n,
        k,
        lda: a[0],
        ldb: b[0],
        ldc: m,
        transA,
        transB,
        alpha: 2,
        beta: -1,
      });
    }
  });

  it('passes block views with their parent leading dimension', () => {
    const a = fake([4, 3], { strides: [1, 100], capacity: 1000 });
    const b = fake([3, 2], { strides: [1, 50], capacity: 1000 });
    const c = fake([4, 2], { strides: [1, 64], capacity: 1000 });
    expect(checkGemm('gemm', a, b, c)).toMatchObject({ lda: 100, ldb: 50, ldc: 64 });
  });

  it('rejects inner dimensions that differ', () => {
    argumentError(
      () => checkGemm('gemm', fake([4, 3]), fake([4, 5]), fake([4, 5])),
      /inner dimensions differ: a is 4 x 3, b is 4 x 5/,
    );
    argumentError(
      () => checkGemm('gemm', fake([4, 3]), fake([3, 5]), fake([4, 5]), { transA: true }),
      /a\^T is 3 x 4/,
    );
  });

  it('rejects a result of the wrong shape', () => {
    argumentError(() => checkGemm('gemm', fake([4, 3]), fake([3, 5]), fake([5, 4])), /c is 5 x 4/);
    argumentError(
      () => checkGemm('gemm', fake([4, 3]), fake([5, 3]), fake([4, 3]), { transB: true }),
      /a \* b\^T is 4 x 5/,
    );
  });

  it('rejects mixed and unsupported dtypes', () => {
    argumentError(
      () => checkGemm('gemm', fake([2, 2]), fake([2, 2], { dtype: 'float64' }), fake([2, 2])),
      /a: float32, b: float64, c: float32/,
    );
    argumentError(
      () =>
        checkGemm(
          'gemm',
          fake([2, 2], { dtype: 'int32' }),
          fake([2, 2], { dtype: 'int32' }),
          fake([2, 2], { dtype: 'int32' }),
        ),
      /float32 or float64/,
    );
    argumentError(
      () =>
        checkGemm(
          'gemm',
          fake([2, 2], { dtype: 'float16' }),
          fake([2, 2], { dtype: 'float16' }),
          fake([2, 2], { dtype: 'float16' }),
        ),
      /float32 or float64/,
    );
  });

  it('throws DisposedError for a disposed operand', () => {
    expect(() =>
      checkGemm('gemm', fake([2, 2]), fake([2, 2], { disposed: true }), fake([2, 2])),
    ).toThrow(DisposedError);
    expect(() =>
      checkGemm('gemm', fake([2, 2]), fake([2, 2]), fake([2, 2], { disposed: true })),
    ).toThrow(/gemm: c has been disposed/);
  });

  it('rejects non-arrays, bad scalars and bad flags', () => {
    argumentError(
      () => checkGemm('gemm', null, fake([2, 2]), fake([2, 2])),
      /a must be a DeviceArray/,
    );
    argumentError(
      () => checkGemm('gemm', fake([2, 2]), 3, fake([2, 2])),
      /b must be a DeviceArray/,
    );
    argumentError(
      () => checkGemm('gemm', fake([2, 2]), fake([2, 2]), fake([2, 2]), { alpha: '1' as any }),
      /alpha must be a number/,
    );
    argumentError(
      () => checkGemm('gemm', fake([2, 2]), fake([2, 2]), fake([2, 2]), { transA: 'T' as any }),
      /transA must be true or false/,
    );
    argumentError(
      () => checkGemm('gemm', fake([2, 2]), fake([2, 2]), fake([2, 2]), null as any),
      /options must be an object/,
    );
  });

  it('rejects strided rows and overlapping columns in any operand', () => {
    argumentError(
      () =>
        checkGemm(
          'gemm',
          fake([2, 2]),
          fake([2, 2], { strides: [2, 4], capacity: 8 }),
          fake([2, 2]),
        ),
      /b has a row stride of 2/,
    );
    argumentError(
      () =>
        checkGemm(
          'gemm',
          fake([2, 2]),
          fake([2, 2]),
          fake([3, 2], { strides: [1, 2], capacity: 6 }),
        ),
      /c has leading dimension 2/,
    );
  });

  it('accepts k = 0 and empty results', () => {
    expect(checkGemm('gemm', fake([4, 0]), fake([0, 5]), fake([4, 5]))).toMatchObject({
      m: 4,
      n: 5,
      k: 0,
      lda: 4,
      ldb: 1,
    });
    expect(checkGemm('gemm', fake([0, 3]), fake([3, 5]), fake([0, 5]))).toMatchObject({ m: 0 });
  });
});

describe('checkMatmul', () => {
  it('gives the result shape of op(a) op(b)', () => {
    expect(checkMatmul('matmul', fake([4, 3]), fake([3, 5]))).toEqual({
      dtype: 'float32',
      m: 4,
      n: 5,
    });
    expect(
      checkMatmul('matmul', fake([3, 4]), fake([5, 3]), { transA: true, transB: true }),
    ).toEqual({ dtype: 'float32', m: 4, n: 5 });
  });

  it('rejects mismatched operands', () => {
    argumentError(() => checkMatmul('matmul', fake([4, 3]), fake([4, 5])), /inner dimensions/);
    argumentError(
      () => checkMatmul('matmul', fake([4, 3]), fake([3, 5], { dtype: 'float64' })),
      /dtype/,
    );
    expect(() => checkMatmul('matmul', fake([4, 3], { disposed: true }), fake([3, 5]))).toThrow(
      DisposedError,
    );
  });
});

describe('checkStridedBatched', () => {
  const m = 4;
  const n = 5;
  const k = 3;
  const batch = 6;

  it('reads batch count and strides from 3-D operands', () => {
    const g = checkStridedBatched(
      'gsb',
      fake([m, k, batch]),
      fake([k, n, batch]),
      fake([m, n, batch]),
    );
    expect(g).toMatchObject({
      m,
      n,
      k,
      lda: m,
      ldb: k,
      ldc: m,
      batch,
      strideA: m * k,
      strideB: k * n,
      strideC: m * n,
    });
  });

  it('handles transposes of 3-D operands', () => {
    const g = checkStridedBatched(
      'gsb',
      fake([k, m, batch]),
      fake([n, k, batch]),
      fake([m, n, batch]),
      { transA: true, transB: true },
    );
    expect(g).toMatchObject({ m, n, k, lda: k, ldb: n, strideA: k * m, strideB: n * k });
  });

  it('broadcasts a 2-D a or b with stride 0', () => {
    const g = checkStridedBatched('gsb', fake([m, k]), fake([k, n, batch]), fake([m, n, batch]));
    expect(g).toMatchObject({ batch, strideA: 0, strideB: k * n });
  });

  it('takes explicit strides and batch', () => {
    // six A matrices side by side in a [m, k*6] array: pass the first block and its stride
    const a = fake([m, k], { capacity: m * k * batch });
    const g = checkStridedBatched('gsb', a, fake([k, n, batch]), fake([m, n, batch]), {
      strideA: m * k,
    });
    expect(g).toMatchObject({ batch, strideA: m * k });
    // a 2-D a holds only one matrix: reading six with stride m*k needs 6*m*k elements
    argumentError(
      () =>
        checkStridedBatched('gsb', fake([m, k]), fake([k, n, batch]), fake([m, n, batch]), {
          strideA: m * k,
        }),
      /a would reach element/,
    );
  });

  it('uses the first `batch` matrices when batch is given', () => {
    const g = checkStridedBatched('gsb', fake([m, k, 8]), fake([k, n, 8]), fake([m, n, 8]), {
      batch: 3,
    });
    expect(g.batch).toBe(3);
    argumentError(
      () =>
        checkStridedBatched('gsb', fake([m, k, 2]), fake([k, n, 8]), fake([m, n, 8]), {
          batch: 3,
        }),
      /a holds 2 matrices/,
    );
  });

  it('rejects operands with different batch counts', () => {
    argumentError(
      () => checkStridedBatched('gsb', fake([m, k, 6]), fake([k, n, 5]), fake([m, n, 6])),
      /different numbers of matrices \(a: 6, b: 5, c: 6\)/,
    );
  });

  it('needs batch or a 3-D operand', () => {
    argumentError(
      () => checkStridedBatched('gsb', fake([m, k]), fake([k, n]), fake([m, n])),
      /batch is required/,
    );
    const g = checkStridedBatched('gsb', fake([m, k]), fake([k, n]), fake([m, n]), { batch: 1 });
    expect(g).toMatchObject({ batch: 1, strideA: 0, strideB: 0, strideC: 0 });
  });

  it('rejects a 2-D c with several products and no strideC', () => {
    argumentError(
      () => checkStridedBatched('gsb', fake([m, k, batch]), fake([k, n, batch]), fake([m, n])),
      /pass strideC/,
    );
  });

  it('rejects overlapping results', () => {
    argumentError(
      () =>
        checkStridedBatched('gsb', fake([m, k, batch]), fake([k, n, batch]), fake([m, n, batch]), {
          strideC: 0,
        }),
      /overlap/,
    );
    argumentError(
      () =>
        checkStridedBatched('gsb', fake([m, k, batch]), fake([k, n, batch]), fake([m, n, batch]), {
          strideC: m * n - 1,
        }),
      /overlap/,
    );
  });

  it('accepts results interleaved as row blocks of one tall matrix', () => {
    // C = [m * batch, n]: product i writes rows i*m .. i*m+m
    const tall = fake([m * batch, n]);
    const c = { ...tall, shape: [m, n], strides: [1, m * batch] };
    const g = checkStridedBatched('gsb', fake([m, k, batch]), fake([k, n, batch]), c, {
      strideC: m,
    });
    expect(g).toMatchObject({ ldc: m * batch, strideC: m, batch });
  });

  it('rejects bad stride and batch values', () => {
    const args = [fake([m, k, batch]), fake([k, n, batch]), fake([m, n, batch])] as const;
    argumentError(() => checkStridedBatched('gsb', ...args, { strideA: -1 }), /strideA/);
    argumentError(() => checkStridedBatched('gsb', ...args, { strideB: 1.5 }), /strideB/);
    argumentError(() => checkStridedBatched('gsb', ...args, { batch: -2 }), /batch/);
  });

  it('rejects mismatched shapes, dtypes and 1-D operands', () => {
    argumentError(
      () =>
        checkStridedBatched(
          'gsb',
          fake([m, k, batch]),
          fake([k + 1, n, batch]),
          fake([m, n, batch]),
        ),
      /inner dimensions/,
    );
    argumentError(
      () =>
        checkStridedBatched('gsb', fake([m, k, batch]), fake([k, n, batch]), fake([n, m, batch])),
      /c's matrices are 5 x 4/,
    );
    argumentError(
      () =>
        checkStridedBatched(
          'gsb',
          fake([m, k, batch]),
          fake([k, n, batch], { dtype: 'float64' }),
          fake([m, n, batch]),
        ),
      /dtype/,
    );
    argumentError(
      () => checkStridedBatched('gsb', fake([m]), fake([k, n, batch]), fake([m, n, batch])),
      /3-D array/,
    );
  });
});

describe('checkGemv', () => {
  it('checks x against columns and y against rows of op(a)', () => {
    expect(checkGemv('gemv', fake([4, 3]), fake([3]), fake([4]))).toMatchObject({
      m: 4,
      n: 3,
      lda: 4,
      incx: 1,
      incy: 1,
      trans: false,
      alpha: 1,
      beta: 0,
    });
    expect(
      checkGemv('gemv', fake([4, 3]), fake([4]), fake([3]), { trans: true, beta: 1 }),
    ).toMatchObject({ m: 4, n: 3, trans: true, beta: 1 });
  });

  it('passes strides and leading dimensions through', () => {
    const a = fake([4, 3], { strides: [1, 9], capacity: 100 });
    const x = fake([3], { strides: [2] });
    const y = fake([1, 4], { strides: [1, 5] });
    expect(checkGemv('gemv', a, x, y)).toMatchObject({ lda: 9, incx: 2, incy: 5 });
  });

  it('rejects wrong vector lengths', () => {
    argumentError(
      () => checkGemv('gemv', fake([4, 3]), fake([4]), fake([4])),
      /x has 4 elements, a has 3 columns/,
    );
    argumentError(
      () => checkGemv('gemv', fake([4, 3]), fake([3]), fake([3])),
      /y has 3 elements, a has 4 rows/,
    );
    argumentError(
      () => checkGemv('gemv', fake([4, 3]), fake([3]), fake([4]), { trans: true }),
      /x has 3 elements, a\^T has 4 columns/,
    );
  });

  it('rejects dtype mismatches, disposed arrays and bad options', () => {
    argumentError(
      () => checkGemv('gemv', fake([4, 3]), fake([3], { dtype: 'float64' }), fake([4])),
      /dtype/,
    );
    expect(() => checkGemv('gemv', fake([4, 3]), fake([3]), fake([4], { disposed: true }))).toThrow(
      DisposedError,
    );
    argumentError(
      () => checkGemv('gemv', fake([4, 3]), fake([3]), fake([4]), { trans: 1 as any }),
      /trans/,
    );
    argumentError(
      () => checkGemv('gemv', fake([4, 3]), fake([3]), fake([4]), { beta: null as any }),
      /beta/,
    );
  });
});

describe('vector routines', () => {
  it('checkVector reads n and incx', () => {
    expect(checkVector('nrm2', fake([7], { dtype: 'float64' }))).toEqual({
      dtype: 'float64',
      n: 7,
      incx: 1,
    });
    expect(checkVector('nrm2', fake([7], { strides: [4] }))).toEqual({
      dtype: 'float32',
      n: 7,
      incx: 4,
    });
  });

  it('checkVector rejects non-BLAS dtypes, matrices and disposed arrays', () => {
    argumentError(() => checkVector('nrm2', fake([7], { dtype: 'int32' })), /float32 or float64/);
    argumentError(() => checkVector('nrm2', fake([7, 2])), /vector/);
    expect(() => checkVector('nrm2', fake([7], { disposed: true }))).toThrow(DisposedError);
  });

  it('checkVectorPair needs equal lengths and dtypes', () => {
    expect(checkVectorPair('dot', fake([5]), fake([5], { strides: [3] }))).toEqual({
      dtype: 'float32',
      n: 5,
      incx: 1,
      incy: 3,
    });
    argumentError(() => checkVectorPair('dot', fake([5]), fake([6])), /x has 5 elements, y has 6/);
    argumentError(
      () => checkVectorPair('dot', fake([5]), fake([5], { dtype: 'float64' })),
      /dtype/,
    );
  });
});

describe('checkGemmEx', () => {
  it('maps dtypes to cudaDataType_t values from library_types.h', () => {
    const half = { dtype: 'float16' as const };
    const g = checkGemmEx('gemmEx', fake([4, 3], half), fake([3, 5], half), fake([4, 5]));
    expect(g).toMatchObject({ aType: 2, bType: 2, cType: 0, m: 4, n: 5, k: 3 });
    const bf = { dtype: 'bfloat16' as const };
    expect(
      checkGemmEx('gemmEx', fake([4, 3], bf), fake([3, 5], bf), fake([4, 5], bf)),
    ).toMatchObject({ aType: 14, bType: 14, cType: 14 });
    expect(checkGemmEx('gemmEx', fake([4, 3]), fake([3, 5]), fake([4, 5]))).toMatchObject({
      aType: 0,
      cType: 0,
    });
  });

  it('rejects mixed inputs and unsupported outputs', () => {
    argumentError(
      () =>
        checkGemmEx(
          'gemmEx',
          fake([4, 3], { dtype: 'float16' }),
          fake([3, 5], { dtype: 'bfloat16' }),
          fake([4, 5]),
        ),
      /must both be float16, both bfloat16 or both float32/,
    );
    argumentError(
      () =>
        checkGemmEx(
          'gemmEx',
          fake([4, 3], { dtype: 'float16' }),
          fake([3, 5], { dtype: 'float16' }),
          fake([4, 5], { dtype: 'float64' }),
        ),
      /c must be float32 or float16/,
    );
    argumentError(
      () =>
        checkGemmEx(
          'gemmEx',
          fake([4, 3], { dtype: 'float64' }),
          fake([3, 5], { dtype: 'float64' }),
          fake([4, 5], { dtype: 'float64' }),
        ),
      /must both be float16/,
    );
  });

  it('checks shapes like gemm', () => {
    const half = { dtype: 'float16' as const };
    argumentError(
      () => checkGemmEx('gemmEx', fake([4, 3], half), fake([4, 5], half), fake([4, 5])),
      /inner dimensions/,
    );
  });
});

describe('checks fill the object they are given (the wrappers reuse one per routine)', () => {
  it('return that object, with nothing left of the previous call', () => {
    const f64 = { dtype: 'float64' as const };
    const gemmOut = checkGemm('gemm', fake([3, 4], f64), fake([5, 3], f64), fake([4, 5], f64), {
      transA: true,
      transB: true,
      alpha: 2,
      beta: 3,
    });
    const again = checkGemm('gemm', fake([4, 3]), fake([3, 5]), fake([4, 5]), {}, gemmOut);
    expect(again).toBe(gemmOut);
    expect(again).toEqual(checkGemm('gemm', fake([4, 3]), fake([3, 5]), fake([4, 5])));

    const batched = checkStridedBatched('gsb', fake([2, 3, 4]), fake([3, 5, 4]), fake([2, 5, 4]));
    const batchedAgain = checkStridedBatched(
      'gsb',
      fake([2, 3]),
      fake([3, 5, 4]),
      fake([2, 5, 4]),
      { batch: 2 },
      batched,
    );
    expect(batchedAgain).toBe(batched);
    expect(batchedAgain).toEqual(
      checkStridedBatched('gsb', fake([2, 3]), fake([3, 5, 4]), fake([2, 5, 4]), { batch: 2 }),
    );

    const gemv = checkGemv('gemv', fake([4, 3], f64), fake([4], f64), fake([3], f64), {
      trans: true,
    });
    expect(checkGemv('gemv', fake([4, 3]), fake([3]), fake([4]), {}, gemv)).toEqual(
      checkGemv('gemv', fake([4, 3]), fake([3]), fake([4])),
    );

    const pair = checkVectorPair('dot', fake([5], f64), fake([5], { ...f64, strides: [2] }));
    expect(checkVectorPair('dot', fake([3]), fake([3]), pair)).toEqual({
      dtype: 'float32',
      n: 3,
      incx: 1,
      incy: 1,
    });
  });

  it('leave the given object as it was when a check fails before filling it', () => {
    const out = checkGemm('gemm', fake([4, 3]), fake([3, 5]), fake([4, 5]));
    const before = { ...out };
    argumentError(() => checkGemm('gemm', null, fake([3, 5]), fake([4, 5]), {}, out));
    expect(out).toEqual(before);
  });
});

// The exact text of every message the checks write (other tests match fragments): a table of
// one fault each, so that a rewrite of the checks keeps each message to the letter.
describe('the message of each rule, to the letter', () => {
  const f64 = { dtype: 'float64' as const };
  const half = { dtype: 'float16' as const };
  const big = 2 ** 31;
  const cases: [string, () => unknown, string][] = [
    [
      'a 32-bit int limit',
      () => matrixLayout('t', 'a', fake([big, 1], { strides: [1, big] })),
      "t: a rows = 2147483648 exceeds cuBLAS's 32-bit int limit (2147483647)",
    ],
    [
      'a vector length limit',
      () => vectorLayout('t', 'x', fake([big])),
      "t: x length = 2147483648 exceeds cuBLAS's 32-bit int limit (2147483647)",
    ],
    [
      'a leading dimension limit',
      () => matrixLayout('t', 'a', fake([2, 2], { strides: [1, big], capacity: 2 * big + 2 })),
      "t: a leading dimension = 2147483648 exceeds cuBLAS's 32-bit int limit (2147483647)",
    ],
    [
      'one c for a batch',
      () => checkStridedBatched('gsb', fake([2, 2]), fake([2, 2]), fake([2, 2]), { batch: 2 }),
      'gsb: c is 2-D: pass strideC (the results of a batch cannot share one matrix)',
    ],
    [
      'a batch limit with strides',
      () =>
        checkStridedBatched('gsb', fake([2, 2]), fake([2, 2]), fake([2, 2]), {
          batch: big,
          strideC: 4,
        }),
      "gsb: batch = 2147483648 exceeds cuBLAS's 32-bit int limit (2147483647)",
    ],
    [
      'mixed dtypes',
      () => checkGemm('gemm', fake([2, 2]), fake([2, 2], f64), fake([2, 2])),
      'gemm: operands must all be float32 or float64 and of one dtype, got a: float32, b: float64, c: float32',
    ],
    [
      'a dtype that is no float',
      () => checkVector('nrm2', fake([3], { dtype: 'int32' })),
      'nrm2: operands must all be float32 or float64 and of one dtype, got x: int32',
    ],
    [
      'mixed dtypes of two',
      () => checkMatmul('matmul', fake([2, 2], f64), fake([2, 2])),
      'matmul: operands must all be float32 or float64 and of one dtype, got a: float64, b: float32',
    ],
    [
      'mixed dtypes of gemv',
      () => checkGemv('gemv', fake([2, 2]), fake([2]), fake([2], half)),
      'gemv: operands must all be float32 or float64 and of one dtype, got a: float32, x: float32, y: float16',
    ],
    [
      'a batch where a matrix goes',
      () => checkGemm('gemm', fake([2, 2, 2]), fake([2, 2]), fake([2, 2])),
      'gemm: a must be a 1-D or 2-D array, got shape [2,2,2] (use gemmStridedBatched for batches)',
    ],
    [
      'a 4-D matrix',
      () => matrixLayout('t', 'b', fake([1, 1, 1, 1])),
      't: b must be a 1-D or 2-D array, got shape [1,1,1,1]',
    ],
    [
      'a matrix where a batch goes',
      () => matrixLayout('t', 'a', fake([2, 2]), 3),
      't: a must be a 3-D array [rows, columns, batch], got shape [2,2]',
    ],
    [
      'a row stride',
      () =>
        checkGemm(
          'gemm',
          fake([2, 2]),
          fake([2, 2], { strides: [2, 4], capacity: 8 }),
          fake([2, 2]),
        ),
      'gemm: b has a row stride of 2; cuBLAS needs contiguous columns (strides[0] === 1), copy() the view first',
    ],
    [
      'a leading dimension',
      () => matrixLayout('t', 'c', fake([4, 3], { strides: [1, 3], capacity: 100 })),
      't: c has leading dimension 3, less than its 4 rows (columns overlap)',
    ],
    [
      'a buffer too small',
      () => matrixLayout('t', 'a', fake([4, 4], { capacity: 15 })),
      't: a would reach element 15 past its first, beyond the 15 elements its buffer holds from there',
    ],
    [
      'a matrix where a vector goes',
      () => checkVectorPair('dot', fake([3]), fake([2, 3])),
      'dot: y must be a vector (1-D, or 2-D with one row or one column), got shape [2,3]',
    ],
    [
      'an increment',
      () => vectorLayout('t', 'x', fake([3], { strides: [-2], capacity: 9 })),
      't: x has element stride -2; cuBLAS needs a positive increment',
    ],
    [
      'a vector beyond its buffer',
      () => checkVector('scal', fake([4], { strides: [2], capacity: 6 })),
      'scal: x would reach element 6 past its first, beyond the 6 elements its buffer holds from there',
    ],
    [
      'inner dimensions',
      () =>
        checkGemm('gemm', fake([3, 4]), fake([3, 5]), fake([4, 5]), { transA: true, transB: true }),
      'gemm: inner dimensions differ: a^T is 4 x 3, b^T is 5 x 3',
    ],
    [
      'inner dimensions of matmul',
      () => checkMatmul('matmul', fake([4, 3]), fake([4, 5])),
      'matmul: inner dimensions differ: a is 4 x 3, b is 4 x 5',
    ],
    [
      "c's shape",
      () => checkGemm('gemm', fake([4, 3]), fake([5, 3]), fake([4, 3]), { transB: true }),
      'gemm: c is 4 x 3, but a * b^T is 4 x 5',
    ],
    [
      "c's shape in a batch",
      () => checkStridedBatched('gsb', fake([4, 3, 2]), fake([3, 5, 2]), fake([5, 4, 2])),
      "gsb: c's matrices are 5 x 4, but a * b is 4 x 5",
    ],
    [
      'gemmEx inputs',
      () =>
        checkGemmEx(
          'gemmEx',
          fake([4, 3], half),
          fake([3, 5], { dtype: 'bfloat16' }),
          fake([4, 5]),
        ),
      'gemmEx: a and b must both be float16, both bfloat16 or both float32, got a: float16, b: bfloat16',
    ],
    [
      'gemmEx output',
      () => checkGemmEx('gemmEx', fake([4, 3], half), fake([3, 5], half), fake([4, 5], f64)),
      'gemmEx: c must be float32 or float16 (like a and b), got float64',
    ],
    [
      'gemmEx operand',
      () => checkGemmEx('gemmEx', fake([4, 3]), undefined, fake([4, 5])),
      'gemmEx: b must be a DeviceArray, got undefined',
    ],
    [
      'a stride',
      () =>
        checkStridedBatched('gsb', fake([2, 2, 2]), fake([2, 2, 2]), fake([2, 2, 2]), {
          strideB: 1.5,
        }),
      'gsb: strideB must be a non-negative integer, got 1.5',
    ],
    [
      'a batch count',
      () =>
        checkStridedBatched('gsb', fake([2, 2, 2]), fake([2, 2, 2]), fake([2, 2, 2]), {
          batch: 'x' as any,
        }),
      'gsb: batch must be a non-negative integer, got "x"',
    ],
    [
      'a vector where a batch goes',
      () => checkStridedBatched('gsb', fake([2, 2, 2]), fake([2]), fake([2, 2, 2])),
      'gsb: b must be a 3-D array [rows, columns, batch] (or 2-D with an explicit stride), got shape [2]',
    ],
    [
      'a batch larger than an operand holds',
      () =>
        checkStridedBatched('gsb', fake([2, 2, 4]), fake([2, 2, 4]), fake([2, 2, 2]), { batch: 3 }),
      'gsb: batch is 3, but c holds 2 matrices',
    ],
    [
      'no batch',
      () => checkStridedBatched('gsb', fake([2, 2]), fake([2, 2]), fake([2, 2])),
      'gsb: batch is required when no operand is 3-D',
    ],
    [
      'batches that differ',
      () => checkStridedBatched('gsb', fake([2, 2]), fake([2, 2, 5]), fake([2, 2, 6])),
      'gsb: the operands hold different numbers of matrices (b: 5, c: 6); pass batch to use the first ones',
    ],
    [
      'results that overlap',
      () =>
        checkStridedBatched('gsb', fake([4, 3, 6]), fake([3, 5, 6]), fake([4, 5, 6]), {
          strideC: 19,
        }),
      'gsb: strideC = 19 makes the 6 result matrices (4 x 5, leading dimension 4) overlap or interleave: pass strideC >= 20 (one after another), or place them side by side in each column (strideC >= 4 and (batch - 1) * strideC + 4 <= 4)',
    ],
    [
      'a batch beyond its buffer',
      () =>
        checkStridedBatched('gsb', fake([2, 2]), fake([2, 2, 3]), fake([2, 2, 3]), { strideA: 4 }),
      'gsb: a would reach element 11 past its first, beyond the 4 elements its buffer holds from there',
    ],
    [
      "x's length",
      () => checkGemv('gemv', fake([4, 3]), fake([4]), fake([4])),
      'gemv: x has 4 elements, a has 3 columns',
    ],
    [
      "y's length",
      () => checkGemv('gemv', fake([4, 3]), fake([4]), fake([4]), { transA: true }),
      'gemv: y has 4 elements, a^T has 3 rows',
    ],
    [
      'two lengths',
      () => checkVectorPair('axpy', fake([5]), fake([6]), undefined, true),
      'axpy: x has 5 elements, y has 6',
    ],
  ];
  it.each(cases)('%s', (_, check, message) => {
    let thrown: unknown;
    try {
      check();
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(CudaArgumentError);
    expect((thrown as Error).message).toBe(message);
  });

  it('names both operands and their bytes when an output overlaps an input', () => {
    const buffer = { byteLength: 400 };
    const at = (shape: number[], strides: number[], offset: number): OperandLike => ({
      dtype: 'float32',
      shape,
      strides,
      offset,
      disposed: false,
      buffer,
    });
    const message = (fn: () => unknown): string => {
      try {
        fn();
      } catch (error) {
        return (error as Error).message;
      }
      return 'passed';
    };
    const tail =
      'of one buffer share elements); the result would be undefined: pass an output that does not overlap its inputs (a copy, or another array)';
    const square = (offset: number) => at([2, 2], [1, 2], offset);
    expect(message(() => checkGemm('gemm', square(0), square(4), square(2)))).toBe(
      `gemm: the output c overlaps a in memory (bytes 8..23 and 0..15 ${tail}`,
    );
    expect(message(() => checkGemm('gemm', square(8), square(4), square(2)))).toBe(
      `gemm: the output c overlaps b in memory (bytes 8..23 and 16..31 ${tail}`,
    );
    expect(message(() => checkGemv('gemv', square(10), at([2], [1], 1), at([2], [1], 0)))).toBe(
      `gemv: the output y overlaps x in memory (bytes 0..7 and 4..11 ${tail}`,
    );
    expect(message(() => checkGemv('gemv', square(0), at([2], [1], 10), at([2], [1], 3)))).toBe(
      `gemv: the output y overlaps a in memory (bytes 12..19 and 0..15 ${tail}`,
    );
    expect(
      message(() => checkVectorPair('axpy', at([3], [2], 0), at([3], [2], 4), undefined, true)),
    ).toBe(`axpy: the output y overlaps x in memory (bytes 16..35 and 0..19 ${tail}`);
    expect(checkVectorPair('dot', at([3], [2], 0), at([3], [2], 4))).toMatchObject({ n: 3 });
    expect(
      message(() =>
        checkStridedBatched(
          'gsb',
          at([2, 2, 2], [1, 2, 4], 40),
          at([2, 2, 2], [1, 2, 4], 0),
          at([2, 2, 2], [1, 2, 4], 6),
        ),
      ),
    ).toBe(`gsb: the output c overlaps b in memory (bytes 24..55 and 0..31 ${tail}`);
  });
});

// The verdict of the checks on random operands against a plain reference of cuBLAS's rules:
// one float dtype, rank, contiguous rows, leading dimension >= rows, the elements inside the
// buffer, the product's and vectors' dimensions, the batch count and strides. Separate buffers
// (the overlap rule has its own property test in aliasing.test.ts).
describe('verdicts against a reference of the rules (property)', () => {
  /** How an operand views its buffer: each off its dense layout now and then. */
  interface Layout {
    rowStride: number;
    ldExtra: number;
    slack: number;
    batchStrideExtra: number;
  }
  const layout: fc.Arbitrary<Layout> = fc.record({
    rowStride: fc.constantFrom(1, 1, 1, 1, 1, 1, 2),
    ldExtra: fc.constantFrom(0, 0, 0, 0, 1, -1),
    slack: fc.constantFrom(0, 0, 0, 0, 2, -1),
    batchStrideExtra: fc.constantFrom(0, 0, 0, 3, -1),
  });
  /** `shape` most times, now and then another of rank 1 to 3. */
  const noisy = (shape: number[]): fc.Arbitrary<number[]> =>
    fc.oneof(
      { weight: 8, arbitrary: fc.constant(shape) },
      { weight: 1, arbitrary: fc.array(fc.nat(3), { minLength: 1, maxLength: 3 }) },
    );
  /** The dtypes of three operands: one float dtype most times. */
  const dtypes = fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom<DType>('float32', 'float64').map((d) => [d, d, d]) },
    {
      weight: 1,
      arbitrary: fc.array(fc.constantFrom<DType>('float32', 'float64', 'float16'), {
        minLength: 3,
        maxLength: 3,
      }),
    },
  );

  function operand(shape: readonly number[], l: Layout, dtype: DType): OperandLike {
    const [rows = 1, columns = 1] = shape;
    const strides = [l.rowStride];
    if (shape.length > 1) strides.push(Math.max(0, rows * l.rowStride + l.ldExtra));
    if (shape.length > 2) strides.push(Math.max(0, columns * strides[1]! + l.batchStrideExtra));
    const reach = shape.some((d) => d === 0)
      ? 0
      : shape.reduce((sum, d, i) => sum + (d - 1) * strides[i]!, 0) + 1;
    return fake([...shape], { dtype, strides, capacity: Math.max(0, reach + l.slack) });
  }

  /** The reference matrix of an operand's first two dimensions, or undefined if refused. */
  function matrix(o: OperandLike, blocks = 1, blockStride = 0) {
    if (o.strides[0] !== 1) return undefined;
    const rows = o.shape[0]!;
    const columns = o.shape.length > 1 ? o.shape[1]! : 1;
    const ld =
      o.shape.length === 1 || columns <= 1 || rows === 0 ? Math.max(1, rows) : o.strides[1]!;
    if (ld < Math.max(1, rows)) return undefined;
    const capacity = o.buffer.byteLength / BYTES[o.dtype]! - o.offset;
    const extent = rows === 0 || columns === 0 ? 0 : (columns - 1) * ld + rows;
    if (blocks > 0 && extent > 0 && (blocks - 1) * blockStride + extent > capacity)
      return undefined;
    return { rows, columns, ld };
  }

  function vector(o: OperandLike) {
    let length: number;
    let increment: number;
    if (o.shape.length === 1 || (o.shape.length === 2 && o.shape[1] === 1)) {
      [length, increment] = [o.shape[0]!, o.strides[0]!];
    } else if (o.shape.length === 2 && o.shape[0] === 1) {
      [length, increment] = [o.shape[1]!, o.strides[1]!];
    } else return undefined;
    if (length <= 1) increment = Math.max(1, increment);
    if (increment < 1) return undefined;
    const capacity = o.buffer.byteLength / BYTES[o.dtype]! - o.offset;
    if (length > 0 && (length - 1) * increment + 1 > capacity) return undefined;
    return { length, increment };
  }

  const oneFloat = (...os: OperandLike[]) =>
    os.every((o) => o.dtype === os[0]!.dtype) &&
    (os[0]!.dtype === 'float32' || os[0]!.dtype === 'float64');

  /** The product's m, n, k, or undefined where the dimensions disagree. */
  function product(
    la: ReturnType<typeof matrix>,
    lb: ReturnType<typeof matrix>,
    lc: ReturnType<typeof matrix>,
    transA: boolean,
    transB: boolean,
  ) {
    if (!la || !lb || !lc) return undefined;
    const [m, k] = transA ? [la.columns, la.rows] : [la.rows, la.columns];
    const [kb, n] = transB ? [lb.columns, lb.rows] : [lb.rows, lb.columns];
    if (k !== kb || lc.rows !== m || lc.columns !== n) return undefined;
    return { m, n, k, lda: la.ld, ldb: lb.ld, ldc: lc.ld };
  }

  const seen = { accepted: 0, refused: 0 };
  function verdict(fn: () => object): object | 'refused' {
    try {
      const result = { ...fn() };
      seen.accepted++;
      return result;
    } catch (error) {
      expect(error).toBeInstanceOf(CudaArgumentError);
      seen.refused++;
      return 'refused';
    }
  }
  /** Both verdicts came up often enough for the property to say something. */
  function bothSeen(runs: number): void {
    expect(seen.accepted).toBeGreaterThan(runs / 10);
    expect(seen.refused).toBeGreaterThan(runs / 10);
    seen.accepted = 0;
    seen.refused = 0;
  }

  const dims = fc.tuple(fc.nat(3), fc.nat(3), fc.nat(3), fc.boolean(), fc.boolean());

  it('gemm and matmul', () => {
    const runs = 2000;
    const shapes = dims.chain(([m, n, k, transA, transB]) =>
      fc.tuple(
        noisy(transA ? [k, m] : [m, k]),
        noisy(transB ? [n, k] : [k, n]),
        noisy([m, n]),
        fc.constant(transA),
        fc.constant(transB),
      ),
    );
    fc.assert(
      fc.property(
        shapes,
        fc.tuple(layout, layout, layout),
        dtypes,
        ([sa, sb, sc, transA, transB], [l1, l2, l3], [d1, d2, d3]) => {
          const [a, b, c] = [operand(sa, l1, d1!), operand(sb, l2, d2!), operand(sc, l3, d3!)];
          const twoD = (o: OperandLike) => (o.shape.length <= 2 ? matrix(o) : undefined);
          const p = oneFloat(a, b, c)
            ? product(twoD(a), twoD(b), twoD(c), transA, transB)
            : undefined;
          expect(verdict(() => checkGemm('gemm', a, b, c, { transA, transB }))).toEqual(
            p ? { dtype: a.dtype, transA, transB, alpha: 1, beta: 0, ...p } : 'refused',
          );
          // matmul: c is what it allocates (a and b alone are checked).
          const q = oneFloat(a, b)
            ? product(
                twoD(a),
                twoD(b),
                {
                  rows: transA ? (a.shape[1] ?? 1) : a.shape[0]!,
                  columns: transB ? b.shape[0]! : (b.shape[1] ?? 1),
                  ld: 1,
                },
                transA,
                transB,
              )
            : undefined;
          expect(verdict(() => checkMatmul('matmul', a, b, { transA, transB }))).toEqual(
            q ? { dtype: a.dtype, m: q.m, n: q.n } : 'refused',
          );
        },
      ),
      { numRuns: runs },
    );
    bothSeen(runs);
  });

  it('gemv, dot, axpy and nrm2', () => {
    const runs = 2000;
    const shapes = dims.chain(([m, n, , trans]) =>
      fc.tuple(
        noisy([m, n]),
        noisy(trans ? [m] : [n]),
        fc.oneof(noisy(trans ? [n] : [m]), fc.constant(trans ? [1, n] : [m, 1])),
        fc.constant(trans),
      ),
    );
    fc.assert(
      fc.property(
        shapes,
        fc.tuple(layout, layout, layout),
        dtypes,
        ([sa, sx, sy, trans], [l1, l2, l3], [d1, d2, d3]) => {
          const [a, x, y] = [operand(sa, l1, d1!), operand(sx, l2, d2!), operand(sy, l3, d3!)];
          const [la, vx, vy] = [a.shape.length <= 2 ? matrix(a) : undefined, vector(x), vector(y)];
          let expected: object | 'refused' = 'refused';
          if (oneFloat(a, x, y) && la && vx && vy) {
            const [rows, columns] = trans ? [la.columns, la.rows] : [la.rows, la.columns];
            if (vx.length === columns && vy.length === rows) {
              expected = {
                dtype: a.dtype,
                trans,
                alpha: 1,
                beta: 0,
                m: la.rows,
                n: la.columns,
                lda: la.ld,
                incx: vx.increment,
                incy: vy.increment,
              };
            }
          }
          expect(verdict(() => checkGemv('gemv', a, x, y, { transA: trans }))).toEqual(expected);
          const pair =
            oneFloat(x, y) && vx && vy && vx.length === vy.length
              ? { dtype: x.dtype, n: vx.length, incx: vx.increment, incy: vy.increment }
              : 'refused';
          expect(verdict(() => checkVectorPair('dot', x, y))).toEqual(pair);
          expect(verdict(() => checkVectorPair('axpy', x, y, undefined, true))).toEqual(pair);
          expect(verdict(() => checkVector('nrm2', x))).toEqual(
            oneFloat(x) && vx ? { dtype: x.dtype, n: vx.length, incx: vx.increment } : 'refused',
          );
        },
      ),
      { numRuns: runs },
    );
    bothSeen(runs * 4);
  });

  it('gemmStridedBatched', () => {
    const runs = 3000;
    /** A batch of rows x columns matrices: 3-D most times, 2-D (one matrix) now and then. */
    const batched = (rows: number, columns: number, batch: number) =>
      fc.oneof(
        { weight: 4, arbitrary: noisy([rows, columns, batch]) },
        { weight: 1, arbitrary: fc.constant([rows, columns]) },
      );
    const stride = fc.option(fc.nat(12), { nil: undefined, freq: 3 });
    const cases = fc.tuple(dims, fc.nat(3)).chain(([[m, n, k, transA, transB], batch]) =>
      fc.record({
        sa: batched(transA ? k : m, transA ? m : k, batch),
        sb: batched(transB ? n : k, transB ? k : n, batch),
        sc: batched(m, n, batch),
        transA: fc.constant(transA),
        transB: fc.constant(transB),
        given: fc.record({
          batch: fc.option(fc.constantFrom(batch, batch, Math.max(0, batch - 1), batch + 1), {
            nil: undefined,
          }),
          strideA: stride,
          strideB: stride,
          strideC: fc.option(fc.constantFrom(m, m * n, m * n + 1, Math.max(0, m * n - 1), 0), {
            nil: undefined,
            freq: 3,
          }),
        }),
      }),
    );
    fc.assert(
      fc.property(
        cases,
        fc.tuple(layout, layout, layout),
        dtypes,
        ({ sa, sb, sc, transA, transB, given }, [l1, l2, l3], [d1, d2, d3]) => {
          const operands = [
            operand(sa, l1, d1!),
            operand(sb, l2, d2!),
            operand(sc, l3, d3!),
          ] as const;
          const [a, b, c] = operands;
          const reference = (): object | 'refused' => {
            if (!oneFloat(a, b, c) || operands.some((o) => o.shape.length < 2)) return 'refused';
            const strideGiven = [given.strideA, given.strideB, given.strideC];
            let batch = given.batch;
            const threes = operands.filter((o) => o.shape.length === 3).map((o) => o.shape[2]!);
            if (batch === undefined) {
              if (threes.length === 0 || threes.some((t) => t !== threes[0])) return 'refused';
              batch = threes[0]!;
            } else if (
              operands.some(
                (o, i) =>
                  o.shape.length === 3 && strideGiven[i] === undefined && o.shape[2]! < batch!,
              )
            ) {
              return 'refused';
            }
            const strides = operands.map(
              (o, i) => strideGiven[i] ?? (o.shape.length === 3 ? o.strides[2]! : 0),
            );
            if (c.shape.length === 2 && given.strideC === undefined && batch > 1) return 'refused';
            // A 2-D operand's one matrix lies in its buffer whatever the batch.
            const layouts = operands.map((o, i) =>
              o.shape.length === 2 && !matrix(o) ? undefined : matrix(o, batch, strides[i]),
            );
            const p = product(layouts[0], layouts[1], layouts[2], transA, transB);
            if (!p) return 'refused';
            // The result matrices, written together, share no element.
            const cells = new Set<number>();
            for (let i = 0; i < batch; i++) {
              for (let j = 0; j < p.n; j++) {
                for (let r = 0; r < p.m; r++) {
                  const cell = i * strides[2]! + j * p.ldc + r;
                  if (cells.has(cell)) return 'refused';
                  cells.add(cell);
                }
              }
            }
            // The documented rule is stricter: they lie one after another or side by side
            // within each column; other layouts are refused even where no element is shared.
            const extent = p.m > 0 && p.n > 0 ? (p.n - 1) * p.ldc + p.m : 0;
            const apart =
              strides[2]! >= extent ||
              (strides[2]! >= p.m && (batch - 1) * strides[2]! + p.m <= p.ldc);
            if (batch > 1 && extent > 0 && !apart) return 'refused';
            return {
              dtype: a.dtype,
              transA,
              transB,
              alpha: 1,
              beta: 0,
              ...p,
              batch,
              strideA: strides[0],
              strideB: strides[1],
              strideC: strides[2],
            };
          };
          expect(
            verdict(() => checkStridedBatched('gsb', a, b, c, { transA, transB, ...given })),
          ).toEqual(reference());
        },
      ),
      { numRuns: runs },
    );
    bothSeen(runs);
  });
});
