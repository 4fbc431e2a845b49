/**
 * `gemm` through cuBLASLt with its plan cached. `cublasSgemm` chooses its algorithm on every
 * call (a heuristic lookup inside cuBLAS); `cublasLtMatmul` takes an algorithm chosen once.
 * A plan holds, per problem (dtype, transposes, m, n, k, leading dimensions, the alignment of
 * the three addresses, the compute type and the workspace bound), the matmul descriptor, the
 * three matrix layouts and the algorithm cuBLASLt's heuristic picked. The stream and the
 * workspace are arguments of every cublasLtMatmul call, so nothing in a plan belongs to a task
 * or a stream: plans are shared by every task of a context. An algorithm that needs no
 * workspace needs nothing of the task's cuBLAS handle either; one that needs workspace gets
 * the (handle, stream) pair's, as every cuBLAS routine does. Where the heuristic finds no
 * algorithm, the plan says so and `gemm` calls cublasSgemm / cublasDgemm instead.
 *
 * The cuBLASLt handle is the task runtime kit's second kind of handle (`SharedHandle`): one
 * per context, shared by every task, the context's plans hanging off it; the calls go through
 * cuBLAS's issue envelope (`blas` in handle.ts) like every other cuBLAS call.
 */
import { type Context, CudaArgumentError, packageOf, processState } from '@cuda-tasks/cudadrv';
import { koffi } from '@cuda-tasks/cudadrv/ffi';
import { ffiValue } from '@cuda-tasks/cudadrv/internal';
import { SharedHandle } from '@cuda-tasks/task-runtime';
import { check } from './errors.js';
import {
  CUBLAS_COMPUTE_32F,
  CUBLAS_COMPUTE_32F_FAST_TF32,
  CUBLAS_COMPUTE_64F,
  CUDA_R_32F,
  CUDA_R_64F,
} from './ffi/cublas.js';
import {
  CUBLASLT_MATMUL_DESC_TRANSA,
  CUBLASLT_MATMUL_DESC_TRANSB,
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
  cublasLt,
  HEURISTIC_RESULT_BYTES,
  HEURISTIC_STATE_OFFSET,
  HEURISTIC_WORKSPACE_OFFSET,
} from './ffi/cublaslt.js';
import type { GemmShape } from './validate-gemm.js';

/** Which library `gemm` calls for float32 and float64: cuBLASLt with cached plans, or cuBLAS. */
export type GemmBackend = 'cublaslt' | 'cublas';

/** Plans kept per context before the oldest are destroyed. */
export const PLAN_LIMIT = 256;

/** A cached cuBLASLt matmul plan: the problem and context it was built for (its key), and more. */
export interface LtPlan extends Readonly<LtProblem> {
  readonly context: Context;
  /** False: the heuristic found no algorithm; gemm calls cublas<t>gemm for this problem. */
  readonly usable: boolean;
  /**
   * The workspace the algorithm needs, in bytes. 0: gemm passes none, and so needs nothing
   * of the task's cuBLAS handle (no lease, no per-stream workspace).
   */
  readonly workspaceNeeded: number;
  /** The context's cublasLtHandle_t, as koffi converts it fastest. */
  readonly ltHandle: number | bigint;
  readonly desc: number | bigint;
  readonly aDesc: number | bigint;
  readonly bDesc: number | bigint;
  readonly cDesc: number | bigint;
  /** Address of the cublasLtMatmulHeuristicResult_t whose first member is the algorithm. */
  readonly algo: number | bigint;
  /** What each native object is, for destroying them. */
  readonly owned: { desc: bigint; layouts: bigint[]; result: bigint | undefined };
}

/** A context's cuBLASLt handle and the plans built with it (the kit's shared handle). */
interface ContextPlans {
  readonly handle: bigint;
  readonly ffiHandle: number | bigint;
  readonly plans: Map<string, LtPlan>;
}

interface LtState {
  backend: GemmBackend;
  /** Per context: its cuBLASLt handle with its plans, made at the context's first plan. */
  readonly contexts: SharedHandle<ContextPlans>;
  /** The plan of the last call: a loop of one shape finds it without building a key. */
  last: LtPlan | undefined;
  /** Plans built since the process started (for tests and statistics). */
  built: number;
}

// Process-wide: a second loaded copy of this package shares the backend and the plans.
const state: LtState = processState(
  packageOf(import.meta.url, '@cuda-tasks/cublas'),
  'lt',
  (): LtState => ({
    backend: process.env.CUDA_TASKS_CUBLASLT === '0' ? 'cublas' : 'cublaslt',
    contexts: new SharedHandle<ContextPlans>({
      name: 'cublasLt',
      create() {
        const out: (bigint | null)[] = [null];
        check(cublasLt().cublasLtCreate(out), 'cublasLtCreate');
        const handle = out[0] as bigint;
        return { handle, ffiHandle: ffiValue(handle), plans: new Map() };
      },
      destroy(plans) {
        for (const plan of plans.plans.values()) destroyPlan(plan);
        plans.plans.clear();
        cublasLt().cublasLtDestroy(plans.handle);
      },
    }),
    last: undefined,
    built: 0,
  }),
);

/**
 * Chooses the library behind float32 and float64 `gemm` (and `matmul`): 'cublaslt' (the
 * default; an algorithm chosen once per problem and cached) or 'cublas' (cublasSgemm /
 * cublasDgemm, which choose on every call). The environment variable
 * `CUDA_TASKS_CUBLASLT=0` makes 'cublas' the default. Both give results within float
 * rounding of each other; one backend gives the same bits every time for the same problem.
 * @example setGemmBackend('cublas');
 */
export function setGemmBackend(backend: GemmBackend): void {
  if (backend !== 'cublaslt' && backend !== 'cublas') {
    throw new CudaArgumentError(
      `setGemmBackend: backend must be 'cublaslt' or 'cublas', got ${JSON.stringify(backend)}`,
    );
  }
  state.backend = backend;
}

/** The library behind float32 and float64 `gemm` (see `setGemmBackend`). */
export function gemmBackend(): GemmBackend {
  return state.backend;
}

/** The alignment in bytes (a power of two, at most 256) of a device address. */
export function alignmentOf(address: number | bigint): number {
  const low = typeof address === 'number' ? address % 256 : Number(address & 255n);
  return low === 0 ? 256 : low & -low;
}

/** The cublasComputeType_t `gemm` uses: FP64, FP32, or FP32 with TF32 tensor cores. */
export function computeTypeOf(float64: boolean, tf32: boolean): number {
  return float64 ? CUBLAS_COMPUTE_64F : tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

/** The problem a `gemm` call poses: what a plan is looked up by (its shape, and the rest). */
export interface LtProblem extends GemmShape {
  float64: boolean;
  transA: number;
  transB: number;
  alignA: number;
  alignB: number;
  alignC: number;
  computeType: number;
  workspaceBytes: number;
}

function matches(plan: LtPlan, context: Context, p: LtProblem): boolean {
  return (
    plan.context === context &&
    plan.m === p.m &&
    plan.n === p.n &&
    plan.k === p.k &&
    plan.lda === p.lda &&
    plan.ldb === p.ldb &&
    plan.ldc === p.ldc &&
    plan.float64 === p.float64 &&
    plan.transA === p.transA &&
    plan.transB === p.transB &&
    plan.alignA === p.alignA &&
    plan.alignB === p.alignB &&
    plan.alignC === p.alignC &&
    plan.computeType === p.computeType &&
    plan.workspaceBytes === p.workspaceBytes
  );
}

function keyOf(p: LtProblem): string {
  return `${p.float64 ? 'd' : 's'}${p.transA}${p.transB}:${p.m},${p.n},${p.k}:${p.lda},${p.ldb},${p.ldc}:${p.alignA},${p.alignB},${p.alignC}:${p.computeType}:${p.workspaceBytes}`;
}

/**
 * The plan for `problem` on `context` (whose primary context must be current): the last
 * call's when it matches, else the cached one, else a new one (cuBLASLt's heuristic runs
 * once). Allocates nothing when the last call posed the same problem.
 */
export function ltPlan(context: Context, problem: LtProblem): LtPlan {
  const last = state.last;
  if (last !== undefined && matches(last, context, problem)) return last;
  const plans = state.contexts.get(context);
  const key = keyOf(problem);
  let plan = plans.plans.get(key);
  if (plan === undefined) {
    if (plans.plans.size >= PLAN_LIMIT) {
      // The oldest first (a Map iterates in insertion order).
      const oldest = plans.plans.keys().next().value as string;
      destroyPlan(plans.plans.get(oldest)!);
      plans.plans.delete(oldest);
    }
    plan = buildPlan(context, plans.ffiHandle, problem);
    plans.plans.set(key, plan);
  }
  state.last = plan;
  return plan;
}

/** A native scratch arena for attribute values (the cold path only). */
let attributeArena: { address: number | bigint; i32: Int32Array; u64: BigUint64Array } | undefined;
function attributes() {
  if (attributeArena === undefined) {
    const k = koffi();
    const pointer = k.alloc('uint8_t', 16) as bigint;
    const view = k.view(pointer, 16);
    attributeArena = {
      address: ffiValue(pointer),
      i32: new Int32Array(view),
      u64: new BigUint64Array(view),
    };
  }
  return attributeArena;
}

function buildPlan(context: Context, ltHandle: number | bigint, p: LtProblem): LtPlan {
  const lt = cublasLt();
  const k = koffi();
  const dataType = p.float64 ? CUDA_R_64F : CUDA_R_32F;
  const out: (bigint | null)[] = [null];
  const scratch = attributes();
  const layouts: bigint[] = [];
  let desc: bigint | undefined;
  let preference: bigint | undefined;
  let result: bigint | undefined;
  try {
    check(lt.cublasLtMatmulDescCreate(out, p.computeType, dataType), 'cublasLtMatmulDescCreate');
    desc = out[0] as bigint;
    for (const [attribute, operation] of [
      [CUBLASLT_MATMUL_DESC_TRANSA, p.transA],
      [CUBLASLT_MATMUL_DESC_TRANSB, p.transB],
    ] as const) {
      scratch.i32[0] = operation;
      check(
        lt.cublasLtMatmulDescSetAttribute(desc, attribute, scratch.address, 4),
        'cublasLtMatmulDescSetAttribute',
      );
    }
    // op(A) is m x k and op(B) k x n: the stored matrices are their transposes when asked.
    const shapes: [number, number, number][] = [
      p.transA ? [p.k, p.m, p.lda] : [p.m, p.k, p.lda],
      p.transB ? [p.n, p.k, p.ldb] : [p.k, p.n, p.ldb],
      [p.m, p.n, p.ldc],
    ];
    for (const [rows, columns, ld] of shapes) {
      check(
        lt.cublasLtMatrixLayoutCreate(out, dataType, rows, columns, ld),
        'cublasLtMatrixLayoutCreate',
      );
      layouts.push(out[0] as bigint);
    }
    check(lt.cublasLtMatmulPreferenceCreate(out), 'cublasLtMatmulPreferenceCreate');
    preference = out[0] as bigint;
    scratch.u64[0] = BigInt(p.workspaceBytes);
    check(
      lt.cublasLtMatmulPreferenceSetAttribute(
        preference,
        CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
        scratch.address,
        8,
      ),
      'cublasLtMatmulPreferenceSetAttribute',
    );
    for (const [attribute, alignment] of [
      [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, p.alignA],
      [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, p.alignB],
      [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, p.alignC],
      [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, p.alignC],
    ] as const) {
      scratch.i32[0] = alignment;
      check(
        lt.cublasLtMatmulPreferenceSetAttribute(preference, attribute, scratch.address, 4),
        'cublasLtMatmulPreferenceSetAttribute',
      );
    }
    result = k.alloc('uint8_t', HEURISTIC_RESULT_BYTES) as bigint;
    const view = k.view(result, HEURISTIC_RESULT_BYTES);
    new Uint8Array(view).fill(0);
    const count = [0];
    const status = lt.cublasLtMatmulAlgoGetHeuristic(
      ltHandle,
      desc,
      layouts[0]!,
      layouts[1]!,
      layouts[2]!,
      layouts[2]!,
      preference,
      1,
      result,
      count,
    );
    const words = new DataView(view);
    const workspaceNeeded = Number(words.getBigUint64(HEURISTIC_WORKSPACE_OFFSET, true));
    const usable =
      status === 0 &&
      count[0] === 1 &&
      words.getInt32(HEURISTIC_STATE_OFFSET, true) === 0 &&
      workspaceNeeded <= p.workspaceBytes;
    state.built++;
    return {
      context,
      ...p,
      usable,
      workspaceNeeded: usable ? workspaceNeeded : 0,
      ltHandle,
      desc: ffiValue(desc),
      aDesc: ffiValue(layouts[0]!),
      bDesc: ffiValue(layouts[1]!),
      cDesc: ffiValue(layouts[2]!),
      algo: ffiValue(result),
      owned: { desc, layouts, result },
    };
  } catch (error) {
    destroyNative(desc, layouts, result);
    throw error;
  } finally {
    if (preference !== undefined) lt.cublasLtMatmulPreferenceDestroy(preference);
  }
}

function destroyNative(desc: bigint | undefined, layouts: bigint[], result: bigint | undefined) {
  const lt = cublasLt();
  for (const layout of layouts) lt.cublasLtMatrixLayoutDestroy(layout);
  if (desc !== undefined) lt.cublasLtMatmulDescDestroy(desc);
  if (result !== undefined) koffi().free(result);
}

function destroyPlan(plan: LtPlan): void {
  if (state.last === plan) state.last = undefined;
  destroyNative(plan.owned.desc, plan.owned.layouts, plan.owned.result);
}

/**
 * Destroys every cached plan and cuBLASLt handle (they are rebuilt on the next gemm).
 * Returns how many plans there were.
 */
export function releasePlans(): number {
  let count = 0;
  for (const [, plans] of state.contexts.entries()) count += plans.plans.size;
  state.last = undefined;
  state.contexts.release();
  return count;
}

/** @internal For tests: the plan of the last gemm that went through cuBLASLt. */
export function lastPlan(): LtPlan | undefined {
  return state.last;
}

/** How many plans are cached, and how many were built since the process started. */
export function planStatistics(): { cached: number; built: number } {
  let cached = 0;
  for (const [, plans] of state.contexts.entries()) cached += plans.plans.size;
  return { cached, built: state.built };
}
