/**
 * The CPU doubles of libcuda and NVRTC (native.ts): kernels compiled by the host's C++
 * compiler, run as one fiber per thread. What the GPU suites run on them rests on these.
 */
import { describe, expect, it } from 'vitest';
import { useCpuCuda } from './native.js';

const usable = await useCpuCuda('the CPU doubles');
const { DeviceArray, Module, launch, CompileError } = await import('@cuda-tasks/cudadrv');

describe.runIf(usable)('CUDA C on the CPU doubles', () => {
  it('gives every thread its own indices in a 3-D grid of 3-D blocks', async () => {
    const module = Module.compile(`
extern "C" __global__ void where(unsigned int *out) {
  const unsigned int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned int threads = blockDim.x * blockDim.y * blockDim.z;
  out[block * threads + thread] = block * 1000 + thread;
}`);
    const kernel = module.kernel('where', ['uint32*']);
    const out = DeviceArray.zeros('uint32', 2 * 3 * 2 * (4 * 2 * 3));
    launch(kernel, { grid: [2, 3, 2], block: [4, 2, 3] }, out);
    const got = Array.from(await out.toHost());
    const expected = Array.from(
      { length: 12 * 24 },
      (_, i) => Math.floor(i / 24) * 1000 + (i % 24),
    );
    expect(got).toEqual(expected);
    module.dispose();
  });

  it('__syncthreads orders shared memory, and its _or / _and / _count forms vote', async () => {
    const module = Module.compile(`
extern "C" __global__ void votes(const int *flags, int *out) {
  __shared__ int cells[64];
  const unsigned int t = threadIdx.x;
  cells[t] = flags[blockIdx.x * 64 + t];
  __syncthreads();
  // Every thread reads its neighbour's cell, written before the barrier.
  const int neighbour = cells[(t + 1) % 64];
  const int any = __syncthreads_or(cells[t]);
  const int all = __syncthreads_and(cells[t]);
  const int count = __syncthreads_count(cells[t]);
  if (t == 0) {
    out[blockIdx.x * 4] = any;
    out[blockIdx.x * 4 + 1] = all;
    out[blockIdx.x * 4 + 2] = count;
  }
  if (t == 63) out[blockIdx.x * 4 + 3] = neighbour;
}`);
    const kernel = module.kernel('votes', ['const int32*', 'int32*']);
    const flags = new Int32Array(3 * 64);
    flags.fill(1, 64, 128); // block 1: all set
    for (const i of [128 + 0, 128 + 5, 128 + 63]) flags[i] = 1; // block 2: three set
    const out = DeviceArray.zeros('int32', 12);
    launch(kernel, { grid: 3, block: 64 }, DeviceArray.fromHost(flags), out);
    expect(Array.from(await out.toHost())).toEqual([0, 0, 0, 0, 1, 1, 64, 1, 1, 0, 3, 1]);
    module.dispose();
  });

  it('a warp shuffle down reads lane + delta, and its own word past the warp', async () => {
    const module = Module.compile(`
extern "C" __global__ void shuffle(unsigned int *out, unsigned int delta) {
  unsigned int ct_word = threadIdx.x * 10, ct_delta = delta, ct_result;
  asm volatile("shfl.sync.down.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(ct_result) : "r"(ct_word), "r"(ct_delta));
  out[threadIdx.x] = ct_result;
}`);
    const kernel = module.kernel('shuffle', ['uint32*', 'uint32']);
    const out = DeviceArray.zeros('uint32', 64);
    launch(kernel, { grid: 1, block: 64 }, out, 3);
    const expected = Array.from({ length: 64 }, (_, t) => ((t % 32) + 3 < 32 ? t + 3 : t) * 10);
    expect(Array.from(await out.toHost())).toEqual(expected);
    module.dispose();
  });

  it('a barrier that some threads never reach fails the launch, as it would hang on a GPU', () => {
    const module = Module.compile(`
extern "C" __global__ void diverges(int *out) {
  if (threadIdx.x == 0) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}`);
    const kernel = module.kernel('diverges', ['int32*']);
    const out = DeviceArray.zeros('int32', 32);
    let thrown: unknown;
    try {
      launch(kernel, { grid: 1, block: 32 }, out);
    } catch (error) {
      thrown = error;
    }
    // CUDA_ERROR_LAUNCH_FAILED, from the launch itself.
    expect((thrown as { code?: number }).code).toBe(719);
    expect((thrown as { call?: string }).call).toMatch(/^cuLaunchKernel/);
    module.dispose();
  });

  it('inline PTX it does not emulate is a compile error that says so', () => {
    let thrown: unknown;
    try {
      Module.compile(`
extern "C" __global__ void clock(unsigned long long *out) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  out[0] = t;
}`);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(CompileError);
    expect(String((thrown as Error).message)).toMatch(/inline PTX that is not emulated/);
  });

  it('a C++ error in the source is a compile error with the compiler log', () => {
    expect(() => Module.compile('extern "C" __global__ void broken(int *x) { x[0] = y; }')).toThrow(
      /y.*was not declared|undeclared/,
    );
  });
});
