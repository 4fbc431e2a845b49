/**
 * @cuda-tasks/cudadrv: the CUDA driver API for Node.js. Devices and primary contexts,
 * streams, events, stream-ordered memory, DeviceBuffer / DeviceArray, modules (PTX, cubin,
 * NVRTC), kernel launch and graphs (stream capture and replay). Every operation takes `{ stream }` and defaults to
 * `currentStream()`, which `@cuda-tasks/task-runtime` makes task-local.
 *
 * This entry is the public API. What the sibling packages of cuda-tasks share beyond it lives
 * in `@cuda-tasks/cudadrv/internal`, which is not public.
 *
 * @module @cuda-tasks/cudadrv
 */

export { availability, type CudaAvailability, isAvailable } from './context/availability.js';
export { Context, Device, deviceCount } from './context/device.js';
export {
  parseSharedEventHandle,
  parseSharedMemoryHandle,
  type SharedDeviceIdentity,
  type SharedEventHandle,
  SharedMemoryError,
  type SharedMemoryFailure,
  type SharedMemoryHandle,
} from './context/ipc-handle.js';
export {
  currentContext,
  currentDevice,
  currentSignal,
  currentStream,
  resolveStream,
  setDefaultDevice,
} from './context/provider.js';
export { check, cudaError, driver, driverVersion } from './driver.js';
export {
  bfloat16BitsToFloat32,
  DTYPES,
  type DType,
  dtypeBytes,
  dtypeOfHost,
  type FloatDType,
  float16BitsToFloat32,
  float32ToBfloat16Bits,
  float32ToFloat16Bits,
  type HostArray,
  type HostArrayOf,
} from './dtype.js';
export {
  CaptureError,
  CudaArgumentError,
  CudaError,
  CudaOutOfMemoryError,
  CudaUnavailableError,
  DisposedError,
  formatBytes,
  markErrorClass,
} from './errors.js';
export { type BufferAccess, StreamCapture } from './graph/capture.js';
export { Graph } from './graph/graph.js';
export { Kernel, type KernelArgument, type KernelParameter } from './kernel/kernel.js';
export { type Dim3, type LaunchConfig, launch, launchOn } from './kernel/launch.js';
export {
  CompileError,
  type CompileOptions,
  compileToCubin,
  Module,
  ModuleLoadError,
} from './kernel/module.js';
export {
  type LibraryErrorClass,
  type LibraryErrors,
  type LibraryStatusTable,
  libraryErrors,
  type MadeErrorClass,
  type OwnErrorClass,
} from './library-errors.js';
export { DeviceArray, type Shape } from './memory/array.js';
export {
  assertArray,
  assertDType,
  assertOperand,
  assertSameDType,
  describeValue,
  isFloatDType,
  isOperand,
  type Operand,
  type SameDType,
  sharedDType,
} from './memory/array-checks.js';
export {
  DLDeviceType,
  DLPACK_FLAG_BITMASK_IS_COPIED,
  DLPACK_FLAG_BITMASK_READ_ONLY,
  DLPACK_VERSION,
  type FromDLPackOptions,
  fromDLPack,
  pendingDLPackExports,
  type ToDLPackOptions,
  toDLPack,
} from './memory/dlpack.js';
export { HostView, type HostViewArrayOf, type HostViewOptions } from './memory/host-view.js';
export {
  allocateShareable,
  checkSharedMemory,
  type OpenSharedMemoryOptions,
  openSharedMemory,
  shareableArray,
  sharedMemoryHolders,
  shareMemory,
} from './memory/ipc.js';
export {
  assertFits,
  elementCapacity,
  type MatrixLayout,
  matrixExtent,
  newMatrixLayout,
  newVectorLayout,
  operandMatrixFootprint,
  operandVectorFootprint,
  readMatrixLayout,
  readVectorLayout,
  type VectorLayout,
  vectorExtent,
} from './memory/matrix-layout.js';
export { DeviceBuffer, type StreamOption } from './memory/memory.js';
export {
  MemoryPool,
  onOutOfMemory,
  onReleaseCached,
  type PoolStatistics,
} from './memory/memory-pool.js';
export {
  assertApart,
  assertSameContext,
  byteRangesOverlap,
  type ContextOperand,
  type Footprint,
  footprintsOverlap,
  matrixFootprint,
  newFootprint,
  vectorFootprint,
} from './memory/operands.js';
export {
  type ArrayLoan,
  borrowArray,
  isLentArrayDescriptor,
  isTransferredArrayDescriptor,
  type LendOptions,
  type LentArrayDescriptor,
  lendArray,
  pendingArrayLoans,
  receiveArray,
  type ThreadShareOptions,
  type TransferredArrayDescriptor,
  transferArray,
} from './memory/thread-share.js';
export {
  copyDeviceToDevice,
  copyDeviceToPinned,
  copyHostToDevice,
  type DeviceRegion,
  memset,
  memsetWords,
  PinnedHostBuffer,
  STAGED_UPLOAD_MAX_BYTES,
  STAGED_UPLOAD_MIN_BYTES,
} from './memory/transfer.js';
export {
  assertOptions,
  booleanOption,
  numberOption,
  renamedBooleanOption,
  streamOption,
} from './options-checks.js';
export { type PackageCopy, packageOf, processState } from './process-state.js';
export { Event, type EventOptions, type ThreadEventDescriptor } from './stream/event.js';
export { InterprocessEvent } from './stream/ipc-event.js';
export {
  type IssueEngineOptions,
  type IssueEngineStatistics,
  issueEngineStatistics,
  type StopIssueEngineOptions,
  startIssueEngine,
  stopIssueEngine,
} from './stream/issue-engine.js';
export { beginOperation, endOperation } from './stream/observer.js';
export { type StreamPriority, streamPriority } from './stream/priority.js';
export { Stream, type StreamOptions } from './stream/stream.js';
export {
  DEFAULT_POLLING_WINDOW_MS,
  pollingWindow,
  setPollingWindow,
  type WaitOptions,
  waitForStream,
} from './stream/wait.js';
