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

  it('__shfl_sync and its up / down / xor forms read the lane CUDA names; __ballot_sync votes per warp', async () => {
    const module = Module.compile(`
extern "C" __global__ void lanes(double *moved, unsigned int *votes, const int *flags) {
  const unsigned int t = threadIdx.x, lane = t & 31;
  const double mine = t * 1.5 + 0.25;
  moved[t * 4] = __shfl_sync(0xffffffffu, mine, (int)(lane * 7 + 3));
  moved[t * 4 + 1] = __shfl_up_sync(0xffffffffu, mine, 5);
  moved[t * 4 + 2] = (double)__shfl_down_sync(0xffffffffu, (float)mine, 6);
  moved[t * 4 + 3] = (double)__shfl_xor_sync(0xffffffffu, (int)t, 9);
  if (flags[t] < 0) return; // these lanes end before the vote
  const unsigned int vote = __ballot_sync(__activemask(), flags[t] > 0);
  votes[t * 2] = vote;
  votes[t * 2 + 1] = (unsigned int)(__popc(vote) * 100 + __ffs((int)vote));
}`);
    const kernel = module.kernel('lanes', ['float64*', 'uint32*', 'const int32*']);
    const threads = 64;
    const flags = Int32Array.from({ length: threads }, (_, t) =>
      t % 3 === 0 ? 1 : t % 5 === 0 ? -1 : 0,
    );
    const moved = DeviceArray.zeros('float64', threads * 4);
    const votes = DeviceArray.zeros('uint32', threads * 2);
    launch(kernel, { grid: 1, block: threads }, moved, votes, DeviceArray.fromHost(flags));
    const value = (t: number) => t * 1.5 + 0.25;
    const expected: number[] = [];
    for (let t = 0; t < threads; t++) {
      const base = t - (t % 32);
      const lane = t % 32;
      expected.push(value(base + ((lane * 7 + 3) % 32)));
      expected.push(value(lane >= 5 ? t - 5 : t));
      expected.push(Math.fround(value(lane + 6 < 32 ? t + 6 : t)));
      expected.push(base + (lane ^ 9));
    }
    expect(Array.from(await moved.toHost())).toEqual(expected);
    const expectedVotes = Array.from({ length: threads }, (_, t) => {
      if (flags[t]! < 0) return [0, 0];
      const lanes = Array.from({ length: 32 }, (_, l) => flags[t - (t % 32) + l]! > 0);
      const mask = lanes.reduce((m, set, l) => (set ? m | (1 << l) : m), 0) >>> 0;
      const count = lanes.filter(Boolean).length;
      return [mask, count * 100 + lanes.indexOf(true) + 1];
    }).flat();
    expect(Array.from(await votes.toHost())).toEqual(expectedVotes);
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
