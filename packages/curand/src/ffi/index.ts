/**
 * The raw binding layer of `@cuda-tasks/curand`: libcurand declared with koffi exactly as
 * curand.h names it, for calling routines that the typed API does not wrap. Pass
 * `generator.handle` (or `handle()`, the current task's default generator) as the
 * `curandGenerator_t`, and `array.useOn(stream)` as the output pointer.
 *
 * @module @cuda-tasks/curand/ffi
 */
export * from './curand.js';
