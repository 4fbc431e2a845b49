/**
 * @cuda-tasks/task-runtime: automatic concurrency. Every `task()` gets its own CUDA stream;
 * launches, copies and library calls go to the stream of the task that issues them.
 * Importing this package installs its current-stream provider into `@cuda-tasks/cudadrv`.
 */
export {
  type CleanupErrorListener,
  type CleanupTaskInfo,
  onCleanupError,
} from './cleanup.js';
export {
  type CaptureOptions,
  capture,
  capturedGraphs,
  capturedOnce,
  GraphCache,
} from './graphs.js';
export { HandleCache, type HandleCacheOptions } from './handle-cache.js';
export { nvtxAvailable, range } from './nvtx.js';
export {
  configureStreams,
  onStreamReleased,
  type StreamPoolOptions,
  type StreamPoolStatistics,
  streamPoolStatistics,
} from './pool.js';
export { device, setDefaultDevice, stream } from './state.js';
export {
  currentTask,
  deviceSynchronize,
  prewarmStreams,
  synchronize,
  synchronizeSync,
  type TaskOptions,
  task,
  withDevice,
  withStream,
} from './task.js';
export { startTrace, type Trace, type TraceEvent, TraceRecorder } from './trace.js';
