import { fileURLToPath } from 'node:url';

/** `kernels.ptx` (built from `kernels.cu` by `build-ptx.sh`): the kernels the seed, the service and the benchmarks load. */
export const kernelsPtxPath = fileURLToPath(new URL('./kernels.ptx', import.meta.url));

/** `kernels.cu`, the CUDA C source of `kernels.ptx` (the Python peers compile it with NVRTC). */
export const kernelsSourcePath = fileURLToPath(new URL('./kernels.cu', import.meta.url));
