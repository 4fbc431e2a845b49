/**
 * cuBLAS through koffi: declarations named exactly as in cublas_api.h (the `_v2` entry points
 * that cublas_v2.h maps the plain names to), with the C prototype above each. Loaded on first
 * use, so importing the package never touches native code.
 *
 * Conventions: `cublasHandle_t`, `cudaStream_t`, device pointers (A, B, C, x, y, result) and
 * host scalar pointers (alpha, beta) are declared `uint64_t`: pass a BigInt (`handle()`,
 * `DeviceArray.useOn(stream)`) or a Number (`ffiValue(handle())`,
 * `DeviceArray.ffiAddressOn(stream)`, `stream.ffiHandle`), which needs no BigInt per call.
 * Host scalars live in a reused `koffi.alloc` arena so that a call allocates nothing. Enums are `int`. Cold out-parameters (`cublasCreate_v2`,
 * `cublasGetStream_v2`, ...) take a `[null]` or `[0]` array.
 */
import { cudaLibraryCandidates, lazyBindings, loadLibrary } from '@cuda-tasks/cudadrv/ffi';

/** Where libcublas is found, and what to say when it is not. */
export const libcublasSpec = {
  displayName: 'cuBLAS (libcublas)',
  environmentVariable: 'CUDA_TASKS_LIBCUBLAS',
  candidates: cudaLibraryCandidates('libcublas.so', ['13', '12']),
  installHint:
    'Install the CUDA toolkit (12 or 13) or the nvidia-cublas package (pip install nvidia-cublas-cu12 or nvidia-cublas) and make libcublas.so.13 or libcublas.so.12 findable (LD_LIBRARY_PATH).',
  minimumVersion: 'cuBLAS from CUDA 12.0 or newer',
} as const;

/** cublasStatus_t (cublas_api.h). */
export const cublasStatus = {
  CUBLAS_STATUS_SUCCESS: 0,
  CUBLAS_STATUS_NOT_INITIALIZED: 1,
  CUBLAS_STATUS_ALLOC_FAILED: 3,
  CUBLAS_STATUS_INVALID_VALUE: 7,
  CUBLAS_STATUS_ARCH_MISMATCH: 8,
  CUBLAS_STATUS_MAPPING_ERROR: 11,
  CUBLAS_STATUS_EXECUTION_FAILED: 13,
  CUBLAS_STATUS_INTERNAL_ERROR: 14,
  CUBLAS_STATUS_NOT_SUPPORTED: 15,
  CUBLAS_STATUS_LICENSE_ERROR: 16,
} as const;

/** cublasOperation_t: the matrix as stored. */
export const CUBLAS_OP_N = 0;
/** cublasOperation_t: the transpose. */
export const CUBLAS_OP_T = 1;
/** cublasOperation_t: the conjugate transpose. */
export const CUBLAS_OP_C = 2;

/** cublasPointerMode_t: scalars (alpha, beta, results) are host pointers. */
export const CUBLAS_POINTER_MODE_HOST = 0;
/** cublasPointerMode_t: scalars are device pointers. */
export const CUBLAS_POINTER_MODE_DEVICE = 1;

// cublasMath_t (the modes this package sets).
/** cublasMath_t: the default math mode (no TF32 for FP32). */
export const CUBLAS_DEFAULT_MATH = 0;
/** cublasMath_t: the most accurate mode, for numerical checks. */
export const CUBLAS_PEDANTIC_MATH = 2;
/** cublasMath_t: FP32 routines may use TF32 tensor cores. */
export const CUBLAS_TF32_TENSOR_OP_MATH = 3;

// cublasComputeType_t (the ones `gemmEx` uses or users commonly want).
/** cublasComputeType_t: FP32 accumulation. */
export const CUBLAS_COMPUTE_32F = 68;
/** cublasComputeType_t: FP32 accumulation, no reduced-precision shortcuts. */
export const CUBLAS_COMPUTE_32F_PEDANTIC = 69;
/** cublasComputeType_t: FP32 accumulation with TF32 tensor-core inputs. */
export const CUBLAS_COMPUTE_32F_FAST_TF32 = 77;
/** cublasComputeType_t: FP64 accumulation. */
export const CUBLAS_COMPUTE_64F = 70;

/** cublasGemmAlgo_t: let cuBLAS choose (cublas_api.h: CUBLAS_GEMM_DEFAULT = -1). */
export const CUBLAS_GEMM_DEFAULT = -1;

// cudaDataType_t (library_types.h) values used by `gemmEx`.
/** cudaDataType_t: real float32. */
export const CUDA_R_32F = 0;
/** cudaDataType_t: real float64. */
export const CUDA_R_64F = 1;
/** cudaDataType_t: real float16. */
export const CUDA_R_16F = 2;
/** cudaDataType_t: real bfloat16. */
export const CUDA_R_16BF = 14;

let loaded: ReturnType<typeof build> | undefined;

function build() {
  const lib = loadLibrary(libcublasSpec);
  const bindings = {
    // cublasStatus_t cublasCreate_v2(cublasHandle_t* handle);
    cublasCreate_v2: lib.func('int cublasCreate_v2(_Out_ void **handle)'),
    // cublasStatus_t cublasDestroy_v2(cublasHandle_t handle);
    cublasDestroy_v2: lib.func('int cublasDestroy_v2(uint64_t handle)'),
    // cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int* version);
    cublasGetVersion_v2: lib.func('int cublasGetVersion_v2(uint64_t handle, _Out_ int *version)'),
    // cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t workspaceSizeInBytes);
    cublasSetWorkspace_v2: lib.func(
      'int cublasSetWorkspace_v2(uint64_t handle, uint64_t workspace, size_t workspaceSizeInBytes)',
    ),
    // cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId);
    cublasSetStream_v2: lib.func('int cublasSetStream_v2(uint64_t handle, uint64_t streamId)'),
    // cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* streamId);
    cublasGetStream_v2: lib.func('int cublasGetStream_v2(uint64_t handle, _Out_ void **streamId)'),
    // cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode);
    cublasGetPointerMode_v2: lib.func(
      'int cublasGetPointerMode_v2(uint64_t handle, _Out_ int *mode)',
    ),
    // cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode);
    cublasSetPointerMode_v2: lib.func('int cublasSetPointerMode_v2(uint64_t handle, int mode)'),
    // cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode);
    cublasGetMathMode: lib.func('int cublasGetMathMode(uint64_t handle, _Out_ int *mode)'),
    // cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
    cublasSetMathMode: lib.func('int cublasSetMathMode(uint64_t handle, int mode)'),
    // const char* cublasGetStatusName(cublasStatus_t status);
    cublasGetStatusName: lib.func('const char *cublasGetStatusName(int status)'),
    // const char* cublasGetStatusString(cublasStatus_t status);
    cublasGetStatusString: lib.func('const char *cublasGetStatusString(int status)'),

    // ---- Level 1 ----

    // cublasStatus_t cublasSaxpy_v2(cublasHandle_t handle, int n, const float* alpha,
    //   const float* x, int incx, float* y, int incy);
    cublasSaxpy_v2: lib.func(
      'int cublasSaxpy_v2(uint64_t handle, int n, uint64_t alpha, uint64_t x, int incx, uint64_t y, int incy)',
    ),
    // cublasStatus_t cublasDaxpy_v2(cublasHandle_t handle, int n, const double* alpha,
    //   const double* x, int incx, double* y, int incy);
    cublasDaxpy_v2: lib.func(
      'int cublasDaxpy_v2(uint64_t handle, int n, uint64_t alpha, uint64_t x, int incx, uint64_t y, int incy)',
    ),
    // cublasStatus_t cublasSdot_v2(cublasHandle_t handle, int n, const float* x, int incx,
    //   const float* y, int incy, float* result);
    cublasSdot_v2: lib.func(
      'int cublasSdot_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t y, int incy, uint64_t result)',
    ),
    // cublasStatus_t cublasDdot_v2(cublasHandle_t handle, int n, const double* x, int incx,
    //   const double* y, int incy, double* result);
    cublasDdot_v2: lib.func(
      'int cublasDdot_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t y, int incy, uint64_t result)',
    ),
    // cublasStatus_t cublasSnrm2_v2(cublasHandle_t handle, int n, const float* x, int incx, float* result);
    cublasSnrm2_v2: lib.func(
      'int cublasSnrm2_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t result)',
    ),
    // cublasStatus_t cublasDnrm2_v2(cublasHandle_t handle, int n, const double* x, int incx, double* result);
    cublasDnrm2_v2: lib.func(
      'int cublasDnrm2_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t result)',
    ),
    // cublasStatus_t cublasSscal_v2(cublasHandle_t handle, int n, const float* alpha, float* x, int incx);
    cublasSscal_v2: lib.func(
      'int cublasSscal_v2(uint64_t handle, int n, uint64_t alpha, uint64_t x, int incx)',
    ),
    // cublasStatus_t cublasDscal_v2(cublasHandle_t handle, int n, const double* alpha, double* x, int incx);
    cublasDscal_v2: lib.func(
      'int cublasDscal_v2(uint64_t handle, int n, uint64_t alpha, uint64_t x, int incx)',
    ),
    // cublasStatus_t cublasSasum_v2(cublasHandle_t handle, int n, const float* x, int incx, float* result);
    cublasSasum_v2: lib.func(
      'int cublasSasum_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t result)',
    ),
    // cublasStatus_t cublasDasum_v2(cublasHandle_t handle, int n, const double* x, int incx, double* result);
    cublasDasum_v2: lib.func(
      'int cublasDasum_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t result)',
    ),
    // cublasStatus_t cublasIsamax_v2(cublasHandle_t handle, int n, const float* x, int incx, int* result);
    cublasIsamax_v2: lib.func(
      'int cublasIsamax_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t result)',
    ),
    // cublasStatus_t cublasIdamax_v2(cublasHandle_t handle, int n, const double* x, int incx, int* result);
    cublasIdamax_v2: lib.func(
      'int cublasIdamax_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t result)',
    ),

    // ---- Level 2 ----

    // cublasStatus_t cublasSgemv_v2(cublasHandle_t handle, cublasOperation_t trans, int m, int n,
    //   const float* alpha, const float* A, int lda, const float* x, int incx,
    //   const float* beta, float* y, int incy);
    cublasSgemv_v2: lib.func(
      'int cublasSgemv_v2(uint64_t handle, int trans, int m, int n, uint64_t alpha, uint64_t A, int lda, uint64_t x, int incx, uint64_t beta, uint64_t y, int incy)',
    ),
    // cublasStatus_t cublasDgemv_v2(cublasHandle_t handle, cublasOperation_t trans, int m, int n,
    //   const double* alpha, const double* A, int lda, const double* x, int incx,
    //   const double* beta, double* y, int incy);
    cublasDgemv_v2: lib.func(
      'int cublasDgemv_v2(uint64_t handle, int trans, int m, int n, uint64_t alpha, uint64_t A, int lda, uint64_t x, int incx, uint64_t beta, uint64_t y, int incy)',
    ),

    // ---- Level 3 ----

    // cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
    //   cublasOperation_t transb, int m, int n, int k, const float* alpha, const float* A,
    //   int lda, const float* B, int ldb, const float* beta, float* C, int ldc);
    cublasSgemm_v2: lib.func(
      'int cublasSgemm_v2(uint64_t handle, int transa, int transb, int m, int n, int k, uint64_t alpha, uint64_t A, int lda, uint64_t B, int ldb, uint64_t beta, uint64_t C, int ldc)',
    ),
    // cublasStatus_t cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
    //   cublasOperation_t transb, int m, int n, int k, const double* alpha, const double* A,
    //   int lda, const double* B, int ldb, const double* beta, double* C, int ldc);
    cublasDgemm_v2: lib.func(
      'int cublasDgemm_v2(uint64_t handle, int transa, int transb, int m, int n, int k, uint64_t alpha, uint64_t A, int lda, uint64_t B, int ldb, uint64_t beta, uint64_t C, int ldc)',
    ),
    // cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
    //   cublasOperation_t transb, int m, int n, int k, const float* alpha, const float* A,
    //   int lda, long long int strideA, const float* B, int ldb, long long int strideB,
    //   const float* beta, float* C, int ldc, long long int strideC, int batchCount);
    cublasSgemmStridedBatched: lib.func(
      'int cublasSgemmStridedBatched(uint64_t handle, int transa, int transb, int m, int n, int k, uint64_t alpha, uint64_t A, int lda, int64_t strideA, uint64_t B, int ldb, int64_t strideB, uint64_t beta, uint64_t C, int ldc, int64_t strideC, int batchCount)',
    ),
    // cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
    //   cublasOperation_t transb, int m, int n, int k, const double* alpha, const double* A,
    //   int lda, long long int strideA, const double* B, int ldb, long long int strideB,
    //   const double* beta, double* C, int ldc, long long int strideC, int batchCount);
    cublasDgemmStridedBatched: lib.func(
      'int cublasDgemmStridedBatched(uint64_t handle, int transa, int transb, int m, int n, int k, uint64_t alpha, uint64_t A, int lda, int64_t strideA, uint64_t B, int ldb, int64_t strideB, uint64_t beta, uint64_t C, int ldc, int64_t strideC, int batchCount)',
    ),
    // cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
    //   cublasOperation_t transb, int m, int n, int k, const void* alpha, const void* A,
    //   cudaDataType Atype, int lda, const void* B, cudaDataType Btype, int ldb,
    //   const void* beta, void* C, cudaDataType Ctype, int ldc,
    //   cublasComputeType_t computeType, cublasGemmAlgo_t algo);
    cublasGemmEx: lib.func(
      'int cublasGemmEx(uint64_t handle, int transa, int transb, int m, int n, int k, uint64_t alpha, uint64_t A, int Atype, int lda, uint64_t B, int Btype, int ldb, uint64_t beta, uint64_t C, int Ctype, int ldc, int computeType, int algo)',
    ),
  };
  loaded = bindings;
  return bindings;
}

/** The cuBLAS bindings, loaded on first call (throws CudaUnavailableError when missing). */
export const cublas = lazyBindings(build);

/** The cuBLAS bindings' type. */
export type CublasBindings = ReturnType<typeof build>;

/** The bindings if the library has been loaded already, else undefined (never loads it). */
export function cublasIfLoaded(): CublasBindings | undefined {
  return loaded;
}
