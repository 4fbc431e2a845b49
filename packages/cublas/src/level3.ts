/**
 * Matrix-matrix products (BLAS level 3) over DeviceArrays: gemm, matmul, strided batched gemm
 * and the mixed-precision gemmEx. Column-major, as cuBLAS; float32 picks the S routine,
 * float64 the D routine.
 */
import {
  DeviceArray,
  type DType,
  resolveStream,
  type SameDType,
  type Stream,
  type StreamOption,
} from '@cuda-tasks/cudadrv';
import { NO_OPTIONS } from '@cuda-tasks/cudadrv/internal';
import {
  CUBLAS_COMPUTE_32F,
  CUBLAS_GEMM_DEFAULT,
  CUBLAS_OP_N,
  CUBLAS_OP_T,
  cublas,
} from './ffi/cublas.js';
import { cublasLt } from './ffi/cublaslt.js';
import { blas, mathMode, workspaceSize } from './handle.js';
import { type Address, type CallName, cublasCall, type Issue, issue } from './issue.js';
import {
  alignmentOf,
  computeTypeOf,
  gemmBackend,
  type LtPlan,
  type LtProblem,
  ltPlan,
} from './lt.js';
import { GEMM, GEMM_EX, GEMM_STRIDED_BATCHED } from './routines.js';
import { scalars } from './scalars.js';
import {
  GEMM_OPTIONS,
  MATMUL_OPTIONS,
  operandStream,
  STRIDED_BATCHED_OPTIONS,
} from './validate.js';
import {
  type BatchOptions,
  type CheckedStridedBatched,
  checkStridedBatched,
  newCheckedStridedBatched,
} from './validate-batched.js';
import {
  type CheckedGemm,
  type CheckedGemmEx,
  checkGemm,
  checkGemmEx,
  checkMatmul,
  newCheckedGemm,
  newCheckedGemmEx,
  type ProductOptions,
} from './validate-gemm.js';

/** Options of `gemm`: C = alpha op(A) op(B) + beta C. */
export interface GemmOptions extends ProductOptions, StreamOption {}

/** Options of `matmul` (beta is always 0: the result is new). */
export interface MatmulOptions extends Omit<ProductOptions, 'beta'>, StreamOption {}

/** Options of `gemmStridedBatched`. */
export interface StridedBatchedOptions extends ProductOptions, BatchOptions, StreamOption {}

/** Options of `gemmEx`. */
export interface GemmExOptions extends ProductOptions, StreamOption {}

// The checked arguments, reused by every call (one call at a time: the event loop's thread).
const checkedGemm = newCheckedGemm();
const checkedStridedBatched = newCheckedStridedBatched();
const checkedGemmEx = newCheckedGemmEx();

/** gemm's cuBLASLt problem, reused by every call likewise. */
const problem: LtProblem = {
  float64: false,
  transA: 0,
  transB: 0,
  m: 0,
  n: 0,
  k: 0,
  lda: 0,
  ldb: 0,
  ldc: 0,
  alignA: 0,
  alignB: 0,
  alignC: 0,
  computeType: 0,
  workspaceBytes: 0,
};

function operation(transpose: boolean): number {
  return transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
}

// The native calls (`issue.ts`): A and B read, C written; alpha and beta in the arena.
const GEMM_CALL = cublasCall<CheckedGemm>((routine, handle, g, a, b, c) => {
  const s = scalars();
  return cublas()[routine.symbol](
    handle,
    operation(g.transA),
    operation(g.transB),
    g.m,
    g.n,
    g.k,
    s.alpha,
    a,
    g.lda,
    b,
    g.ldb,
    s.beta,
    c,
    g.ldc,
  );
});
const STRIDED_BATCHED_CALL = cublasCall<CheckedStridedBatched>((routine, handle, g, a, b, c) => {
  const s = scalars();
  return cublas()[routine.symbol](
    handle,
    operation(g.transA),
    operation(g.transB),
    g.m,
    g.n,
    g.k,
    s.alpha,
    a,
    g.lda,
    g.strideA,
    b,
    g.ldb,
    g.strideB,
    s.beta,
    c,
    g.ldc,
    g.strideC,
    g.batch,
  );
});
const GEMM_EX_CALL = cublasCall<CheckedGemmEx>((routine, handle, g, a, b, c) => {
  const s = scalars();
  return cublas()[routine.symbol](
    handle,
    operation(g.transA),
    operation(g.transB),
    g.m,
    g.n,
    g.k,
    s.alpha,
    a,
    g.aType,
    g.lda,
    b,
    g.bType,
    g.ldb,
    s.beta,
    c,
    g.cType,
    g.ldc,
    CUBLAS_COMPUTE_32F,
    CUBLAS_GEMM_DEFAULT,
  );
});

/** A gemm through cuBLASLt: its plan, and the workspace its algorithm gets. */
interface LtCall {
  plan: LtPlan | undefined;
  workspace: Address;
  workspaceBytes: number;
  stream: Address;
}

/** gemm's cuBLASLt call, reused by every call likewise. */
const ltCall: LtCall = { plan: undefined, workspace: 0, workspaceBytes: 0, stream: 0 };

/** The cuBLASLt matmul, traced as the gemm it is (`cublas.sgemm`), checked as cublasLtMatmul. */
const LT_MATMUL: Readonly<Record<'float32' | 'float64', CallName>> = Object.freeze({
  float32: Object.freeze({ operation: GEMM.float32.operation, symbol: 'cublasLtMatmul' }),
  float64: Object.freeze({ operation: GEMM.float64.operation, symbol: 'cublasLtMatmul' }),
});

/**
 * gemm's cuBLASLt issue. Step 1 takes no cuBLAS handle for an algorithm without workspace
 * (cublasLtMatmul needs none); one with workspace gets the task handle's for this stream
 * (never shared with another stream).
 */
const LT_CALL = Object.freeze<Issue<LtCall, CallName>>({
  handle(stream, lt) {
    lt.stream = stream.ffiHandle;
    lt.workspace = 0;
    lt.workspaceBytes = 0;
    if (lt.plan!.workspaceNeeded > 0) {
      const workspace = blas.binding(stream).workspace;
      if (workspace !== undefined) {
        lt.workspace = workspace.address;
        lt.workspaceBytes = workspace.byteLength;
      }
    }
    return 0;
  },
  call(_name, _handle, lt, a, b, c) {
    const plan = lt.plan!;
    const s = scalars();
    return cublasLt().cublasLtMatmul(
      plan.ltHandle,
      plan.desc,
      s.alpha,
      a,
      plan.aDesc,
      b,
      plan.bDesc,
      s.beta,
      c,
      plan.cDesc,
      c,
      plan.cDesc,
      plan.algo,
      lt.workspace,
      lt.workspaceBytes,
      lt.stream,
    );
  },
  devicePointers: false,
});

/**
 * C = alpha op(A) op(B) + beta C, in place on `c`, ordered on the stream: through
 * cublasLtMatmul with an algorithm chosen once per problem and cached (see
 * `setGemmBackend`), or cublasSgemm_v2 / cublasDgemm_v2 where cuBLASLt offers none. op(X) is X or, with `transA` / `transB`, its transpose. A, B, C are 2-D
 * (or 1-D: a column) float32 or float64 arrays of one dtype; views from `block()` work,
 * their leading dimension going to cuBLAS as lda/ldb/ldc. C must not share memory with A or B
 * (a CudaArgumentError says so; blocks of one matrix that touch different elements are fine),
 * and every operand must live in the stream's context. Returns `c`.
 * @example
 * const c = DeviceArray.zeros('float32', [m, n]);
 * gemm(a, b, c, { transB: true, alpha: 2 }); // c = 2 a b^T
 */
export function gemm<A extends DType, B extends DType, C extends DeviceArray>(
  a: DeviceArray<A>,
  b: DeviceArray<B> & SameDType<A, B>,
  c: C & SameDType<A, C['dtype']>,
  options: GemmOptions = NO_OPTIONS,
): C {
  const g = checkedGemm;
  const p = problem;
  let stream: Stream;
  // The same three arrays as the last gemm, with the default options, on the same stream:
  // what that call checked still holds (see `lastGemm`), so only what can have changed since
  // is looked at again: whether an array was disposed, the current stream, the settings.
  if (
    options === NO_OPTIONS &&
    lastGemm.a !== undefined &&
    a === lastGemm.a &&
    b === lastGemm.b &&
    c === lastGemm.c &&
    !a.disposed &&
    !b.disposed &&
    !c.disposed
  ) {
    stream = resolveStream(undefined);
    if (stream !== lastGemm.stream) stream = checkAll(a, b, c, options);
  } else stream = checkAll(a, b, c, options);
  if (g.m === 0 || g.n === 0) return c;
  const routine = GEMM[g.dtype];
  scalars().set(routine.scalar, g.alpha, g.beta);
  // Everything that can fail (the plan, the handle and its binding) comes before the operands
  // are declared used on the stream: a gemm that throws leaves no trace on any buffer.
  if (gemmBackend() === 'cublaslt' && g.k > 0) {
    // The plan is looked up (or built) with the stream's context current; an algorithm
    // without workspace takes no cuBLAS handle, which would make it current otherwise.
    stream.context.makeCurrent();
    p.computeType = computeTypeOf(p.float64, mathMode() === 'tf32');
    p.workspaceBytes = workspaceSize();
    const plan = ltPlan(stream.context, p);
    if (plan.usable) {
      ltCall.plan = plan;
      issue(stream, LT_MATMUL[g.dtype], LT_CALL, ltCall, a, b, c);
      return c;
    }
  }
  issue(stream, routine, GEMM_CALL, g, a, b, c);
  return c;
}

/**
 * The arrays of the last `gemm` whose checks passed with the default options, and the stream
 * they were checked against; undefined arrays once another call has begun its checks. While
 * they are set, `checkedGemm` and `problem` hold that call's checked values (nothing else
 * writes them). Those values depend only on what an array keeps for its life: its dtype, its
 * frozen shape and strides, its offset and buffer (the address and context), so they hold for
 * the same arrays as long as none is disposed. The stream decides the context check.
 *
 * The references are dropped within `LAST_GEMM_HELD_MS` of being taken (`forgetLastGemm`), so
 * that arrays the program no longer holds are not kept from the garbage collector (which frees
 * their memory) for longer than that; the next gemm of the same arrays then checks them again.
 */
const lastGemm: {
  a: DeviceArray | undefined;
  b: DeviceArray | undefined;
  c: DeviceArray | undefined;
  stream: Stream | undefined;
  /** Whether a timer to forget them is pending. */
  forgetting: boolean;
} = { a: undefined, b: undefined, c: undefined, stream: undefined, forgetting: false };

/** How long `lastGemm` holds its references at most (one timer per such period, unreferenced). */
const LAST_GEMM_HELD_MS = 1000;

/** Clears `lastGemm`'s arrays and stream: the next gemm checks everything. */
function clearLastGemm(): void {
  lastGemm.a = lastGemm.b = lastGemm.c = undefined;
  lastGemm.stream = undefined;
}

/** The forgetting timer's callback. */
function forgetLastGemm(): void {
  clearLastGemm();
  lastGemm.forgetting = false;
}

/**
 * Every check of `gemm` (the arrays, dtypes, options, shapes, aliasing, the stream and the
 * contexts), into `checkedGemm` and `problem`; returns the stream. With the default options,
 * remembers the arrays and the stream in `lastGemm` once all passed.
 */
function checkAll(a: DeviceArray, b: DeviceArray, c: DeviceArray, options: GemmOptions): Stream {
  clearLastGemm();
  const g = checkGemm('gemm', a, b, c, options, checkedGemm);
  const stream = operandStream('gemm', options, GEMM_OPTIONS, 'abc', a, b, c);
  const p = problem;
  p.float64 = g.dtype === 'float64';
  p.transA = operation(g.transA);
  p.transB = operation(g.transB);
  p.m = g.m;
  p.n = g.n;
  p.k = g.k;
  p.lda = g.lda;
  p.ldb = g.ldb;
  p.ldc = g.ldc;
  p.alignA = alignmentOf(a.pointer);
  p.alignB = alignmentOf(b.pointer);
  p.alignC = alignmentOf(c.pointer);
  if (options === NO_OPTIONS) {
    lastGemm.a = a;
    lastGemm.b = b;
    lastGemm.c = c;
    lastGemm.stream = stream;
    if (!lastGemm.forgetting) {
      lastGemm.forgetting = true;
      setTimeout(forgetLastGemm, LAST_GEMM_HELD_MS).unref();
    }
  }
  return stream;
}

/**
 * A new array alpha op(A) op(B) (m x n), allocated from the pool on the stream.
 * @example const c = matmul(a, b); // a: m x k, b: k x n
 */
export function matmul<D extends DType, B extends DType>(
  a: DeviceArray<D>,
  b: DeviceArray<B> & SameDType<D, B>,
  options: MatmulOptions = NO_OPTIONS,
): DeviceArray<D> {
  const { dtype, m, n } = checkMatmul('matmul', a, b, options);
  const stream = operandStream('matmul', options, MATMUL_OPTIONS, 'ab', a, b);
  const c = DeviceArray.empty(dtype as D, [m, n], { stream });
  try {
    return gemm(a, b, c, {
      transA: options.transA,
      transB: options.transB,
      alpha: options.alpha,
      beta: 0,
      stream,
    });
  } catch (error) {
    c.dispose();
    throw error;
  }
}

/**
 * C_i = alpha op(A_i) op(B_i) + beta C_i for every matrix i of a batch, in one call
 * (cublasSgemmStridedBatched / cublasDgemmStridedBatched). By default the operands are 3-D
 * arrays [rows, columns, batch] and each X_i is `X[:, :, i]`; a 2-D `a` or `b` is used for
 * every product. `batch`, `strideA`, `strideB`, `strideC` (elements between consecutive
 * matrices) override that. Every matrix must lie in its array's memory and the C matrices
 * must not overlap each other nor any A or B matrix. Returns `c`.
 * @example
 * const a = DeviceArray.fromHost(dataA, [m, k, batch]);
 * const b = DeviceArray.fromHost(dataB, [k, n, batch]);
 * const c = DeviceArray.empty('float32', [m, n, batch]);
 * gemmStridedBatched(a, b, c);
 */
export function gemmStridedBatched<A extends DType, B extends DType, C extends DeviceArray>(
  a: DeviceArray<A>,
  b: DeviceArray<B> & SameDType<A, B>,
  c: C & SameDType<A, C['dtype']>,
  options: StridedBatchedOptions = NO_OPTIONS,
): C {
  const g = checkStridedBatched('gemmStridedBatched', a, b, c, options, checkedStridedBatched);
  const stream = operandStream(
    'gemmStridedBatched',
    options,
    STRIDED_BATCHED_OPTIONS,
    'abc',
    a,
    b,
    c,
  );
  if (g.m === 0 || g.n === 0 || g.batch === 0) return c;
  const routine = GEMM_STRIDED_BATCHED[g.dtype];
  scalars().set(routine.scalar, g.alpha, g.beta);
  issue(stream, routine, STRIDED_BATCHED_CALL, g, a, b, c);
  return c;
}

/**
 * Mixed-precision C = alpha op(A) op(B) + beta C (cublasGemmEx) with float32 accumulation
 * (CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT): A and B both float16 or both bfloat16 (or both
 * float32), C float32 or the inputs' dtype. alpha and beta are float32. Tensor cores do the
 * half-precision products. Returns `c`.
 * @example
 * const a = DeviceArray.fromHost(values, [m, k], { dtype: 'float16' });
 * const b = DeviceArray.fromHost(other, [k, n], { dtype: 'float16' });
 * const c = gemmEx(a, b, DeviceArray.empty('float32', [m, n]));
 */
export function gemmEx<C extends DeviceArray>(
  a: DeviceArray,
  b: DeviceArray,
  c: C,
  options: GemmExOptions = NO_OPTIONS,
): C {
  const g = checkGemmEx('gemmEx', a, b, c, options, checkedGemmEx);
  const stream = operandStream('gemmEx', options, GEMM_OPTIONS, 'abc', a, b, c);
  if (g.m === 0 || g.n === 0) return c;
  scalars().set(GEMM_EX.scalar, g.alpha, g.beta);
  issue(stream, GEMM_EX, GEMM_EX_CALL, g, a, b, c);
  return c;
}
