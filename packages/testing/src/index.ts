/**
 * @cuda-tasks/testing (private): what the packages' tests share. GPU gating, seeded random
 * data, float64 CPU references, a host-only DeviceArray for argument checks, stand-in operands that count their uses, the driver test
 * double for the runtime's unit tests, a CUDA header locator, and the packages' layer rules.
 */

export { barrier } from './barrier.js';
export {
  type CancellableEntry,
  describeCancelledEntries,
  type TaskWithSignal,
} from './cancelled-entries.js';
export { findCudaHeader } from './cuda-headers.js';
export { watchEventLoop } from './event-loop.js';
export { createFakeDriver } from './fake-driver.js';
export { describeGpu, gpuAvailable, underSanitizer } from './gpu.js';
export { hostOnlyArray, STAND_IN_CONTEXT } from './host-only-array.js';
export {
  describeLayers,
  findCircle,
  importStatements,
  type LayerRules,
  readPackage,
  type SiblingTable,
} from './layers.js';
export { probeGpu } from './probe-gpu.js';
export { randomFloat32, rng } from './random.js';
export { recordingOperand, standInStream, streamDouble } from './recording-operand.js';
export * from './reference.js';
export { failureOf, thrown } from './thrown.js';
