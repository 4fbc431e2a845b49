/*
 * Stand-ins for libcublas, libcublasLt and libcurand, for `pnpm bench:host` (src/host.ts),
 * beside the stand-in libcuda (stubcuda.c): every function our bindings declare returns
 * success at once, after writing plausible values to its outputs (handles that count up,
 * cuBLAS 13.0 and cuRAND 10.4 as versions, one algorithm from cuBLASLt's heuristic that needs
 * no workspace). They do no math and touch no device memory: they exist so that the host cost
 * of our library calls can be measured against the bare koffi call of the same function on a
 * machine without a GPU. Test doubles, loaded only through CUDA_TASKS_LIBCUBLAS,
 * CUDA_TASKS_LIBCUBLASLT and CUDA_TASKS_LIBCURAND by the host benchmark and its test; no
 * package uses them.
 *
 * Every function the bindings bind (packages/cublas/src/ffi, packages/curand/src/ffi) must be
 * defined here: a library's bindings are made all at once, and a missing symbol fails the first
 * call of that library (benchmarks/test/host.test.ts runs every row, so it fails there first).
 *
 * A function that only succeeds is defined without parameters (SUCCEEDS): koffi passes the
 * declared arguments, and a function that reads none of them may ignore them under the x86-64
 * and AArch64 calling conventions, where the caller places and removes its arguments.
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

/* A function that returns success (0 in cublasStatus_t and curandStatus_t) and reads nothing. */
#define SUCCEEDS(name) \
  STAND_IN int name(void) { return 0; }

/* Bytes of one cublasLtMatmulHeuristicResult_t. */
#define HEURISTIC_RESULT_BYTES 96

/* cuBLAS */

STAND_IN const char *cublasGetStatusName(int status) { return "CUBLAS_STATUS_STAND_IN"; }
STAND_IN const char *cublasGetStatusString(int status) { return "stand-in libcublas"; }
STAND_IN int cublasCreate_v2(void **handle) {
  NEW_HANDLE(handle);
  return 0;
}
STAND_IN int cublasGetVersion_v2(uint64_t handle, int *version) {
  *version = 130000;
  return 0;
}
STAND_IN int cublasGetStream_v2(uint64_t handle, void **stream) {
  *stream = 0;
  return 0;
}
STAND_IN int cublasGetPointerMode_v2(uint64_t handle, int *mode) {
  *mode = 0;
  return 0;
}
STAND_IN int cublasGetMathMode(uint64_t handle, int *mode) {
  *mode = 0;
  return 0;
}
SUCCEEDS(cublasDestroy_v2)
SUCCEEDS(cublasSetWorkspace_v2)
SUCCEEDS(cublasSetStream_v2)
SUCCEEDS(cublasSetPointerMode_v2)
SUCCEEDS(cublasSetMathMode)
SUCCEEDS(cublasSaxpy_v2)
SUCCEEDS(cublasDaxpy_v2)
SUCCEEDS(cublasSdot_v2)
SUCCEEDS(cublasDdot_v2)
SUCCEEDS(cublasSnrm2_v2)
SUCCEEDS(cublasDnrm2_v2)
SUCCEEDS(cublasSscal_v2)
SUCCEEDS(cublasDscal_v2)
SUCCEEDS(cublasSasum_v2)
SUCCEEDS(cublasDasum_v2)
SUCCEEDS(cublasIsamax_v2)
SUCCEEDS(cublasIdamax_v2)
SUCCEEDS(cublasSgemv_v2)
SUCCEEDS(cublasDgemv_v2)
SUCCEEDS(cublasSgemm_v2)
SUCCEEDS(cublasDgemm_v2)
SUCCEEDS(cublasSgemmStridedBatched)
SUCCEEDS(cublasDgemmStridedBatched)
SUCCEEDS(cublasGemmEx)

/* cuBLASLt */

STAND_IN size_t cublasLtGetVersion(void) { return 130000; }
STAND_IN int cublasLtCreate(void **handle) {
  NEW_HANDLE(handle);
  return 0;
}
STAND_IN int cublasLtMatmulDescCreate(void **desc, int computeType, int scaleType) {
  NEW_HANDLE(desc);
  return 0;
}
STAND_IN int cublasLtMatrixLayoutCreate(void **layout, int type, uint64_t rows, uint64_t cols,
                                        int64_t ld) {
  NEW_HANDLE(layout);
  return 0;
}
STAND_IN int cublasLtMatmulPreferenceCreate(void **preference) {
  NEW_HANDLE(preference);
  return 0;
}
/* One algorithm (all zero: no workspace, CUBLAS_STATUS_SUCCESS) for any problem. */
STAND_IN int cublasLtMatmulAlgoGetHeuristic(uint64_t handle, uint64_t desc, uint64_t a,
                                            uint64_t b, uint64_t c, uint64_t d,
                                            uint64_t preference, int requested,
                                            uint64_t results, int *returned) {
  if (requested < 1) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
  memset((void *)(uintptr_t)results, 0, HEURISTIC_RESULT_BYTES);
  *returned = 1;
  return 0;
}
SUCCEEDS(cublasLtDestroy)
SUCCEEDS(cublasLtMatmulDescDestroy)
SUCCEEDS(cublasLtMatmulDescSetAttribute)
SUCCEEDS(cublasLtMatrixLayoutDestroy)
SUCCEEDS(cublasLtMatmulPreferenceDestroy)
SUCCEEDS(cublasLtMatmulPreferenceSetAttribute)
SUCCEEDS(cublasLtMatmul)

/* cuRAND */

STAND_IN int curandCreateGenerator(void **generator, int type) {
  NEW_HANDLE(generator);
  return 0;
}
STAND_IN int curandGetVersion(int *version) {
  *version = 10400;
  return 0;
}
SUCCEEDS(curandDestroyGenerator)
SUCCEEDS(curandSetStream)
SUCCEEDS(curandSetPseudoRandomGeneratorSeed)
SUCCEEDS(curandSetGeneratorOffset)
SUCCEEDS(curandGenerateSeeds)
SUCCEEDS(curandSetGeneratorOrdering)
SUCCEEDS(curandGenerate)
SUCCEEDS(curandGenerateUniform)
SUCCEEDS(curandGenerateUniformDouble)
SUCCEEDS(curandGenerateNormal)
SUCCEEDS(curandGenerateNormalDouble)
SUCCEEDS(curandGenerateLogNormal)
SUCCEEDS(curandGenerateLogNormalDouble)
SUCCEEDS(curandGeneratePoisson)
