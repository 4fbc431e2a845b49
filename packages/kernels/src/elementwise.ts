/**
 * `elementwise(signature, body)`: a kernel from an expression, in the spirit of CuPy's
 * ElementwiseKernel. Each call checks its arguments, binds the type variables, and launches
 * the variant compiled for those dtypes (and for which inputs are scalars) on the current
 * task's stream.
 */
import {
  CudaArgumentError,
  currentStream,
  DeviceArray,
  type DType,
  type KernelArgument,
  type LaunchConfig,
  launch,
  type Stream,
} from '@cuda-tasks/cudadrv';
import {
  type CallOptions,
  checkArray,
  checkSameShape,
  describe,
  isOptions,
  scalarValue,
} from './arguments.js';
import {
  ELEMENTWISE_ENTRY,
  elementwiseParameters,
  generateElementwise,
  type ResolvedParameter,
} from './codegen-elementwise.js';
import { CompiledSource } from './compiled.js';
import { CTYPES, DTYPE_BY_CODE } from './ctypes.js';
import { assigns, checkCode, type Parameter, parseSignature, type Signature } from './signature.js';

/** Names the body can use besides the parameters: the element's index and the count. */
export const ELEMENTWISE_RESERVED = ['i', 'n'] as const;

/** Options of `elementwise`. */
export interface ElementwiseOptions {
  /** A name for messages and NVRTC's file name (default: from the signature). */
  name?: string;
}

/** What a kernel returns: the output array, or an array of them for several outputs. */
export type ElementwiseResult<S extends string> = string extends S
  ? DeviceArray | DeviceArray[]
  : S extends `${string}->${infer Outputs}`
    ? Outputs extends `${string},${string}`
      ? DeviceArray[]
      : DeviceArray
    : DeviceArray | DeviceArray[];

/**
 * An element-wise kernel: call it with its inputs (DeviceArrays of one shape, or numbers),
 * then optionally its outputs (allocated when not passed), then optionally `{ stream }`.
 */
export interface ElementwiseKernel<S extends string = string> {
  /** Runs the kernel: inputs, then optionally outputs, then optionally `{ stream }`. */
  (...args: (DeviceArray | number | CallOptions | undefined)[]): ElementwiseResult<S>;
  /** The signature, whitespace folded. */
  readonly signature: string;
  /** The body as given. */
  readonly body: string;
  /**
   * The CUDA C source a call with these arguments compiles (checked as a call would be; no
   * native call), for reading or debugging.
   */
  source(...args: (DeviceArray | number | CallOptions | undefined)[]): string;
}

/** One compiled variant: the dtypes bound and which inputs are scalars. */
class Variant {
  readonly compiled: CompiledSource;
  readonly parameters: readonly ResolvedParameter[];
  /** Reused launch configuration and argument list (a launch allocates nothing of ours). */
  readonly config: LaunchConfig & { grid: number; block: number };
  readonly args: KernelArgument[];

  constructor(
    name: string,
    entry: string,
    signature: string,
    body: string,
    inputs: ResolvedParameter[],
    outputs: ResolvedParameter[],
  ) {
    const source = { signature, inputs, outputs, body, entry };
    this.compiled = new CompiledSource(name, generateElementwise(source), [
      { name: entry, parameters: elementwiseParameters(source) },
    ]);
    this.parameters = [...inputs, ...outputs];
    this.config = { grid: 1, block: 1, stream: undefined };
    this.args = new Array(inputs.length + outputs.length + 1).fill(0);
  }
}

const NO_VALUE: unknown[] = [];

/** The program behind an elementwise kernel; also used directly by the ready-made ops. */
export class ElementwiseProgram {
  readonly signature: Signature;
  readonly body: string;
  readonly what: string;
  readonly #name: string;
  readonly #entry: string;
  readonly #variants = new Map<number, Variant>();
  readonly #bound: (DType | undefined)[];
  readonly #codes: number[];
  readonly #shapeOf: (DeviceArray | undefined)[];

  constructor(signature: string, body: string, options: ElementwiseOptions = {}) {
    const provisional = options.name ?? 'elementwise';
    this.signature = parseSignature(signature, provisional, ELEMENTWISE_RESERVED);
    this.body = checkCode(body, provisional, 'the body');
    this.what = options.name ?? `elementwise '${this.signature.text}'`;
    const stem = (options.name ?? 'elementwise').replace(/[^A-Za-z0-9_]+/g, '_');
    this.#name = `${stem}.cu`;
    // The kernel's name as traces and profilers show it, e.g. ct_map_sin.
    this.#entry = stem === 'elementwise' ? ELEMENTWISE_ENTRY : `ct_${stem}`;
    for (const output of this.signature.outputs) {
      if (!assigns(body, output.name)) {
        throw new CudaArgumentError(
          `${this.what}: the body never assigns the output ${output.name} (e.g. "${output.name} = ...")`,
        );
      }
    }
    const count = this.signature.inputs.length + this.signature.outputs.length;
    this.#bound = new Array(this.signature.variables.length).fill(undefined);
    this.#codes = new Array(count).fill(0);
    this.#shapeOf = new Array(1).fill(undefined);
  }

  /**
   * Checks the arguments and binds the dtypes; returns the variant key, and leaves the shape
   * reference in `#shapeOf[0]`. Throws before any native call on bad input.
   */
  private resolve(
    inputs: ArrayLike<unknown>,
    outputs: ArrayLike<unknown>,
    outputStart: number,
    outputEnd: number,
  ): number {
    const { signature, what } = this;
    const bound = this.#bound;
    bound.fill(undefined);
    let reference: DeviceArray | undefined;
    let referenceName = '';
    const bind = (parameter: Parameter, dtype: DType, label: string) => {
      const type = parameter.type;
      if ('dtype' in type) {
        if (type.dtype !== dtype)
          throw new CudaArgumentError(`${what}: ${label} must be ${type.dtype}, got ${dtype}`);
      } else {
        const previous = bound[type.variable];
        if (previous === undefined) bound[type.variable] = dtype;
        else if (previous !== dtype) {
          throw new CudaArgumentError(
            `${what}: ${label} is ${dtype} but ${signature.variables[type.variable]} is already ${previous} (no type promotion: convert first)`,
          );
        }
      }
    };
    const check = (parameter: Parameter, value: unknown, label: string) => {
      const array = checkArray(value, what, label);
      bind(parameter, array.dtype, label);
      if (reference === undefined) {
        reference = array;
        referenceName = parameter.name;
      } else checkSameShape(array, reference, what, label, referenceName);
    };
    for (let j = 0; j < signature.inputs.length; j++) {
      const parameter = signature.inputs[j]!;
      const value = inputs[j];
      if (typeof value === 'number') continue;
      if (!DeviceArray.isInstance(value)) {
        throw new CudaArgumentError(
          `${what}: input ${parameter.name} must be a DeviceArray or a number, got ${describe(value)}`,
        );
      }
      check(parameter, value, `input ${parameter.name}`);
    }
    for (let j = 0; j < signature.outputs.length; j++) {
      const value = outputStart + j < outputEnd ? outputs[outputStart + j] : undefined;
      if (value !== undefined) {
        check(signature.outputs[j]!, value, `output ${signature.outputs[j]!.name}`);
      }
    }
    if (reference === undefined) {
      throw new CudaArgumentError(
        `${what}: no array argument to take the shape from; pass the output${signature.outputs.length > 1 ? 's' : ''}`,
      );
    }
    const dtypeOf = (parameter: Parameter, label: string): DType => {
      const type = parameter.type;
      if ('dtype' in type) return type.dtype;
      const dtype = bound[type.variable];
      if (dtype === undefined) {
        throw new CudaArgumentError(
          `${what}: cannot tell ${signature.variables[type.variable]} (the dtype of ${label}) from the arguments; pass ${label} as an array`,
        );
      }
      return dtype;
    };
    const codes = this.#codes;
    let key = 0;
    let factor = 1;
    for (let j = 0; j < signature.inputs.length; j++) {
      const parameter = signature.inputs[j]!;
      const dtype = dtypeOf(parameter, parameter.name);
      const value = inputs[j];
      const scalar = typeof value === 'number';
      if (scalar) scalarValue(value, dtype, what, `input ${parameter.name}`);
      codes[j] = CTYPES[dtype].code + (scalar ? 8 : 0);
      key += codes[j]! * factor;
      factor *= 16;
    }
    const offset = signature.inputs.length;
    for (let j = 0; j < signature.outputs.length; j++) {
      const parameter = signature.outputs[j]!;
      codes[offset + j] = CTYPES[dtypeOf(parameter, `output ${parameter.name}`)].code;
      key += codes[offset + j]! * factor;
      factor *= 16;
    }
    this.#shapeOf[0] = reference;
    return key;
  }

  private variant(key: number): Variant {
    let variant = this.#variants.get(key);
    if (variant === undefined) {
      const codes = this.#codes;
      const resolved = (parameter: Parameter, j: number): ResolvedParameter => ({
        name: parameter.name,
        dtype: DTYPE_BY_CODE[codes[j]! & 7]!,
        scalar: codes[j]! >= 8,
      });
      const inputs = this.signature.inputs.map(resolved);
      const offset = inputs.length;
      const outputs = this.signature.outputs.map((parameter, j) => resolved(parameter, offset + j));
      variant = new Variant(
        this.#name,
        this.#entry,
        this.signature.text,
        this.body,
        inputs,
        outputs,
      );
      this.#variants.set(key, variant);
    }
    return variant;
  }

  /** The source a call with these inputs and outputs compiles (checked as a call would be). */
  sourceFor(
    inputs: ArrayLike<unknown>,
    outputs: ArrayLike<unknown> = NO_VALUE,
    outputStart = 0,
    outputEnd = outputs.length,
  ): string {
    const source = this.variant(this.resolve(inputs, outputs, outputStart, outputEnd)).compiled
      .source;
    this.#shapeOf[0] = undefined;
    return source;
  }

  /**
   * Runs the kernel: checks, binds, allocates the missing outputs on the stream, launches.
   * The outputs are `outputs[outputStart..outputEnd)` (missing ones are allocated). Returns
   * the output, or all outputs when there are several.
   */
  run(
    inputs: ArrayLike<unknown>,
    outputs: ArrayLike<unknown>,
    stream: Stream | undefined,
    outputStart = 0,
    outputEnd = outputs.length,
  ): DeviceArray | DeviceArray[] {
    const variant = this.variant(this.resolve(inputs, outputs, outputStart, outputEnd));
    const reference = this.#shapeOf[0]!;
    this.#shapeOf[0] = undefined;
    const target = stream ?? currentStream();
    const parameters = variant.parameters;
    const args = variant.args;
    const inputCount = this.signature.inputs.length;
    const outputCount = this.signature.outputs.length;
    const n = reference.length;
    // Compiled (or found) before anything is allocated: a CompileError leaves nothing behind.
    const loaded = n > 0 ? variant.compiled.kernels(target.context)[0]! : undefined;
    let single: DeviceArray | undefined;
    let several: DeviceArray[] | undefined;
    if (outputCount > 1) several = new Array(outputCount);
    for (let j = 0; j < outputCount; j++) {
      let output = (outputStart + j < outputEnd ? outputs[outputStart + j] : undefined) as
        | DeviceArray
        | undefined;
      if (output === undefined) {
        output = DeviceArray.empty(parameters[inputCount + j]!.dtype, reference.shape, {
          stream: target,
        });
      }
      args[inputCount + j] = output;
      if (several === undefined) single = output;
      else several[j] = output;
    }
    if (loaded !== undefined) {
      for (let j = 0; j < inputCount; j++) {
        const value = inputs[j];
        args[j] = (
          typeof value === 'number'
            ? scalarValue(value, parameters[j]!.dtype, this.what, 'input')
            : value
        ) as KernelArgument;
      }
      args[inputCount + outputCount] = n;
      const config = variant.config;
      const blocks = Math.ceil(n / loaded.blockSize);
      config.grid = Math.min(blocks, loaded.fullGrid);
      config.block = loaded.blockSize;
      config.stream = target;
      try {
        launch(loaded.kernel, config, ...args);
      } finally {
        config.stream = undefined;
        args.fill(0);
      }
    } else args.fill(0);
    return several ?? single!;
  }
}

/**
 * An element-wise kernel from a signature and a body of CUDA C statements. Inputs may be
 * DeviceArrays (all of one shape, contiguous) or numbers; outputs are arrays of that shape,
 * allocated when not passed. The body sees each input's value, each output as a reference to
 * its element (so `y += x` reads it), the index `i` and the element count `n`. Half types
 * (float16, bfloat16) compute in float and are rounded to nearest even when stored.
 *
 * Compiled with NVRTC once per (body, dtypes, scalar inputs, device architecture), kept in
 * memory and in the on-disk cache (see `setKernelCacheDirectory`); launched with a grid-stride
 * loop and an occupancy-chosen block size on the current task's stream (or `{ stream }`).
 * @example
 * const scaledSin = elementwise('x: T, y: T, a: float32 -> z: T', 'z = a * sinf(x) * y');
 * const z = scaledSin(x, y, 0.5); // allocates z
 * scaledSin(x, y, 2, z); // into z
 */
export function elementwise<S extends string>(
  signature: S,
  body: string,
  options: ElementwiseOptions = {},
): ElementwiseKernel<S> {
  const program = new ElementwiseProgram(signature, body, options);
  const inputCount = program.signature.inputs.length;
  const outputCount = program.signature.outputs.length;
  // The arguments' count without a trailing options object (checked).
  const count = (args: readonly unknown[]): number => {
    let count = args.length;
    if (count > inputCount && isOptions(args[count - 1])) count--;
    if (count < inputCount || count > inputCount + outputCount) {
      const names = program.signature.inputs.map((input) => input.name).join(', ');
      throw new CudaArgumentError(
        `${program.what}: takes ${inputCount} input${inputCount === 1 ? '' : 's'} (${names}), then up to ${outputCount} output${outputCount === 1 ? '' : 's'} and { stream }; got ${args.length} arguments`,
      );
    }
    return count;
  };
  const kernel = ((...args: unknown[]) => {
    const end = count(args);
    const stream = end < args.length ? (args[end] as CallOptions).stream : undefined;
    return program.run(args, args, stream, inputCount, end);
  }) as unknown as ElementwiseKernel<S>;
  Object.defineProperties(kernel, {
    signature: { value: program.signature.text, enumerable: true },
    body: { value: program.body, enumerable: true },
    source: {
      value: (...args: unknown[]) => program.sourceFor(args, args, inputCount, count(args)),
    },
  });
  return kernel;
}
