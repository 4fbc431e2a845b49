import {
  CudaArgumentError,
  DeviceArray,
  DisposedError,
  type FloatDType,
} from '@cuda-tasks/cudadrv';
import { describeGpu, rng } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';
import { cublas } from './ffi/index.js';
import {
  asum,
  axpy,
  CublasError,
  check,
  dot,
  gemm,
  gemmBackend,
  gemmEx,
  gemmPlanStatistics,
  gemmStridedBatched,
  gemv,
  handle,
  iamax,
  matmul,
  nrm2,
  scal,
  setGemmBackend,
  setMathMode,
  version,
} from './index.js';
import { scalars } from './scalars.js';

// ---- CPU references (float64, column-major) ----

/** `n` uniform values in [-1, 1) in the dtype's host array (float64 values use all 53 bits). */
function random(dtype: FloatDType, n: number, seed: number): Float32Array | Float64Array {
  const next = rng(seed);
  const out = dtype === 'float32' ? new Float32Array(n) : new Float64Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = dtype === 'float32' ? next() * 2 - 1 : next() * 2 - 1 + (next() - 0.5) * 2 ** -26;
  }
  return out;
}

interface MatrixData {
  data: ArrayLike<number>;
  /** Leading dimension. */
  ld: number;
  /** Element offset of the matrix in `data`. */
  offset?: number;
}

/** alpha op(A) op(B) + beta C in float64, as a dense m x n column-major array. */
function gemmReference(
  m: number,
  n: number,
  k: number,
  a: MatrixData & { trans: boolean },
  b: MatrixData & { trans: boolean },
  c: MatrixData,
  alpha: number,
  beta: number,
): Float64Array {
  const out = new Float64Array(m * n);
  const ao = a.offset ?? 0;
  const bo = b.offset ?? 0;
  const co = c.offset ?? 0;
  for (let j = 0; j < n; j++) {
    for (let i = 0; i < m; i++) {
      let sum = 0;
      for (let l = 0; l < k; l++) {
        const av = a.trans ? a.data[ao + l + i * a.ld]! : a.data[ao + i + l * a.ld]!;
        const bv = b.trans ? b.data[bo + j + l * b.ld]! : b.data[bo + l + j * b.ld]!;
        sum += av * bv;
      }
      out[i + j * m] = alpha * sum + (beta === 0 ? 0 : beta * c.data[co + i + j * c.ld]!);
    }
  }
  return out;
}

/** ||got - want||_2 / ||want||_2. */
function relativeError(got: ArrayLike<number>, want: ArrayLike<number>): number {
  expect(got.length).toBe(want.length);
  let difference = 0;
  let norm = 0;
  for (let i = 0; i < want.length; i++) {
    difference += (got[i]! - want[i]!) ** 2;
    norm += want[i]! ** 2;
  }
  return Math.sqrt(difference / norm);
}

const TOLERANCE: Record<FloatDType, number> = { float32: 1e-5, float64: 1e-12 };

describeGpu('cuBLAS on the GPU', () => {
  it('reports its version', () => {
    expect(version()).toBeGreaterThanOrEqual(120000);
  });

  for (const dtype of ['float32', 'float64'] as const) {
    it(`${dtype === 'float32' ? 's' : 'd'}gemm 256x256x256 with transposes, alpha and beta`, async () => {
      const size = 256;
      const hostA = random(dtype, size * size, 1);
      const hostB = random(dtype, size * size, 2);
      const hostC = random(dtype, size * size, 3);
      using a = DeviceArray.fromHost(hostA, [size, size]);
      using b = DeviceArray.fromHost(hostB, [size, size]);
      for (const [transA, transB] of [
        [false, false],
        [true, false],
        [false, true],
        [true, true],
      ] as const) {
        const alpha = 1.5;
        const beta = -0.75;
        using c = DeviceArray.fromHost(hostC, [size, size]);
        gemm(a, b, c, { transA, transB, alpha, beta });
        const got = await c.toHost();
        const want = gemmReference(
          size,
          size,
          size,
          { data: hostA, ld: size, trans: transA },
          { data: hostB, ld: size, trans: transB },
          { data: hostC, ld: size },
          alpha,
          beta,
        );
        expect(relativeError(got, want), `transA=${transA} transB=${transB}`).toBeLessThan(
          TOLERANCE[dtype],
        );
      }
    });
  }

  it('gemm on block() views uses their leading dimension and leaves the rest alone', async () => {
    const dtype = 'float32';
    const parentA = random(dtype, 300 * 280, 4);
    const parentB = random(dtype, 90 * 200, 5);
    const parentC = random(dtype, 150 * 120, 6);
    using pa = DeviceArray.fromHost(parentA, [300, 280]);
    using pb = DeviceArray.fromHost(parentB, [90, 200]);
    using pc = DeviceArray.fromHost(parentC, [150, 120]);
    // C[20:120, 30:110] = 0.5 A[5:105, 7:67] B[3:63, 11:91] + 2 C[20:120, 30:110]
    const a = pa.block(5, 7, 100, 60);
    const b = pb.block(3, 11, 60, 80);
    const c = pc.block(20, 30, 100, 80);
    expect([a.leadingDimension, b.leadingDimension, c.leadingDimension]).toEqual([300, 90, 150]);
    gemm(a, b, c, { alpha: 0.5, beta: 2 });
    const got = await pc.toHost();
    const want = gemmReference(
      100,
      80,
      60,
      { data: parentA, ld: 300, offset: 5 + 7 * 300, trans: false },
      { data: parentB, ld: 90, offset: 3 + 11 * 90, trans: false },
      { data: parentC, ld: 150, offset: 20 + 30 * 150 },
      0.5,
      2,
    );
    const block = new Float64Array(100 * 80);
    for (let j = 0; j < 80; j++) {
      for (let i = 0; i < 100; i++) block[i + j * 100] = got[20 + i + (30 + j) * 150]!;
    }
    expect(relativeError(block, want)).toBeLessThan(1e-5);
    // Outside the block, C is untouched.
    for (let j = 0; j < 120; j++) {
      for (let i = 0; i < 150; i++) {
        const inside = i >= 20 && i < 120 && j >= 30 && j < 110;
        if (!inside && got[i + j * 150] !== parentC[i + j * 150]) {
          throw new Error(`C[${i}, ${j}] changed outside the block`);
        }
      }
    }

    // A transposed block: op(A) = A[0:60, 0:100]^T.
    using out = DeviceArray.zeros('float32', [100, 80]);
    gemm(pa.block(0, 0, 60, 100), b, out, { transA: true });
    const want2 = gemmReference(
      100,
      80,
      60,
      { data: parentA, ld: 300, trans: true },
      { data: parentB, ld: 90, offset: 3 + 11 * 90, trans: false },
      { data: new Float64Array(0), ld: 100 },
      1,
      0,
    );
    expect(relativeError(await out.toHost(), want2)).toBeLessThan(1e-5);
  });

  it('gemm through cuBLASLt (the default) and through cuBLAS agree with the CPU and each other', async () => {
    expect(gemmBackend()).toBe('cublaslt');
    // A problem no other test poses, so that its plan is built here: 200 x 120 x 72, C's view
    // at an element offset (4-byte alignment), alpha and beta.
    const [m, n, k] = [200, 120, 72];
    const hostA = random('float32', m * k, 41);
    const hostB = random('float32', k * n, 42);
    const hostC = random('float32', 210 * n, 43);
    using a = DeviceArray.fromHost(hostA, [m, k]);
    using b = DeviceArray.fromHost(hostB, [k, n]);
    const want = gemmReference(
      m,
      n,
      k,
      { data: hostA, ld: m, trans: false },
      { data: hostB, ld: k, trans: false },
      { data: hostC, ld: 210, offset: 3 },
      0.5,
      2,
    );
    const run = async () => {
      using parent = DeviceArray.fromHost(hostC, [210, n]);
      const c = parent.block(3, 0, m, n);
      gemm(a, b, c, { alpha: 0.5, beta: 2 });
      return Float64Array.from(await c.copy().toHost());
    };
    const before = gemmPlanStatistics().built;
    const lt = await run();
    for (let i = 0; i < 50; i++) await run();
    // One plan for the 51 calls: cuBLASLt's heuristic ran once.
    expect(gemmPlanStatistics().built - before).toBe(1);
    // The same problem through the same plan gives the same bits every time.
    expect(await run()).toEqual(lt);
    setGemmBackend('cublas');
    let classic: Float64Array;
    try {
      classic = await run();
    } finally {
      setGemmBackend('cublaslt');
    }
    expect(relativeError(lt, want)).toBeLessThan(1e-5);
    expect(relativeError(classic, want)).toBeLessThan(1e-5);
    expect(relativeError(lt, classic)).toBeLessThan(1e-5);
  });

  it('gemm with TF32 allowed builds a plan of its own, within TF32 precision of the CPU', async () => {
    const size = 256;
    const hostA = random('float32', size * size, 51);
    const hostB = random('float32', size * size, 52);
    using a = DeviceArray.fromHost(hostA, [size, size]);
    using b = DeviceArray.fromHost(hostB, [size, size]);
    using c = DeviceArray.zeros('float32', [size, size]);
    const want = gemmReference(
      size,
      size,
      size,
      { data: hostA, ld: size, trans: false },
      { data: hostB, ld: size, trans: false },
      { data: new Float64Array(0), ld: size },
      1,
      0,
    );
    gemm(a, b, c);
    const full = relativeError(await c.toHost(), want);
    const before = gemmPlanStatistics().built;
    setMathMode('tf32');
    try {
      gemm(a, b, c);
    } finally {
      setMathMode('default');
    }
    const tf32 = relativeError(await c.toHost(), want);
    expect(gemmPlanStatistics().built - before).toBe(1);
    expect(full).toBeLessThan(1e-5);
    // TF32 keeps 10 bits of mantissa in the products: ~1e-3 off, far from FP32's ~1e-7.
    expect(tf32).toBeLessThan(5e-3);
    expect(tf32).toBeGreaterThan(10 * full);
  });

  it('gemm with k = 0 scales C by beta (the cuBLAS path: cuBLASLt gets no empty problem)', async () => {
    const hostC = random('float64', 6 * 5, 61);
    using a = DeviceArray.zeros('float64', [6, 0]);
    using b = DeviceArray.zeros('float64', [0, 5]);
    using c = DeviceArray.fromHost(hostC, [6, 5]);
    gemm(a, b, c, { beta: -2 });
    expect(Array.from(await c.toHost())).toEqual(Array.from(hostC, (x) => -2 * x));
  });

  it('matmul allocates the product', async () => {
    const hostA = random('float64', 70 * 40, 7);
    const hostB = random('float64', 50 * 40, 8);
    using a = DeviceArray.fromHost(hostA, [70, 40]);
    using b = DeviceArray.fromHost(hostB, [50, 40]);
    using c = matmul(a, b, { transB: true, alpha: 3 });
    expect(c.shape).toEqual([70, 50]);
    expect(c.dtype).toBe('float64');
    const want = gemmReference(
      70,
      50,
      40,
      { data: hostA, ld: 70, trans: false },
      { data: hostB, ld: 50, trans: true },
      { data: new Float64Array(0), ld: 70 },
      3,
      0,
    );
    expect(relativeError(await c.toHost(), want)).toBeLessThan(1e-12);
  });

  for (const dtype of ['float32', 'float64'] as const) {
    it(`${dtype} gemmStridedBatched over [m, k, batch] arrays, with transposes and broadcast`, async () => {
      const [m, n, k, batch] = [32, 24, 40, 7];
      const hostA = random(dtype, m * k * batch, 9);
      const hostBt = random(dtype, n * k * batch, 10);
      const hostC = random(dtype, m * n * batch, 11);
      using a = DeviceArray.fromHost(hostA, [m, k, batch]);
      using bt = DeviceArray.fromHost(hostBt, [n, k, batch]);
      using c = DeviceArray.fromHost(hostC, [m, n, batch]);
      gemmStridedBatched(a, bt, c, { transB: true, alpha: -1, beta: 0.5 });
      const got = await c.toHost();
      for (let i = 0; i < batch; i++) {
        const want = gemmReference(
          m,
          n,
          k,
          { data: hostA, ld: m, offset: i * m * k, trans: false },
          { data: hostBt, ld: n, offset: i * n * k, trans: true },
          { data: hostC, ld: m, offset: i * m * n },
          -1,
          0.5,
        );
        const slice = got.subarray(i * m * n, (i + 1) * m * n);
        expect(relativeError(slice, want), `batch ${i}`).toBeLessThan(TOLERANCE[dtype]);
      }

      // One A (2-D, stride 0) against every B: C_i = A B_i.
      const hostB = random(dtype, k * n * batch, 12);
      using single = DeviceArray.fromHost(hostA.subarray(0, m * k), [m, k]);
      using b = DeviceArray.fromHost(hostB, [k, n, batch]);
      using out = DeviceArray.zeros(dtype, [m, n, batch]);
      gemmStridedBatched(single, b, out);
      const got2 = await out.toHost();
      for (let i = 0; i < batch; i++) {
        const want = gemmReference(
          m,
          n,
          k,
          { data: hostA, ld: m, trans: false },
          { data: hostB, ld: k, offset: i * k * n, trans: false },
          { data: new Float64Array(0), ld: m },
          1,
          0,
        );
        expect(relativeError(got2.subarray(i * m * n, (i + 1) * m * n), want)).toBeLessThan(
          TOLERANCE[dtype],
        );
      }
    });
  }

  for (const dtype of ['float32', 'float64'] as const) {
    it(`${dtype} gemv with and without transpose, and a strided x`, async () => {
      const [m, n] = [200, 150];
      const hostA = random(dtype, m * n, 13);
      const hostX = random(dtype, Math.max(m, n), 14);
      const hostY = random(dtype, Math.max(m, n), 15);
      using a = DeviceArray.fromHost(hostA, [m, n]);
      for (const trans of [false, true]) {
        const [rows, columns] = trans ? [n, m] : [m, n];
        using x = DeviceArray.fromHost(hostX.subarray(0, columns));
        using y = DeviceArray.fromHost(hostY.subarray(0, rows));
        gemv(a, x, y, { trans, alpha: 2, beta: -1 });
        const want = gemmReference(
          rows,
          1,
          columns,
          { data: hostA, ld: m, trans },
          { data: hostX, ld: columns, trans: false },
          { data: hostY, ld: rows },
          2,
          -1,
        );
        expect(relativeError(await y.toHost(), want), `trans=${trans}`).toBeLessThan(
          TOLERANCE[dtype],
        );
      }
      // x = row 3 of a 10 x n matrix: increment 10.
      const hostRows = random(dtype, 10 * n, 16);
      using rowsMatrix = DeviceArray.fromHost(hostRows, [10, n]);
      const x = rowsMatrix.block(3, 0, 1, n);
      using y = DeviceArray.zeros(dtype, [m]);
      gemv(a, x, y);
      const xValues = Array.from({ length: n }, (_, j) => hostRows[3 + j * 10]!);
      const want = gemmReference(
        m,
        1,
        n,
        { data: hostA, ld: m, trans: false },
        { data: xValues, ld: n, trans: false },
        { data: new Float64Array(0), ld: m },
        1,
        0,
      );
      expect(relativeError(await y.toHost(), want)).toBeLessThan(TOLERANCE[dtype]);
    });
  }

  for (const dtype of ['float32', 'float64'] as const) {
    it(`${dtype} axpy, dot, nrm2, asum, iamax and scal match the CPU`, async () => {
      const n = 10_000;
      const hostX = random(dtype, n, 17);
      const hostY = random(dtype, n, 18);
      const peak = dtype === 'float32' ? 1234 : 4321;
      hostX[peak] = -7; // the unique largest |x_i|
      using x = DeviceArray.fromHost(hostX);
      using y = DeviceArray.fromHost(hostY);
      const tolerance = dtype === 'float32' ? 1e-5 : 1e-13;

      let dotAbs = 0;
      let dotRef = 0;
      let sumSquares = 0;
      let sumAbs = 0;
      for (let i = 0; i < n; i++) {
        dotRef += hostX[i]! * hostY[i]!;
        dotAbs += Math.abs(hostX[i]! * hostY[i]!);
        sumSquares += hostX[i]! ** 2;
        sumAbs += Math.abs(hostX[i]!);
      }
      expect(Math.abs((await dot(x, y)) - dotRef)).toBeLessThan(tolerance * dotAbs);
      const norm = Math.sqrt(sumSquares);
      expect(Math.abs((await nrm2(x)) - norm)).toBeLessThan(tolerance * norm);
      expect(Math.abs((await asum(x)) - sumAbs)).toBeLessThan(tolerance * sumAbs);
      expect(await iamax(x)).toBe(peak);

      // Concurrent reductions on one stream each get their own result buffer.
      const [d2, n2] = await Promise.all([dot(x, x), nrm2(y)]);
      expect(Math.abs(d2 - sumSquares)).toBeLessThan(tolerance * sumSquares);
      expect(n2).toBeGreaterThan(0);

      axpy(0.7, x, y);
      const afterAxpy = await y.toHost();
      for (let i = 0; i < n; i++) {
        const want = 0.7 * hostX[i]! + hostY[i]!;
        if (Math.abs(afterAxpy[i]! - want) > tolerance * 4) {
          throw new Error(`axpy: y[${i}] = ${afterAxpy[i]}, expected ${want}`);
        }
      }

      scal(-1.25, x);
      const afterScal = await x.toHost();
      for (let i = 0; i < n; i++) {
        const want = -1.25 * hostX[i]!;
        if (Math.abs(afterScal[i]! - want) > tolerance * 8) {
          throw new Error(`scal: x[${i}] = ${afterScal[i]}, expected ${want}`);
        }
      }

      // Strided vectors: every 4th element through a row of a 4 x (n/4) matrix.
      using matrix = DeviceArray.fromHost(hostY, [4, n / 4]);
      const row = matrix.block(1, 0, 1, n / 4);
      let rowSum = 0;
      let rowPeak = 0;
      for (let j = 0; j < n / 4; j++) {
        rowSum += Math.abs(hostY[1 + 4 * j]!);
        if (Math.abs(hostY[1 + 4 * j]!) > Math.abs(hostY[1 + 4 * rowPeak]!)) rowPeak = j;
      }
      expect(Math.abs((await asum(row)) - rowSum)).toBeLessThan(tolerance * rowSum);
      expect(await iamax(row)).toBe(rowPeak);
    });
  }

  it('reductions leave the handle in host pointer mode', async () => {
    using x = DeviceArray.fromHost(new Float32Array([3, 4]));
    expect(await nrm2(x)).toBeCloseTo(5, 5);
    const mode = [-1];
    check(cublas().cublasGetPointerMode_v2(handle(), mode), 'cublasGetPointerMode_v2');
    expect(mode[0]).toBe(0); // CUBLAS_POINTER_MODE_HOST
  });

  for (const dtype of ['float16', 'bfloat16'] as const) {
    it(`gemmEx with ${dtype} inputs and float32 output`, async () => {
      const [m, n, k] = [128, 96, 256];
      const transB = dtype === 'bfloat16';
      using a = DeviceArray.fromHost(random('float32', m * k, 19), [m, k], { dtype });
      using b = DeviceArray.fromHost(random('float32', k * n, 20), transB ? [n, k] : [k, n], {
        dtype,
      });
      const hostC = random('float32', m * n, 21);
      using c = DeviceArray.fromHost(hostC, [m, n]);
      // The reference uses the inputs as rounded to half precision on the device.
      const roundedA = await a.toHost();
      const roundedB = await b.toHost();
      gemmEx(a, b, c, { transB, alpha: 1, beta: 0.5 });
      const want = gemmReference(
        m,
        n,
        k,
        { data: roundedA, ld: m, trans: false },
        { data: roundedB, ld: transB ? n : k, trans: transB },
        { data: hostC, ld: m },
        1,
        0.5,
      );
      expect(relativeError(await c.toHost(), want)).toBeLessThan(2e-4);
    });
  }

  // gemmEx may also write C in the inputs' half-precision dtype (validate.ts: c is float32 or
  // a's dtype): float32 accumulation, then one rounding to float16 / bfloat16 on output.
  for (const [dtype, unitRoundoff] of [
    ['float16', 2 ** -11],
    ['bfloat16', 2 ** -8],
  ] as const) {
    it(`gemmEx with ${dtype} inputs and ${dtype} output, alpha, beta and a transpose`, async () => {
      const [m, n, k] = [64, 48, 256];
      const transA = dtype === 'bfloat16';
      using a = DeviceArray.fromHost(random('float32', m * k, 31), transA ? [k, m] : [m, k], {
        dtype,
      });
      using b = DeviceArray.fromHost(random('float32', k * n, 32), [k, n], { dtype });
      using c = DeviceArray.fromHost(random('float32', m * n, 33), [m, n], { dtype });
      expect(c.dtype).toBe(dtype);
      // The reference (float64) uses the operands as rounded to half precision on the device.
      const roundedA = await a.toHost();
      const roundedB = await b.toHost();
      const roundedC = await c.toHost();
      const [alpha, beta] = [1.5, -0.5];
      gemmEx(a, b, c, { transA, alpha, beta });
      const got = await c.toHost();
      const want = gemmReference(
        m,
        n,
        k,
        { data: roundedA, ld: transA ? k : m, trans: transA },
        { data: roundedB, ld: k, trans: false },
        { data: roundedC, ld: m },
        alpha,
        beta,
      );
      // |alpha| sum |a||b| + |beta c|: the scale of float32 accumulation error per element.
      const magnitude = gemmReference(
        m,
        n,
        k,
        { data: roundedA.map(Math.abs), ld: transA ? k : m, trans: transA },
        { data: roundedB.map(Math.abs), ld: k, trans: false },
        { data: roundedC.map(Math.abs), ld: m },
        Math.abs(alpha),
        Math.abs(beta),
      );
      // Per element: one rounding to the output dtype (unit roundoff u: 2^-11 for float16,
      // 2^-8 for bfloat16) of a float32 sum of k terms (error at most ~k 2^-24 of the
      // magnitude; doubled for slack).
      let bad = -1;
      for (let i = 0; i < m * n && bad < 0; i++) {
        const bound =
          unitRoundoff * Math.abs(want[i]!) + (1 + unitRoundoff) * 2 * k * 2 ** -24 * magnitude[i]!;
        if (!(Math.abs(got[i]! - want[i]!) <= bound)) bad = i;
      }
      expect(bad < 0 ? 'within' : `element ${bad}: ${got[bad]} vs ${want[bad]}`).toBe('within');
      // Half precision really was the output: the values are representable in it, and not
      // all of them equal the float64 product (which float16/bfloat16 cannot hold exactly).
      using again = DeviceArray.fromHost(got as Float32Array, [m, n], { dtype });
      expect(await again.toHost()).toEqual(got);
      expect(relativeError(got, want)).toBeGreaterThan(0);
      expect(relativeError(got, want)).toBeLessThan(unitRoundoff);
    });
  }

  it('rejects bad input with CudaArgumentError or DisposedError', async () => {
    using a = DeviceArray.zeros('float32', [4, 3]);
    using b = DeviceArray.zeros('float32', [3, 5]);
    using c = DeviceArray.zeros('float32', [4, 5]);
    using wrongShape = DeviceArray.zeros('float32', [4, 4]);
    using double = DeviceArray.zeros('float64', [3, 5]);
    using batch = DeviceArray.zeros('float32', [4, 3, 2]);
    expect(() => gemm(a, wrongShape, c)).toThrow(CudaArgumentError);
    expect(() => gemm(a, b, wrongShape)).toThrow(CudaArgumentError);
    expect(() => gemm(a, double as any, c)).toThrow(/dtype/);
    expect(() => gemm(batch, b, c)).toThrow(/gemmStridedBatched/);
    expect(() => gemm(a, b, c, { transA: true })).toThrow(/inner dimensions/);
    const gone = DeviceArray.zeros('float32', [3, 5]);
    gone.dispose();
    expect(() => gemm(a, gone, c)).toThrow(DisposedError);
    await expect(dot(gone, gone)).rejects.toThrow(DisposedError);
    using x = DeviceArray.zeros('float32', [5]);
    using y = DeviceArray.zeros('float32', [6]);
    expect(() => axpy(1, x, y)).toThrow(CudaArgumentError);
    await expect(dot(x, y)).rejects.toThrow(CudaArgumentError);
    expect(() => gemv(a, x, y)).toThrow(CudaArgumentError);
    using ints = DeviceArray.zeros('int32', [5]);
    await expect(nrm2(ints as any)).rejects.toThrow(CudaArgumentError);
  });

  it('turns a failed cuBLAS status into a CublasError named by cublasGetStatusName', () => {
    // m = -1 is rejected by cuBLAS itself with CUBLAS_STATUS_INVALID_VALUE.
    const s = scalars().float32(1, 0);
    const status = cublas().cublasSgemm_v2(
      handle(),
      0,
      0,
      -1,
      1,
      1,
      s.alpha,
      0n,
      1,
      0n,
      1,
      s.beta,
      0n,
      1,
    );
    let thrown: unknown;
    try {
      check(status, 'cublasSgemm_v2');
    } catch (error) {
      thrown = error;
    }
    expect(CublasError.isInstance(thrown)).toBe(true);
    expect(thrown).toMatchObject({ code: 7, status: 'CUBLAS_STATUS_INVALID_VALUE' });
  });
});
