// @cuda-tasks/kernels reduction: x: float32 -> y: float32
// ct_p0: x, ct_y: y
typedef double ct_acc;
__device__ __forceinline__ ct_acc ct_identity() { return (0); }
__device__ __forceinline__ ct_acc ct_map(const float x, const unsigned long long i) { return ((double)x); }
__device__ __forceinline__ ct_acc ct_reduce(const ct_acc a, const ct_acc b) { return (a + b); }
__device__ __forceinline__ void ct_post(const ct_acc a, float &y, const unsigned long long n) {
y = (float)a;
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

extern "C" __global__ void ct_reduce_blocks(const float *ct_p0, float *ct_y, ct_acc *ct_partials,
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
      const float ct_p0_0 = ct_p0[ct_base + ct_k], ct_p0_1 = ct_p0[ct_base + (ct_k + blockDim.x)], ct_p0_2 = ct_p0[ct_base + (ct_k + 2 * blockDim.x)], ct_p0_3 = ct_p0[ct_base + (ct_k + 3 * blockDim.x)], ct_p0_4 = ct_p0[ct_base + (ct_k + 4 * blockDim.x)], ct_p0_5 = ct_p0[ct_base + (ct_k + 5 * blockDim.x)], ct_p0_6 = ct_p0[ct_base + (ct_k + 6 * blockDim.x)], ct_p0_7 = ct_p0[ct_base + (ct_k + 7 * blockDim.x)];
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_0, ct_k));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_1, ct_k + blockDim.x));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_2, ct_k + 2 * blockDim.x));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_3, ct_k + 3 * blockDim.x));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_4, ct_k + 4 * blockDim.x));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_5, ct_k + 5 * blockDim.x));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_6, ct_k + 6 * blockDim.x));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_7, ct_k + 7 * blockDim.x));
    }
    for (; ct_k < ct_end; ct_k += blockDim.x) ct_a = ct_reduce(ct_a, ct_map(ct_p0[ct_base + ct_k], ct_k));
    ct_a = ct_block_reduce(ct_a);
    if (threadIdx.x == 0) ct_finish(ct_a, ct_y, ct_partials, ct_segment, ct_part, ct_parts, ct_length);
  }
}

extern "C" __global__ void ct_reduce_threads(const float *ct_p0, float *ct_y, ct_acc *ct_partials,
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
      const float ct_p0_0 = ct_p0[ct_base + (ct_k) * ct_element_stride], ct_p0_1 = ct_p0[ct_base + (ct_k + 1) * ct_element_stride], ct_p0_2 = ct_p0[ct_base + (ct_k + 2 * 1) * ct_element_stride], ct_p0_3 = ct_p0[ct_base + (ct_k + 3 * 1) * ct_element_stride], ct_p0_4 = ct_p0[ct_base + (ct_k + 4 * 1) * ct_element_stride], ct_p0_5 = ct_p0[ct_base + (ct_k + 5 * 1) * ct_element_stride], ct_p0_6 = ct_p0[ct_base + (ct_k + 6 * 1) * ct_element_stride], ct_p0_7 = ct_p0[ct_base + (ct_k + 7 * 1) * ct_element_stride];
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_0, ct_k));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_1, ct_k + 1));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_2, ct_k + 2 * 1));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_3, ct_k + 3 * 1));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_4, ct_k + 4 * 1));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_5, ct_k + 5 * 1));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_6, ct_k + 6 * 1));
      ct_a = ct_reduce(ct_a, ct_map(ct_p0_7, ct_k + 7 * 1));
    }
    for (; ct_k < ct_end; ct_k += 1) ct_a = ct_reduce(ct_a, ct_map(ct_p0[ct_base + (ct_k) * ct_element_stride], ct_k));
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

// 16 bytes of float: one vector load.
struct alignas(16) ct_vector { float ct_lane[4]; };

extern "C" __global__ void ct_reduce_vectors(const float *__restrict__ ct_p0, float *ct_y,
    ct_acc *ct_partials, const unsigned long long ct_length, const unsigned long long ct_head) {
  const unsigned long long ct_vector_count = (ct_length - ct_head) / 4;
  const ct_vector *__restrict__ ct_vectors = (const ct_vector *)(ct_p0 + ct_head);
  const unsigned long long ct_tile = (unsigned long long)blockDim.x * 4;
  const unsigned long long ct_step = ct_tile * gridDim.x;
  ct_acc ct_a0 = ct_identity(), ct_a1 = ct_identity(), ct_a2 = ct_identity(), ct_a3 = ct_identity();
  unsigned long long ct_k = blockIdx.x * ct_tile + threadIdx.x;
  for (; ct_k + 3 * blockDim.x < ct_vector_count; ct_k += ct_step) {
    const ct_vector ct_v0 = ct_vectors[ct_k], ct_v1 = ct_vectors[ct_k + blockDim.x], ct_v2 = ct_vectors[ct_k + 2 * blockDim.x], ct_v3 = ct_vectors[ct_k + 3 * blockDim.x];
    ct_a0 = ct_reduce(ct_a0, ct_map(ct_v0.ct_lane[0], ct_head + 4 * ct_k));
    ct_a0 = ct_reduce(ct_a0, ct_map(ct_v0.ct_lane[1], ct_head + 4 * ct_k + 1));
    ct_a0 = ct_reduce(ct_a0, ct_map(ct_v0.ct_lane[2], ct_head + 4 * ct_k + 2));
    ct_a0 = ct_reduce(ct_a0, ct_map(ct_v0.ct_lane[3], ct_head + 4 * ct_k + 3));
    ct_a1 = ct_reduce(ct_a1, ct_map(ct_v1.ct_lane[0], ct_head + 4 * (ct_k + blockDim.x)));
    ct_a1 = ct_reduce(ct_a1, ct_map(ct_v1.ct_lane[1], ct_head + 4 * (ct_k + blockDim.x) + 1));
    ct_a1 = ct_reduce(ct_a1, ct_map(ct_v1.ct_lane[2], ct_head + 4 * (ct_k + blockDim.x) + 2));
    ct_a1 = ct_reduce(ct_a1, ct_map(ct_v1.ct_lane[3], ct_head + 4 * (ct_k + blockDim.x) + 3));
    ct_a2 = ct_reduce(ct_a2, ct_map(ct_v2.ct_lane[0], ct_head + 4 * (ct_k + 2 * blockDim.x)));
    ct_a2 = ct_reduce(ct_a2, ct_map(ct_v2.ct_lane[1], ct_head + 4 * (ct_k + 2 * blockDim.x) + 1));
    ct_a2 = ct_reduce(ct_a2, ct_map(ct_v2.ct_lane[2], ct_head + 4 * (ct_k + 2 * blockDim.x) + 2));
    ct_a2 = ct_reduce(ct_a2, ct_map(ct_v2.ct_lane[3], ct_head + 4 * (ct_k + 2 * blockDim.x) + 3));
    ct_a3 = ct_reduce(ct_a3, ct_map(ct_v3.ct_lane[0], ct_head + 4 * (ct_k + 3 * blockDim.x)));
    ct_a3 = ct_reduce(ct_a3, ct_map(ct_v3.ct_lane[1], ct_head + 4 * (ct_k + 3 * blockDim.x) + 1));
    ct_a3 = ct_reduce(ct_a3, ct_map(ct_v3.ct_lane[2], ct_head + 4 * (ct_k + 3 * blockDim.x) + 2));
    ct_a3 = ct_reduce(ct_a3, ct_map(ct_v3.ct_lane[3], ct_head + 4 * (ct_k + 3 * blockDim.x) + 3));
  }
  // The last tile, when it is not whole (its block only).
  for (; ct_k < ct_vector_count; ct_k += blockDim.x) {
    const ct_vector ct_v0 = ct_vectors[ct_k];
    ct_a0 = ct_reduce(ct_a0, ct_map(ct_v0.ct_lane[0], ct_head + 4 * ct_k));
    ct_a0 = ct_reduce(ct_a0, ct_map(ct_v0.ct_lane[1], ct_head + 4 * ct_k + 1));
    ct_a0 = ct_reduce(ct_a0, ct_map(ct_v0.ct_lane[2], ct_head + 4 * ct_k + 2));
    ct_a0 = ct_reduce(ct_a0, ct_map(ct_v0.ct_lane[3], ct_head + 4 * ct_k + 3));
  }
  // The elements before the first vector and after the last: one each for the first threads.
  const unsigned long long ct_thread = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned long long ct_tail = ct_head + 4 * ct_vector_count;
  if (ct_thread < ct_head) ct_a1 = ct_reduce(ct_a1, ct_map(ct_p0[ct_thread], ct_thread));
  if (ct_thread < ct_length - ct_tail) ct_a2 = ct_reduce(ct_a2, ct_map(ct_p0[ct_tail + ct_thread], ct_tail + ct_thread));
  ct_acc ct_a = ct_reduce(ct_reduce(ct_a0, ct_a1), ct_reduce(ct_a2, ct_a3));
  ct_a = ct_block_reduce(ct_a);
  if (threadIdx.x == 0) ct_finish(ct_a, ct_y, ct_partials, 0, blockIdx.x, gridDim.x, ct_length);
}
