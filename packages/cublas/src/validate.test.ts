import { CudaArgumentError, DisposedError, type DType } from '@cuda-tasks/cudadrv';
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
