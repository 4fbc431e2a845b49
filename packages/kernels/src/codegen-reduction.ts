/**
 * CUDA C for a reduction: `map` turns each element into an accumulator value, `reduce`
 * combines two of them, `identity` starts each partial result, `post` turns the final value
 * into the output. Three entry points share them:
 *
 * - `ct_reduce_blocks`: a block per (segment, part) of contiguous elements (full reductions,
 *   and along axis 0 of a column-major matrix, whose columns are contiguous). Each thread
 *   accumulates a strided share in order, then the block combines its threads' values in a
 *   fixed tree in shared memory.
 * - `ct_reduce_threads`: a thread per (segment, part) for any strides (along axis 1, where
 *   neighbouring threads then read neighbouring rows, and short columns).
 * - `ct_reduce_partials`: a block per segment combines the parts' values, when a segment was
 *   split into parts to fill the GPU.
 *
 * No atomics: for a given shape (and device) the order of every combination is fixed, so the
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

/** The three entry points. */
export const REDUCTION_ENTRIES = {
  blocks: 'ct_reduce_blocks',
  threads: 'ct_reduce_threads',
  partials: 'ct_reduce_partials',
} as const;

/** Threads per block at most (the shared-memory tree is sized for it). */
export const MAX_REDUCTION_BLOCK = 1024;

/**
 * Elements each thread loads before combining them: memory requests in flight. A reduction
 * reads each element once and computes little, so it needs many bytes in flight per SM to
 * reach the memory's bandwidth (Little's law: about 4.8 TB/s x 0.7 us over 132 SMs is 25 KB).
 */
const UNROLL = 8;

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
  };
}

/** Generates the module's CUDA C source. */
export function generateReduction(source: ReductionSource): string {
  const { inputs, output } = source;
  const value = (parameter: ResolvedParameter) => CTYPES[parameter.dtype].value;
  const storage = (parameter: ResolvedParameter) => CTYPES[parameter.dtype].storage;
  const arrays = inputs.filter((input) => !input.scalar);
  const lines: string[] = [];
  lines.push(`// @cuda-tasks/kernels reduction: ${source.signature}`);
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
        '    float ct_o = 0.0f;',
        '    ct_post(a, ct_o, count);',
        `    ct_y[s] = ${storeValue(output.dtype, 'ct_o')};`,
      ]
    : ['    ct_post(a, ct_y[s], count);'];
  lines.push(
    '// The result of (segment s, part p): the output when the segment is one part, else a partial.',
    `__device__ __forceinline__ void ct_finish(const ct_acc a, ${storage(output)} *ct_y, ct_acc *ct_partials,`,
    '    const unsigned long long s, const unsigned long long p, const unsigned long long parts,',
    '    const unsigned long long count) {',
    '  if (parts == 1) {',
    ...outputStore,
    '  } else {',
    '    ct_partials[s * parts + p] = a;',
    '  }',
    '}',
    '',
    "// Combines the block's values in a fixed tree (blockDim.x a power of two).",
    '__device__ ct_acc ct_block_reduce(const ct_acc a) {',
    `  __shared__ ct_acc ct_shared[${MAX_REDUCTION_BLOCK}];`,
    '  const unsigned int t = threadIdx.x;',
    '  ct_shared[t] = a;',
    '  __syncthreads();',
    '  for (unsigned int half = blockDim.x >> 1; half > 0; half >>= 1) {',
    '    if (t < half) ct_shared[t] = ct_reduce(ct_shared[t], ct_shared[t + half]);',
    '    __syncthreads();',
    '  }',
    '  const ct_acc result = ct_shared[0];',
    '  __syncthreads();',
    '  return result;',
    '}',
    '',
  );
  const kernelInputs = inputs.map((input) =>
    input.scalar
      ? `const ${value(input)} ct_${input.name}`
      : `const ${storage(input)} *ct_${input.name}`,
  );
  const outputParameter = `${storage(output)} *ct_y`;
  // The map's arguments for the element at `address` with index `index`; `loaded(input)` names
  // an already loaded value, or undefined to load it here.
  const mapCall = (address: string, index: string, loaded?: (input: ResolvedParameter) => string) =>
    `ct_map(${[
      ...inputs.map((input) =>
        input.scalar
          ? `ct_${input.name}`
          : (loaded?.(input) ?? loadValue(input.dtype, `ct_${input.name}[${address}]`)),
      ),
      index,
    ].join(', ')})`;
  // A thread's ordered accumulation over k = first, first + step, ... < end of elements at
  // base + k * stride, UNROLL at a time with all loads first.
  const accumulate = (first: string, step: string, stride: string) => {
    const offsets = Array.from({ length: UNROLL }, (_, u) =>
      u === 0 ? 'k' : `k + ${u === 1 ? '' : `${u} * `}${step}`,
    );
    const address = (offset: string) =>
      stride === '1'
        ? `base + ${offset.includes('+') ? `(${offset})` : offset}`
        : `base + (${offset}) * ${stride}`;
    const body: string[] = [
      '    ct_acc a = ct_identity();',
      `    unsigned long long k = ${first};`,
      `    for (; k + ${UNROLL - 1} * ${step} < end; k += ${UNROLL} * ${step}) {`,
    ];
    for (const input of arrays) {
      body.push(
        `      const ${value(input)} ${offsets
          .map(
            (offset, u) =>
              `ct_${input.name}_${u} = ${loadValue(input.dtype, `ct_${input.name}[${address(offset)}]`)}`,
          )
          .join(', ')};`,
      );
    }
    offsets.forEach((offset, u) => {
      body.push(
        `      a = ct_reduce(a, ${mapCall(address(offset), offset, (input) => `ct_${input.name}_${u}`)});`,
      );
    });
    body.push('    }');
    body.push(`    for (; k < end; k += ${step}) a = ct_reduce(a, ${mapCall(address('k'), 'k')});`);
    return body;
  };
  lines.push(
    `extern "C" __global__ void ${REDUCTION_ENTRIES.blocks}(${[...kernelInputs, outputParameter].join(', ')}, ct_acc *ct_partials,`,
    '    const unsigned long long length, const unsigned long long segments,',
    '    const unsigned long long parts, const unsigned long long chunk) {',
    '  const unsigned long long items = segments * parts;',
    '  for (unsigned long long w = blockIdx.x; w < items; w += gridDim.x) {',
    '    const unsigned long long s = w / parts, p = w - s * parts;',
    '    const unsigned long long begin = p * chunk;',
    '    const unsigned long long end = begin + chunk < length ? begin + chunk : length;',
    '    const unsigned long long base = s * length;',
    ...accumulate('begin + threadIdx.x', 'blockDim.x', '1'),
    '    a = ct_block_reduce(a);',
    '    if (threadIdx.x == 0) ct_finish(a, ct_y, ct_partials, s, p, parts, length);',
    '  }',
    '}',
    '',
    `extern "C" __global__ void ${REDUCTION_ENTRIES.threads}(${[...kernelInputs, outputParameter].join(', ')}, ct_acc *ct_partials,`,
    '    const unsigned long long length, const unsigned long long segments,',
    '    const unsigned long long parts, const unsigned long long chunk,',
    '    const unsigned long long segment_stride, const unsigned long long element_stride) {',
    '  const unsigned long long items = segments * parts;',
    '  const unsigned long long step = (unsigned long long)blockDim.x * gridDim.x;',
    '  for (unsigned long long w = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; w < items; w += step) {',
    '    // Segments fastest: neighbouring threads take neighbouring segments.',
    '    const unsigned long long p = w / segments, s = w - p * segments;',
    '    const unsigned long long begin = p * chunk;',
    '    const unsigned long long end = begin + chunk < length ? begin + chunk : length;',
    '    const unsigned long long base = s * segment_stride;',
    ...accumulate('begin', '1', 'element_stride'),
    '    ct_finish(a, ct_y, ct_partials, s, p, parts, length);',
    '  }',
    '}',
    '',
    `extern "C" __global__ void ${REDUCTION_ENTRIES.partials}(const ct_acc *ct_partials, ${outputParameter},`,
    '    const unsigned long long length, const unsigned long long segments,',
    '    const unsigned long long parts) {',
    '  for (unsigned long long s = blockIdx.x; s < segments; s += gridDim.x) {',
    '    ct_acc a = ct_identity();',
    '    for (unsigned long long q = threadIdx.x; q < parts; q += blockDim.x) {',
    '      a = ct_reduce(a, ct_partials[s * parts + q]);',
    '    }',
    '    a = ct_block_reduce(a);',
    '    if (threadIdx.x == 0) ct_finish(a, ct_y, (ct_acc *)0, s, 0, 1, length);',
    '  }',
    '}',
  );
  return `${lines.join('\n')}\n`;
}

/** Bytes of an accumulator of C type `accumulator` (the partials' element size). */
export function accumulatorBytes(accumulator: string): number {
  if (accumulator === 'float' || accumulator === 'int' || accumulator === 'unsigned int') return 4;
  // double, long long, and the arg-reductions' struct of a value and a long long (16).
  return accumulator.startsWith('struct') || accumulator === 'ct_arg' ? 16 : 8;
}
