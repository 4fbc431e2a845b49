/**
 * CUDA C for top-k. For k <= 32, the warp kernel (generateWarpTopk below). Otherwise a block
 * of K threads (K = k rounded up to a power of two, 64..1024) keeps the K best elements of its
 * range in shared memory, best first. Each tile of K candidates is
 * sorted worst first (bitonic sort; lists from an earlier pass arrive sorted and are read
 * backwards), then the pairwise better of (kept, tile) is the K best of both as a bitonic
 * sequence, which a bitonic merge sorts again. Passes run until one list per segment is left.
 *
 * The first pass reads its range FIRST_PASS_PREFETCH tiles at a time (each thread keeps its
 * elements in registers, so that the loads overlap) and passes over a tile none of whose
 * elements comes before the k-th kept (one `__syncthreads_or`): the k best of the kept and
 * such a tile are the kept's k best. Only the first k of a list are exact then, and only they
 * can reach the result: an element of the k best of a segment is among the k best of its
 * range. Past the first tiles of a range, most tiles of unordered scores are passed over,
 * which leaves the pass about as fast as reading its range.
 *
 * The order is total, so the result does not depend on how the work was split: larger value
 * first (smaller for `smallest`), NaN before every number for the largest and after every
 * number for the smallest (as torch.topk), then the smaller index; an index of -1 marks an
 * empty slot, worse than anything.
 */
import type { DType, KernelParameter } from '@cuda-tasks/cudadrv';
import { CTYPES } from './ctypes.js';

/** The dtypes topk takes. */
export const TOPK_DTYPES: readonly DType[] = ['float32', 'float64', 'int32'];

/** What a top-k kernel is generated from. */
export interface TopkSource {
  /** The values' dtype. */
  readonly dtype: DType;
  /** Slots per list, a power of two in 32..1024 (also the block size). */
  readonly slots: number;
  /** Largest first (true) or smallest first. */
  readonly largest: boolean;
}

/** Tiles the first pass loads at once, per thread one element of each. */
export const FIRST_PASS_PREFETCH = 4;

/** The kernel's entry point. */
export const TOPK_ENTRY = 'ct_topk';

/**
 * The kernel's parameters, as `launch` checks them. The arrays are untyped pointers: later
 * passes read and write scratch buffers (topk checks the arrays' dtypes itself).
 */
export function topkParameters(): KernelParameter[] {
  return [
    'const pointer', // values
    'const pointer', // indices of an earlier pass (0 in the first)
    'pointer', // out values
    'pointer', // out indices
    'uint64', // sequence length per segment
    'uint64', // segments
    'uint64', // segment stride
    'uint64', // element stride
    'uint64', // range per block
    'uint64', // parts per segment
    'int32', // k
    'uint64', // out segment stride (last pass)
    'uint64', // out rank stride (last pass)
    'int32', // last pass
  ];
}

/** Elements a lane of the warp kernel (32 slots) loads at once in the first pass. */
export const WARP_PREFETCH = 8;

/** Generates the kernel's CUDA C source. */
export function generateTopk(source: TopkSource): string {
  const { dtype, slots, largest } = source;
  const value = CTYPES[dtype].storage;
  if (slots === 32) return generateWarpTopk(dtype, value, largest);
  const prefetch = FIRST_PASS_PREFETCH;
  const merge = mergeTile(value, slots);
  const loads = firstPassLoads(value, prefetch, slots);
  const tiles = Array.from(
    { length: prefetch },
    (
      _,
      j,
    ) => `        // Tile ${j}: passed over unless one of its elements comes before the k-th kept.
        if (__syncthreads_or(ct_better(ct_v${j}, ct_i${j}, ct_top_v[ct_k - 1], ct_top_i[ct_k - 1]))) {
          ct_tile_v[ct_t] = ct_v${j};
          ct_tile_i[ct_t] = ct_i${j};
          __syncthreads();
${sortTile(value, slots)}
${merge}
        }`,
  ).join('\n');
  return `// @cuda-tasks/kernels topk: ${dtype}, ${slots} slots, ${largest ? 'largest' : 'smallest'} first
${betterFunction(value, largest)}

${entrySignature(value)} {
  __shared__ ${value} ct_top_v[${slots}];
  __shared__ int ct_top_i[${slots}];
  __shared__ ${value} ct_tile_v[${slots}];
  __shared__ int ct_tile_i[${slots}];
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
      for (unsigned long long ct_base = ct_begin; ct_base < ct_end; ct_base += ${slots}) {
        // A whole list of the earlier pass, best first: read backwards, worst first.
        const unsigned long long ct_q = ct_segment + ct_base + (${slots - 1} - ct_t);
        ct_tile_v[ct_t] = ct_values[ct_q];
        ct_tile_i[ct_t] = ct_indices[ct_q];
        __syncthreads();
${merge}
      }
    } else {
      for (unsigned long long ct_base = ct_begin; ct_base < ct_end; ct_base += ${prefetch * slots}) {
${loads}
${tiles}
      }
    }
    if (ct_last) {
      if (ct_t < (unsigned int)ct_k) {
        const unsigned long long ct_o = ct_s * ct_out_segment_stride + ct_t * ct_out_rank_stride;
        ct_out_values[ct_o] = ct_top_v[ct_t];
        ct_out_indices[ct_o] = ct_top_i[ct_t];
      }
    } else {
      const unsigned long long ct_o = (ct_s * ct_parts + ct_p) * ${slots} + ct_t;
      ct_out_values[ct_o] = ct_top_v[ct_t];
      ct_out_indices[ct_o] = ct_top_i[ct_t];
    }
    __syncthreads();
  }
}
`;
}

/**
 * The first pass's loads of `count` steps of `width` elements from ct_base: step j's element
 * of this thread in (ct_v<j>, ct_i<j>), an empty slot (index -1) past the range's end.
 */
function firstPassLoads(value: string, count: number, width: number): string {
  return Array.from(
    { length: count },
    (_, j) => `        const unsigned long long ct_q${j} = ct_base + ${j * width} + ct_t;
        const bool ct_in${j} = ct_q${j} < ct_end;
        const ${value} ct_v${j} = ct_in${j} ? ct_values[ct_segment + ct_q${j} * ct_element_stride] : (${value})0;
        const int ct_i${j} = ct_in${j} ? (int)ct_q${j} : -1;`,
  ).join('\n');
}

/** The entry point's signature (both kernels take `topkParameters()`), without its body. */
function entrySignature(value: string): string {
  return `extern "C" __global__ void ${TOPK_ENTRY}(const ${value} *ct_values, const int *ct_indices, ${value} *ct_out_values, int *ct_out_indices,
    const unsigned long long ct_length, const unsigned long long ct_segments,
    const unsigned long long ct_segment_stride, const unsigned long long ct_element_stride,
    const unsigned long long ct_range, const unsigned long long ct_parts, const int ct_k,
    const unsigned long long ct_out_segment_stride, const unsigned long long ct_out_rank_stride,
    const int ct_last)`;
}

/** The order: whether (ct_av, ct_ai) comes before (ct_bv, ct_bi); an index below 0 is an empty slot. */
function betterFunction(value: string, largest: boolean): string {
  return `// Whether (ct_av, ct_ai) comes before (ct_bv, ct_bi); an index below 0 is an empty slot.
__device__ __forceinline__ bool ct_better(const ${value} ct_av, const int ct_ai, const ${value} ct_bv, const int ct_bi) {
  if (ct_ai < 0) return false;
  if (ct_bi < 0) return true;
  const bool ct_an = ct_av != ct_av, ct_bn = ct_bv != ct_bv;
  if (ct_an || ct_bn) {
    if (ct_an && ct_bn) return ct_ai < ct_bi;
    return ${largest ? 'ct_an' : 'ct_bn'};
  }
  if (ct_av != ct_bv) return ct_av ${largest ? '>' : '<'} ct_bv;
  return ct_ai < ct_bi;
}`;
}

/**
 * The kernel for k <= 32 (topk launches it a warp a block; each warp of a larger block would
 * take work items of its own): lane r holds the r-th best kept in registers.
 * Each pass reads 32 elements per lane step (WARP_PREFETCH steps at once in the first pass; a
 * whole list of an earlier pass, best first, in the others); a ballot finds the lanes whose
 * element comes before the k-th kept, usually none, and each of those is inserted at its rank
 * with shuffles (the kept below it move down a lane, the last falls off). The first k kept are
 * then the k best of what the block read; no shared memory, no barrier.
 */
function generateWarpTopk(dtype: DType, value: string, largest: boolean): string {
  const steps = firstPassLoads(value, WARP_PREFETCH, 32);
  const offers = Array.from(
    { length: WARP_PREFETCH },
    (_, j) => `        ct_offer(ct_v${j}, ct_i${j}, ct_kv, ct_ki, ct_tv, ct_ti, ct_k);`,
  ).join('\n');
  return `// @cuda-tasks/kernels topk: ${dtype}, 32 slots (a warp each), ${largest ? 'largest' : 'smallest'} first
${betterFunction(value, largest)}

// Offers each lane's (ct_v, ct_i) to the kept list (ct_kv, ct_ki: lane r holds rank r; ct_tv,
// ct_ti: the k-th kept, on every lane). Every lane of the warp calls it with the same ct_k.
__device__ __forceinline__ void ct_offer(const ${value} ct_v, const int ct_i, ${value} &ct_kv, int &ct_ki,
    ${value} &ct_tv, int &ct_ti, const int ct_k) {
  const unsigned int ct_full = 0xffffffffu;
  unsigned int ct_m = __ballot_sync(ct_full, ct_better(ct_v, ct_i, ct_tv, ct_ti));
  while (ct_m != 0) {
    const int ct_from = __ffs(ct_m) - 1;
    const ${value} ct_cv = __shfl_sync(ct_full, ct_v, ct_from);
    const int ct_ci = __shfl_sync(ct_full, ct_i, ct_from);
    // Its rank: the kept that come before it (fewer than k, as it comes before the k-th).
    const int ct_rank = __popc(__ballot_sync(ct_full, ct_better(ct_kv, ct_ki, ct_cv, ct_ci)));
    const ${value} ct_uv = __shfl_up_sync(ct_full, ct_kv, 1);
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

${entrySignature(value)} {
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
    ${value} ct_kv = 0, ct_tv = 0;
    int ct_ki = -1, ct_ti = -1;
    if (ct_presorted) {
      for (unsigned long long ct_base = ct_begin; ct_base < ct_end; ct_base += 32) {
        // A whole list of the earlier pass, best first.
        const unsigned long long ct_q = ct_segment + ct_base + ct_t;
        ct_offer(ct_values[ct_q], ct_indices[ct_q], ct_kv, ct_ki, ct_tv, ct_ti, ct_k);
      }
    } else {
      for (unsigned long long ct_base = ct_begin; ct_base < ct_end; ct_base += ${WARP_PREFETCH * 32}) {
${steps}
${offers}
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
`;
}

/** Bitonic sort of the tile in shared memory, worst first (a step per stride, each with a barrier). */
function sortTile(value: string, slots: number): string {
  return `          for (unsigned int ct_size = 2; ct_size <= ${slots}; ct_size <<= 1) {
            for (unsigned int ct_stride = ct_size >> 1; ct_stride > 0; ct_stride >>= 1) {
              const unsigned int ct_u = ct_t ^ ct_stride;
              if (ct_u > ct_t) {
                const bool ct_up = (ct_t & ct_size) == 0;
                const bool ct_swap = ct_up ? ct_better(ct_tile_v[ct_t], ct_tile_i[ct_t], ct_tile_v[ct_u], ct_tile_i[ct_u])
                                           : ct_better(ct_tile_v[ct_u], ct_tile_i[ct_u], ct_tile_v[ct_t], ct_tile_i[ct_t]);
                if (ct_swap) {
${swapSlots(value, 'ct_tile', '                  ')}
                }
              }
              __syncthreads();
            }
          }`;
}

/**
 * Kept (best first) against the tile in shared memory (worst first): the better of each pair
 * are the best of both, as a bitonic sequence, which a bitonic merge sorts best first. Ends
 * with a barrier, so that the kept list is whole when the next tile reads it.
 */
function mergeTile(value: string, slots: number): string {
  return `          if (ct_better(ct_tile_v[ct_t], ct_tile_i[ct_t], ct_top_v[ct_t], ct_top_i[ct_t])) {
            ct_top_v[ct_t] = ct_tile_v[ct_t];
            ct_top_i[ct_t] = ct_tile_i[ct_t];
          }
          __syncthreads();
          for (unsigned int ct_stride = ${slots / 2}; ct_stride > 0; ct_stride >>= 1) {
            const unsigned int ct_u = ct_t ^ ct_stride;
            if (ct_u > ct_t && ct_better(ct_top_v[ct_u], ct_top_i[ct_u], ct_top_v[ct_t], ct_top_i[ct_t])) {
${swapSlots(value, 'ct_top', '              ')}
            }
            __syncthreads();
          }`;
}

/** Swaps slots ct_t and ct_u of the list `list` (its `_v` values and `_i` indices). */
function swapSlots(value: string, list: string, indent: string): string {
  return [
    `const ${value} ct_v = ${list}_v[ct_t];`,
    `const int ct_i = ${list}_i[ct_t];`,
    `${list}_v[ct_t] = ${list}_v[ct_u];`,
    `${list}_i[ct_t] = ${list}_i[ct_u];`,
    `${list}_v[ct_u] = ct_v;`,
    `${list}_i[ct_u] = ct_i;`,
  ]
    .map((line) => indent + line)
    .join('\n');
}
