/**
 * CUDA C for an element-wise kernel: the body becomes a device function over values, and a
 * grid-stride loop applies it to every index, four indices per iteration with all loads
 * issued first (more memory requests in flight than one element at a time).
 */
import type { DType, KernelParameter } from '@cuda-tasks/cudadrv';
import { CTYPES, DTYPE_BY_CODE, HALF_PRELUDE, isHalf, loadValue, storeValue } from './ctypes.js';
import { type Parameter, reads } from './signature.js';

/** A parameter with its dtype bound for one compiled variant. */
export interface ResolvedParameter {
  /** The name the body uses. */
  readonly name: string;
  /** The dtype of this variant. */
  readonly dtype: DType;
  /** Inputs only: passed as a number, not an array. */
  readonly scalar: boolean;
}

/**
 * `parameter` bound to the dtype of a variant's `code` for it: the dtype's `CTYPES` code, plus
 * 8 for an input passed as a number.
 */
export function resolvedParameter(parameter: Parameter, code: number): ResolvedParameter {
  return { name: parameter.name, dtype: DTYPE_BY_CODE[code & 7]!, scalar: code >= 8 };
}

/** What an element-wise kernel is generated from. */
export interface ElementwiseSource {
  /** The signature's text (shown in a comment). */
  readonly signature: string;
  /** Inputs, in order. */
  readonly inputs: readonly ResolvedParameter[];
  /** Outputs, in order. */
  readonly outputs: readonly ResolvedParameter[];
  /** C statements assigning the outputs. */
  readonly body: string;
  /** The kernel's name (default `ct_elementwise`; traces and profilers show it). */
  readonly entry?: string;
  /**
   * An output that is the same array as an input (in place): one pointer, passed once and
   * declared written, serves both.
   */
  readonly alias?: { readonly output: number; readonly input: number };
}

/** The kernel's entry point unless the source names another. */
export const ELEMENTWISE_ENTRY = 'ct_elementwise';

/** Indices handled per loop iteration (loads first, then the bodies). */
export const ELEMENTWISE_UNROLL = 4;
const UNROLL = ELEMENTWISE_UNROLL;

/** Whether any parameter has a half type (the source then needs the conversion helpers). */
export function needsHalf(parameters: readonly ResolvedParameter[]): boolean {
  return parameters.some((parameter) => isHalf(parameter.dtype));
}

/**
 * The kernel parameters `launch` checks, in order: inputs, outputs (less one that aliases an
 * input), then the element count.
 */
export function elementwiseParameters(source: ElementwiseSource): KernelParameter[] {
  const alias = source.alias;
  return [
    ...source.inputs.map((input, k) =>
      input.scalar
        ? CTYPES[input.dtype].scalar
        : ((alias?.input === k ? `${input.dtype}*` : `const ${input.dtype}*`) as KernelParameter),
    ),
    ...source.outputs
      .filter((_, j) => alias?.output !== j)
      .map((output) => `${output.dtype}*` as KernelParameter),
    'uint64',
  ];
}

/** File-scope names of an element-wise source other than its entry point. */
const HELPERS = ['ct_body', 'ct_f16_to_f32', 'ct_f32_to_f16', 'ct_bf16_to_f32', 'ct_f32_to_bf16'];

/**
 * The entry point of a kernel named `stem` (letters, digits and _): `ct_<stem>`, or
 * `ct_<stem>_kernel` where that would be one of the source's own helpers.
 */
export function elementwiseEntry(stem: string): string {
  const entry = `ct_${stem}`;
  return HELPERS.includes(entry) ? `${entry}_kernel` : entry;
}

/**
 * The kernel parameter of parameter `j` (inputs, then outputs): generated names come from the
 * index, never the user's name, and start with ct_, which no user name may.
 */
const pointer = (j: number) => `ct_p${j}`;

/**
 * Generates the kernel's CUDA C source. The body is a device function whose parameters are the
 * user's names (and `i`, `n`); the kernel around it names everything `ct_` + index or a fixed
 * word, so no user name can meet a generated one.
 */
export function generateElementwise(source: ElementwiseSource): string {
  const { inputs, outputs, body } = source;
  const all = [...inputs, ...outputs];
  const value = (parameter: ResolvedParameter) => CTYPES[parameter.dtype].value;
  const storage = (parameter: ResolvedParameter) => CTYPES[parameter.dtype].storage;
  const lines: string[] = [];
  lines.push(`// @cuda-tasks/kernels elementwise: ${source.signature}`);
  lines.push(`// ${all.map((parameter, j) => `${pointer(j)}: ${parameter.name}`).join(', ')}`);
  if (needsHalf(all)) lines.push(HALF_PRELUDE);

  const bodyParameters = [
    ...inputs.map((input) => `const ${value(input)} ${input.name}`),
    ...outputs.map((output) => `${value(output)} &${output.name}`),
    'const unsigned long long i',
    'const unsigned long long n',
  ];
  lines.push(`__device__ __forceinline__ void ct_body(${bodyParameters.join(', ')}) {`);
  lines.push(
    body.trim().endsWith(';') || body.trim().endsWith('}') ? body.trim() : `${body.trim()};`,
  );
  lines.push('}');
  lines.push('');

  const alias = source.alias;
  const first = inputs.length;
  const kernelParameters = [
    ...inputs.map((input, k) =>
      input.scalar
        ? `const ${value(input)} ${pointer(k)}`
        : `${alias?.input === k ? '' : 'const '}${storage(input)} *${pointer(k)}`,
    ),
    ...outputs.flatMap((output, j) =>
      alias?.output === j ? [] : [`${storage(output)} *${pointer(first + j)}`],
    ),
    'const unsigned long long ct_n',
  ];
  // One call of the body for index `index`, with input k's value in `loaded(k)`.
  const apply = (index: string, loaded: (k: number) => string) => {
    const halves = outputs.flatMap((output, j) => (isHalf(output.dtype) ? [first + j] : []));
    const outputArguments = outputs.map((output, j) =>
      isHalf(output.dtype) ? `ct_o${first + j}` : `${pointer(first + j)}[${index}]`,
    );
    const call = `ct_body(${[
      ...inputs.map((input, k) => (input.scalar ? pointer(k) : loaded(k))),
      ...outputArguments,
      index,
      'ct_n',
    ].join(', ')});`;
    if (halves.length === 0) return [`    ${call}`];
    return [
      '    {',
      ...halves.map((j) => {
        const output = all[j]!;
        const start = reads(body, output.name)
          ? loadValue(output.dtype, `${pointer(j)}[${index}]`)
          : '0.0f';
        return `      float ct_o${j} = ${start};`;
      }),
      `      ${call}`,
      ...halves.map(
        (j) => `      ${pointer(j)}[${index}] = ${storeValue(all[j]!.dtype, `ct_o${j}`)};`,
      ),
      '    }',
    ];
  };
  const indices = Array.from({ length: UNROLL }, (_, u) => (u === 0 ? 'ct_i' : `ct_i${u}`));

  lines.push(
    `extern "C" __global__ void ${source.entry ?? ELEMENTWISE_ENTRY}(${kernelParameters.join(', ')}) {`,
  );
  if (alias !== undefined) {
    const output = outputs[alias.output]!;
    lines.push(
      `  ${storage(output)} *const ${pointer(first + alias.output)} = ${pointer(alias.input)}; // in place`,
    );
  }
  lines.push('  const unsigned long long ct_stride = (unsigned long long)blockDim.x * gridDim.x;');
  lines.push(
    '  unsigned long long ct_i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;',
  );
  lines.push(`  for (; ct_i + ${UNROLL - 1} * ct_stride < ct_n; ct_i += ${UNROLL} * ct_stride) {`);
  lines.push(
    `    const unsigned long long ${indices
      .slice(1)
      .map((index, u) => `${index} = ${indices[u]} + ct_stride`)
      .join(', ')};`,
  );
  inputs.forEach((input, k) => {
    if (input.scalar) return;
    lines.push(
      `    const ${value(input)} ${indices
        .map(
          (index, u) => `${pointer(k)}_${u} = ${loadValue(input.dtype, `${pointer(k)}[${index}]`)}`,
        )
        .join(', ')};`,
    );
  });
  indices.forEach((index, u) => {
    lines.push(...apply(index, (k) => `${pointer(k)}_${u}`));
  });
  lines.push('  }');
  lines.push('  for (; ct_i < ct_n; ct_i += ct_stride) {');
  lines.push(...apply('ct_i', (k) => loadValue(inputs[k]!.dtype, `${pointer(k)}[ct_i]`)));
  lines.push('  }');
  lines.push('}');
  return `${lines.join('\n')}\n`;
}
