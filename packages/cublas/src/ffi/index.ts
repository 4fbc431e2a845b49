/**
 * The raw binding layer of @cuda-tasks/cublas: libcublas (and the matmul part of
 * libcublasLt) declared with koffi exactly as cublas_api.h and cublasLt.h name them, for
 * calling routines the package does not wrap. Get a handle bound to the current stream with
 * `handle()` from `@cuda-tasks/cublas`, device addresses with `array.useOn(stream)`, and turn
 * statuses into errors with its `check()`.
 *
 * @module @cuda-tasks/cublas/ffi
 */
export * from './cublas.js';
export * from './cublaslt.js';
