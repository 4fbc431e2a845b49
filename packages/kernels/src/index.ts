/**
 * @cuda-tasks/kernels: element-wise and reduction kernels from expressions, compiled with
 * NVRTC once per (expression, dtypes, device architecture), cached in memory and on disk, and
 * launched on the current task's stream; ready-made math (`map`, `add`, ..., `axpby`,
 * `fill`, `arange`), reductions (`sum`, `mean`, `max`, `min`, `argmax`, `argmin`) and
 * `topk`. Importing it installs task-runtime's task-local streams, as the libraries do.
 *
 * @module @cuda-tasks/kernels
 */
import '@cuda-tasks/task-runtime';

/**
 * The compile cache's settings and counters: the task runtime's (its library kit's one NVRTC
 * cache, which cuSOLVER's helpers share), the same functions, re-exported.
 */
export {
  CACHE_ENVIRONMENT_VARIABLE,
  clearKernelCache,
  type KernelCacheStatistics,
  kernelCacheDirectory,
  kernelCacheStatistics,
  setKernelCacheDirectory,
} from '@cuda-tasks/task-runtime';
export type { CallOptions } from './arguments.js';
export {
  type ElementwiseKernel,
  type ElementwiseOptions,
  type ElementwiseResult,
  elementwise,
} from './elementwise.js';
export {
  type ArangeOptions,
  add,
  arange,
  axpby,
  type BinaryOperation,
  type BinaryOperator,
  div,
  ELEMENTWISE_DTYPES,
  fill,
  map,
  maximum,
  minimum,
  mul,
  sub,
  type UnaryFunction,
} from './ops.js';
export {
  type ReductionCallOptions,
  type ReductionDefinition,
  type ReductionKernel,
  reduction,
} from './reduction.js';
export {
  argmax,
  argmin,
  type MeanDType,
  max,
  mean,
  min,
  REDUCTION_DTYPES,
  type ReduceOptions,
  type ReductionOperation,
  sum,
} from './reductions.js';
export { MAX_TOPK, type TopkOptions, type TopkResult, topk, topkSource } from './topk.js';
