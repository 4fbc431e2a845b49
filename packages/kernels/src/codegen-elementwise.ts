/**
 * CUDA C for an element-wise kernel: the body becomes a device function over values, and a
 * grid-stride loop applies it to every index, four indices per iteration with all loads
 * issued first (more memory requests in flight than one element at a time).
 */
import type { DType, KernelParameter } from '@cuda-tasks/cudadrv';
import { CTYPES, HALF_PRELUDE, isHalf, loadValue, storeValue } from './ctypes.js';
import { reads } from './signature.js';

/** A parameter with its dtype bound for one compiled variant. */
export interface ResolvedParameter {
  /** The name the body uses. */
  readonly name: string;
  /** The dtype of this variant. */
  readonly dtype: DType;
  /** Inputs only: passed as a number, not an array. */
  readonly scalar: boolean;
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

/** Generates the kernel's CUDA C source. */
export function generateElementwise(source: ElementwiseSource): string {
  const { inputs, outputs, body } = source;
  const all = [...inputs, ...outputs];
  const value = (parameter: ResolvedParameter) => CTYPES[parameter.dtype].value;
  const storage = (parameter: ResolvedParameter) => CTYPES[parameter.dtype].storage;
  const lines: string[] = [];
  lines.push(`// @cuda-tasks/kernels elementwise: ${source.signature}`);
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
  const kernelParameters = [
    ...inputs.map((input, k) =>
      input.scalar
        ? `const ${value(input)} ct_${input.name}`
        : `${alias?.input === k ? '' : 'const '}${storage(input)} *ct_${input.name}`,
    ),
    ...outputs
      .filter((_, j) => alias?.output !== j)
      .map((output) => `${storage(output)} *ct_${output.name}`),
    'const unsigned long long ct_n',
  ];
  // One call of the body for index `index`, with the inputs' values in `loaded(input)`.
  const apply = (index: string, loaded: (input: ResolvedParameter) => string) => {
    const halves = outputs.filter((output) => isHalf(output.dtype));
    const outputArguments = outputs.map((output) =>
      isHalf(output.dtype) ? `ct_o_${output.name}` : `ct_${output.name}[${index}]`,
    );
    const call = `ct_body(${[
      ...inputs.map((input) => (input.scalar ? `ct_${input.name}` : loaded(input))),
      ...outputArguments,
      index,
      'ct_n',
    ].join(', ')});`;
    if (halves.length === 0) return [`    ${call}`];
    return [
      '    {',
      ...halves.map(
        (output) =>
          `      float ct_o_${output.name} = ${reads(body, output.name) ? loadValue(output.dtype, `ct_${output.name}[${index}]`) : '0.0f'};`,
      ),
      `      ${call}`,
      ...halves.map(
        (output) =>
          `      ct_${output.name}[${index}] = ${storeValue(output.dtype, `ct_o_${output.name}`)};`,
      ),
      '    }',
    ];
  };
  const arrays = inputs.filter((input) => !input.scalar);
  const indices = Array.from({ length: UNROLL }, (_, u) => (u === 0 ? 'ct_i' : `ct_i${u}`));

  lines.push(
    `extern "C" __global__ void ${source.entry ?? ELEMENTWISE_ENTRY}(${kernelParameters.join(', ')}) {`,
  );
  if (alias !== undefined) {
    const output = outputs[alias.output]!;
    lines.push(
      `  ${storage(output)} *const ct_${output.name} = ct_${inputs[alias.input]!.name}; // in place`,
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
  for (const input of arrays) {
    lines.push(
      `    const ${value(input)} ${indices
        .map(
          (index, u) =>
            `ct_${input.name}_${u} = ${loadValue(input.dtype, `ct_${input.name}[${index}]`)}`,
        )
        .join(', ')};`,
    );
  }
  indices.forEach((index, u) => {
    lines.push(...apply(index, (input) => `ct_${input.name}_${u}`));
  });
  lines.push('  }');
  lines.push('  for (; ct_i < ct_n; ct_i += ct_stride) {');
  lines.push(...apply('ct_i', (input) => loadValue(input.dtype, `ct_${input.name}[ct_i]`)));
  lines.push('  }');
  lines.push('}');
  return `${lines.join('\n')}\n`;
}
