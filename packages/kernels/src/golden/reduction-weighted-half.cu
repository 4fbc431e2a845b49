// @cuda-tasks/kernels reduction: x: float16, w: float16, s: float32 -> y: float32
__device__ __forceinline__ float ct_f16_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ unsigned short ct_f32_to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ float ct_bf16_to_f32(unsigned short h) {
  return __uint_as_float(((unsigned int)h) << 16);
}
__device__ __forceinline__ unsigned short ct_f32_to_bf16(float f) {
  unsigned int x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

typedef float ct_acc;
__device__ __forceinline__ ct_acc ct_identity() { return (0); }
__device__ __forceinline__ ct_acc ct_map(const float x, const float w, const float s, const unsigned long long i) { return (x * w * s); }
__device__ __forceinline__ ct_acc ct_reduce(const ct_acc a, const ct_acc b) { return (a + b); }
__device__ __forceinline__ void ct_post(const ct_acc a, float &y, const unsigned long long n) {
y = a / n;
}

// The result of (segment s, part p): the output when the segment is one part, else a partial.
__device__ __forceinline__ void ct_finish(const ct_acc a, float *ct_y, ct_acc *ct_partials,
    const unsigned long long s, const unsigned long long p, const unsigned long long parts,
    const unsigned long long count) {
  if (parts == 1) {
    ct_post(a, ct_y[s], count);
  } else {
    ct_partials[s * parts + p] = a;
  }
}

// One 32-bit word of a warp shuffle down (width 32).
__device__ __forceinline__ unsigned int ct_shuffle_word(const unsigned int w, const unsigned int d) {
  unsigned int r;
  asm volatile("shfl.sync.down.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(w), "r"(d));
  return r;
}

// The accumulator of the lane d above, 32 bits at a time (any accumulator type).
__device__ __forceinline__ ct_acc ct_shuffle_down(const ct_acc a, const unsigned int d) {
  union { ct_acc value; unsigned int words[(sizeof(ct_acc) + 3) / 4]; } u;
  for (unsigned int w = 0; w < (sizeof(ct_acc) + 3) / 4; w++) u.words[w] = 0;
  u.value = a;
  for (unsigned int w = 0; w < (sizeof(ct_acc) + 3) / 4; w++) u.words[w] = ct_shuffle_word(u.words[w], d);
  return u.value;
}

// Combines the block's values (blockDim.x a multiple of 32, at most 1024) in a fixed tree:
// within each warp by shuffles, then the warps' values in warp 0. The result is thread 0's.
__device__ ct_acc ct_block_reduce(ct_acc a) {
  __shared__ ct_acc ct_warps[32];
  const unsigned int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (unsigned int d = 16; d > 0; d >>= 1) a = ct_reduce(a, ct_shuffle_down(a, d));
  if (lane == 0) ct_warps[warp] = a;
  __syncthreads();
  if (warp == 0) {
    a = lane < (blockDim.x >> 5) ? ct_warps[lane] : ct_identity();
    for (unsigned int d = 16; d > 0; d >>= 1) a = ct_reduce(a, ct_shuffle_down(a, d));
  }
  __syncthreads();
  return a;
}

extern "C" __global__ void ct_reduce_blocks(const unsigned short *ct_x, const unsigned short *ct_w, const float ct_s, float *ct_y, ct_acc *ct_partials,
    const unsigned long long length, const unsigned long long segments,
    const unsigned long long parts, const unsigned long long chunk) {
  const unsigned long long items = segments * parts;
  for (unsigned long long w = blockIdx.x; w < items; w += gridDim.x) {
    const unsigned long long s = w / parts, p = w - s * parts;
    const unsigned long long begin = p * chunk;
    const unsigned long long end = begin + chunk < length ? begin + chunk : length;
    const unsigned long long base = s * length;
    ct_acc a = ct_identity();
    unsigned long long k = begin + threadIdx.x;
    for (; k + 7 * blockDim.x < end; k += 8 * blockDim.x) {
      const float ct_x_0 = ct_f16_to_f32(ct_x[base + k]), ct_x_1 = ct_f16_to_f32(ct_x[base + (k + blockDim.x)]), ct_x_2 = ct_f16_to_f32(ct_x[base + (k + 2 * blockDim.x)]), ct_x_3 = ct_f16_to_f32(ct_x[base + (k + 3 * blockDim.x)]), ct_x_4 = ct_f16_to_f32(ct_x[base + (k + 4 * blockDim.x)]), ct_x_5 = ct_f16_to_f32(ct_x[base + (k + 5 * blockDim.x)]), ct_x_6 = ct_f16_to_f32(ct_x[base + (k + 6 * blockDim.x)]), ct_x_7 = ct_f16_to_f32(ct_x[base + (k + 7 * blockDim.x)]);
      const float ct_w_0 = ct_f16_to_f32(ct_w[base + k]), ct_w_1 = ct_f16_to_f32(ct_w[base + (k + blockDim.x)]), ct_w_2 = ct_f16_to_f32(ct_w[base + (k + 2 * blockDim.x)]), ct_w_3 = ct_f16_to_f32(ct_w[base + (k + 3 * blockDim.x)]), ct_w_4 = ct_f16_to_f32(ct_w[base + (k + 4 * blockDim.x)]), ct_w_5 = ct_f16_to_f32(ct_w[base + (k + 5 * blockDim.x)]), ct_w_6 = ct_f16_to_f32(ct_w[base + (k + 6 * blockDim.x)]), ct_w_7 = ct_f16_to_f32(ct_w[base + (k + 7 * blockDim.x)]);
      a = ct_reduce(a, ct_map(ct_x_0, ct_w_0, ct_s, k));
      a = ct_reduce(a, ct_map(ct_x_1, ct_w_1, ct_s, k + blockDim.x));
      a = ct_reduce(a, ct_map(ct_x_2, ct_w_2, ct_s, k + 2 * blockDim.x));
      a = ct_reduce(a, ct_map(ct_x_3, ct_w_3, ct_s, k + 3 * blockDim.x));
      a = ct_reduce(a, ct_map(ct_x_4, ct_w_4, ct_s, k + 4 * blockDim.x));
      a = ct_reduce(a, ct_map(ct_x_5, ct_w_5, ct_s, k + 5 * blockDim.x));
      a = ct_reduce(a, ct_map(ct_x_6, ct_w_6, ct_s, k + 6 * blockDim.x));
      a = ct_reduce(a, ct_map(ct_x_7, ct_w_7, ct_s, k + 7 * blockDim.x));
    }
    for (; k < end; k += blockDim.x) a = ct_reduce(a, ct_map(ct_f16_to_f32(ct_x[base + k]), ct_f16_to_f32(ct_w[base + k]), ct_s, k));
    a = ct_block_reduce(a);
    if (threadIdx.x == 0) ct_finish(a, ct_y, ct_partials, s, p, parts, length);
  }
}

extern "C" __global__ void ct_reduce_threads(const unsigned short *ct_x, const unsigned short *ct_w, const float ct_s, float *ct_y, ct_acc *ct_partials,
    const unsigned long long length, const unsigned long long segments,
    const unsigned long long parts, const unsigned long long chunk,
    const unsigned long long segment_stride, const unsigned long long element_stride) {
  const unsigned long long items = segments * parts;
  const unsigned long long step = (unsigned long long)blockDim.x * gridDim.x;
  for (unsigned long long w = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; w < items; w += step) {
    // Segments fastest: neighbouring threads take neighbouring segments.
    const unsigned long long p = w / segments, s = w - p * segments;
    const unsigned long long begin = p * chunk;
    const unsigned long long end = begin + chunk < length ? begin + chunk : length;
    const unsigned long long base = s * segment_stride;
    ct_acc a = ct_identity();
    unsigned long long k = begin;
    for (; k + 7 * 1 < end; k += 8 * 1) {
      const float ct_x_0 = ct_f16_to_f32(ct_x[base + (k) * element_stride]), ct_x_1 = ct_f16_to_f32(ct_x[base + (k + 1) * element_stride]), ct_x_2 = ct_f16_to_f32(ct_x[base + (k + 2 * 1) * element_stride]), ct_x_3 = ct_f16_to_f32(ct_x[base + (k + 3 * 1) * element_stride]), ct_x_4 = ct_f16_to_f32(ct_x[base + (k + 4 * 1) * element_stride]), ct_x_5 = ct_f16_to_f32(ct_x[base + (k + 5 * 1) * element_stride]), ct_x_6 = ct_f16_to_f32(ct_x[base + (k + 6 * 1) * element_stride]), ct_x_7 = ct_f16_to_f32(ct_x[base + (k + 7 * 1) * element_stride]);
      const float ct_w_0 = ct_f16_to_f32(ct_w[base + (k) * element_stride]), ct_w_1 = ct_f16_to_f32(ct_w[base + (k + 1) * element_stride]), ct_w_2 = ct_f16_to_f32(ct_w[base + (k + 2 * 1) * element_stride]), ct_w_3 = ct_f16_to_f32(ct_w[base + (k + 3 * 1) * element_stride]), ct_w_4 = ct_f16_to_f32(ct_w[base + (k + 4 * 1) * element_stride]), ct_w_5 = ct_f16_to_f32(ct_w[base + (k + 5 * 1) * element_stride]), ct_w_6 = ct_f16_to_f32(ct_w[base + (k + 6 * 1) * element_stride]), ct_w_7 = ct_f16_to_f32(ct_w[base + (k + 7 * 1) * element_stride]);
      a = ct_reduce(a, ct_map(ct_x_0, ct_w_0, ct_s, k));
      a = ct_reduce(a, ct_map(ct_x_1, ct_w_1, ct_s, k + 1));
      a = ct_reduce(a, ct_map(ct_x_2, ct_w_2, ct_s, k + 2 * 1));
      a = ct_reduce(a, ct_map(ct_x_3, ct_w_3, ct_s, k + 3 * 1));
      a = ct_reduce(a, ct_map(ct_x_4, ct_w_4, ct_s, k + 4 * 1));
      a = ct_reduce(a, ct_map(ct_x_5, ct_w_5, ct_s, k + 5 * 1));
      a = ct_reduce(a, ct_map(ct_x_6, ct_w_6, ct_s, k + 6 * 1));
      a = ct_reduce(a, ct_map(ct_x_7, ct_w_7, ct_s, k + 7 * 1));
    }
    for (; k < end; k += 1) a = ct_reduce(a, ct_map(ct_f16_to_f32(ct_x[base + (k) * element_stride]), ct_f16_to_f32(ct_w[base + (k) * element_stride]), ct_s, k));
    ct_finish(a, ct_y, ct_partials, s, p, parts, length);
  }
}

extern "C" __global__ void ct_reduce_partials(const ct_acc *ct_partials, float *ct_y,
    const unsigned long long length, const unsigned long long segments,
    const unsigned long long parts) {
  for (unsigned long long s = blockIdx.x; s < segments; s += gridDim.x) {
    ct_acc a = ct_identity();
    for (unsigned long long q = threadIdx.x; q < parts; q += blockDim.x) {
      a = ct_reduce(a, ct_partials[s * parts + q]);
    }
    a = ct_block_reduce(a);
    if (threadIdx.x == 0) ct_finish(a, ct_y, (ct_acc *)0, s, 0, 1, length);
  }
}
