import { describe } from 'vitest';

/** True where the vitest config's probe found a CUDA device. */
export const gpuAvailable = process.env.CUDA_TASKS_GPU === '1';

/**
 * True when the suite runs under compute-sanitizer (sanitize.sh sets CUDA_TASKS_SANITIZER=1),
 * which instruments every kernel: tests shrink their sizes or lengthen their timeouts.
 */
export const underSanitizer = process.env.CUDA_TASKS_SANITIZER === '1';

/** `describe` for GPU suites: runs where a device answers, skipped (with the config's one-line notice) elsewhere. */
export const describeGpu = describe.runIf(gpuAvailable);
