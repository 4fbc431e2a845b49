/**
 * libcufft through koffi: the few cufft.h declarations this library uses, named exactly as in
 * C with the prototype above each, loaded on first use with cudadrv's loader (the same
 * search, environment override and error message as the packages of this repository).
 *
 * Conventions: `cufftHandle` is a C `int`; `cudaStream_t` and device pointers are `void *`
 * and travel as BigInt; out-parameters (plan creation only, a cold path) are `_Out_` with a
 * one-element array. The execution path has no out-parameter, so it allocates nothing.
 */
import {
  cudaLibraryCandidates,
  type LibrarySpec,
  lazyBindings,
  loadLibrary,
} from '@cuda-tasks/cudadrv/ffi';

/** `cufftType` CUFFT_R2C (cufft.h, `enum cufftType_t`): real to complex, float32. */
export const CUFFT_R2C = 0x2a;
/** `cufftType` CUFFT_C2R (cufft.h): complex to real, float32. */
export const CUFFT_C2R = 0x2c;
/** `cufftType` CUFFT_C2C (cufft.h): complex to complex, float32. */
export const CUFFT_C2C = 0x29;

/** Transform direction CUFFT_FORWARD (cufft.h): exponent sign -1. */
export const CUFFT_FORWARD = -1;
/** Transform direction CUFFT_INVERSE (cufft.h): exponent sign +1, unnormalized. */
export const CUFFT_INVERSE = 1;

/** `cufftResult` values to names (cufft.h, `enum cufftResult_t`). */
export const cufftResult: Readonly<Record<number, string>> = {
  0: 'CUFFT_SUCCESS',
  1: 'CUFFT_INVALID_PLAN',
  2: 'CUFFT_ALLOC_FAILED',
  3: 'CUFFT_INVALID_TYPE',
  4: 'CUFFT_INVALID_VALUE',
  5: 'CUFFT_INTERNAL_ERROR',
  6: 'CUFFT_EXEC_FAILED',
  7: 'CUFFT_SETUP_FAILED',
  8: 'CUFFT_INVALID_SIZE',
  9: 'CUFFT_UNALIGNED_DATA',
  10: 'CUFFT_INCOMPLETE_PARAMETER_LIST',
  11: 'CUFFT_INVALID_DEVICE',
  12: 'CUFFT_PARSE_ERROR',
  13: 'CUFFT_NO_WORKSPACE',
  14: 'CUFFT_NOT_IMPLEMENTED',
  15: 'CUFFT_LICENSE_ERROR',
  16: 'CUFFT_NOT_SUPPORTED',
  17: 'CUFFT_MISSING_DEPENDENCY',
  18: 'CUFFT_NVRTC_FAILURE',
  19: 'CUFFT_NVJITLINK_FAILURE',
  20: 'CUFFT_NVSHMEM_FAILURE',
};

/** What each `cufftResult` means, for error messages (from the cuFFT documentation). */
export const cufftResultDescriptions: Readonly<Record<number, string>> = {
  0: 'the operation succeeded',
  1: 'cuFFT was passed an invalid plan handle',
  2: 'cuFFT failed to allocate GPU or CPU memory',
  3: 'the transform type is not supported',
  4: 'a bad pointer or parameter value was passed',
  5: 'an internal driver error was detected',
  6: 'cuFFT failed to execute the transform on the GPU',
  7: 'the cuFFT library failed to initialize',
  8: 'the transform size is not supported',
  9: 'the data is not aligned as cuFFT requires',
  10: 'the parameter list is incomplete',
  11: 'the plan was executed on a different GPU than it was created on',
  12: 'internal plan database error',
  13: 'no workspace was provided before execution',
  14: 'the functionality is not implemented',
  15: 'license error',
  16: 'the operation is not supported for these parameters',
  17: 'a library that cuFFT depends on is missing',
  18: 'an NVRTC failure inside cuFFT',
  19: 'an nvJitLink failure inside cuFFT',
  20: 'an NVSHMEM failure inside cuFFT',
};

/**
 * Where libcufft is found: libcufft.so.12 ships with CUDA 13, libcufft.so.11 with CUDA 12.
 * `CUDA_TASKS_LIBCUFFT` overrides the search with a full path.
 */
export const libcufftSpec: LibrarySpec = {
  displayName: 'cuFFT',
  environmentVariable: 'CUDA_TASKS_LIBCUFFT',
  candidates: cudaLibraryCandidates('libcufft.so', ['12', '11']),
  installHint:
    'Install the CUDA toolkit (or the libcufft package, e.g. `apt install libcufft-13-0` or `pip install nvidia-cufft-cu12`) and make sure libcufft.so.12 or .11 is on the loader path.',
};

/** The libcufft bindings, loaded on first call. */
export const cufft = lazyBindings(() => {
  const lib = loadLibrary(libcufftSpec);
  return {
    // cufftResult cufftCreate(cufftHandle *handle);
    cufftCreate: lib.func('int cufftCreate(_Out_ int *handle)'),
    // cufftResult cufftSetAutoAllocation(cufftHandle plan, int autoAllocate);
    cufftSetAutoAllocation: lib.func('int cufftSetAutoAllocation(int plan, int autoAllocate)'),
    // cufftResult cufftMakePlan1d(cufftHandle plan, int nx, cufftType type, int batch, size_t *workSize);
    cufftMakePlan1d: lib.func(
      'int cufftMakePlan1d(int plan, int nx, int type, int batch, _Out_ size_t *workSize)',
    ),
    // cufftResult cufftPlan1d(cufftHandle *plan, int nx, cufftType type, int batch);
    cufftPlan1d: lib.func('int cufftPlan1d(_Out_ int *plan, int nx, int type, int batch)'),
    // cufftResult cufftSetWorkArea(cufftHandle plan, void *workArea);
    cufftSetWorkArea: lib.func('int cufftSetWorkArea(int plan, void *workArea)'),
    // cufftResult cufftSetStream(cufftHandle plan, cudaStream_t stream);
    cufftSetStream: lib.func('int cufftSetStream(int plan, void *stream)'),
    // cufftResult cufftExecC2C(cufftHandle plan, cufftComplex *idata, cufftComplex *odata, int direction);
    cufftExecC2C: lib.func('int cufftExecC2C(int plan, void *idata, void *odata, int direction)'),
    // cufftResult cufftExecR2C(cufftHandle plan, cufftReal *idata, cufftComplex *odata);
    cufftExecR2C: lib.func('int cufftExecR2C(int plan, void *idata, void *odata)'),
    // cufftResult cufftDestroy(cufftHandle plan);
    cufftDestroy: lib.func('int cufftDestroy(int plan)'),
    // cufftResult cufftGetVersion(int *version);
    cufftGetVersion: lib.func('int cufftGetVersion(_Out_ int *version)'),
  };
});

/** The bound cuFFT functions (what `cufft()` returns). */
export type CufftBindings = ReturnType<typeof cufft>;
