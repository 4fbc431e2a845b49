/**
 * libcusolver (the dense API, cusolverDn) through koffi: declarations named exactly as in
 * cusolverDn.h and cusolver_common.h, with the C prototype above each. Loaded on first use.
 *
 * Conventions: `cusolverDnHandle_t` and `cudaStream_t` are `void *` and travel as BigInt.
 * Device pointers (`float *A`, `int *devInfo`, ...) are declared `void *` too and take the
 * BigInt device address (`DeviceArray.useOn(stream)`). The `int *Lwork` out-parameters of the
 * `_bufferSize` queries are `void *` as well: callers pass the address of a reused native
 * arena (`Scratch` from `@cuda-tasks/cudadrv`), so a query allocates nothing. Enums are `int`;
 * LAPACK's `signed char` job letters are `int8_t` (pass the character code, e.g. 65 for 'A').
 */
import {
  cudaLibraryCandidates,
  type LibrarySpec,
  lazyBindings,
  loadLibrary,
} from '@cuda-tasks/cudadrv/ffi';

/** cusolverStatus_t (cusolver_common.h): value -> name. */
export const cusolverStatus: Readonly<Record<number, string>> = Object.freeze({
  0: 'CUSOLVER_STATUS_SUCCESS',
  1: 'CUSOLVER_STATUS_NOT_INITIALIZED',
  2: 'CUSOLVER_STATUS_ALLOC_FAILED',
  3: 'CUSOLVER_STATUS_INVALID_VALUE',
  4: 'CUSOLVER_STATUS_ARCH_MISMATCH',
  5: 'CUSOLVER_STATUS_MAPPING_ERROR',
  6: 'CUSOLVER_STATUS_EXECUTION_FAILED',
  7: 'CUSOLVER_STATUS_INTERNAL_ERROR',
  8: 'CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED',
  9: 'CUSOLVER_STATUS_NOT_SUPPORTED',
  10: 'CUSOLVER_STATUS_ZERO_PIVOT',
  11: 'CUSOLVER_STATUS_INVALID_LICENSE',
  12: 'CUSOLVER_STATUS_IRS_PARAMS_NOT_INITIALIZED',
  13: 'CUSOLVER_STATUS_IRS_PARAMS_INVALID',
  14: 'CUSOLVER_STATUS_IRS_PARAMS_INVALID_PREC',
  15: 'CUSOLVER_STATUS_IRS_PARAMS_INVALID_REFINE',
  16: 'CUSOLVER_STATUS_IRS_PARAMS_INVALID_MAXITER',
  20: 'CUSOLVER_STATUS_IRS_INTERNAL_ERROR',
  21: 'CUSOLVER_STATUS_IRS_NOT_SUPPORTED',
  22: 'CUSOLVER_STATUS_IRS_OUT_OF_RANGE',
  23: 'CUSOLVER_STATUS_IRS_NRHS_NOT_SUPPORTED_FOR_REFINE_GMRES',
  25: 'CUSOLVER_STATUS_IRS_INFOS_NOT_INITIALIZED',
  26: 'CUSOLVER_STATUS_IRS_INFOS_NOT_DESTROYED',
  30: 'CUSOLVER_STATUS_IRS_MATRIX_SINGULAR',
  31: 'CUSOLVER_STATUS_INVALID_WORKSPACE',
});

/** CUSOLVER_STATUS_SUCCESS (cusolverStatus_t). */
export const CUSOLVER_STATUS_SUCCESS = 0;
/** CUSOLVER_STATUS_INVALID_VALUE (cusolverStatus_t). */
export const CUSOLVER_STATUS_INVALID_VALUE = 3;

/** cublasFillMode_t (cublas_api.h): which triangle of a symmetric matrix is referenced. */
export const CUBLAS_FILL_MODE_LOWER = 0;
/** cublasFillMode_t (cublas_api.h). */
export const CUBLAS_FILL_MODE_UPPER = 1;
/** cublasOperation_t (cublas_api.h): no transpose. */
export const CUBLAS_OP_N = 0;
/** cublasOperation_t (cublas_api.h): transpose. */
export const CUBLAS_OP_T = 1;
/** cusolverEigMode_t (cusolver_common.h): eigenvalues only. */
export const CUSOLVER_EIG_MODE_NOVECTOR = 0;
/** cusolverEigMode_t (cusolver_common.h): eigenvalues and eigenvectors. */
export const CUSOLVER_EIG_MODE_VECTOR = 1;
/** libraryPropertyType (library_types.h), for `cusolverGetProperty`. */
export const MAJOR_VERSION = 0;
/** libraryPropertyType (library_types.h). */
export const MINOR_VERSION = 1;
/** libraryPropertyType (library_types.h). */
export const PATCH_LEVEL = 2;

/**
 * Where libcusolver is found, and what to say when it is not. CUDA 13 ships
 * libcusolver.so.12, CUDA 12 ships libcusolver.so.11.
 */
export const libcusolverSpec: LibrarySpec = {
  displayName: 'cuSOLVER',
  environmentVariable: 'CUDA_TASKS_LIBCUSOLVER',
  candidates: cudaLibraryCandidates('libcusolver.so', ['12', '11']),
  installHint:
    'Install the CUDA Toolkit (12 or 13) or the nvidia-cusolver wheel, and make libcusolver.so.12 (CUDA 13) or libcusolver.so.11 (CUDA 12) findable by the loader (LD_LIBRARY_PATH).',
  minimumVersion: 'cuSOLVER from CUDA 12.0 or newer',
};

/** The libcusolver bindings, loaded on first call. */
export const cusolver = lazyBindings(() => {
  const lib = loadLibrary(libcusolverSpec);
  return {
    // cusolverStatus_t cusolverGetProperty(libraryPropertyType type, int *value);
    cusolverGetProperty: lib.func('int cusolverGetProperty(int type, _Out_ int *value)'),
    // cusolverStatus_t cusolverGetVersion(int *version);
    cusolverGetVersion: lib.func('int cusolverGetVersion(_Out_ int *version)'),

    // cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t *handle);
    cusolverDnCreate: lib.func('int cusolverDnCreate(_Out_ void **handle)'),
    // cusolverStatus_t cusolverDnDestroy(cusolverDnHandle_t handle);
    cusolverDnDestroy: lib.func('int cusolverDnDestroy(void *handle)'),
    // cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t handle, cudaStream_t streamId);
    cusolverDnSetStream: lib.func('int cusolverDnSetStream(void *handle, void *streamId)'),
    // cusolverStatus_t cusolverDnGetStream(cusolverDnHandle_t handle, cudaStream_t *streamId);
    cusolverDnGetStream: lib.func('int cusolverDnGetStream(void *handle, _Out_ void **streamId)'),

    // ---- LU factorization: getrf / getrs ----

    // cusolverStatus_t cusolverDnSgetrf_bufferSize(cusolverDnHandle_t handle, int m, int n,
    //   float *A, int lda, int *Lwork);
    cusolverDnSgetrf_bufferSize: lib.func(
      'int cusolverDnSgetrf_bufferSize(void *handle, int m, int n, void *A, int lda, void *Lwork)',
    ),
    // cusolverStatus_t cusolverDnDgetrf_bufferSize(cusolverDnHandle_t handle, int m, int n,
    //   double *A, int lda, int *Lwork);
    cusolverDnDgetrf_bufferSize: lib.func(
      'int cusolverDnDgetrf_bufferSize(void *handle, int m, int n, void *A, int lda, void *Lwork)',
    ),
    // cusolverStatus_t cusolverDnSgetrf(cusolverDnHandle_t handle, int m, int n, float *A,
    //   int lda, float *Workspace, int *devIpiv, int *devInfo);
    cusolverDnSgetrf: lib.func(
      'int cusolverDnSgetrf(void *handle, int m, int n, void *A, int lda, void *Workspace, void *devIpiv, void *devInfo)',
    ),
    // cusolverStatus_t cusolverDnDgetrf(cusolverDnHandle_t handle, int m, int n, double *A,
    //   int lda, double *Workspace, int *devIpiv, int *devInfo);
    cusolverDnDgetrf: lib.func(
      'int cusolverDnDgetrf(void *handle, int m, int n, void *A, int lda, void *Workspace, void *devIpiv, void *devInfo)',
    ),
    // cusolverStatus_t cusolverDnSgetrs(cusolverDnHandle_t handle, cublasOperation_t trans,
    //   int n, int nrhs, const float *A, int lda, const int *devIpiv, float *B, int ldb,
    //   int *devInfo);
    cusolverDnSgetrs: lib.func(
      'int cusolverDnSgetrs(void *handle, int trans, int n, int nrhs, void *A, int lda, void *devIpiv, void *B, int ldb, void *devInfo)',
    ),
    // cusolverStatus_t cusolverDnDgetrs(cusolverDnHandle_t handle, cublasOperation_t trans,
    //   int n, int nrhs, const double *A, int lda, const int *devIpiv, double *B, int ldb,
    //   int *devInfo);
    cusolverDnDgetrs: lib.func(
      'int cusolverDnDgetrs(void *handle, int trans, int n, int nrhs, void *A, int lda, void *devIpiv, void *B, int ldb, void *devInfo)',
    ),

    // ---- Cholesky factorization: potrf / potrs ----

    // cusolverStatus_t cusolverDnSpotrf_bufferSize(cusolverDnHandle_t handle,
    //   cublasFillMode_t uplo, int n, float *A, int lda, int *Lwork);
    cusolverDnSpotrf_bufferSize: lib.func(
      'int cusolverDnSpotrf_bufferSize(void *handle, int uplo, int n, void *A, int lda, void *Lwork)',
    ),
    // cusolverStatus_t cusolverDnDpotrf_bufferSize(cusolverDnHandle_t handle,
    //   cublasFillMode_t uplo, int n, double *A, int lda, int *Lwork);
    cusolverDnDpotrf_bufferSize: lib.func(
      'int cusolverDnDpotrf_bufferSize(void *handle, int uplo, int n, void *A, int lda, void *Lwork)',
    ),
    // cusolverStatus_t cusolverDnSpotrf(cusolverDnHandle_t handle, cublasFillMode_t uplo,
    //   int n, float *A, int lda, float *Workspace, int Lwork, int *devInfo);
    cusolverDnSpotrf: lib.func(
      'int cusolverDnSpotrf(void *handle, int uplo, int n, void *A, int lda, void *Workspace, int Lwork, void *devInfo)',
    ),
    // cusolverStatus_t cusolverDnDpotrf(cusolverDnHandle_t handle, cublasFillMode_t uplo,
    //   int n, double *A, int lda, double *Workspace, int Lwork, int *devInfo);
    cusolverDnDpotrf: lib.func(
      'int cusolverDnDpotrf(void *handle, int uplo, int n, void *A, int lda, void *Workspace, int Lwork, void *devInfo)',
    ),
    // cusolverStatus_t cusolverDnSpotrs(cusolverDnHandle_t handle, cublasFillMode_t uplo,
    //   int n, int nrhs, const float *A, int lda, float *B, int ldb, int *devInfo);
    cusolverDnSpotrs: lib.func(
      'int cusolverDnSpotrs(void *handle, int uplo, int n, int nrhs, void *A, int lda, void *B, int ldb, void *devInfo)',
    ),
    // cusolverStatus_t cusolverDnDpotrs(cusolverDnHandle_t handle, cublasFillMode_t uplo,
    //   int n, int nrhs, const double *A, int lda, double *B, int ldb, int *devInfo);
    cusolverDnDpotrs: lib.func(
      'int cusolverDnDpotrs(void *handle, int uplo, int n, int nrhs, void *A, int lda, void *B, int ldb, void *devInfo)',
    ),

    // ---- QR factorization: geqrf / orgqr ----

    // cusolverStatus_t cusolverDnSgeqrf_bufferSize(cusolverDnHandle_t handle, int m, int n,
    //   float *A, int lda, int *lwork);
    cusolverDnSgeqrf_bufferSize: lib.func(
      'int cusolverDnSgeqrf_bufferSize(void *handle, int m, int n, void *A, int lda, void *lwork)',
    ),
    // cusolverStatus_t cusolverDnDgeqrf_bufferSize(cusolverDnHandle_t handle, int m, int n,
    //   double *A, int lda, int *lwork);
    cusolverDnDgeqrf_bufferSize: lib.func(
      'int cusolverDnDgeqrf_bufferSize(void *handle, int m, int n, void *A, int lda, void *lwork)',
    ),
    // cusolverStatus_t cusolverDnSgeqrf(cusolverDnHandle_t handle, int m, int n, float *A,
    //   int lda, float *TAU, float *Workspace, int Lwork, int *devInfo);
    cusolverDnSgeqrf: lib.func(
      'int cusolverDnSgeqrf(void *handle, int m, int n, void *A, int lda, void *TAU, void *Workspace, int Lwork, void *devInfo)',
    ),
    // cusolverStatus_t cusolverDnDgeqrf(cusolverDnHandle_t handle, int m, int n, double *A,
    //   int lda, double *TAU, double *Workspace, int Lwork, int *devInfo);
    cusolverDnDgeqrf: lib.func(
      'int cusolverDnDgeqrf(void *handle, int m, int n, void *A, int lda, void *TAU, void *Workspace, int Lwork, void *devInfo)',
    ),
    // cusolverStatus_t cusolverDnSorgqr_bufferSize(cusolverDnHandle_t handle, int m, int n,
    //   int k, const float *A, int lda, const float *tau, int *lwork);
    cusolverDnSorgqr_bufferSize: lib.func(
      'int cusolverDnSorgqr_bufferSize(void *handle, int m, int n, int k, void *A, int lda, void *tau, void *lwork)',
    ),
    // cusolverStatus_t cusolverDnDorgqr_bufferSize(cusolverDnHandle_t handle, int m, int n,
    //   int k, const double *A, int lda, const double *tau, int *lwork);
    cusolverDnDorgqr_bufferSize: lib.func(
      'int cusolverDnDorgqr_bufferSize(void *handle, int m, int n, int k, void *A, int lda, void *tau, void *lwork)',
    ),
    // cusolverStatus_t cusolverDnSorgqr(cusolverDnHandle_t handle, int m, int n, int k,
    //   float *A, int lda, const float *tau, float *work, int lwork, int *info);
    cusolverDnSorgqr: lib.func(
      'int cusolverDnSorgqr(void *handle, int m, int n, int k, void *A, int lda, void *tau, void *work, int lwork, void *info)',
    ),
    // cusolverStatus_t cusolverDnDorgqr(cusolverDnHandle_t handle, int m, int n, int k,
    //   double *A, int lda, const double *tau, double *work, int lwork, int *info);
    cusolverDnDorgqr: lib.func(
      'int cusolverDnDorgqr(void *handle, int m, int n, int k, void *A, int lda, void *tau, void *work, int lwork, void *info)',
    ),

    // ---- Singular value decomposition: gesvd ----

    // cusolverStatus_t cusolverDnSgesvd_bufferSize(cusolverDnHandle_t handle, int m, int n,
    //   int *lwork);
    cusolverDnSgesvd_bufferSize: lib.func(
      'int cusolverDnSgesvd_bufferSize(void *handle, int m, int n, void *lwork)',
    ),
    // cusolverStatus_t cusolverDnDgesvd_bufferSize(cusolverDnHandle_t handle, int m, int n,
    //   int *lwork);
    cusolverDnDgesvd_bufferSize: lib.func(
      'int cusolverDnDgesvd_bufferSize(void *handle, int m, int n, void *lwork)',
    ),
    // cusolverStatus_t cusolverDnSgesvd(cusolverDnHandle_t handle, signed char jobu,
    //   signed char jobvt, int m, int n, float *A, int lda, float *S, float *U, int ldu,
    //   float *VT, int ldvt, float *work, int lwork, float *rwork, int *info);
    cusolverDnSgesvd: lib.func(
      'int cusolverDnSgesvd(void *handle, int8_t jobu, int8_t jobvt, int m, int n, void *A, int lda, void *S, void *U, int ldu, void *VT, int ldvt, void *work, int lwork, void *rwork, void *info)',
    ),
    // cusolverStatus_t cusolverDnDgesvd(cusolverDnHandle_t handle, signed char jobu,
    //   signed char jobvt, int m, int n, double *A, int lda, double *S, double *U, int ldu,
    //   double *VT, int ldvt, double *work, int lwork, double *rwork, int *info);
    cusolverDnDgesvd: lib.func(
      'int cusolverDnDgesvd(void *handle, int8_t jobu, int8_t jobvt, int m, int n, void *A, int lda, void *S, void *U, int ldu, void *VT, int ldvt, void *work, int lwork, void *rwork, void *info)',
    ),

    // ---- Symmetric eigenvalue problem: syevd ----

    // cusolverStatus_t cusolverDnSsyevd_bufferSize(cusolverDnHandle_t handle,
    //   cusolverEigMode_t jobz, cublasFillMode_t uplo, int n, const float *A, int lda,
    //   const float *W, int *lwork);
    cusolverDnSsyevd_bufferSize: lib.func(
      'int cusolverDnSsyevd_bufferSize(void *handle, int jobz, int uplo, int n, void *A, int lda, void *W, void *lwork)',
    ),
    // cusolverStatus_t cusolverDnDsyevd_bufferSize(cusolverDnHandle_t handle,
    //   cusolverEigMode_t jobz, cublasFillMode_t uplo, int n, const double *A, int lda,
    //   const double *W, int *lwork);
    cusolverDnDsyevd_bufferSize: lib.func(
      'int cusolverDnDsyevd_bufferSize(void *handle, int jobz, int uplo, int n, void *A, int lda, void *W, void *lwork)',
    ),
    // cusolverStatus_t cusolverDnSsyevd(cusolverDnHandle_t handle, cusolverEigMode_t jobz,
    //   cublasFillMode_t uplo, int n, float *A, int lda, float *W, float *work, int lwork,
    //   int *info);
    cusolverDnSsyevd: lib.func(
      'int cusolverDnSsyevd(void *handle, int jobz, int uplo, int n, void *A, int lda, void *W, void *work, int lwork, void *info)',
    ),
    // cusolverStatus_t cusolverDnDsyevd(cusolverDnHandle_t handle, cusolverEigMode_t jobz,
    //   cublasFillMode_t uplo, int n, double *A, int lda, double *W, double *work, int lwork,
    //   int *info);
    cusolverDnDsyevd: lib.func(
      'int cusolverDnDsyevd(void *handle, int jobz, int uplo, int n, void *A, int lda, void *W, void *work, int lwork, void *info)',
    ),
  };
});

/** The type of the libcusolver bindings. */
export type CusolverBindings = ReturnType<typeof cusolver>;
