/**
 * libcurand through koffi: the host API declarations named exactly as in curand.h, with the
 * C prototype above each, and the enums that the TypeScript layer uses. Loaded on first use.
 *
 * Conventions: `curandGenerator_t` and `cudaStream_t` are `void *` and travel as BigInt;
 * output pointers are device addresses (BigInt) passed as the declared pointer type; no call
 * on the generation path has an out-parameter, so generation allocates nothing per call.
 */
import {
  cudaLibraryCandidates,
  type LibrarySpec,
  lazyBindings,
  loadLibrary,
} from '@cuda-tasks/cudadrv/ffi';

/** `curandStatus_t` (curand.h, `enum curandStatus`). */
export const curandStatus = {
  CURAND_STATUS_SUCCESS: 0,
  CURAND_STATUS_VERSION_MISMATCH: 100,
  CURAND_STATUS_NOT_INITIALIZED: 101,
  CURAND_STATUS_ALLOCATION_FAILED: 102,
  CURAND_STATUS_TYPE_ERROR: 103,
  CURAND_STATUS_OUT_OF_RANGE: 104,
  CURAND_STATUS_LENGTH_NOT_MULTIPLE: 105,
  CURAND_STATUS_DOUBLE_PRECISION_REQUIRED: 106,
  CURAND_STATUS_LAUNCH_FAILURE: 201,
  CURAND_STATUS_PREEXISTING_FAILURE: 202,
  CURAND_STATUS_INITIALIZATION_FAILED: 203,
  CURAND_STATUS_ARCH_MISMATCH: 204,
  CURAND_STATUS_INTERNAL_ERROR: 999,
} as const;

/**
 * What each status means, from the comments in curand.h (cuRAND has no function that names
 * or describes a status, unlike cuGetErrorName).
 */
export const curandStatusDescriptions: Readonly<Record<number, string>> = {
  0: 'no errors',
  100: 'header file and linked library version do not match',
  101: 'generator not initialized',
  102: 'memory allocation failed',
  103: 'generator is wrong type',
  104: 'argument out of range',
  105: 'length requested is not a multiple of dimension (or, for normal and log-normal pseudorandom generation, not even)',
  106: 'GPU does not have double precision required by MRG32k3a',
  201: 'kernel launch failure',
  202: 'preexisting failure on library entry',
  203: 'initialization of CUDA failed',
  204: 'architecture mismatch, GPU does not support requested feature',
  999: 'internal library error',
};

/** `curandRngType_t` (curand.h, `enum curandRngType`). */
export const curandRngType = {
  CURAND_RNG_TEST: 0,
  CURAND_RNG_PSEUDO_DEFAULT: 100,
  CURAND_RNG_PSEUDO_XORWOW: 101,
  CURAND_RNG_PSEUDO_MRG32K3A: 121,
  CURAND_RNG_PSEUDO_MTGP32: 141,
  CURAND_RNG_PSEUDO_MT19937: 142,
  CURAND_RNG_PSEUDO_PHILOX4_32_10: 161,
  CURAND_RNG_QUASI_DEFAULT: 200,
  CURAND_RNG_QUASI_SOBOL32: 201,
  CURAND_RNG_QUASI_SCRAMBLED_SOBOL32: 202,
  CURAND_RNG_QUASI_SOBOL64: 203,
  CURAND_RNG_QUASI_SCRAMBLED_SOBOL64: 204,
} as const;

/** `curandOrdering_t` (curand.h, `enum curandOrdering`). */
export const curandOrdering = {
  CURAND_ORDERING_PSEUDO_BEST: 100,
  CURAND_ORDERING_PSEUDO_DEFAULT: 101,
  CURAND_ORDERING_PSEUDO_SEEDED: 102,
  CURAND_ORDERING_PSEUDO_LEGACY: 103,
  CURAND_ORDERING_PSEUDO_DYNAMIC: 104,
  CURAND_ORDERING_QUASI_DEFAULT: 201,
} as const;

/**
 * Where libcurand is found, and what to say when it is not. The soname has been
 * libcurand.so.10 from CUDA 10.2 through CUDA 13.
 */
export const libcurandSpec: LibrarySpec = {
  displayName: 'cuRAND',
  environmentVariable: 'CUDA_TASKS_LIBCURAND',
  candidates: cudaLibraryCandidates('libcurand.so', ['10']),
  installHint:
    'Install the CUDA toolkit (or the libcurand package, e.g. `apt install libcurand-12-x` or `pip install nvidia-curand-cu12`) and make sure libcurand.so.10 is on the loader path.',
  minimumVersion: 'cuRAND from CUDA 12.0 or newer',
};

/** The libcurand bindings, loaded on first call. */
export const curand = lazyBindings(() => {
  const lib = loadLibrary(libcurandSpec);
  return {
    // curandStatus_t curandCreateGenerator(curandGenerator_t *generator, curandRngType_t rng_type);
    curandCreateGenerator: lib.func(
      'int curandCreateGenerator(_Out_ void **generator, int rng_type)',
    ),
    // curandStatus_t curandDestroyGenerator(curandGenerator_t generator);
    curandDestroyGenerator: lib.func('int curandDestroyGenerator(void *generator)'),
    // curandStatus_t curandGetVersion(int *version);
    curandGetVersion: lib.func('int curandGetVersion(_Out_ int *version)'),
    // curandStatus_t curandSetStream(curandGenerator_t generator, cudaStream_t stream);
    curandSetStream: lib.func('int curandSetStream(void *generator, void *stream)'),
    // curandStatus_t curandSetPseudoRandomGeneratorSeed(curandGenerator_t generator, unsigned long long seed);
    curandSetPseudoRandomGeneratorSeed: lib.func(
      'int curandSetPseudoRandomGeneratorSeed(void *generator, unsigned long long seed)',
    ),
    // curandStatus_t curandSetGeneratorOffset(curandGenerator_t generator, unsigned long long offset);
    curandSetGeneratorOffset: lib.func(
      'int curandSetGeneratorOffset(void *generator, unsigned long long offset)',
    ),
    // curandStatus_t curandGenerateSeeds(curandGenerator_t generator);
    curandGenerateSeeds: lib.func('int curandGenerateSeeds(void *generator)'),
    // curandStatus_t curandSetGeneratorOrdering(curandGenerator_t generator, curandOrdering_t order);
    curandSetGeneratorOrdering: lib.func(
      'int curandSetGeneratorOrdering(void *generator, int order)',
    ),
    // curandStatus_t curandGenerate(curandGenerator_t generator, unsigned int *outputPtr, size_t num);
    curandGenerate: lib.func(
      'int curandGenerate(void *generator, unsigned int *outputPtr, size_t num)',
    ),
    // curandStatus_t curandGenerateUniform(curandGenerator_t generator, float *outputPtr, size_t num);
    curandGenerateUniform: lib.func(
      'int curandGenerateUniform(void *generator, float *outputPtr, size_t num)',
    ),
    // curandStatus_t curandGenerateUniformDouble(curandGenerator_t generator, double *outputPtr, size_t num);
    curandGenerateUniformDouble: lib.func(
      'int curandGenerateUniformDouble(void *generator, double *outputPtr, size_t num)',
    ),
    // curandStatus_t curandGenerateNormal(curandGenerator_t generator, float *outputPtr, size_t n, float mean, float stddev);
    curandGenerateNormal: lib.func(
      'int curandGenerateNormal(void *generator, float *outputPtr, size_t n, float mean, float stddev)',
    ),
    // curandStatus_t curandGenerateNormalDouble(curandGenerator_t generator, double *outputPtr, size_t n, double mean, double stddev);
    curandGenerateNormalDouble: lib.func(
      'int curandGenerateNormalDouble(void *generator, double *outputPtr, size_t n, double mean, double stddev)',
    ),
    // curandStatus_t curandGenerateLogNormal(curandGenerator_t generator, float *outputPtr, size_t n, float mean, float stddev);
    curandGenerateLogNormal: lib.func(
      'int curandGenerateLogNormal(void *generator, float *outputPtr, size_t n, float mean, float stddev)',
    ),
    // curandStatus_t curandGenerateLogNormalDouble(curandGenerator_t generator, double *outputPtr, size_t n, double mean, double stddev);
    curandGenerateLogNormalDouble: lib.func(
      'int curandGenerateLogNormalDouble(void *generator, double *outputPtr, size_t n, double mean, double stddev)',
    ),
    // curandStatus_t curandGeneratePoisson(curandGenerator_t generator, unsigned int *outputPtr, size_t n, double lambda);
    curandGeneratePoisson: lib.func(
      'int curandGeneratePoisson(void *generator, unsigned int *outputPtr, size_t n, double lambda)',
    ),
  };
});

/** The bound cuRAND functions (what `curand()` returns). */
export type CurandBindings = ReturnType<typeof curand>;
