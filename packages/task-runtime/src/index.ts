/**
 * @cuda-tasks/task-runtime: automatic concurrency. Every `task()` gets its own CUDA stream;
 * launches, copies and library calls go to the stream of the task that issues them.
 * Importing this package installs its current-stream provider into `@cuda-tasks/cudadrv`.
 *
 * @module @cuda-tasks/task-runtime
 */

/**
 * A priority by name, 'high' | 'normal' | 'low': what `task(fn, { priority })` takes, and
 * `Stream.create({ priority })` as well; cudadrv's type, the same one (`TaskPriority` is its
 * deprecated alias).
 */
export type { StreamPriority } from '@cuda-tasks/cudadrv';
/**
 * cudadrv's `setDefaultDevice`, the same function: one process default device, with or
 * without the task runtime. A running task keeps its device; tasks started afterwards and
 * code outside tasks use the new one.
 */
export { setDefaultDevice } from '@cuda-tasks/cudadrv';
export {
  type CleanupErrorListener,
  type CleanupTaskInfo,
  onCleanupError,
} from './cleanup.js';
export {
  clearKernelCache,
  type KernelCacheStatistics,
  kernelCacheDirectory,
  kernelCacheGeneration,
  kernelCacheStatistics,
  loadCachedModule,
  setKernelCacheDirectory,
} from './compile-cache.js';
export { CACHE_ENVIRONMENT_VARIABLE } from './disk-cache.js';
export {
  type CaptureOptions,
  capture,
  capturedGraphs,
  capturedOnce,
  GraphCache,
} from './graphs.js';
export {
  configureHandles,
  DEFAULT_KEEP_IDLE_WORKSPACES_MS,
  DEFAULT_MAX_HANDLES_PER_CONTEXT,
  DEFAULT_MAX_WORKSPACES_PER_HANDLE,
  type HandleBinding,
  type HandleBoundOptions,
  HandleCache,
  type HandleCacheOptions,
  type HandleWorkspace,
  warmHandles,
} from './handle-cache.js';
export { SharedHandle, type SharedHandleOptions } from './handle-shared.js';
export type { HandleStatistics } from './handle-statistics.js';
export { IssueEnvelope, type IssueEnvelopeOptions } from './issue-envelope.js';
export { nvtxAvailable, range } from './nvtx.js';
export {
  configureStreams,
  onStreamReleased,
  type StreamPoolOptions,
  type StreamPoolStatistics,
  streamPoolStatistics,
} from './pool.js';
export { device, stream, type TaskPriority } from './state.js';
export { StreamBinding, type StreamBindingOptions } from './stream-binding.js';
export {
  currentTask,
  deviceSynchronize,
  prewarm,
  prewarmStreams,
  synchronize,
  synchronizeSync,
  type TaskInfo,
  type TaskOptions,
  task,
  withDevice,
  withStream,
} from './task.js';
export { startTrace, type Trace, type TraceEvent, TraceRecorder } from './trace.js';
export {
  type ReadOnlyArgument,
  readOnly,
  WorkerJobError,
  type WorkerJobOptions,
  WorkerPool,
  type WorkerPoolOptions,
  type WorkerPoolStatistics,
} from './worker-pool.js';
