import { describe } from 'vitest';

/** True where the vitest config's probe found a CUDA device. */
export const gpuAvailable = process.env.CUDA_TASKS_GPU === '1';

/** `describe` for GPU suites: runs where a device answers, skipped (with the config's one-line notice) elsewhere. */
export const describeGpu = describe.runIf(gpuAvailable);
