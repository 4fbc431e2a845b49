// @cuda-tasks/kernels topk: int32, 32 slots (a warp each), smallest first
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

// Lane t and lane t ^ ct_stride compare their (ct_v, ct_i); lane t keeps the better one if
// ct_keep_better, else the other. Every lane of the warp calls it with the same ct_stride.
__device__ __forceinline__ void ct_exchange(int &ct_v, int &ct_i, const int ct_stride, const bool ct_keep_better) {
  const int ct_ov = __shfl_xor_sync(0xffffffffu, ct_v, ct_stride);
  const int ct_oi = __shfl_xor_sync(0xffffffffu, ct_i, ct_stride);
  if (ct_better(ct_ov, ct_oi, ct_v, ct_i) == ct_keep_better) {
    ct_v = ct_ov;
    ct_i = ct_oi;
  }
}

// Merges a list sorted worst first across the lanes (ct_v, ct_i) into the kept (best first),
// then sets the k-th kept (ct_tv, ct_ti).
__device__ __forceinline__ void ct_merge(const int ct_v, const int ct_i, int &ct_kv, int &ct_ki,
    int &ct_tv, int &ct_ti, const int ct_k) {
  const int ct_lane = (int)(threadIdx.x & 31);
  if (ct_better(ct_v, ct_i, ct_kv, ct_ki)) {
    ct_kv = ct_v;
    ct_ki = ct_i;
  }
  for (int ct_stride = 16; ct_stride > 0; ct_stride >>= 1) {
    ct_exchange(ct_kv, ct_ki, ct_stride, (ct_lane & ct_stride) == 0);
  }
  ct_tv = __shfl_sync(0xffffffffu, ct_kv, ct_k - 1);
  ct_ti = __shfl_sync(0xffffffffu, ct_ki, ct_k - 1);
}

// Merges a list of an earlier pass, read worst first, unless none of it comes before the k-th kept.
__device__ __forceinline__ void ct_merge_list(const int ct_v, const int ct_i, int &ct_kv, int &ct_ki,
    int &ct_tv, int &ct_ti, const int ct_k) {
  if (__any_sync(0xffffffffu, ct_better(ct_v, ct_i, ct_tv, ct_ti))) {
    ct_merge(ct_v, ct_i, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
  }
}

// Offers each lane's (ct_v, ct_i) to the kept list (ct_kv, ct_ki: lane r holds rank r; ct_tv,
// ct_ti: the k-th kept, on every lane). Every lane of the warp calls it with the same ct_k.
__device__ __forceinline__ void ct_offer(int ct_v, int ct_i, int &ct_kv, int &ct_ki,
    int &ct_tv, int &ct_ti, const int ct_k) {
  const unsigned int ct_full = 0xffffffffu;
  const int ct_lane = (int)(threadIdx.x & 31);
  unsigned int ct_m = __ballot_sync(ct_full, ct_better(ct_v, ct_i, ct_tv, ct_ti));
  if (__popc(ct_m) > 3) {
    // Many: sort the step worst first (a bitonic sort across the lanes), then merge it.
    for (int ct_size = 2; ct_size <= 32; ct_size <<= 1) {
      for (int ct_stride = ct_size >> 1; ct_stride > 0; ct_stride >>= 1) {
        ct_exchange(ct_v, ct_i, ct_stride, ((ct_lane & ct_stride) == 0) != ((ct_lane & ct_size) == 0));
      }
    }
    ct_merge(ct_v, ct_i, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
    return;
  }
  while (ct_m != 0) {
    const int ct_from = __ffs(ct_m) - 1;
    const int ct_cv = __shfl_sync(ct_full, ct_v, ct_from);
    const int ct_ci = __shfl_sync(ct_full, ct_i, ct_from);
    // Its rank: the kept that come before it (fewer than k, as it comes before the k-th).
    const int ct_rank = __popc(__ballot_sync(ct_full, ct_better(ct_kv, ct_ki, ct_cv, ct_ci)));
    const int ct_uv = __shfl_up_sync(ct_full, ct_kv, 1);
    const int ct_ui = __shfl_up_sync(ct_full, ct_ki, 1);
    if (ct_lane == ct_rank) {
      ct_kv = ct_cv;
      ct_ki = ct_ci;
    } else if (ct_lane > ct_rank) {
      ct_kv = ct_uv;
      ct_ki = ct_ui;
    }
    ct_tv = __shfl_sync(ct_full, ct_kv, ct_k - 1);
    ct_ti = __shfl_sync(ct_full, ct_ki, ct_k - 1);
    // The others that still come before the k-th.
    ct_m &= ct_m - 1;
    ct_m &= __ballot_sync(ct_full, ct_better(ct_v, ct_i, ct_tv, ct_ti));
  }
}

extern "C" __global__ void ct_topk(const int *ct_values, const int *ct_indices, int *ct_out_values, int *ct_out_indices,
    const unsigned long long ct_length, const unsigned long long ct_segments,
    const unsigned long long ct_segment_stride, const unsigned long long ct_element_stride,
    const unsigned long long ct_range, const unsigned long long ct_parts, const int ct_k,
    const unsigned long long ct_out_segment_stride, const unsigned long long ct_out_rank_stride,
    const int ct_last) {
  // Each warp of the block takes work items of its own (no barrier between warps).
  const unsigned int ct_t = threadIdx.x & 31;
  const unsigned long long ct_warps = blockDim.x >> 5;
  const bool ct_presorted = ct_indices != 0;
  const unsigned long long ct_items = ct_segments * ct_parts;
  for (unsigned long long ct_w = blockIdx.x * ct_warps + (threadIdx.x >> 5); ct_w < ct_items; ct_w += gridDim.x * ct_warps) {
    const unsigned long long ct_s = ct_w / ct_parts, ct_p = ct_w - ct_s * ct_parts;
    const unsigned long long ct_begin = ct_p * ct_range;
    const unsigned long long ct_end = ct_begin + ct_range < ct_length ? ct_begin + ct_range : ct_length;
    const unsigned long long ct_segment = ct_s * ct_segment_stride;
    int ct_kv = 0, ct_tv = 0;
    int ct_ki = -1, ct_ti = -1;
    if (ct_presorted) {
      for (unsigned long long ct_base = ct_begin; ct_base < ct_end; ct_base += 256) {
        // Whole lists of the earlier pass (best first), each read backwards: worst first.
        const bool ct_in0 = ct_base + 0 < ct_end;
        const unsigned long long ct_q0 = ct_segment + ct_base + 0 + (31 - ct_t);
        const int ct_v0 = ct_in0 ? ct_values[ct_q0] : (int)0;
        const int ct_i0 = ct_in0 ? ct_indices[ct_q0] : -1;
        const bool ct_in1 = ct_base + 32 < ct_end;
        const unsigned long long ct_q1 = ct_segment + ct_base + 32 + (31 - ct_t);
        const int ct_v1 = ct_in1 ? ct_values[ct_q1] : (int)0;
        const int ct_i1 = ct_in1 ? ct_indices[ct_q1] : -1;
        const bool ct_in2 = ct_base + 64 < ct_end;
        const unsigned long long ct_q2 = ct_segment + ct_base + 64 + (31 - ct_t);
        const int ct_v2 = ct_in2 ? ct_values[ct_q2] : (int)0;
        const int ct_i2 = ct_in2 ? ct_indices[ct_q2] : -1;
        const bool ct_in3 = ct_base + 96 < ct_end;
        const unsigned long long ct_q3 = ct_segment + ct_base + 96 + (31 - ct_t);
        const int ct_v3 = ct_in3 ? ct_values[ct_q3] : (int)0;
        const int ct_i3 = ct_in3 ? ct_indices[ct_q3] : -1;
        const bool ct_in4 = ct_base + 128 < ct_end;
        const unsigned long long ct_q4 = ct_segment + ct_base + 128 + (31 - ct_t);
        const int ct_v4 = ct_in4 ? ct_values[ct_q4] : (int)0;
        const int ct_i4 = ct_in4 ? ct_indices[ct_q4] : -1;
        const bool ct_in5 = ct_base + 160 < ct_end;
        const unsigned long long ct_q5 = ct_segment + ct_base + 160 + (31 - ct_t);
        const int ct_v5 = ct_in5 ? ct_values[ct_q5] : (int)0;
        const int ct_i5 = ct_in5 ? ct_indices[ct_q5] : -1;
        const bool ct_in6 = ct_base + 192 < ct_end;
        const unsigned long long ct_q6 = ct_segment + ct_base + 192 + (31 - ct_t);
        const int ct_v6 = ct_in6 ? ct_values[ct_q6] : (int)0;
        const int ct_i6 = ct_in6 ? ct_indices[ct_q6] : -1;
        const bool ct_in7 = ct_base + 224 < ct_end;
        const unsigned long long ct_q7 = ct_segment + ct_base + 224 + (31 - ct_t);
        const int ct_v7 = ct_in7 ? ct_values[ct_q7] : (int)0;
        const int ct_i7 = ct_in7 ? ct_indices[ct_q7] : -1;
        ct_merge_list(ct_v0, ct_i0, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
        ct_merge_list(ct_v1, ct_i1, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
        ct_merge_list(ct_v2, ct_i2, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
        ct_merge_list(ct_v3, ct_i3, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
        ct_merge_list(ct_v4, ct_i4, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
        ct_merge_list(ct_v5, ct_i5, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
        ct_merge_list(ct_v6, ct_i6, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
        ct_merge_list(ct_v7, ct_i7, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
      }
    } else {
      for (unsigned long long ct_base = ct_begin; ct_base < ct_end; ct_base += 256) {
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
        const unsigned long long ct_q4 = ct_base + 128 + ct_t;
        const bool ct_in4 = ct_q4 < ct_end;
        const int ct_v4 = ct_in4 ? ct_values[ct_segment + ct_q4 * ct_element_stride] : (int)0;
        const int ct_i4 = ct_in4 ? (int)ct_q4 : -1;
        const unsigned long long ct_q5 = ct_base + 160 + ct_t;
        const bool ct_in5 = ct_q5 < ct_end;
        const int ct_v5 = ct_in5 ? ct_values[ct_segment + ct_q5 * ct_element_stride] : (int)0;
        const int ct_i5 = ct_in5 ? (int)ct_q5 : -1;
        const unsigned long long ct_q6 = ct_base + 192 + ct_t;
        const bool ct_in6 = ct_q6 < ct_end;
        const int ct_v6 = ct_in6 ? ct_values[ct_segment + ct_q6 * ct_element_stride] : (int)0;
        const int ct_i6 = ct_in6 ? (int)ct_q6 : -1;
        const unsigned long long ct_q7 = ct_base + 224 + ct_t;
        const bool ct_in7 = ct_q7 < ct_end;
        const int ct_v7 = ct_in7 ? ct_values[ct_segment + ct_q7 * ct_element_stride] : (int)0;
        const int ct_i7 = ct_in7 ? (int)ct_q7 : -1;
        ct_offer(ct_v0, ct_i0, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
        ct_offer(ct_v1, ct_i1, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
        ct_offer(ct_v2, ct_i2, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
        ct_offer(ct_v3, ct_i3, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
        ct_offer(ct_v4, ct_i4, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
        ct_offer(ct_v5, ct_i5, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
        ct_offer(ct_v6, ct_i6, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
        ct_offer(ct_v7, ct_i7, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
      }
    }
    if (ct_last) {
      if (ct_t < (unsigned int)ct_k) {
        const unsigned long long ct_o = ct_s * ct_out_segment_stride + ct_t * ct_out_rank_stride;
        ct_out_values[ct_o] = ct_kv;
        ct_out_indices[ct_o] = ct_ki;
      }
    } else {
      const unsigned long long ct_o = (ct_s * ct_parts + ct_p) * 32 + ct_t;
      ct_out_values[ct_o] = ct_kv;
      ct_out_indices[ct_o] = ct_ki;
    }
  }
}
