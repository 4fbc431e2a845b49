/**
 * cuBLASLt through koffi: the matmul entry points of cublasLt.h that `gemm` uses, declared
 * with the header's names. Loaded on first use. Handles and descriptors (`cublasLtHandle_t`,
 * `cublasLtMatmulDesc_t`, `cublasLtMatrixLayout_t`, `cublasLtMatmulPreference_t`), device
 * pointers, host scalar pointers and the stream are `uint64_t`; out-parameters of the cold
 * calls take a `[null]` array; attribute values are passed by address from a native arena.
 */
import { cudaLibraryCandidates, lazyBindings, loadLibrary } from '@cuda-tasks/cudadrv/ffi';

/** Where libcublasLt is found (it ships beside libcublas), and what to say when it is not. */
export const libcublasLtSpec = {
  displayName: 'cuBLASLt (libcublasLt)',
  environmentVariable: 'CUDA_TASKS_LIBCUBLASLT',
  candidates: cudaLibraryCandidates('libcublasLt.so', ['13', '12']),
  installHint:
    'Install the CUDA toolkit (12 or 13) or the nvidia-cublas package, which ship libcublasLt beside libcublas, and make libcublasLt.so.13 or libcublasLt.so.12 findable (LD_LIBRARY_PATH).',
  minimumVersion: 'cuBLASLt from CUDA 12.0 or newer',
} as const;

// cublasLtMatmulDescAttributes_t (the ones `gemm` sets).
/** cublasLtMatmulDescAttributes_t: the operation on A (int32 cublasOperation_t). */
export const CUBLASLT_MATMUL_DESC_TRANSA = 3;
/** cublasLtMatmulDescAttributes_t: the operation on B (int32 cublasOperation_t). */
export const CUBLASLT_MATMUL_DESC_TRANSB = 4;

// cublasLtMatmulPreferenceAttributes_t (the ones `gemm` sets).
/** cublasLtMatmulPreferenceAttributes_t: the largest workspace an algorithm may ask for (uint64). */
export const CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1;
/** cublasLtMatmulPreferenceAttributes_t: A's address alignment, in bytes (uint32). */
export const CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5;
/** cublasLtMatmulPreferenceAttributes_t: B's address alignment, in bytes (uint32). */
export const CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6;
/** cublasLtMatmulPreferenceAttributes_t: C's address alignment, in bytes (uint32). */
export const CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7;
/** cublasLtMatmulPreferenceAttributes_t: D's address alignment, in bytes (uint32). */
export const CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8;

/** sizeof(cublasLtMatmulHeuristicResult_t): the 64-byte algo, workspaceSize, state, wavesCount, reserved[4]. */
export const HEURISTIC_RESULT_BYTES = 96;
/** Offset of `workspaceSize` (size_t) in cublasLtMatmulHeuristicResult_t. */
export const HEURISTIC_WORKSPACE_OFFSET = 64;
/** Offset of `state` (cublasStatus_t) in cublasLtMatmulHeuristicResult_t. */
export const HEURISTIC_STATE_OFFSET = 72;

function build() {
  const lib = loadLibrary(libcublasLtSpec);
  return {
    // cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle);
    cublasLtCreate: lib.func('int cublasLtCreate(_Out_ void **lightHandle)'),
    // cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle);
    cublasLtDestroy: lib.func('int cublasLtDestroy(uint64_t lightHandle)'),
    // size_t cublasLtGetVersion(void);
    cublasLtGetVersion: lib.func('size_t cublasLtGetVersion()'),
    // cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
    //   cublasComputeType_t computeType, cudaDataType_t scaleType);
    cublasLtMatmulDescCreate: lib.func(
      'int cublasLtMatmulDescCreate(_Out_ void **matmulDesc, int computeType, int scaleType)',
    ),
    // cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc);
    cublasLtMatmulDescDestroy: lib.func('int cublasLtMatmulDescDestroy(uint64_t matmulDesc)'),
    // cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
    //   cublasLtMatmulDescAttributes_t attr, const void* buf, size_t sizeInBytes);
    cublasLtMatmulDescSetAttribute: lib.func(
      'int cublasLtMatmulDescSetAttribute(uint64_t matmulDesc, int attr, uint64_t buf, size_t sizeInBytes)',
    ),
    // cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout,
    //   cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld);
    cublasLtMatrixLayoutCreate: lib.func(
      'int cublasLtMatrixLayoutCreate(_Out_ void **matLayout, int type, uint64_t rows, uint64_t cols, int64_t ld)',
    ),
    // cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout);
    cublasLtMatrixLayoutDestroy: lib.func('int cublasLtMatrixLayoutDestroy(uint64_t matLayout)'),
    // cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
    cublasLtMatmulPreferenceCreate: lib.func(
      'int cublasLtMatmulPreferenceCreate(_Out_ void **pref)',
    ),
    // cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
    cublasLtMatmulPreferenceDestroy: lib.func('int cublasLtMatmulPreferenceDestroy(uint64_t pref)'),
    // cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
    //   cublasLtMatmulPreferenceAttributes_t attr, const void* buf, size_t sizeInBytes);
    cublasLtMatmulPreferenceSetAttribute: lib.func(
      'int cublasLtMatmulPreferenceSetAttribute(uint64_t pref, int attr, uint64_t buf, size_t sizeInBytes)',
    ),
    // cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
    //   cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    //   cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    //   cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    //   cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount);
    cublasLtMatmulAlgoGetHeuristic: lib.func(
      'int cublasLtMatmulAlgoGetHeuristic(uint64_t lightHandle, uint64_t operationDesc, uint64_t Adesc, uint64_t Bdesc, uint64_t Cdesc, uint64_t Ddesc, uint64_t preference, int requestedAlgoCount, uint64_t heuristicResultsArray, _Out_ int *returnAlgoCount)',
    ),
    // cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle,
    //   cublasLtMatmulDesc_t computeDesc, const void* alpha, const void* A,
    //   cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
    //   const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
    //   cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
    //   size_t workspaceSizeInBytes, cudaStream_t stream);
    cublasLtMatmul: lib.func(
      'int cublasLtMatmul(uint64_t lightHandle, uint64_t computeDesc, uint64_t alpha, uint64_t A, uint64_t Adesc, uint64_t B, uint64_t Bdesc, uint64_t beta, uint64_t C, uint64_t Cdesc, uint64_t D, uint64_t Ddesc, uint64_t algo, uint64_t workspace, size_t workspaceSizeInBytes, uint64_t stream)',
    ),
  };
}

/** The cuBLASLt bindings, loaded on first call (throws CudaUnavailableError when missing). */
export const cublasLt = lazyBindings(build);

/** The cuBLASLt bindings' type. */
export type CublasLtBindings = ReturnType<typeof build>;
