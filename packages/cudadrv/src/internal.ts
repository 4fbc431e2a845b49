/**
 * @cuda-tasks/cudadrv/internal: what the sibling packages of cuda-tasks (the task runtime, the
 * cuBLAS, cuRAND and cuSOLVER wrappers, the examples and benchmarks) share beyond the public
 * API: the scratch arena, handle conversion for koffi, the operation observer slot, the
 * current-stream provider slot and the process default device it reads, stream-disposal
 * listeners and the waiter's tuning. (The operand checks every library runs before its native
 * calls are public: `@cuda-tasks/cudadrv`.)
 *
 * NOT PUBLIC API: anything here may change or go in any release, minor and patch included.
 * Use `@cuda-tasks/cudadrv` instead.
 */
export {
  type CurrentDeviceProvider,
  type CurrentSignalProvider,
  type CurrentStreamProvider,
  defaultDevice,
  defaultDeviceOrdinal,
  setCurrentStreamProvider,
} from './context/provider.js';
export { ffiValue, Scratch, scratch, stickyError } from './driver.js';
export { releaseStreamCache } from './memory/block-cache.js';
export { contextOption, NO_OPTIONS, STREAM_ONLY, stringOption } from './options-checks.js';
export {
  compatibleVersion,
  cudadrvCopy,
  type PackageCopy,
  packageOf,
  processState,
  registerCopy,
} from './process-state.js';
export { nextUseStamp } from './progress.js';
// beginOperation / endOperation are public (`@cuda-tasks/cudadrv`); the sibling packages still
// import them from here too, the same functions.
export {
  beginOperation,
  endOperation,
  type OperationObserver,
  setOperationObserver,
} from './stream/observer.js';
export { onStreamDisposed, type StreamDisposedListener } from './stream/stream.js';
export { TURN_BUDGET_MS, turnElapsed, turnSpent } from './stream/turn.js';
export {
  MAX_BLOCKING_WAITS,
  pendingWaits,
  SPIN_BUDGET_PER_TURN,
  SPIN_QUERIES,
} from './stream/wait.js';
export { type ThreadEntry, threadEntry } from './thread-entry.js';
