/**
 * names.gpu.test.ts on the CPU: @cuda-tasks/testing's doubles of libcuda and NVRTC compile the
 * generated kernels with the host's C++ compiler and run their blocks as fibers, so that the
 * suite's checks against its CPU references run wherever the tests do, CI included. The GPU
 * run stays the test of record (the device's own arithmetic and scheduling are not here).
 */
import { useCpuCuda } from '@cuda-tasks/testing/native';

if (await useCpuCuda('names.gpu.test.ts')) await import('./names.gpu.test.js');
