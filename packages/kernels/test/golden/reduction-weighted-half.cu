// @cuda-tasks/kernels reduction: x: float16, w: float16, s: float32 -> y: float32
// ct_p0: x, ct_p1: w, ct_p2: s, ct_y: y
__device__ __forceinline__ float ct_f16_to_f32(unsigned short ct_h) {
  float ct_f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(ct_f) : "h"(ct_h));
  return ct_f;
}
__device__ __forceinline__ unsigned short ct_f32_to_f16(float ct_f) {
  unsigned short ct_h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(ct_h) : "f"(ct_f));
  return ct_h;
}
__device__ __forceinline__ float ct_bf16_to_f32(unsigned short ct_h) {
  return __uint_as_float(((unsigned int)ct_h) << 16);
}
__device__ __forceinline__ unsigned short ct_f32_to_bf16(float ct_f) {
  unsigned int ct_bits = __float_as_uint(ct_f);
  if ((ct_bits & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((ct_bits >> 16) | 0x40u);
  return (unsigned short)((ct_bits + 0x7fffu + ((ct_bits >> 16) & 1u)) >> 16);
}

typedef float ct_acc;
__device__ __forceinline__ ct_acc ct_identity() { return (0); }
__device__ __forceinline__ ct_acc ct_map(const float x, const float w, const float s, const unsigned long long i) { return (x * w * s); }
__device__ __forceinline__ ct_acc ct_reduce(const ct_acc a, const ct_acc b) { return (a + b); }
__device__ __forceinline__ void ct_post(const ct_acc a, float &y, const unsigned long long n) {
y = a / n;
}

// The result of (segment, part): the output when the segment is one part, else a partial.
__device__ __forceinline__ void ct_finish(const ct_acc ct_a, float *ct_y, ct_acc *ct_partials,
    const unsigned long long ct_segment, const unsigned long long ct_part,
    const unsigned long long ct_parts, const unsigned long long ct_count) {
  if (ct_parts == 1) {
    ct_post(ct_a, ct_y[ct_segment], ct_count);
  } else {
    ct_partials[ct_segment * ct_parts + ct_part] = ct_a;
  }
}

// One 32-bit word of a warp shuffle down (width 32).
__device__ __forceinline__ unsigned int ct_shuffle_word(const unsigned int ct_word, const unsigned int ct_delta) {
  unsigned int ct_result;
  asm volatile("shfl.sync.down.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(ct_result) : "r"(ct_word), "r"(ct_delta));
  return ct_result;
}

// The accumulator of the lane ct_delta above, 32 bits at a time (any accumulator type).
__device__ __forceinline__ ct_acc ct_shuffle_down(const ct_acc ct_a, const unsigned int ct_delta) {
  union { ct_acc ct_value; unsigned int ct_words[(sizeof(ct_acc) + 3) / 4]; } ct_u;
  for (unsigned int ct_w = 0; ct_w < (sizeof(ct_acc) + 3) / 4; ct_w++) ct_u.ct_words[ct_w] = 0;
  ct_u.ct_value = ct_a;
  for (unsigned int ct_w = 0; ct_w < (sizeof(ct_acc) + 3) / 4; ct_w++) ct_u.ct_words[ct_w] = ct_shuffle_word(ct_u.ct_words[ct_w], ct_delta);
  return ct_u.ct_value;
}

// Combines the block's values (blockDim.x a multiple of 32, at most 1024) in a fixed tree:
// within each warp by shuffles, then the warps' values in warp 0. The result is thread 0's.
__device__ ct_acc ct_block_reduce(ct_acc ct_a) {
  __shared__ ct_acc ct_warps[32];
  const unsigned int ct_lane = threadIdx.x & 31, ct_warp = threadIdx.x >> 5;
  for (unsigned int ct_delta = 16; ct_delta > 0; ct_delta >>= 1) ct_a = ct_reduce(ct_a, ct_shuffle_down(ct_a, ct_delta));
  if (ct_lane == 0) ct_warps[ct_warp] = ct_a;
  __syncthreads();
  if (ct_warp == 0) {
    ct_a = ct_lane < (blockDim.x >> 5) ? ct_warps[ct_lane] : ct_identity();
    for (unsigned int ct_delta = 16; ct_delta > 0; ct_delta >>= 1) ct_a = ct_reduce(ct_a, ct_shuffle_down(ct_a, ct_delta));
  }
  __syncthreads();
  return ct_a;
}

extern "C" __global__ void ct_reduce_blocks(const unsigned short *ct_p0, const unsigned short *ct_p1, const float ct_p2, float *ct_y, ct_acc *ct_partials,
    const unsigned long long ct_length, const unsigned long long ct_segments,
    const unsigned long long ct_parts, const unsigned long long ct_chunk) {
  const unsigned long long ct_items = ct_segments * ct_parts;
  for (unsigned long long ct_w = blockIdx.x; ct_w < ct_items; ct_w += gridDim.x) {
    const unsigned long long ct_segment = ct_w / ct_parts, ct_part = ct_w - ct_segment * ct_parts;
    const unsigned long long ct_begin = ct_part * ct_chunk;
    const unsigned long long ct_end = ct_begin + ct_chunk < ct_length ? ct_begin + ct_chunk : ct_length;
    const unsigned long long ct_base = ct_segment * ct_length;
    ct_acc ct_a = ct_identity();
    unsigned long long ct_k = ct_begin + threadIdx.x;
    for (; ct_k + 7 * blockDim.x < ct_end; ct_k += 8 * blockDim.x) {
      const float ct_p0_0 = ct_f16_to_f32(ct_p0[ct_base + ct_k]), ct_p0_1 = ct_f16_to_f32(ct_p0[ct_base + (ct_k + blockDim.x)]), ct_p0_2 = ct_f16_to_f32(ct_p0[ct_base + (ct_k + 2 * blockDim.x)]), ct_p0_3 = ct_f16_to_f32(ct_p0[ct_base + (ct_k + 3 * blockDim.x)]), ct_p0_4 = ct_f16_to_f32(ct_p0[ct_base + (ct_k + 4 * blockDim.x)]), ct_p0_5 = ct_f16_to_f32(ct_p0[ct_base + (ct_k + 5 * blockDim.x)]), ct_p0_6 = ct_f16_to_f32(ct_p0[ct_base + (ct_k + 6 * blockDim.x)]), ct_p0_7 = ct_f16_to_f32(ct_p0[ct_base + (ct_k + 7 * blockDim.x)]);
      const float ct_p1_0 = ct_f16_to_f32(ct_p1[ct_base + ct_k]), ct_p1_1 = ct_f16_to_f32(ct_p1[ct_base + (ct_k + blockDim.x)]), ct_p1_2 = ct_f16_to_f32(ct_p1[ct_base + (ct_k + 2 * blockDim.x)]), ct_p1_3 = ct_f16_to_f32(ct_p1[ct_base + (ct_k + 3 * blockDim.x)]), ct_p1_4 = ct_f16_to_f32(ct_p1[ct_base + (ct_k + 4 * blockDim.x)]), ct_p1_5 = ct_f16_to_f32(ct_p1[ct_base + (ct_k + 5 * blockDim.x)]), ct_p1_6 = ct_f16_to_f32(ct_p1[ct_base + (ct_k + 6 * blockDim.x)]), ct_p1_7 = ct_f16_to_f32(ct_p1[ct_base + (ct_k + 7 * blockDim.x)]);
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_0, ct_p1_0, ct_p2, ct_k));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_1, ct_p1_1, ct_p2, ct_k + blockDim.x));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_2, ct_p1_2, ct_p2, ct_k + 2 * blockDim.x));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_3, ct_p1_3, ct_p2, ct_k + 3 * blockDim.x));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_4, ct_p1_4, ct_p2, ct_k + 4 * blockDim.x));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_5, ct_p1_5, ct_p2, ct_k + 5 * blockDim.x));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_6, ct_p1_6, ct_p2, ct_k + 6 * blockDim.x));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_7, ct_p1_7, ct_p2, ct_k + 7 * blockDim.x));
    }
    for (; ct_k < ct_end; ct_k += blockDim.x) ct_a = ct_reduce(ct_a, ct_map(ct_f16_to_f32(ct_p0[ct_base + ct_k]), ct_f16_to_f32(ct_p1[ct_base + ct_k]), ct_p2, ct_k));
    ct_a = ct_block_reduce(ct_a);
    if (threadIdx.x == 0) ct_finish(ct_a, ct_y, ct_partials, ct_segment, ct_part, ct_parts, ct_length);
  }
}

extern "C" __global__ void ct_reduce_threads(const unsigned short *ct_p0, const unsigned short *ct_p1, const float ct_p2, float *ct_y, ct_acc *ct_partials,
    const unsigned long long ct_length, const unsigned long long ct_segments,
    const unsigned long long ct_parts, const unsigned long long ct_chunk,
    const unsigned long long ct_segment_stride, const unsigned long long ct_element_stride) {
  const unsigned long long ct_items = ct_segments * ct_parts;
  const unsigned long long ct_step = (unsigned long long)blockDim.x * gridDim.x;
  for (unsigned long long ct_w = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; ct_w < ct_items; ct_w += ct_step) {
    // Segments fastest: neighbouring threads take neighbouring segments.
    const unsigned long long ct_part = ct_w / ct_segments, ct_segment = ct_w - ct_part * ct_segments;
    const unsigned long long ct_begin = ct_part * ct_chunk;
    const unsigned long long ct_end = ct_begin + ct_chunk < ct_length ? ct_begin + ct_chunk : ct_length;
    const unsigned long long ct_base = ct_segment * ct_segment_stride;
    ct_acc ct_a = ct_identity();
    unsigned long long ct_k = ct_begin;
    for (; ct_k + 7 * 1 < ct_end; ct_k += 8 * 1) {
      const float ct_p0_0 = ct_f16_to_f32(ct_p0[ct_base + (ct_k) * ct_element_stride]), ct_p0_1 = ct_f16_to_f32(ct_p0[ct_base + (ct_k + 1) * ct_element_stride]), ct_p0_2 = ct_f16_to_f32(ct_p0[ct_base + (ct_k + 2 * 1) * ct_element_stride]), ct_p0_3 = ct_f16_to_f32(ct_p0[ct_base + (ct_k + 3 * 1) * ct_element_stride]), ct_p0_4 = ct_f16_to_f32(ct_p0[ct_base + (ct_k + 4 * 1) * ct_element_stride]), ct_p0_5 = ct_f16_to_f32(ct_p0[ct_base + (ct_k + 5 * 1) * ct_element_stride]), ct_p0_6 = ct_f16_to_f32(ct_p0[ct_base + (ct_k + 6 * 1) * ct_element_stride]), ct_p0_7 = ct_f16_to_f32(ct_p0[ct_base + (ct_k + 7 * 1) * ct_element_stride]);
      const float ct_p1_0 = ct_f16_to_f32(ct_p1[ct_base + (ct_k) * ct_element_stride]), ct_p1_1 = ct_f16_to_f32(ct_p1[ct_base + (ct_k + 1) * ct_element_stride]), ct_p1_2 = ct_f16_to_f32(ct_p1[ct_base + (ct_k + 2 * 1) * ct_element_stride]), ct_p1_3 = ct_f16_to_f32(ct_p1[ct_base + (ct_k + 3 * 1) * ct_element_stride]), ct_p1_4 = ct_f16_to_f32(ct_p1[ct_base + (ct_k + 4 * 1) * ct_element_stride]), ct_p1_5 = ct_f16_to_f32(ct_p1[ct_base + (ct_k + 5 * 1) * ct_element_stride]), ct_p1_6 = ct_f16_to_f32(ct_p1[ct_base + (ct_k + 6 * 1) * ct_element_stride]), ct_p1_7 = ct_f16_to_f32(ct_p1[ct_base + (ct_k + 7 * 1) * ct_element_stride]);
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_0, ct_p1_0, ct_p2, ct_k));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_1, ct_p1_1, ct_p2, ct_k + 1));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_2, ct_p1_2, ct_p2, ct_k + 2 * 1));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_3, ct_p1_3, ct_p2, ct_k + 3 * 1));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_4, ct_p1_4, ct_p2, ct_k + 4 * 1));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_5, ct_p1_5, ct_p2, ct_k + 5 * 1));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_6, ct_p1_6, ct_p2, ct_k + 6 * 1));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_7, ct_p1_7, ct_p2, ct_k + 7 * 1));
    }
    for (; ct_k < ct_end; ct_k += 1) ct_a = ct_reduce(ct_a, ct_map(ct_f16_to_f32(ct_p0[ct_base + (ct_k) * ct_element_stride]), ct_f16_to_f32(ct_p1[ct_base + (ct_k) * ct_element_stride]), ct_p2, ct_k));
    ct_finish(ct_a, ct_y, ct_partials, ct_segment, ct_part, ct_parts, ct_length);
  }
}

extern "C" __global__ void ct_reduce_partials(const ct_acc *ct_partials, float *ct_y,
    const unsigned long long ct_length, const unsigned long long ct_segments,
    const unsigned long long ct_parts) {
  for (unsigned long long ct_segment = blockIdx.x; ct_segment < ct_segments; ct_segment += gridDim.x) {
    ct_acc ct_a = ct_identity();
    for (unsigned long long ct_q = threadIdx.x; ct_q < ct_parts; ct_q += blockDim.x) {
      ct_a = ct_reduce(ct_a, ct_partials[ct_segment * ct_parts + ct_q]);
    }
    ct_a = ct_block_reduce(ct_a);
    if (threadIdx.x == 0) ct_finish(ct_a, ct_y, (ct_acc *)0, ct_segment, 0, 1, ct_length);
  }
}
