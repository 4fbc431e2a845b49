/**
 * `elementwise(signature, body)`: a kernel from an expression, in the spirit of CuPy's
 * ElementwiseKernel. Each call checks its arguments, binds the type variables, and launches
 * the variant compiled for those dtypes (and for which inputs are scalars) on the current
 * task's stream.
 */
import {
  assertOptions,
  CudaArgumentError,
  DeviceArray,
  type DType,
  describeValue,
  type KernelArgument,
  launchOn,
  resolveStream,
  type Stream,
} from '@cuda-tasks/cudadrv';
import {
  type CallOptions,
  checkArray,
  checkOperands,
  checkSameShape,
  clearList,
  isOptions,
  STREAM_OPTIONS,
  sameShape,
  scalarFits,
  scalarValue,
} from './arguments.js';
import {
  ELEMENTWISE_ENTRY,
  ELEMENTWISE_UNROLL,
  elementwiseEntry,
  elementwiseParameters,
  generateElementwise,
  type ResolvedParameter,
  resolvedParameter,
} from './codegen-elementwise.js';
import { CompiledSource, type LoadedKernel } from './compiled.js';
import { CTYPES } from './ctypes.js';
import { assigns, checkCode, parseSignature, type RoleNames, type Signature } from './signature.js';

/** Names the body sees besides the parameters: the element's index and the count. */
export const ELEMENTWISE_RESERVED: RoleNames = {
  inputs: { i: "the body's element index", n: "the body's element count" },
  outputs: { i: "the body's element index", n: "the body's element count" },
};

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
  /** Reused argument list (a launch allocates nothing of ours). */
  readonly args: KernelArgument[];
  /** The output that is passed as its input (in place), or -1. */
  readonly aliasOutput: number;
  /** The grid of the last launch, for `gridKernel` and `gridCount` elements. */
  grid = 1;
  gridKernel: LoadedKernel | undefined;
  gridCount = -1;

  constructor(
    name: string,
    entry: string,
    signature: string,
    body: string,
    inputs: ResolvedParameter[],
    outputs: ResolvedParameter[],
    alias: { output: number; input: number } | undefined,
  ) {
    const source = { signature, inputs, outputs, body, entry, ...(alias ? { alias } : {}) };
    this.compiled = new CompiledSource(name, generateElementwise(source), [
      { name: entry, parameters: elementwiseParameters(source) },
    ]);
    this.parameters = [...inputs, ...outputs];
    this.aliasOutput = alias?.output ?? -1;
    this.args = new Array(inputs.length + outputs.length + (alias ? 0 : 1)).fill(0);
  }

  /**
   * The grid for `count` elements with `loaded`: enough blocks for ELEMENTWISE_UNROLL elements
   * a thread (all loaded at once), at most one full wave (past that each thread loops).
   * Computed once per (kernel, count) in a row.
   */
  gridFor(loaded: LoadedKernel, count: number): number {
    if (count !== this.gridCount || loaded !== this.gridKernel) {
      const blocks = Math.ceil(count / (loaded.blockSize * ELEMENTWISE_UNROLL));
      this.grid = Math.min(blocks, loaded.fullGrid);
      this.gridKernel = loaded;
      this.gridCount = count;
    }
    return this.grid;
  }
}

/** Parameters at most for an in-place variant (its key needs 8 more bits). */
const MAX_ALIASED_PARAMETERS = 11;

const NO_VALUE: unknown[] = [];

/** The program behind an elementwise kernel; also used directly by the ready-made ops. */
export class ElementwiseProgram {
  readonly signature: Signature;
  readonly body: string;
  /** The call label messages name: the kernel's name, else its signature. */
  readonly call: string;
  readonly #name: string;
  readonly #entry: string;
  readonly #variants = new Map<number, Variant>();
  readonly #bound: (DType | undefined)[];
  readonly #codes: number[];
  readonly #shapeOf: (DeviceArray | undefined)[];
  /** The last resolved call's in-place pair: 0, or 1 + output * inputs + input. */
  #aliasCode = 0;
  /**
   * The last call `run` resolved, which the next call of the same pattern reuses without
   * binding anything again: its variant, its in-place pair, and per parameter (inputs, then
   * outputs) the dtype of the array passed, or undefined for a number (an input) or for an
   * output not passed.
   */
  #lastVariant: Variant | undefined;
  #lastAlias = 0;
  readonly #lastDtypes: (DType | undefined)[];
  /** Per parameter (inputs, then outputs): its name, its name in messages ('input x'), its declared
   * dtype (undefined for a type variable) and its type variable (-1 for a dtype). */
  readonly #names: string[];
  readonly #operandNames: string[];
  readonly #declared: (DType | undefined)[];
  readonly #variableOf: number[];

  constructor(signature: string, body: string, options: ElementwiseOptions = {}) {
    const provisional = options.name ?? 'elementwise';
    this.signature = parseSignature(signature, provisional, ELEMENTWISE_RESERVED);
    this.body = checkCode(body, provisional, 'the body');
    this.call = options.name ?? `elementwise '${this.signature.text}'`;
    const stem = (options.name ?? 'elementwise').replace(/[^A-Za-z0-9_]+/g, '_');
    this.#name = `${stem}.cu`;
    // The kernel's name as traces and profilers show it, e.g. ct_map_sin.
    this.#entry = stem === 'elementwise' ? ELEMENTWISE_ENTRY : elementwiseEntry(stem);
    for (const output of this.signature.outputs) {
      if (!assigns(body, output.name)) {
        throw new CudaArgumentError(
          `${this.call}: the body never assigns the output ${output.name} (e.g. "${output.name} = ...")`,
        );
      }
    }
    const count = this.signature.inputs.length + this.signature.outputs.length;
    this.#bound = new Array(this.signature.variables.length).fill(undefined);
    this.#codes = new Array(count).fill(0);
    this.#lastDtypes = new Array(count).fill(undefined);
    this.#shapeOf = new Array(1).fill(undefined);
    const parameters = [...this.signature.inputs, ...this.signature.outputs];
    const inputCount = this.signature.inputs.length;
    this.#names = parameters.map((parameter) => parameter.name);
    this.#operandNames = parameters.map(
      (parameter, j) => `${j < inputCount ? 'input' : 'output'} ${parameter.name}`,
    );
    this.#declared = parameters.map((parameter) =>
      'dtype' in parameter.type ? parameter.type.dtype : undefined,
    );
    this.#variableOf = parameters.map((parameter) =>
      'variable' in parameter.type ? parameter.type.variable : -1,
    );
  }

  /** Binds parameter `j` (inputs, then outputs) to `dtype`; throws on a mismatch. */
  private bind(j: number, dtype: DType): void {
    const declared = this.#declared[j];
    if (declared !== undefined) {
      if (declared !== dtype) {
        throw new CudaArgumentError(
          `${this.call}: ${this.#operandNames[j]} must be ${declared}, got ${dtype}`,
        );
      }
      return;
    }
    const variable = this.#variableOf[j]!;
    const previous = this.#bound[variable];
    if (previous === undefined) this.#bound[variable] = dtype;
    else if (previous !== dtype) {
      throw new CudaArgumentError(
        `${this.call}: ${this.#operandNames[j]} is ${dtype} but ${this.signature.variables[variable]} is already ${previous} (no type promotion: convert first)`,
      );
    }
  }

  /** The dtype of parameter `j` once bound; throws when nothing told it. */
  private dtypeOf(j: number): DType {
    const declared = this.#declared[j];
    if (declared !== undefined) return declared;
    const variable = this.#variableOf[j]!;
    const dtype = this.#bound[variable];
    if (dtype === undefined) {
      const name = this.#operandNames[j]!;
      throw new CudaArgumentError(
        `${this.call}: cannot tell ${this.signature.variables[variable]} (the dtype of ${name}) from the arguments; pass ${name} as an array`,
      );
    }
    return dtype;
  }

  /** Checks array argument `j` and binds its dtype; returns the shape reference so far. */
  private checkArrayArgument(
    j: number,
    value: unknown,
    reference: DeviceArray | undefined,
    referenceIndex: number,
  ): DeviceArray {
    const array = checkArray(value, this.call, this.#operandNames[j]!);
    this.bind(j, array.dtype);
    if (reference !== undefined) {
      checkSameShape(
        array,
        reference,
        this.call,
        this.#operandNames[j]!,
        this.#names[referenceIndex]!,
      );
      return reference;
    }
    return array;
  }

  /**
   * Checks the arguments and binds the dtypes; returns the variant key, and leaves the shape
   * reference in `#shapeOf[0]`. Throws before any native call on bad input. Allocates nothing.
   */
  private resolve(
    inputs: ArrayLike<unknown>,
    outputs: ArrayLike<unknown>,
    outputStart: number,
    outputEnd: number,
  ): number {
    const inputCount = this.signature.inputs.length;
    const outputCount = this.signature.outputs.length;
    clearList(this.#bound, undefined);
    let reference: DeviceArray | undefined;
    let referenceIndex = -1;
    for (let j = 0; j < inputCount; j++) {
      const value = inputs[j];
      if (typeof value === 'number') continue;
      if (!DeviceArray.isInstance(value)) {
        throw new CudaArgumentError(
          `${this.call}: ${this.#operandNames[j]} must be a DeviceArray or a number, got ${describeValue(value)}`,
        );
      }
      const next = this.checkArrayArgument(j, value, reference, referenceIndex);
      if (reference === undefined) referenceIndex = j;
      reference = next;
    }
    for (let j = 0; j < outputCount; j++) {
      const value = outputStart + j < outputEnd ? outputs[outputStart + j] : undefined;
      if (value === undefined) continue;
      const next = this.checkArrayArgument(inputCount + j, value, reference, referenceIndex);
      if (reference === undefined) referenceIndex = inputCount + j;
      reference = next;
    }
    if (reference === undefined) {
      throw new CudaArgumentError(
        `${this.call}: no array argument to take the shape from; pass the output${outputCount > 1 ? 's' : ''}`,
      );
    }
    const codes = this.#codes;
    let key = 0;
    let factor = 1;
    for (let j = 0; j < inputCount + outputCount; j++) {
      const dtype = this.dtypeOf(j);
      const value = j < inputCount ? inputs[j] : undefined;
      const scalar = typeof value === 'number';
      if (scalar) scalarValue(value, dtype, this.call, this.#operandNames[j]!);
      codes[j] = CTYPES[dtype].code + (scalar ? 8 : 0);
      key += codes[j]! * factor;
      factor *= 16;
    }
    const aliasCode = this.aliasCode(inputs, outputs, outputStart, outputEnd);
    this.#aliasCode = aliasCode;
    key += aliasCode * factor;
    this.#shapeOf[0] = reference;
    return key;
  }

  /**
   * The in-place pair: the first output that is the same array as an input shares its
   * pointer. 0 for none, else 1 + output * inputs + input.
   */
  private aliasCode(
    inputs: ArrayLike<unknown>,
    outputs: ArrayLike<unknown>,
    outputStart: number,
    outputEnd: number,
  ): number {
    const inputCount = this.signature.inputs.length;
    const outputCount = this.signature.outputs.length;
    if (inputCount + outputCount > MAX_ALIASED_PARAMETERS) return 0;
    for (let j = 0; j < outputCount; j++) {
      const value = outputStart + j < outputEnd ? outputs[outputStart + j] : undefined;
      if (value === undefined) continue;
      for (let k = 0; k < inputCount; k++) if (inputs[k] === value) return 1 + j * inputCount + k;
    }
    return 0;
  }

  /**
   * The shape reference when this call has the pattern of the last call `run` resolved (the
   * same dtypes, the same inputs as numbers, the same outputs passed, the same in-place pair)
   * and passes every check (arrays usable, contiguous and of one shape; numbers in range);
   * else undefined, and `resolve` decides, with its errors. Allocates nothing.
   */
  private matchLast(
    variant: Variant,
    inputs: ArrayLike<unknown>,
    outputs: ArrayLike<unknown>,
    outputStart: number,
    outputEnd: number,
  ): DeviceArray | undefined {
    const inputCount = this.signature.inputs.length;
    const count = this.#lastDtypes.length;
    const dtypes = this.#lastDtypes;
    let reference: DeviceArray | undefined;
    for (let j = 0; j < count; j++) {
      const value = passedFor(j, inputCount, inputs, outputs, outputStart, outputEnd);
      const dtype = dtypes[j];
      if (dtype === undefined) {
        if (j < inputCount) {
          if (typeof value !== 'number' || !scalarFits(value, variant.parameters[j]!.dtype)) {
            return undefined;
          }
        } else if (value !== undefined) return undefined;
      } else if (reference === undefined || value !== reference || reference.dtype !== dtype) {
        // (The reference itself, passed again in place, was checked already.)
        if (
          !DeviceArray.isInstance(value) ||
          value.dtype !== dtype ||
          value.disposed ||
          !value.contiguous
        ) {
          return undefined;
        }
        if (reference === undefined) reference = value;
        else if (!sameShape(value, reference)) return undefined;
      }
    }
    if (this.aliasCode(inputs, outputs, outputStart, outputEnd) !== this.#lastAlias) {
      return undefined;
    }
    return reference;
  }

  /** Makes the call just resolved the pattern `matchLast` compares the next call with. */
  private remember(
    variant: Variant,
    inputs: ArrayLike<unknown>,
    outputs: ArrayLike<unknown>,
    outputStart: number,
    outputEnd: number,
  ): void {
    const inputCount = this.signature.inputs.length;
    const dtypes = this.#lastDtypes;
    for (let j = 0; j < dtypes.length; j++) {
      const value = passedFor(j, inputCount, inputs, outputs, outputStart, outputEnd);
      dtypes[j] = DeviceArray.isInstance(value) ? value.dtype : undefined;
    }
    this.#lastAlias = this.#aliasCode;
    this.#lastVariant = variant;
  }

  private variant(key: number): Variant {
    let variant = this.#variants.get(key);
    if (variant === undefined) {
      const codes = this.#codes;
      const inputs = this.signature.inputs.map((parameter, j) =>
        resolvedParameter(parameter, codes[j]!),
      );
      const offset = inputs.length;
      const outputs = this.signature.outputs.map((parameter, j) =>
        resolvedParameter(parameter, codes[offset + j]!),
      );
      const alias =
        this.#aliasCode === 0
          ? undefined
          : {
              output: Math.floor((this.#aliasCode - 1) / offset),
              input: (this.#aliasCode - 1) % offset,
            };
      variant = new Variant(
        this.#name,
        this.#entry,
        this.signature.text,
        this.body,
        inputs,
        outputs,
        alias,
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
    // A call of the last call's pattern skips binding and the variant lookup.
    let variant = this.#lastVariant;
    let reference =
      variant === undefined
        ? undefined
        : this.matchLast(variant, inputs, outputs, outputStart, outputEnd);
    if (reference === undefined) {
      variant = this.variant(this.resolve(inputs, outputs, outputStart, outputEnd));
      reference = this.#shapeOf[0]!;
      this.#shapeOf[0] = undefined;
      this.remember(variant, inputs, outputs, outputStart, outputEnd);
    }
    const target = resolveStream(stream);
    const inputCount = this.signature.inputs.length;
    // Every array in the stream's context; an output over an input only as exactly the same
    // elements (read, then written, by the same thread).
    checkOperands(
      this.call,
      this.#operandNames,
      inputs,
      inputCount,
      outputs,
      outputStart,
      outputEnd,
      target,
      true,
    );
    const parameters = variant!.parameters;
    const args = variant!.args;
    const outputCount = this.signature.outputs.length;
    const n = reference.length;
    // Compiled (or found) before anything is allocated: a CompileError leaves nothing behind.
    const loaded = n > 0 ? variant!.compiled.kernels(target.context)[0]! : undefined;
    let single: DeviceArray | undefined;
    let several: DeviceArray[] | undefined;
    if (outputCount > 1) several = new Array(outputCount);
    const alias = variant!.aliasOutput;
    for (let j = 0; j < outputCount; j++) {
      let output = (outputStart + j < outputEnd ? outputs[outputStart + j] : undefined) as
        | DeviceArray
        | undefined;
      if (output === undefined) {
        output = DeviceArray.empty(parameters[inputCount + j]!.dtype, reference.shape, {
          stream: target,
        });
      }
      // Outputs after the inputs, less the one passed as its input (in place).
      if (j !== alias) args[alias >= 0 && j > alias ? inputCount + j - 1 : inputCount + j] = output;
      if (several === undefined) single = output;
      else several[j] = output;
    }
    if (loaded !== undefined) {
      for (let j = 0; j < inputCount; j++) {
        const value = inputs[j];
        args[j] = (
          typeof value === 'number'
            ? scalarValue(value, parameters[j]!.dtype, this.call, 'input')
            : value
        ) as KernelArgument;
      }
      args[args.length - 1] = n;
      try {
        launchOn(loaded.kernel, target, variant!.gridFor(loaded, n), loaded.blockSize, 0, args);
      } finally {
        clearList(args, 0);
      }
    } else clearList(args, 0);
    return several ?? single!;
  }
}

/**
 * The value a call passed for parameter `j` (inputs first, then outputs): the input, the
 * output at `outputStart + j - inputCount` while before `outputEnd`, else undefined (an
 * output to allocate).
 */
function passedFor(
  j: number,
  inputCount: number,
  inputs: ArrayLike<unknown>,
  outputs: ArrayLike<unknown>,
  outputStart: number,
  outputEnd: number,
): unknown {
  if (j < inputCount) return inputs[j];
  const at = outputStart + j - inputCount;
  return at < outputEnd ? outputs[at] : undefined;
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
        `${program.call}: takes ${inputCount} input${inputCount === 1 ? '' : 's'} (${names}), then up to ${outputCount} output${outputCount === 1 ? '' : 's'} and { stream }; got ${args.length} arguments`,
      );
    }
    return count;
  };
  const kernel = ((...args: unknown[]) => {
    const end = count(args);
    let stream: Stream | undefined;
    if (end < args.length) {
      assertOptions(program.call, args[end], STREAM_OPTIONS);
      stream = (args[end] as CallOptions).stream;
    }
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
