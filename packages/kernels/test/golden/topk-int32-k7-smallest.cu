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

// Offers each lane's (ct_v, ct_i) to the kept list (ct_kv, ct_ki: lane r holds rank r; ct_tv,
// ct_ti: the k-th kept, on every lane). Every lane of the warp calls it with the same ct_k.
__device__ __forceinline__ void ct_offer(const int ct_v, const int ct_i, int &ct_kv, int &ct_ki,
    int &ct_tv, int &ct_ti, const int ct_k) {
  const unsigned int ct_full = 0xffffffffu;
  unsigned int ct_m = __ballot_sync(ct_full, ct_better(ct_v, ct_i, ct_tv, ct_ti));
  while (ct_m != 0) {
    const int ct_from = __ffs(ct_m) - 1;
    const int ct_cv = __shfl_sync(ct_full, ct_v, ct_from);
    const int ct_ci = __shfl_sync(ct_full, ct_i, ct_from);
    // Its rank: the kept that come before it (fewer than k, as it comes before the k-th).
    const int ct_rank = __popc(__ballot_sync(ct_full, ct_better(ct_kv, ct_ki, ct_cv, ct_ci)));
    const int ct_uv = __shfl_up_sync(ct_full, ct_kv, 1);
    const int ct_ui = __shfl_up_sync(ct_full, ct_ki, 1);
    const int ct_lane = (int)(threadIdx.x & 31);
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
      for (unsigned long long ct_base = ct_begin; ct_base < ct_end; ct_base += 32) {
        // A whole list of the earlier pass, best first.
        const unsigned long long ct_q = ct_segment + ct_base + ct_t;
        ct_offer(ct_values[ct_q], ct_indices[ct_q], ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
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
