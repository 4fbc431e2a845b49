/**
 * CUDA C for a reduction: `map` turns each element into an accumulator value, `reduce`
 * combines two of them, `identity` starts each partial result, `post` turns the final value
 * into the output. The entry points share them:
 *
 * - `ct_reduce_vectors` (full reductions of one array of 4- or 8-byte elements): each thread
 *   reads 16-byte vectors, four at a time, into four accumulators (loads in flight, no chain of
 *   dependent adds); the elements before the first 16-byte boundary and after the last whole
 *   vector go to the first threads one each. A grid of at most one full wave of blocks; block
 *   b's value is part b.
 * - `ct_reduce_blocks`: a block per (segment, part) of contiguous elements (full reductions of
 *   other inputs, and along axis 0 of a column-major matrix, whose columns are contiguous).
 *   Each thread accumulates a strided share in order.
 * - `ct_reduce_threads`: a thread per (segment, part) for any strides (along axis 1, where
 *   neighbouring threads then read neighbouring rows, and short columns).
 * - `ct_reduce_partials`: a block per segment combines the parts' values, when a segment was
 *   split into parts to fill the GPU.
 *
 * Blocks combine their threads' values with warp shuffles (a fixed tree in each warp, then over
 * the warps). No atomics: for a given shape (and device, and for `ct_reduce_vectors` the
 * input's offset from a 16-byte boundary) the order of every combination is fixed, so the
 * result is the same bits every run.
 */
import type { KernelParameter } from '@cuda-tasks/cudadrv';
import type { ResolvedParameter } from './codegen-elementwise.js';
import { CTYPES, HALF_PRELUDE, isHalf, loadValue, storeValue } from './ctypes.js';

/** What a reduction kernel is generated from. */
export interface ReductionSource {
  /** A description for the header comment (the signature). */
  readonly signature: string;
  /** Inputs (arrays or scalars). */
  readonly inputs: readonly ResolvedParameter[];
  /** The output. */
  readonly output: ResolvedParameter;
  /** The accumulator's C type (`double`, or a struct declared in `prelude`). */
  readonly accumulator: string;
  /** Device code placed before the functions (e.g. a struct for arg-reductions). */
  readonly prelude?: string;
  /** C expression of the accumulator type: the start of every partial result. */
  readonly identity: string;
  /** C expression of the inputs' names and `i` (the index along the reduced axis). */
  readonly map: string;
  /** C expression of `a` and `b`, two accumulator values. */
  readonly reduce: string;
  /** C statements assigning the output from `a` (the result) and `n` (elements combined). */
  readonly post: string;
}

/** The entry points (`vectors` only in the sources of reductions that `vectorizable` takes). */
export const REDUCTION_ENTRIES = {
  blocks: 'ct_reduce_blocks',
  threads: 'ct_reduce_threads',
  partials: 'ct_reduce_partials',
  vectors: 'ct_reduce_vectors',
} as const;

/** Threads per block at most (the shared-memory tree is sized for it). */
export const MAX_REDUCTION_BLOCK = 1024;

/**
 * Elements each thread loads before combining them: memory requests in flight. A reduction
 * reads each element once and computes little, so it needs many bytes in flight per
 * multiprocessor to reach the memory's bandwidth (bandwidth times latency, by Little's law:
 * docs/decisions/0023-vectorized-full-reductions.md).
 */
const UNROLL = 8;

/** Bytes of one vector load of `ct_reduce_vectors`. */
export const VECTOR_BYTES = 16;

/** Vectors each thread of `ct_reduce_vectors` loads before combining them (one accumulator each). */
export const VECTOR_UNROLL = 4;

/** Threads per block of `ct_reduce_vectors`. */
export const VECTOR_BLOCK = 256;

/**
 * The element size `ct_reduce_vectors` reads the reduction's array in, or undefined when it
 * does not apply: exactly one array input (numbers beside it are fine), of 4- or 8-byte
 * elements (a float4-, int4- or double2-sized load).
 */
export function vectorizable(source: Pick<ReductionSource, 'inputs'>): number | undefined {
  const arrays = source.inputs.filter((input) => !input.scalar);
  if (arrays.length !== 1) return undefined;
  const bytes = ELEMENT_BYTES[arrays[0]!.dtype];
  return bytes === 4 || bytes === 8 ? bytes : undefined;
}

const ELEMENT_BYTES: Record<string, number> = {
  float32: 4,
  float64: 8,
  int32: 4,
  uint32: 4,
  int8: 1,
  uint8: 1,
  float16: 2,
  bfloat16: 2,
};

function inputParameters(inputs: readonly ResolvedParameter[]): KernelParameter[] {
  return inputs.map((input) =>
    input.scalar ? CTYPES[input.dtype].scalar : (`const ${input.dtype}*` as KernelParameter),
  );
}

/** The kernel parameters of each entry point, as `launch` checks them. */
export function reductionParameters(
  source: Pick<ReductionSource, 'inputs' | 'output'>,
): Record<keyof typeof REDUCTION_ENTRIES, KernelParameter[]> {
  const inputs = inputParameters(source.inputs);
  const output = `${source.output.dtype}*` as KernelParameter;
  return {
    // inputs, y, partials, length, segments, parts, chunk
    blocks: [...inputs, output, 'pointer', 'uint64', 'uint64', 'uint64', 'uint64'],
    // ... and the segment and element strides
    threads: [
      ...inputs,
      output,
      'pointer',
      'uint64',
      'uint64',
      'uint64',
      'uint64',
      'uint64',
      'uint64',
    ],
    // partials, y, length, segments, parts
    partials: ['const pointer', output, 'uint64', 'uint64', 'uint64'],
    // inputs, y, partials, length, head (elements before the first 16-byte boundary)
    vectors: [...inputs, output, 'pointer', 'uint64', 'uint64'],
  };
}

/**
 * The kernel parameter of input `j`: generated names come from the index, never the user's
 * name, and start with ct_, which no user name may.
 */
const pointer = (j: number) => `ct_p${j}`;

/**
 * Generates the module's CUDA C source. The user's code sits in device functions whose
 * parameters are the user's names (`ct_map`: the inputs and `i`; `ct_reduce`: `a` and `b`;
 * `ct_post`: `a`, the output and `n`); everything else is named `ct_` + an index or a fixed
 * word, so no user name can meet a generated one.
 */
export function generateReduction(source: ReductionSource): string {
  const { inputs, output } = source;
  const value = (parameter: ResolvedParameter) => CTYPES[parameter.dtype].value;
  const storage = (parameter: ResolvedParameter) => CTYPES[parameter.dtype].storage;
  const lines: string[] = [];
  lines.push(`// @cuda-tasks/kernels reduction: ${source.signature}`);
  lines.push(
    `// ${[...inputs.map((input, j) => `${pointer(j)}: ${input.name}`), `ct_y: ${output.name}`].join(', ')}`,
  );
  if ([...inputs, output].some((parameter) => isHalf(parameter.dtype))) lines.push(HALF_PRELUDE);
  if (source.prelude) lines.push(source.prelude.trim(), '');
  const mapParameters = [
    ...inputs.map((input) => `const ${value(input)} ${input.name}`),
    'const unsigned long long i',
  ];
  lines.push(
    `typedef ${source.accumulator} ct_acc;`,
    `__device__ __forceinline__ ct_acc ct_identity() { return (${source.identity}); }`,
    `__device__ __forceinline__ ct_acc ct_map(${mapParameters.join(', ')}) { return (${source.map}); }`,
    `__device__ __forceinline__ ct_acc ct_reduce(const ct_acc a, const ct_acc b) { return (${source.reduce}); }`,
    `__device__ __forceinline__ void ct_post(const ct_acc a, ${value(output)} &${output.name}, const unsigned long long n) {`,
    source.post.trim().endsWith(';') || source.post.trim().endsWith('}')
      ? source.post.trim()
      : `${source.post.trim()};`,
    '}',
    '',
  );
  const outputStore = isHalf(output.dtype)
    ? [
        '    float ct_out = 0.0f;',
        '    ct_post(ct_a, ct_out, ct_count);',
        `    ct_y[ct_segment] = ${storeValue(output.dtype, 'ct_out')};`,
      ]
    : ['    ct_post(ct_a, ct_y[ct_segment], ct_count);'];
  lines.push(
    '// The result of (segment, part): the output when the segment is one part, else a partial.',
    `__device__ __forceinline__ void ct_finish(const ct_acc ct_a, ${storage(output)} *ct_y, ct_acc *ct_partials,`,
    '    const unsigned long long ct_segment, const unsigned long long ct_part,',
    '    const unsigned long long ct_parts, const unsigned long long ct_count) {',
    '  if (ct_parts == 1) {',
    ...outputStore,
    '  } else {',
    '    ct_partials[ct_segment * ct_parts + ct_part] = ct_a;',
    '  }',
    '}',
    '',
    '// One 32-bit word of a warp shuffle down (width 32).',
    '__device__ __forceinline__ unsigned int ct_shuffle_word(const unsigned int ct_word, const unsigned int ct_delta) {',
    '  unsigned int ct_result;',
    '  asm volatile("shfl.sync.down.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(ct_result) : "r"(ct_word), "r"(ct_delta));',
    '  return ct_result;',
    '}',
    '',
    '// The accumulator of the lane ct_delta above, 32 bits at a time (any accumulator type).',
    '__device__ __forceinline__ ct_acc ct_shuffle_down(const ct_acc ct_a, const unsigned int ct_delta) {',
    '  union { ct_acc ct_value; unsigned int ct_words[(sizeof(ct_acc) + 3) / 4]; } ct_u;',
    '  for (unsigned int ct_w = 0; ct_w < (sizeof(ct_acc) + 3) / 4; ct_w++) ct_u.ct_words[ct_w] = 0;',
    '  ct_u.ct_value = ct_a;',
    '  for (unsigned int ct_w = 0; ct_w < (sizeof(ct_acc) + 3) / 4; ct_w++) ct_u.ct_words[ct_w] = ct_shuffle_word(ct_u.ct_words[ct_w], ct_delta);',
    '  return ct_u.ct_value;',
    '}',
    '',
    "// Combines the block's values (blockDim.x a multiple of 32, at most 1024) in a fixed tree:",
    "// within each warp by shuffles, then the warps' values in warp 0. The result is thread 0's.",
    '__device__ ct_acc ct_block_reduce(ct_acc ct_a) {',
    '  __shared__ ct_acc ct_warps[32];',
    '  const unsigned int ct_lane = threadIdx.x & 31, ct_warp = threadIdx.x >> 5;',
    '  for (unsigned int ct_delta = 16; ct_delta > 0; ct_delta >>= 1) ct_a = ct_reduce(ct_a, ct_shuffle_down(ct_a, ct_delta));',
    '  if (ct_lane == 0) ct_warps[ct_warp] = ct_a;',
    '  __syncthreads();',
    '  if (ct_warp == 0) {',
    '    ct_a = ct_lane < (blockDim.x >> 5) ? ct_warps[ct_lane] : ct_identity();',
    '    for (unsigned int ct_delta = 16; ct_delta > 0; ct_delta >>= 1) ct_a = ct_reduce(ct_a, ct_shuffle_down(ct_a, ct_delta));',
    '  }',
    '  __syncthreads();',
    '  return ct_a;',
    '}',
    '',
  );
  const kernelInputs = inputs.map((input, j) =>
    input.scalar ? `const ${value(input)} ${pointer(j)}` : `const ${storage(input)} *${pointer(j)}`,
  );
  const outputParameter = `${storage(output)} *ct_y`;
  // The map's arguments for the element at `address` with index `index`; `loaded(j)` names
  // input j's already loaded value, or undefined to load it here.
  const mapCall = (address: string, index: string, loaded?: (j: number) => string) =>
    `ct_map(${[
      ...inputs.map((input, j) =>
        input.scalar
          ? pointer(j)
          : (loaded?.(j) ?? loadValue(input.dtype, `${pointer(j)}[${address}]`)),
      ),
      index,
    ].join(', ')})`;
  // A thread's ordered accumulation over ct_k = first, first + step, ... < ct_end of elements
  // at ct_base + ct_k * stride, UNROLL at a time with all loads first.
  const accumulate = (first: string, step: string, stride: string) => {
    const offsets = Array.from({ length: UNROLL }, (_, u) =>
      u === 0 ? 'ct_k' : `ct_k + ${u === 1 ? '' : `${u} * `}${step}`,
    );
    const address = (offset: string) =>
      stride === '1'
        ? `ct_base + ${offset.includes('+') ? `(${offset})` : offset}`
        : `ct_base + (${offset}) * ${stride}`;
    const body: string[] = [
      '    ct_acc ct_a = ct_identity();',
      `    unsigned long long ct_k = ${first};`,
      `    for (; ct_k + ${UNROLL - 1} * ${step} < ct_end; ct_k += ${UNROLL} * ${step}) {`,
    ];
    inputs.forEach((input, j) => {
      if (input.scalar) return;
      body.push(
        `      const ${value(input)} ${offsets
          .map(
            (offset, u) =>
              `${pointer(j)}_${u} = ${loadValue(input.dtype, `${pointer(j)}[${address(offset)}]`)}`,
          )
          .join(', ')};`,
      );
    });
    offsets.forEach((offset, u) => {
      body.push(
        `      ct_a = ct_reduce(ct_a, ${mapCall(address(offset), offset, (j) => `${pointer(j)}_${u}`)});`,
      );
    });
    body.push('    }');
    body.push(
      `    for (; ct_k < ct_end; ct_k += ${step}) ct_a = ct_reduce(ct_a, ${mapCall(address('ct_k'), 'ct_k')});`,
    );
    return body;
  };
  lines.push(
    `extern "C" __global__ void ${REDUCTION_ENTRIES.blocks}(${[...kernelInputs, outputParameter].join(', ')}, ct_acc *ct_partials,`,
    '    const unsigned long long ct_length, const unsigned long long ct_segments,',
    '    const unsigned long long ct_parts, const unsigned long long ct_chunk) {',
    '  const unsigned long long ct_items = ct_segments * ct_parts;',
    '  for (unsigned long long ct_w = blockIdx.x; ct_w < ct_items; ct_w += gridDim.x) {',
    '    const unsigned long long ct_segment = ct_w / ct_parts, ct_part = ct_w - ct_segment * ct_parts;',
    '    const unsigned long long ct_begin = ct_part * ct_chunk;',
    '    const unsigned long long ct_end = ct_begin + ct_chunk < ct_length ? ct_begin + ct_chunk : ct_length;',
    '    const unsigned long long ct_base = ct_segment * ct_length;',
    ...accumulate('ct_begin + threadIdx.x', 'blockDim.x', '1'),
    '    ct_a = ct_block_reduce(ct_a);',
    '    if (threadIdx.x == 0) ct_finish(ct_a, ct_y, ct_partials, ct_segment, ct_part, ct_parts, ct_length);',
    '  }',
    '}',
    '',
    `extern "C" __global__ void ${REDUCTION_ENTRIES.threads}(${[...kernelInputs, outputParameter].join(', ')}, ct_acc *ct_partials,`,
    '    const unsigned long long ct_length, const unsigned long long ct_segments,',
    '    const unsigned long long ct_parts, const unsigned long long ct_chunk,',
    '    const unsigned long long ct_segment_stride, const unsigned long long ct_element_stride) {',
    '  const unsigned long long ct_items = ct_segments * ct_parts;',
    '  const unsigned long long ct_step = (unsigned long long)blockDim.x * gridDim.x;',
    '  for (unsigned long long ct_w = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; ct_w < ct_items; ct_w += ct_step) {',
    '    // Segments fastest: neighbouring threads take neighbouring segments.',
    '    const unsigned long long ct_part = ct_w / ct_segments, ct_segment = ct_w - ct_part * ct_segments;',
    '    const unsigned long long ct_begin = ct_part * ct_chunk;',
    '    const unsigned long long ct_end = ct_begin + ct_chunk < ct_length ? ct_begin + ct_chunk : ct_length;',
    '    const unsigned long long ct_base = ct_segment * ct_segment_stride;',
    ...accumulate('ct_begin', '1', 'ct_element_stride'),
    '    ct_finish(ct_a, ct_y, ct_partials, ct_segment, ct_part, ct_parts, ct_length);',
    '  }',
    '}',
    '',
    `extern "C" __global__ void ${REDUCTION_ENTRIES.partials}(const ct_acc *ct_partials, ${outputParameter},`,
    '    const unsigned long long ct_length, const unsigned long long ct_segments,',
    '    const unsigned long long ct_parts) {',
    '  for (unsigned long long ct_segment = blockIdx.x; ct_segment < ct_segments; ct_segment += gridDim.x) {',
    '    ct_acc ct_a = ct_identity();',
    '    for (unsigned long long ct_q = threadIdx.x; ct_q < ct_parts; ct_q += blockDim.x) {',
    '      ct_a = ct_reduce(ct_a, ct_partials[ct_segment * ct_parts + ct_q]);',
    '    }',
    '    ct_a = ct_block_reduce(ct_a);',
    '    if (threadIdx.x == 0) ct_finish(ct_a, ct_y, (ct_acc *)0, ct_segment, 0, 1, ct_length);',
    '  }',
    '}',
  );
  const elementBytes = vectorizable(source);
  if (elementBytes !== undefined) lines.push('', ...vectorsKernel(source, elementBytes, mapCall));
  return `${lines.join('\n')}\n`;
}

/**
 * `ct_reduce_vectors`: the full reduction of the one array input, read as 16-byte vectors from
 * its first 16-byte boundary (`ct_head` elements in). The vectors go in tiles of VECTOR_UNROLL
 * vectors per thread, tile t to block t % gridDim.x; each thread loads its VECTOR_UNROLL
 * vectors of a tile (a block's loads are contiguous) before adding each into its own
 * accumulator. The head and the elements after the last whole vector are taken by the first
 * threads, one each. Block b's value is part b of gridDim.x.
 */
function vectorsKernel(
  source: ReductionSource,
  elementBytes: number,
  mapCall: (address: string, index: string, loaded?: (j: number) => string) => string,
): string[] {
  const { inputs, output } = source;
  const arrayIndex = inputs.findIndex((input) => !input.scalar);
  const array = inputs[arrayIndex]!;
  const x = pointer(arrayIndex);
  const storage = CTYPES[array.dtype].storage;
  const width = VECTOR_BYTES / elementBytes;
  const kernelInputs = inputs.map((input, j) =>
    input.scalar
      ? `const ${CTYPES[input.dtype].value} ${pointer(j)}`
      : `const ${storage} *__restrict__ ${x}`,
  );
  const accumulators = Array.from({ length: VECTOR_UNROLL }, (_, u) => `ct_a${u}`);
  const at = (u: number) => (u === 0 ? 'ct_k' : `ct_k + ${u === 1 ? '' : `${u} * `}blockDim.x`);
  const lines = [
    `// ${VECTOR_BYTES} bytes of ${storage}: one vector load.`,
    `struct alignas(${VECTOR_BYTES}) ct_vector { ${storage} ct_lane[${width}]; };`,
    '',
    `extern "C" __global__ void ${REDUCTION_ENTRIES.vectors}(${[...kernelInputs, `${CTYPES[output.dtype].storage} *ct_y`].join(', ')},`,
    '    ct_acc *ct_partials, const unsigned long long ct_length, const unsigned long long ct_head) {',
    `  const unsigned long long ct_vector_count = (ct_length - ct_head) / ${width};`,
    `  const ct_vector *__restrict__ ct_vectors = (const ct_vector *)(${x} + ct_head);`,
    `  const unsigned long long ct_tile = (unsigned long long)blockDim.x * ${VECTOR_UNROLL};`,
    '  const unsigned long long ct_step = ct_tile * gridDim.x;',
    `  ct_acc ${accumulators.map((a) => `${a} = ct_identity()`).join(', ')};`,
    '  unsigned long long ct_k = blockIdx.x * ct_tile + threadIdx.x;',
    `  for (; ${at(VECTOR_UNROLL - 1)} < ct_vector_count; ct_k += ct_step) {`,
    `    const ct_vector ${accumulators.map((_, u) => `ct_v${u} = ct_vectors[${at(u)}]`).join(', ')};`,
  ];
  accumulators.forEach((a, u) => {
    const index = `ct_head + ${width} * ${u === 0 ? 'ct_k' : `(${at(u)})`}`;
    for (let lane = 0; lane < width; lane++) {
      const element = lane === 0 ? index : `${index} + ${lane}`;
      lines.push(
        `    ${a} = ct_reduce(${a}, ${mapCall('', element, () => `ct_v${u}.ct_lane[${lane}]`)});`,
      );
    }
  });
  lines.push(
    '  }',
    '  // The last tile, when it is not whole (its block only).',
    '  for (; ct_k < ct_vector_count; ct_k += blockDim.x) {',
    '    const ct_vector ct_v0 = ct_vectors[ct_k];',
  );
  for (let lane = 0; lane < width; lane++) {
    const index = `ct_head + ${width} * ct_k${lane === 0 ? '' : ` + ${lane}`}`;
    lines.push(
      `    ct_a0 = ct_reduce(ct_a0, ${mapCall('', index, () => `ct_v0.ct_lane[${lane}]`)});`,
    );
  }
  lines.push(
    '  }',
    '  // The elements before the first vector and after the last: one each for the first threads.',
    '  const unsigned long long ct_thread = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;',
    `  const unsigned long long ct_tail = ct_head + ${width} * ct_vector_count;`,
    `  if (ct_thread < ct_head) ct_a1 = ct_reduce(ct_a1, ${mapCall('ct_thread', 'ct_thread')});`,
    `  if (ct_thread < ct_length - ct_tail) ct_a2 = ct_reduce(ct_a2, ${mapCall('ct_tail + ct_thread', 'ct_tail + ct_thread')});`,
    `  ct_acc ct_a = ${combine(accumulators)};`,
    '  ct_a = ct_block_reduce(ct_a);',
    '  if (threadIdx.x == 0) ct_finish(ct_a, ct_y, ct_partials, 0, blockIdx.x, gridDim.x, ct_length);',
    '}',
  );
  return lines;
}

/** `ct_reduce` over the accumulators, pairwise: ct_reduce(ct_reduce(ct_a0, ct_a1), ct_reduce(ct_a2, ct_a3)). */
function combine(values: readonly string[]): string {
  if (values.length === 1) return values[0]!;
  const half = values.length >> 1;
  return `ct_reduce(${combine(values.slice(0, half))}, ${combine(values.slice(half))})`;
}

/** Bytes of an accumulator of C type `accumulator` (the partials' element size). */
export function accumulatorBytes(accumulator: string): number {
  if (accumulator === 'float' || accumulator === 'int' || accumulator === 'unsigned int') return 4;
  // double, long long, and the arg-reductions' struct of a value and a long long (16).
  return accumulator.startsWith('struct') || accumulator === 'ct_arg' ? 16 : 8;
}
