/*
 * Stand-ins for libcublas, libcublasLt and libcurand, for `pnpm bench:host` (src/host.ts),
 * beside the stand-in libcuda (stubcuda.c): every function our bindings declare returns
 * success at once, after writing plausible values to its outputs (handles that count up,
 * cuBLAS 13.0 and cuRAND 10.4 as versions, one algorithm from cuBLASLt's heuristic that needs
 * no workspace). They do no math and touch no device memory: they exist so that the host cost
 * of our library calls can be measured against the bare koffi call of the same function on a
 * machine without a GPU. Test doubles, loaded only through CUDA_TASKS_LIBCUBLAS,
 * CUDA_TASKS_LIBCUBLASLT and CUDA_TASKS_LIBCURAND by the host benchmark and its test; no
 * package uses them. Every function the bindings (packages/cublas/src/ffi, packages/curand/src/ffi)
 * bind must be defined here: a missing one fails the first call of that library.
 *
 * Build: cc -O2 -shared -fPIC -o libstublibs.so stublibs.c
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef STAND_IN
#define STAND_IN
#endif

static uint64_t next_handle = 0x20000;

/* Writes a fresh non-zero handle to an output parameter. */
#define NEW_HANDLE(out) (*(uint64_t *)(out) = (next_handle += 0x100))

/* Bytes of one cublasLtMatmulHeuristicResult_t. */
#define HEURISTIC_RESULT_BYTES 96

/* cuBLAS */

STAND_IN const char *cublasGetStatusName(int status) { return "CUBLAS_STATUS_STAND_IN"; }
STAND_IN const char *cublasGetStatusString(int status) { return "stand-in libcublas"; }
STAND_IN int cublasCreate_v2(void **handle) {
  NEW_HANDLE(handle);
  return 0;
}
STAND_IN int cublasDestroy_v2(uint64_t handle) { return 0; }
STAND_IN int cublasGetVersion_v2(uint64_t handle, int *version) {
  *version = 130000;
  return 0;
}
STAND_IN int cublasSetWorkspace_v2(uint64_t handle, uint64_t workspace, size_t workspaceSizeInBytes) {
  return 0;
}
STAND_IN int cublasSetStream_v2(uint64_t handle, uint64_t streamId) { return 0; }
STAND_IN int cublasGetStream_v2(uint64_t handle, void **streamId) {
  *streamId = 0;
  return 0;
}
STAND_IN int cublasGetPointerMode_v2(uint64_t handle, int *mode) {
  *mode = 0;
  return 0;
}
STAND_IN int cublasSetPointerMode_v2(uint64_t handle, int mode) { return 0; }
STAND_IN int cublasGetMathMode(uint64_t handle, int *mode) {
  *mode = 0;
  return 0;
}
STAND_IN int cublasSetMathMode(uint64_t handle, int mode) { return 0; }
STAND_IN int cublasSaxpy_v2(uint64_t handle, int n, uint64_t alpha, uint64_t x, int incx,
    uint64_t y, int incy) { return 0; }
STAND_IN int cublasDaxpy_v2(uint64_t handle, int n, uint64_t alpha, uint64_t x, int incx,
    uint64_t y, int incy) { return 0; }
STAND_IN int cublasSdot_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t y, int incy,
    uint64_t result) { return 0; }
STAND_IN int cublasDdot_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t y, int incy,
    uint64_t result) { return 0; }
STAND_IN int cublasSnrm2_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t result) {
  return 0;
}
STAND_IN int cublasDnrm2_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t result) {
  return 0;
}
STAND_IN int cublasSscal_v2(uint64_t handle, int n, uint64_t alpha, uint64_t x, int incx) {
  return 0;
}
STAND_IN int cublasDscal_v2(uint64_t handle, int n, uint64_t alpha, uint64_t x, int incx) {
  return 0;
}
STAND_IN int cublasSasum_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t result) {
  return 0;
}
STAND_IN int cublasDasum_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t result) {
  return 0;
}
STAND_IN int cublasIsamax_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t result) {
  return 0;
}
STAND_IN int cublasIdamax_v2(uint64_t handle, int n, uint64_t x, int incx, uint64_t result) {
  return 0;
}
STAND_IN int cublasSgemv_v2(uint64_t handle, int trans, int m, int n, uint64_t alpha, uint64_t A,
    int lda, uint64_t x, int incx, uint64_t beta, uint64_t y, int incy) { return 0; }
STAND_IN int cublasDgemv_v2(uint64_t handle, int trans, int m, int n, uint64_t alpha, uint64_t A,
    int lda, uint64_t x, int incx, uint64_t beta, uint64_t y, int incy) { return 0; }
STAND_IN int cublasSgemm_v2(uint64_t handle, int transa, int transb, int m, int n, int k,
    uint64_t alpha, uint64_t A, int lda, uint64_t B, int ldb, uint64_t beta, uint64_t C, int ldc) {
  return 0;
}
STAND_IN int cublasDgemm_v2(uint64_t handle, int transa, int transb, int m, int n, int k,
    uint64_t alpha, uint64_t A, int lda, uint64_t B, int ldb, uint64_t beta, uint64_t C, int ldc) {
  return 0;
}
STAND_IN int cublasSgemmStridedBatched(uint64_t handle, int transa, int transb, int m, int n, int k,
    uint64_t alpha, uint64_t A, int lda, int64_t strideA, uint64_t B, int ldb, int64_t strideB,
    uint64_t beta, uint64_t C, int ldc, int64_t strideC, int batchCount) { return 0; }
STAND_IN int cublasDgemmStridedBatched(uint64_t handle, int transa, int transb, int m, int n, int k,
    uint64_t alpha, uint64_t A, int lda, int64_t strideA, uint64_t B, int ldb, int64_t strideB,
    uint64_t beta, uint64_t C, int ldc, int64_t strideC, int batchCount) { return 0; }
STAND_IN int cublasGemmEx(uint64_t handle, int transa, int transb, int m, int n, int k,
    uint64_t alpha, uint64_t A, int Atype, int lda, uint64_t B, int Btype, int ldb, uint64_t beta,
    uint64_t C, int Ctype, int ldc, int computeType, int algo) { return 0; }

/* cuBLASLt */

STAND_IN int cublasLtCreate(void **lightHandle) {
  NEW_HANDLE(lightHandle);
  return 0;
}
STAND_IN int cublasLtDestroy(uint64_t lightHandle) { return 0; }
STAND_IN size_t cublasLtGetVersion(void) { return 130000; }
STAND_IN int cublasLtMatmulDescCreate(void **matmulDesc, int computeType, int scaleType) {
  NEW_HANDLE(matmulDesc);
  return 0;
}
STAND_IN int cublasLtMatmulDescDestroy(uint64_t matmulDesc) { return 0; }
STAND_IN int cublasLtMatmulDescSetAttribute(uint64_t matmulDesc, int attr, uint64_t buf,
    size_t sizeInBytes) { return 0; }
STAND_IN int cublasLtMatrixLayoutCreate(void **matLayout, int type, uint64_t rows, uint64_t cols,
    int64_t ld) {
  NEW_HANDLE(matLayout);
  return 0;
}
STAND_IN int cublasLtMatrixLayoutDestroy(uint64_t matLayout) { return 0; }
STAND_IN int cublasLtMatmulPreferenceCreate(void **pref) {
  NEW_HANDLE(pref);
  return 0;
}
STAND_IN int cublasLtMatmulPreferenceDestroy(uint64_t pref) { return 0; }
STAND_IN int cublasLtMatmulPreferenceSetAttribute(uint64_t pref, int attr, uint64_t buf,
    size_t sizeInBytes) { return 0; }
STAND_IN int cublasLtMatmulAlgoGetHeuristic(uint64_t lightHandle, uint64_t operationDesc,
    uint64_t Adesc, uint64_t Bdesc, uint64_t Cdesc, uint64_t Ddesc, uint64_t preference,
    int requestedAlgoCount, uint64_t heuristicResultsArray, int *returnAlgoCount) {
  if (requestedAlgoCount < 1) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
  memset((void *)(uintptr_t)heuristicResultsArray, 0, HEURISTIC_RESULT_BYTES);
  *returnAlgoCount = 1;
  return 0;
}
STAND_IN int cublasLtMatmul(uint64_t lightHandle, uint64_t computeDesc, uint64_t alpha, uint64_t A,
    uint64_t Adesc, uint64_t B, uint64_t Bdesc, uint64_t beta, uint64_t C, uint64_t Cdesc,
    uint64_t D, uint64_t Ddesc, uint64_t algo, uint64_t workspace, size_t workspaceSizeInBytes,
    uint64_t stream) { return 0; }

/* cuRAND */

STAND_IN int curandCreateGenerator(void **generator, int rng_type) {
  NEW_HANDLE(generator);
  return 0;
}
STAND_IN int curandDestroyGenerator(void *generator) { return 0; }
STAND_IN int curandGetVersion(int *version) {
  *version = 10400;
  return 0;
}
STAND_IN int curandSetStream(void *generator, void *stream) { return 0; }
STAND_IN int curandSetPseudoRandomGeneratorSeed(void *generator, unsigned long long seed) {
  return 0;
}
STAND_IN int curandSetGeneratorOffset(void *generator, unsigned long long offset) { return 0; }
STAND_IN int curandGenerateSeeds(void *generator) { return 0; }
STAND_IN int curandSetGeneratorOrdering(void *generator, int order) { return 0; }
STAND_IN int curandGenerate(void *generator, unsigned int *outputPtr, size_t num) { return 0; }
STAND_IN int curandGenerateUniform(void *generator, float *outputPtr, size_t num) { return 0; }
STAND_IN int curandGenerateUniformDouble(void *generator, double *outputPtr, size_t num) {
  return 0;
}
STAND_IN int curandGenerateNormal(void *generator, float *outputPtr, size_t n, float mean,
    float stddev) { return 0; }
STAND_IN int curandGenerateNormalDouble(void *generator, double *outputPtr, size_t n, double mean,
    double stddev) { return 0; }
STAND_IN int curandGenerateLogNormal(void *generator, float *outputPtr, size_t n, float mean,
    float stddev) { return 0; }
STAND_IN int curandGenerateLogNormalDouble(void *generator, double *outputPtr, size_t n,
    double mean, double stddev) { return 0; }
STAND_IN int curandGeneratePoisson(void *generator, unsigned int *outputPtr, size_t n, double lambda) {
  return 0;
}
