/**
 * A user library built on cuda-tasks: 1-D FFTs with cuFFT plus one NVRTC kernel of its own.
 * It plugs into the task runtime the way the repository's library packages do: plans come
 * from `HandleCache`s (one lease per task, bound lazily to the task's stream), every call
 * runs on the current stream, and every cuFFT call is issued through the kit's
 * `IssueEnvelope` (plan, operands, trace, call, status check).
 */
export { CufftError, check, cufftError, statusName } from './errors.js';
export { cufft, libcufftSpec } from './ffi.js';
export { type FftOptions, fft, ifft, type RfftOptions, rfft } from './fft.js';
export {
  destroyIdlePlans,
  MAX_IDLE_PLANS,
  type Plan,
  type PlanStatistics,
  planStatistics,
  type TransformType,
  version,
} from './plans.js';
export { scaleComplex } from './scale.js';
export type { BatchOption } from './validate.js';
