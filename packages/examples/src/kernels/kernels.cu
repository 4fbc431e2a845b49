// Kernels shared by every implementation in the benchmark suite: the TypeScript
// runtime loads kernels.ptx (built from this file by build-ptx.sh), the C
// baseline loads the same PTX, and CuPy compiles this source with NVRTC.
// Keep the signatures in sync with those three users.

// Does nothing: measures launch overhead only.
extern "C" __global__ void empty_kernel() {}

// x[i] = sinf(x[i]) for i < n (grid-stride loop, any launch shape works).
extern "C" __global__ void sin_inplace(float* x, unsigned long long n) {
  unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    x[i] = sinf(x[i]);
  }
}

// Busy-waits `cycles` SM clock ticks (clock64) in every thread, so the kernel
// lasts about `cycles` ticks whatever the launch shape (one thread is enough).
extern "C" __global__ void spin_kernel(unsigned long long cycles) {
  long long start = clock64();
  while ((unsigned long long)(clock64() - start) < cycles) {
  }
}

// y[i] = a * x[i] + b for i < n (grid-stride loop). With n = 0 it does nothing,
// which makes it a launch-overhead kernel with several arguments.
extern "C" __global__ void axpb_f32(float* y, const float* x, float a, float b,
                                   unsigned long long n) {
  unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    y[i] = a * x[i] + b;
  }
}

// The GPU's global timer in nanoseconds: one clock for every context and process on the
// device, so that times stamped by two processes' kernels can be subtracted.
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The writer of the interprocess event benchmark (one thread): busy-waits `ns` nanoseconds of
// the global timer, writes the time it ended to flag[2] (low) and flag[3] (high), then, after
// a system-wide fence, 1 to flag[0].
extern "C" __global__ void spin_then_flag(unsigned int* flag, unsigned long long ns) {
  unsigned long long start = global_ns();
  while (global_ns() - start < ns) {
  }
  unsigned long long end = global_ns();
  flag[2] = (unsigned int)end;
  flag[3] = (unsigned int)(end >> 32);
  __threadfence_system();
  flag[0] = 1;
}

// The reader's side (one thread): out[0] (low) and out[1] (high) = the global timer when it
// ran, out[2] = flag[0] then.
extern "C" __global__ void stamp(unsigned int* out, const unsigned int* flag) {
  unsigned long long t = global_ns();
  out[0] = (unsigned int)t;
  out[1] = (unsigned int)(t >> 32);
  out[2] = flag[0];
}
