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
