/**
 * NVRTC (the CUDA runtime compiler) through koffi, named as in nvrtc.h. Loaded on first use.
 */
import { cudaLibraryCandidates, lazyBindings, loadLibrary } from './library.js';

/** Where libnvrtc is found, and what to say when it is not. */
export const libnvrtcSpec = {
  displayName: 'NVRTC (libnvrtc, the CUDA runtime compiler)',
  environmentVariable: 'CUDA_TASKS_LIBNVRTC',
  candidates: cudaLibraryCandidates('libnvrtc.so', ['13', '12']),
  installHint: 'Install the CUDA toolkit (12 or 13) or the nvidia-cuda-nvrtc package.',
  minimumVersion: 'NVRTC from CUDA 12.0 or newer',
} as const;

/** nvrtcResult: success. */
export const NVRTC_SUCCESS = 0;
/** nvrtcResult: the source did not compile (the program log says why). */
export const NVRTC_ERROR_COMPILATION = 6;

/** The NVRTC bindings, loaded on first call. */
export const nvrtc = lazyBindings(() => {
  const lib = loadLibrary(libnvrtcSpec);
  return {
    // const char *nvrtcGetErrorString(nvrtcResult result);
    nvrtcGetErrorString: lib.func('const char *nvrtcGetErrorString(int result)'),
    // nvrtcResult nvrtcVersion(int *major, int *minor);
    nvrtcVersion: lib.func('int nvrtcVersion(_Out_ int *major, _Out_ int *minor)'),
    // nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name,
    //   int numHeaders, const char * const *headers, const char * const *includeNames);
    nvrtcCreateProgram: lib.func(
      'int nvrtcCreateProgram(_Out_ void **prog, const char *src, const char *name, int numHeaders, const char **headers, const char **includeNames)',
    ),
    // nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog);
    nvrtcDestroyProgram: lib.func('int nvrtcDestroyProgram(_Inout_ void **prog)'),
    // nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char * const *options);
    nvrtcCompileProgram: lib.func(
      'int nvrtcCompileProgram(void *prog, int numOptions, const char **options)',
    ),
    // nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t *ptxSizeRet);
    nvrtcGetPTXSize: lib.func('int nvrtcGetPTXSize(void *prog, _Out_ size_t *size)'),
    // nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char *ptx);
    nvrtcGetPTX: lib.func('int nvrtcGetPTX(void *prog, _Out_ uint8_t *ptx)'),
    // nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *cubinSizeRet);
    nvrtcGetCUBINSize: lib.func('int nvrtcGetCUBINSize(void *prog, _Out_ size_t *size)'),
    // nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin);
    nvrtcGetCUBIN: lib.func('int nvrtcGetCUBIN(void *prog, _Out_ uint8_t *cubin)'),
    // nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *logSizeRet);
    nvrtcGetProgramLogSize: lib.func('int nvrtcGetProgramLogSize(void *prog, _Out_ size_t *size)'),
    // nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log);
    nvrtcGetProgramLog: lib.func('int nvrtcGetProgramLog(void *prog, _Out_ uint8_t *log)'),
  };
});
