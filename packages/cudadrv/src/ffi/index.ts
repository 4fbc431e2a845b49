/**
 * The raw binding layer: libcuda and NVRTC declared with koffi exactly as the C headers
 * name them, plus the loader that the library packages share.
 *
 * @module @cuda-tasks/cudadrv/ffi
 */
export * from './cuda.js';
export * from './graph.js';
export {
  cudaLibraryCandidates,
  funcFirst,
  koffi,
  koffiModulePath,
  type LibrarySpec,
  lazyBindings,
  loadLibrary,
  type NativeLibrary,
} from './library.js';
export * from './nvrtc.js';
