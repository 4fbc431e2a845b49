/**
 * @cuda-tasks/cudadrv: the CUDA driver API for Node.js. Devices and primary contexts,
 * streams, events, stream-ordered memory, DeviceBuffer / DeviceArray, modules (PTX, cubin,
 * NVRTC) and kernel launch. Every operation takes `{ stream }` and defaults to
 * `currentStream()`, which `@cuda-tasks/task-runtime` makes task-local.
 */
export { DeviceArray, type Shape } from './array.js';
export { Context, Device, deviceCount } from './device.js';
export {
  check,
  cudaError,
  driver,
  driverVersion,
  ffiValue,
  Scratch,
  scratch,
  stickyError,
} from './driver.js';
export {
  bfloat16BitsToFloat32,
  DTYPES,
  type DType,
  dtypeBytes,
  dtypeOfHost,
  float16BitsToFloat32,
  float32ToBfloat16Bits,
  float32ToFloat16Bits,
  type HostArray,
  type HostArrayOf,
} from './dtype.js';
export {
  CudaArgumentError,
  CudaError,
  CudaOutOfMemoryError,
  CudaUnavailableError,
  DisposedError,
  formatBytes,
} from './errors.js';
export { Event, type EventOptions } from './event.js';
export {
  type Dim3,
  Kernel,
  type KernelArgument,
  type KernelParameter,
  type LaunchConfig,
  launch,
} from './launch.js';
export {
  copyDeviceToDevice,
  copyDeviceToPinned,
  copyHostToDevice,
  DeviceBuffer,
  type DeviceRegion,
  memset,
  memsetWords,
  PinnedHostBuffer,
  type StreamOption,
} from './memory.js';
export { MemoryPool, onOutOfMemory, type PoolStatistics } from './memory-pool.js';
export { CompileError, type CompileOptions, compileToCubin, Module } from './module.js';
export {
  beginOperation,
  endOperation,
  type OperationObserver,
  setOperationObserver,
} from './observer.js';
export {
  type CurrentDeviceProvider,
  type CurrentStreamProvider,
  currentContext,
  currentDevice,
  currentStream,
  setCurrentStreamProvider,
  setDefaultDevice,
} from './provider.js';
export { onStreamDisposed, Stream, type StreamOptions } from './stream.js';
export {
  MAX_BLOCKING_WAITS,
  pendingWaits,
  SPIN_BUDGET_PER_TURN,
  SPIN_QUERIES,
  waitForStream,
} from './wait.js';
