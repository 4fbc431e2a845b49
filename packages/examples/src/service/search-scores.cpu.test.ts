/**
 * search-scores.gpu.test.ts on the CPU: @cuda-tasks/testing's doubles of libcuda and NVRTC
 * compile the search batch kernel with the host's C++ compiler and run its blocks as fibers, so
 * that its checks against float64 dot products run wherever the tests do, CI included. The GPU
 * run stays the test of record.
 */
import { useCpuCuda } from '@cuda-tasks/testing/native';

if (await useCpuCuda('search-scores.gpu.test.ts')) await import('./search-scores.gpu.test.js');
