// @cuda-tasks/kernels reduction: x: float32 -> y: float32
typedef double ct_acc;
__device__ __forceinline__ ct_acc ct_identity() { return (0); }
__device__ __forceinline__ ct_acc ct_map(const float x, const unsigned long long i) { return ((double)x); }
__device__ __forceinline__ ct_acc ct_reduce(const ct_acc a, const ct_acc b) { return (a + b); }
__device__ __forceinline__ void ct_post(const ct_acc a, float &y, const unsigned long long n) {
y = (float)a;
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

extern "C" __global__ void ct_reduce_blocks(const float *ct_x, float *ct_y, ct_acc *ct_partials,
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
      const float ct_x_0 = ct_x[base + k], ct_x_1 = ct_x[base + (k + blockDim.x)], ct_x_2 = ct_x[base + (k + 2 * blockDim.x)], ct_x_3 = ct_x[base + (k + 3 * blockDim.x)], ct_x_4 = ct_x[base + (k + 4 * blockDim.x)], ct_x_5 = ct_x[base + (k + 5 * blockDim.x)], ct_x_6 = ct_x[base + (k + 6 * blockDim.x)], ct_x_7 = ct_x[base + (k + 7 * blockDim.x)];
      a = ct_reduce(a, ct_map(ct_x_0, k));
      a = ct_reduce(a, ct_map(ct_x_1, k + blockDim.x));
      a = ct_reduce(a, ct_map(ct_x_2, k + 2 * blockDim.x));
      a = ct_reduce(a, ct_map(ct_x_3, k + 3 * blockDim.x));
      a = ct_reduce(a, ct_map(ct_x_4, k + 4 * blockDim.x));
      a = ct_reduce(a, ct_map(ct_x_5, k + 5 * blockDim.x));
      a = ct_reduce(a, ct_map(ct_x_6, k + 6 * blockDim.x));
      a = ct_reduce(a, ct_map(ct_x_7, k + 7 * blockDim.x));
    }
    for (; k < end; k += blockDim.x) a = ct_reduce(a, ct_map(ct_x[base + k], k));
    a = ct_block_reduce(a);
    if (threadIdx.x == 0) ct_finish(a, ct_y, ct_partials, s, p, parts, length);
  }
}

extern "C" __global__ void ct_reduce_threads(const float *ct_x, float *ct_y, ct_acc *ct_partials,
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
      const float ct_x_0 = ct_x[base + (k) * element_stride], ct_x_1 = ct_x[base + (k + 1) * element_stride], ct_x_2 = ct_x[base + (k + 2 * 1) * element_stride], ct_x_3 = ct_x[base + (k + 3 * 1) * element_stride], ct_x_4 = ct_x[base + (k + 4 * 1) * element_stride], ct_x_5 = ct_x[base + (k + 5 * 1) * element_stride], ct_x_6 = ct_x[base + (k + 6 * 1) * element_stride], ct_x_7 = ct_x[base + (k + 7 * 1) * element_stride];
      a = ct_reduce(a, ct_map(ct_x_0, k));
      a = ct_reduce(a, ct_map(ct_x_1, k + 1));
      a = ct_reduce(a, ct_map(ct_x_2, k + 2 * 1));
      a = ct_reduce(a, ct_map(ct_x_3, k + 3 * 1));
      a = ct_reduce(a, ct_map(ct_x_4, k + 4 * 1));
      a = ct_reduce(a, ct_map(ct_x_5, k + 5 * 1));
      a = ct_reduce(a, ct_map(ct_x_6, k + 6 * 1));
      a = ct_reduce(a, ct_map(ct_x_7, k + 7 * 1));
    }
    for (; k < end; k += 1) a = ct_reduce(a, ct_map(ct_x[base + (k) * element_stride], k));
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

// 16 bytes of float: one vector load.
struct alignas(16) ct_vector { float lane[4]; };

extern "C" __global__ void ct_reduce_vectors(const float *__restrict__ ct_x, float *ct_y,
    ct_acc *ct_partials, const unsigned long long length, const unsigned long long head) {
  const unsigned long long vectors = (length - head) / 4;
  const ct_vector *__restrict__ ct_vectors = (const ct_vector *)(ct_x + head);
  const unsigned long long tile = (unsigned long long)blockDim.x * 4;
  const unsigned long long step = tile * gridDim.x;
  ct_acc a0 = ct_identity(), a1 = ct_identity(), a2 = ct_identity(), a3 = ct_identity();
  unsigned long long k = blockIdx.x * tile + threadIdx.x;
  for (; k + 3 * blockDim.x < vectors; k += step) {
    const ct_vector v0 = ct_vectors[k], v1 = ct_vectors[k + blockDim.x], v2 = ct_vectors[k + 2 * blockDim.x], v3 = ct_vectors[k + 3 * blockDim.x];
    a0 = ct_reduce(a0, ct_map(v0.lane[0], head + 4 * k));
    a0 = ct_reduce(a0, ct_map(v0.lane[1], head + 4 * k + 1));
    a0 = ct_reduce(a0, ct_map(v0.lane[2], head + 4 * k + 2));
    a0 = ct_reduce(a0, ct_map(v0.lane[3], head + 4 * k + 3));
    a1 = ct_reduce(a1, ct_map(v1.lane[0], head + 4 * (k + blockDim.x)));
    a1 = ct_reduce(a1, ct_map(v1.lane[1], head + 4 * (k + blockDim.x) + 1));
    a1 = ct_reduce(a1, ct_map(v1.lane[2], head + 4 * (k + blockDim.x) + 2));
    a1 = ct_reduce(a1, ct_map(v1.lane[3], head + 4 * (k + blockDim.x) + 3));
    a2 = ct_reduce(a2, ct_map(v2.lane[0], head + 4 * (k + 2 * blockDim.x)));
    a2 = ct_reduce(a2, ct_map(v2.lane[1], head + 4 * (k + 2 * blockDim.x) + 1));
    a2 = ct_reduce(a2, ct_map(v2.lane[2], head + 4 * (k + 2 * blockDim.x) + 2));
    a2 = ct_reduce(a2, ct_map(v2.lane[3], head + 4 * (k + 2 * blockDim.x) + 3));
    a3 = ct_reduce(a3, ct_map(v3.lane[0], head + 4 * (k + 3 * blockDim.x)));
    a3 = ct_reduce(a3, ct_map(v3.lane[1], head + 4 * (k + 3 * blockDim.x) + 1));
    a3 = ct_reduce(a3, ct_map(v3.lane[2], head + 4 * (k + 3 * blockDim.x) + 2));
    a3 = ct_reduce(a3, ct_map(v3.lane[3], head + 4 * (k + 3 * blockDim.x) + 3));
  }
  // The last tile, when it is not whole (its block only).
  for (; k < vectors; k += blockDim.x) {
    const ct_vector v0 = ct_vectors[k];
    a0 = ct_reduce(a0, ct_map(v0.lane[0], head + 4 * k));
    a0 = ct_reduce(a0, ct_map(v0.lane[1], head + 4 * k + 1));
    a0 = ct_reduce(a0, ct_map(v0.lane[2], head + 4 * k + 2));
    a0 = ct_reduce(a0, ct_map(v0.lane[3], head + 4 * k + 3));
  }
  // The elements before the first vector and after the last: one each for the first threads.
  const unsigned long long thread = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned long long tail = head + 4 * vectors;
  if (thread < head) a1 = ct_reduce(a1, ct_map(ct_x[thread], thread));
  if (thread < length - tail) a2 = ct_reduce(a2, ct_map(ct_x[tail + thread], tail + thread));
  ct_acc a = ct_reduce(ct_reduce(a0, a1), ct_reduce(a2, a3));
  a = ct_block_reduce(a);
  if (threadIdx.x == 0) ct_finish(a, ct_y, ct_partials, 0, blockIdx.x, gridDim.x, length);
}
