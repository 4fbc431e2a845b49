// @cuda-tasks/kernels topk: int32, 32 slots, smallest first
// Whether (ct_av, ct_ai) comes before (ct_bv, ct_bi); an index below 0 is an empty slot.
__device__ __forceinline__ bool ct_better(const int ct_av, const int ct_ai, const int ct_bv, const int ct_bi) {
  if (ct_ai < 0) return false;
  if (ct_bi < 0) return true;
  const bool ct_an = ct_av != ct_av, ct_bn = ct_bv != ct_bv;
  if (ct_an || ct_bn) {
    if (ct_an && ct_bn) return ct_ai < ct_bi;
    return ct_bn;
  }
  if (ct_av != ct_bv) return ct_av < ct_bv;
  return ct_ai < ct_bi;
}

extern "C" __global__ void ct_topk(const int *ct_values, const int *ct_indices, int *ct_out_values, int *ct_out_indices,
    const unsigned long long ct_length, const unsigned long long ct_segments,
    const unsigned long long ct_segment_stride, const unsigned long long ct_element_stride,
    const unsigned long long ct_range, const unsigned long long ct_parts, const int ct_k,
    const unsigned long long ct_out_segment_stride, const unsigned long long ct_out_rank_stride,
    const int ct_last) {
  __shared__ int ct_top_v[32];
  __shared__ int ct_top_i[32];
  __shared__ int ct_tile_v[32];
  __shared__ int ct_tile_i[32];
  const unsigned int ct_t = threadIdx.x;
  const bool ct_presorted = ct_indices != 0;
  const unsigned long long ct_items = ct_segments * ct_parts;
  for (unsigned long long ct_w = blockIdx.x; ct_w < ct_items; ct_w += gridDim.x) {
    const unsigned long long ct_s = ct_w / ct_parts, ct_p = ct_w - ct_s * ct_parts;
    const unsigned long long ct_begin = ct_p * ct_range;
    const unsigned long long ct_end = ct_begin + ct_range < ct_length ? ct_begin + ct_range : ct_length;
    const unsigned long long ct_segment = ct_s * ct_segment_stride;
    ct_top_v[ct_t] = 0;
    ct_top_i[ct_t] = -1;
    __syncthreads();
    if (ct_presorted) {
      for (unsigned long long ct_base = ct_begin; ct_base < ct_end; ct_base += 32) {
        // A whole list of the earlier pass, best first: read backwards, worst first.
        const unsigned long long ct_q = ct_segment + ct_base + (31 - ct_t);
        ct_tile_v[ct_t] = ct_values[ct_q];
        ct_tile_i[ct_t] = ct_indices[ct_q];
        __syncthreads();
          if (ct_better(ct_tile_v[ct_t], ct_tile_i[ct_t], ct_top_v[ct_t], ct_top_i[ct_t])) {
            ct_top_v[ct_t] = ct_tile_v[ct_t];
            ct_top_i[ct_t] = ct_tile_i[ct_t];
          }
          __syncthreads();
          for (unsigned int ct_stride = 16; ct_stride > 0; ct_stride >>= 1) {
            const unsigned int ct_u = ct_t ^ ct_stride;
            if (ct_u > ct_t && ct_better(ct_top_v[ct_u], ct_top_i[ct_u], ct_top_v[ct_t], ct_top_i[ct_t])) {
              const int ct_v = ct_top_v[ct_t];
              const int ct_i = ct_top_i[ct_t];
              ct_top_v[ct_t] = ct_top_v[ct_u];
              ct_top_i[ct_t] = ct_top_i[ct_u];
              ct_top_v[ct_u] = ct_v;
              ct_top_i[ct_u] = ct_i;
            }
            __syncthreads();
          }
      }
    } else {
      for (unsigned long long ct_base = ct_begin; ct_base < ct_end; ct_base += 128) {
        const unsigned long long ct_q0 = ct_base + 0 + ct_t;
        const bool ct_in0 = ct_q0 < ct_end;
        const int ct_v0 = ct_in0 ? ct_values[ct_segment + ct_q0 * ct_element_stride] : (int)0;
        const int ct_i0 = ct_in0 ? (int)ct_q0 : -1;
        const unsigned long long ct_q1 = ct_base + 32 + ct_t;
        const bool ct_in1 = ct_q1 < ct_end;
        const int ct_v1 = ct_in1 ? ct_values[ct_segment + ct_q1 * ct_element_stride] : (int)0;
        const int ct_i1 = ct_in1 ? (int)ct_q1 : -1;
        const unsigned long long ct_q2 = ct_base + 64 + ct_t;
        const bool ct_in2 = ct_q2 < ct_end;
        const int ct_v2 = ct_in2 ? ct_values[ct_segment + ct_q2 * ct_element_stride] : (int)0;
        const int ct_i2 = ct_in2 ? (int)ct_q2 : -1;
        const unsigned long long ct_q3 = ct_base + 96 + ct_t;
        const bool ct_in3 = ct_q3 < ct_end;
        const int ct_v3 = ct_in3 ? ct_values[ct_segment + ct_q3 * ct_element_stride] : (int)0;
        const int ct_i3 = ct_in3 ? (int)ct_q3 : -1;
        // Tile 0: passed over unless one of its elements comes before the k-th kept.
        if (__syncthreads_or(ct_better(ct_v0, ct_i0, ct_top_v[ct_k - 1], ct_top_i[ct_k - 1]))) {
          ct_tile_v[ct_t] = ct_v0;
          ct_tile_i[ct_t] = ct_i0;
          __syncthreads();
          for (unsigned int ct_size = 2; ct_size <= 32; ct_size <<= 1) {
            for (unsigned int ct_stride = ct_size >> 1; ct_stride > 0; ct_stride >>= 1) {
              const unsigned int ct_u = ct_t ^ ct_stride;
              if (ct_u > ct_t) {
                const bool ct_up = (ct_t & ct_size) == 0;
                const bool ct_swap = ct_up ? ct_better(ct_tile_v[ct_t], ct_tile_i[ct_t], ct_tile_v[ct_u], ct_tile_i[ct_u])
                                           : ct_better(ct_tile_v[ct_u], ct_tile_i[ct_u], ct_tile_v[ct_t], ct_tile_i[ct_t]);
                if (ct_swap) {
                  const int ct_v = ct_tile_v[ct_t];
                  const int ct_i = ct_tile_i[ct_t];
                  ct_tile_v[ct_t] = ct_tile_v[ct_u];
                  ct_tile_i[ct_t] = ct_tile_i[ct_u];
                  ct_tile_v[ct_u] = ct_v;
                  ct_tile_i[ct_u] = ct_i;
                }
              }
              __syncthreads();
            }
          }
          if (ct_better(ct_tile_v[ct_t], ct_tile_i[ct_t], ct_top_v[ct_t], ct_top_i[ct_t])) {
            ct_top_v[ct_t] = ct_tile_v[ct_t];
            ct_top_i[ct_t] = ct_tile_i[ct_t];
          }
          __syncthreads();
          for (unsigned int ct_stride = 16; ct_stride > 0; ct_stride >>= 1) {
            const unsigned int ct_u = ct_t ^ ct_stride;
            if (ct_u > ct_t && ct_better(ct_top_v[ct_u], ct_top_i[ct_u], ct_top_v[ct_t], ct_top_i[ct_t])) {
              const int ct_v = ct_top_v[ct_t];
              const int ct_i = ct_top_i[ct_t];
              ct_top_v[ct_t] = ct_top_v[ct_u];
              ct_top_i[ct_t] = ct_top_i[ct_u];
              ct_top_v[ct_u] = ct_v;
              ct_top_i[ct_u] = ct_i;
            }
            __syncthreads();
          }
        }
        // Tile 1: passed over unless one of its elements comes before the k-th kept.
        if (__syncthreads_or(ct_better(ct_v1, ct_i1, ct_top_v[ct_k - 1], ct_top_i[ct_k - 1]))) {
          ct_tile_v[ct_t] = ct_v1;
          ct_tile_i[ct_t] = ct_i1;
          __syncthreads();
          for (unsigned int ct_size = 2; ct_size <= 32; ct_size <<= 1) {
            for (unsigned int ct_stride = ct_size >> 1; ct_stride > 0; ct_stride >>= 1) {
              const unsigned int ct_u = ct_t ^ ct_stride;
              if (ct_u > ct_t) {
                const bool ct_up = (ct_t & ct_size) == 0;
                const bool ct_swap = ct_up ? ct_better(ct_tile_v[ct_t], ct_tile_i[ct_t], ct_tile_v[ct_u], ct_tile_i[ct_u])
                                           : ct_better(ct_tile_v[ct_u], ct_tile_i[ct_u], ct_tile_v[ct_t], ct_tile_i[ct_t]);
                if (ct_swap) {
                  const int ct_v = ct_tile_v[ct_t];
                  const int ct_i = ct_tile_i[ct_t];
                  ct_tile_v[ct_t] = ct_tile_v[ct_u];
                  ct_tile_i[ct_t] = ct_tile_i[ct_u];
                  ct_tile_v[ct_u] = ct_v;
                  ct_tile_i[ct_u] = ct_i;
                }
              }
              __syncthreads();
            }
          }
          if (ct_better(ct_tile_v[ct_t], ct_tile_i[ct_t], ct_top_v[ct_t], ct_top_i[ct_t])) {
            ct_top_v[ct_t] = ct_tile_v[ct_t];
            ct_top_i[ct_t] = ct_tile_i[ct_t];
          }
          __syncthreads();
          for (unsigned int ct_stride = 16; ct_stride > 0; ct_stride >>= 1) {
            const unsigned int ct_u = ct_t ^ ct_stride;
            if (ct_u > ct_t && ct_better(ct_top_v[ct_u], ct_top_i[ct_u], ct_top_v[ct_t], ct_top_i[ct_t])) {
              const int ct_v = ct_top_v[ct_t];
              const int ct_i = ct_top_i[ct_t];
              ct_top_v[ct_t] = ct_top_v[ct_u];
              ct_top_i[ct_t] = ct_top_i[ct_u];
              ct_top_v[ct_u] = ct_v;
              ct_top_i[ct_u] = ct_i;
            }
            __syncthreads();
          }
        }
        // Tile 2: passed over unless one of its elements comes before the k-th kept.
        if (__syncthreads_or(ct_better(ct_v2, ct_i2, ct_top_v[ct_k - 1], ct_top_i[ct_k - 1]))) {
          ct_tile_v[ct_t] = ct_v2;
          ct_tile_i[ct_t] = ct_i2;
          __syncthreads();
          for (unsigned int ct_size = 2; ct_size <= 32; ct_size <<= 1) {
            for (unsigned int ct_stride = ct_size >> 1; ct_stride > 0; ct_stride >>= 1) {
              const unsigned int ct_u = ct_t ^ ct_stride;
              if (ct_u > ct_t) {
                const bool ct_up = (ct_t & ct_size) == 0;
                const bool ct_swap = ct_up ? ct_better(ct_tile_v[ct_t], ct_tile_i[ct_t], ct_tile_v[ct_u], ct_tile_i[ct_u])
                                           : ct_better(ct_tile_v[ct_u], ct_tile_i[ct_u], ct_tile_v[ct_t], ct_tile_i[ct_t]);
                if (ct_swap) {
                  const int ct_v = ct_tile_v[ct_t];
                  const int ct_i = ct_tile_i[ct_t];
                  ct_tile_v[ct_t] = ct_tile_v[ct_u];
                  ct_tile_i[ct_t] = ct_tile_i[ct_u];
                  ct_tile_v[ct_u] = ct_v;
                  ct_tile_i[ct_u] = ct_i;
                }
              }
              __syncthreads();
            }
          }
          if (ct_better(ct_tile_v[ct_t], ct_tile_i[ct_t], ct_top_v[ct_t], ct_top_i[ct_t])) {
            ct_top_v[ct_t] = ct_tile_v[ct_t];
            ct_top_i[ct_t] = ct_tile_i[ct_t];
          }
          __syncthreads();
          for (unsigned int ct_stride = 16; ct_stride > 0; ct_stride >>= 1) {
            const unsigned int ct_u = ct_t ^ ct_stride;
            if (ct_u > ct_t && ct_better(ct_top_v[ct_u], ct_top_i[ct_u], ct_top_v[ct_t], ct_top_i[ct_t])) {
              const int ct_v = ct_top_v[ct_t];
              const int ct_i = ct_top_i[ct_t];
              ct_top_v[ct_t] = ct_top_v[ct_u];
              ct_top_i[ct_t] = ct_top_i[ct_u];
              ct_top_v[ct_u] = ct_v;
              ct_top_i[ct_u] = ct_i;
            }
            __syncthreads();
          }
        }
        // Tile 3: passed over unless one of its elements comes before the k-th kept.
        if (__syncthreads_or(ct_better(ct_v3, ct_i3, ct_top_v[ct_k - 1], ct_top_i[ct_k - 1]))) {
          ct_tile_v[ct_t] = ct_v3;
          ct_tile_i[ct_t] = ct_i3;
          __syncthreads();
          for (unsigned int ct_size = 2; ct_size <= 32; ct_size <<= 1) {
            for (unsigned int ct_stride = ct_size >> 1; ct_stride > 0; ct_stride >>= 1) {
              const unsigned int ct_u = ct_t ^ ct_stride;
              if (ct_u > ct_t) {
                const bool ct_up = (ct_t & ct_size) == 0;
                const bool ct_swap = ct_up ? ct_better(ct_tile_v[ct_t], ct_tile_i[ct_t], ct_tile_v[ct_u], ct_tile_i[ct_u])
                                           : ct_better(ct_tile_v[ct_u], ct_tile_i[ct_u], ct_tile_v[ct_t], ct_tile_i[ct_t]);
                if (ct_swap) {
                  const int ct_v = ct_tile_v[ct_t];
                  const int ct_i = ct_tile_i[ct_t];
                  ct_tile_v[ct_t] = ct_tile_v[ct_u];
                  ct_tile_i[ct_t] = ct_tile_i[ct_u];
                  ct_tile_v[ct_u] = ct_v;
                  ct_tile_i[ct_u] = ct_i;
                }
              }
              __syncthreads();
            }
          }
          if (ct_better(ct_tile_v[ct_t], ct_tile_i[ct_t], ct_top_v[ct_t], ct_top_i[ct_t])) {
            ct_top_v[ct_t] = ct_tile_v[ct_t];
            ct_top_i[ct_t] = ct_tile_i[ct_t];
          }
          __syncthreads();
          for (unsigned int ct_stride = 16; ct_stride > 0; ct_stride >>= 1) {
            const unsigned int ct_u = ct_t ^ ct_stride;
            if (ct_u > ct_t && ct_better(ct_top_v[ct_u], ct_top_i[ct_u], ct_top_v[ct_t], ct_top_i[ct_t])) {
              const int ct_v = ct_top_v[ct_t];
              const int ct_i = ct_top_i[ct_t];
              ct_top_v[ct_t] = ct_top_v[ct_u];
              ct_top_i[ct_t] = ct_top_i[ct_u];
              ct_top_v[ct_u] = ct_v;
              ct_top_i[ct_u] = ct_i;
            }
            __syncthreads();
          }
        }
      }
    }
    if (ct_last) {
      if (ct_t < (unsigned int)ct_k) {
        const unsigned long long ct_o = ct_s * ct_out_segment_stride + ct_t * ct_out_rank_stride;
        ct_out_values[ct_o] = ct_top_v[ct_t];
        ct_out_indices[ct_o] = ct_top_i[ct_t];
      }
    } else {
      const unsigned long long ct_o = (ct_s * ct_parts + ct_p) * 32 + ct_t;
      ct_out_values[ct_o] = ct_top_v[ct_t];
      ct_out_indices[ct_o] = ct_top_i[ct_t];
    }
    __syncthreads();
  }
}
