/**
 * `reduction(signature, { map, reduce, identity, post })`, in the spirit of CuPy's
 * ReductionKernel: full reductions and reductions along one axis of a column-major matrix,
 * deterministic for a given shape (see codegen-reduction.ts).
 */
import {
  assertOptions,
  assertSameContext,
  CudaArgumentError,
  DeviceArray,
  DeviceBuffer,
  type DType,
  describeValue,
  type Kernel,
  type KernelArgument,
  launchOn,
  resolveStream,
  type Stream,
} from '@cuda-tasks/cudadrv';
import {
  type CallOptions,
  checkArray,
  checkOutputApart,
  checkSameShape,
  clearList,
  isOptions,
  scalarValue,
} from './arguments.js';
import { type ResolvedParameter, resolvedParameter } from './codegen-elementwise.js';
import {
  accumulatorBytes,
  generateReduction,
  MAX_REDUCTION_BLOCK,
  REDUCTION_ENTRIES,
  type ReductionSource,
  reductionParameters,
  VECTOR_BLOCK,
  VECTOR_BYTES,
  VECTOR_UNROLL,
  vectorizable,
} from './codegen-reduction.js';
import { CompiledSource, type LoadedKernel } from './compiled.js';
import { CTYPES, DTYPE_BY_CODE } from './ctypes.js';
import {
  assigns,
  checkCode,
  type Parameter,
  parseSignature,
  type RoleNames,
  type Signature,
} from './signature.js';

/**
 * Names the reduction's code sees besides the parameters: map sees the inputs and `i`; reduce
 * sees `a` and `b` (no parameter); post sees `a`, the output and `n`.
 */
export const REDUCTION_RESERVED: RoleNames = {
  inputs: { i: "map's index" },
  outputs: { a: "post's result", n: "post's count" },
};

/** The options a reduction kernel's call takes (its trailing `{ axis, stream }`). */
const REDUCTION_OPTIONS: readonly string[] = Object.freeze(['axis', 'stream']);

/** Options of a reduction call. */
export interface ReductionCallOptions extends CallOptions {
  /**
   * Reduce along this axis of a matrix (0: down each column, giving one value per column; 1:
   * along each row, one value per row), or, when absent, over all elements (result shape [1]).
   * A vector's only axis is 0, the same as all elements.
   */
  axis?: number;
}

/** The parts of a reduction a variant's source is made from (the inputs and output bound). */
export type ReductionParts = Pick<
  ReductionSource,
  'accumulator' | 'identity' | 'map' | 'reduce' | 'post' | 'prelude'
>;

/** How a program makes its parts for the bound dtypes. */
export type ReductionPartsFor = (
  inputs: readonly ResolvedParameter[],
  output: ResolvedParameter,
) => ReductionParts;

/** Blocks a launch asks for at most (each block loops over its share). */
const MAX_GRID = 1 << 20;
/** Elements a block of the blocks kernel handles at least, per thread (amortizes its tree). */
const ELEMENTS_PER_THREAD = 8;
/** Elements a thread of the threads kernel handles at least. */
const ELEMENTS_PER_ITEM = 16;
/** Columns shorter than this are reduced a thread each rather than a block each. */
const SHORT_SEGMENT = 32;

function largestPowerOfTwoAtMost(value: number): number {
  return 2 ** Math.floor(Math.log2(Math.max(1, value)));
}

class Variant {
  readonly compiled: CompiledSource;
  readonly accumulatorBytes: number;
  readonly blocksArgs: KernelArgument[];
  readonly threadsArgs: KernelArgument[];
  readonly partialsArgs: KernelArgument[] = [0, 0, 0, 0, 0];
  /** The array input's element size when the source has `ct_reduce_vectors`, else undefined. */
  readonly vectorElementBytes: number | undefined;
  readonly vectorsArgs: KernelArgument[];
  readonly outputDType: DType;

  constructor(
    name: string,
    signature: string,
    inputs: ResolvedParameter[],
    output: ResolvedParameter,
    parts: ReductionParts,
  ) {
    const source: ReductionSource = { signature, inputs, output, ...parts };
    const parameters = reductionParameters(source);
    this.vectorElementBytes = vectorizable(source);
    this.compiled = new CompiledSource(name, generateReduction(source), [
      { name: REDUCTION_ENTRIES.blocks, parameters: parameters.blocks, powerOfTwo: true },
      { name: REDUCTION_ENTRIES.threads, parameters: parameters.threads },
      { name: REDUCTION_ENTRIES.partials, parameters: parameters.partials, powerOfTwo: true },
      ...(this.vectorElementBytes === undefined
        ? []
        : [
            {
              name: REDUCTION_ENTRIES.vectors,
              parameters: parameters.vectors,
              blockSize: VECTOR_BLOCK,
            },
          ]),
    ]);
    this.accumulatorBytes = accumulatorBytes(parts.accumulator);
    this.blocksArgs = new Array(parameters.blocks.length).fill(0);
    this.threadsArgs = new Array(parameters.threads.length).fill(0);
    this.vectorsArgs = new Array(parameters.vectors.length).fill(0);
    this.outputDType = output.dtype;
  }
}

/**
 * Elements of `array` before its first 16-byte boundary (at most its length), or undefined
 * when its address is not a multiple of its element size (never for an array of this package).
 */
function headOf(array: DeviceArray, elementBytes: number): number | undefined {
  if (array.length === 0) return 0;
  const address = array.buffer.address;
  const base =
    typeof address === 'number' ? address % VECTOR_BYTES : Number(address % BigInt(VECTOR_BYTES));
  const misaligned = (base + ((array.offset * elementBytes) % VECTOR_BYTES)) % VECTOR_BYTES;
  if (misaligned % elementBytes !== 0) return undefined;
  return Math.min(array.length, ((VECTOR_BYTES - misaligned) % VECTOR_BYTES) / elementBytes);
}

/**
 * Launches `kernel` with a variant's reused argument list, then clears the list (so that it
 * holds no buffer after the call), also when the launch throws.
 */
function launchList(
  kernel: Kernel,
  stream: Stream,
  grid: number,
  block: number,
  args: KernelArgument[],
): void {
  try {
    launchOn(kernel, stream, grid, block, 0, args);
  } finally {
    clearList(args, 0);
  }
}

/** Options of a reduction program. */
export interface ReductionProgramOptions {
  /** A name for messages and NVRTC's file name. */
  name?: string;
  /** Refuse an empty reduction (max, min, argmax, argmin have no identity to give). */
  nonEmpty?: boolean;
}

/** The program behind a reduction kernel; also used directly by the ready-made reductions. */
export class ReductionProgram {
  readonly signature: Signature;
  /** The call label messages name: the reduction's name, else its signature. */
  readonly call: string;
  readonly #name: string;
  readonly #partsFor: ReductionPartsFor;
  readonly #nonEmpty: boolean;
  readonly #variants = new Map<number, Variant>();
  readonly #bound: (DType | undefined)[];
  readonly #codes: number[];
  /** 'input <name>' per input, then 'output <name>': the operands' names in errors. */
  readonly #operandNames: string[];

  constructor(
    signature: string,
    partsFor: ReductionPartsFor,
    options: ReductionProgramOptions = {},
  ) {
    const provisional = options.name ?? 'reduction';
    this.signature = parseSignature(signature, provisional, REDUCTION_RESERVED, { maxOutputs: 1 });
    this.call = options.name ?? `reduction '${this.signature.text}'`;
    this.#name = `${(options.name ?? 'reduction').replace(/[^A-Za-z0-9_-]+/g, '_')}.cu`;
    this.#partsFor = partsFor;
    this.#nonEmpty = options.nonEmpty ?? false;
    this.#bound = new Array(this.signature.variables.length).fill(undefined);
    this.#codes = new Array(this.signature.inputs.length + 1).fill(0);
    this.#operandNames = [
      ...this.signature.inputs.map((input) => `input ${input.name}`),
      ...this.signature.outputs.map((output) => `output ${output.name}`),
    ];
  }

  /** Checks and binds; returns the variant key and the shape reference. */
  private resolve(
    inputs: ArrayLike<unknown>,
    out: unknown,
  ): { key: number; reference: DeviceArray; given: DeviceArray | undefined } {
    const { signature, call } = this;
    const bound = this.#bound;
    clearList(bound, undefined);
    const bind = (parameter: Parameter, dtype: DType, name: string) => {
      const type = parameter.type;
      if ('dtype' in type) {
        if (type.dtype !== dtype)
          throw new CudaArgumentError(`${call}: ${name} must be ${type.dtype}, got ${dtype}`);
        return;
      }
      const previous = bound[type.variable];
      if (previous === undefined) bound[type.variable] = dtype;
      else if (previous !== dtype) {
        throw new CudaArgumentError(
          `${call}: ${name} is ${dtype} but ${signature.variables[type.variable]} is already ${previous} (no type promotion: convert first)`,
        );
      }
    };
    let reference: DeviceArray | undefined;
    let referenceName = '';
    for (let j = 0; j < signature.inputs.length; j++) {
      const parameter = signature.inputs[j]!;
      const value = inputs[j];
      if (typeof value === 'number') continue;
      if (!DeviceArray.isInstance(value)) {
        throw new CudaArgumentError(
          `${call}: input ${parameter.name} must be a DeviceArray or a number, got ${describeValue(value)}`,
        );
      }
      const array = checkArray(value, call, `input ${parameter.name}`);
      bind(parameter, array.dtype, `input ${parameter.name}`);
      if (reference === undefined) {
        reference = array;
        referenceName = parameter.name;
      } else checkSameShape(array, reference, call, `input ${parameter.name}`, referenceName);
    }
    if (reference === undefined)
      throw new CudaArgumentError(`${call}: at least one input must be a DeviceArray`);
    const output = signature.outputs[0]!;
    let given: DeviceArray | undefined;
    if (out !== undefined) {
      given = checkArray(out, call, `output ${output.name}`);
      bind(output, given.dtype, `output ${output.name}`);
    }
    const dtypeOf = (parameter: Parameter, name: string): DType => {
      const type = parameter.type;
      if ('dtype' in type) return type.dtype;
      const dtype = bound[type.variable];
      if (dtype === undefined) {
        throw new CudaArgumentError(
          `${call}: cannot tell ${signature.variables[type.variable]} (the dtype of ${name}) from the arguments; pass ${name} as an array`,
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
      if (scalar) scalarValue(value, dtype, call, `input ${parameter.name}`);
      codes[j] = CTYPES[dtype].code + (scalar ? 8 : 0);
      key += codes[j]! * factor;
      factor *= 16;
    }
    codes[signature.inputs.length] = CTYPES[dtypeOf(output, `output ${output.name}`)].code;
    key += codes[signature.inputs.length]! * factor;
    return { key, reference, given };
  }

  private variant(key: number): Variant {
    let variant = this.#variants.get(key);
    if (variant === undefined) {
      const codes = this.#codes;
      const inputs = this.signature.inputs.map((parameter, j) =>
        resolvedParameter(parameter, codes[j]!),
      );
      const output = resolvedParameter(this.signature.outputs[0]!, codes[inputs.length]!);
      variant = new Variant(
        this.#name,
        this.signature.text,
        inputs,
        output,
        this.#partsFor(inputs, output),
      );
      this.#variants.set(key, variant);
    }
    return variant;
  }

  /** The layout of one call: segments, their length and strides, and the output's shape. */
  private layout(
    reference: DeviceArray,
    axis: number | undefined,
  ): { segments: number; length: number; axis: 0 | 1 | undefined; shape: number[] } {
    const shape = reference.shape;
    if (axis === undefined || (shape.length === 1 && (axis === 0 || axis === -1))) {
      return { segments: 1, length: reference.length, axis: undefined, shape: [1] };
    }
    if (shape.length !== 2) {
      throw new CudaArgumentError(
        `${this.call}: axis ${describeValue(axis)} needs a vector or a matrix, got shape [${shape.join(', ')}] (leave axis out to reduce all elements)`,
      );
    }
    const normalized = axis === -1 ? 1 : axis;
    if (normalized !== 0 && normalized !== 1) {
      throw new CudaArgumentError(
        `${this.call}: axis must be 0, 1 or -1, got ${describeValue(axis)}`,
      );
    }
    const [rows, columns] = shape as [number, number];
    return normalized === 0
      ? { segments: columns, length: rows, axis: 0, shape: [columns] }
      : { segments: rows, length: columns, axis: 1, shape: [rows] };
  }

  /**
   * Every array in the stream's context, and the output apart from every input (each output
   * element reads many input elements: no overlap at all). Allocates nothing.
   */
  private checkOperands(
    inputs: ArrayLike<unknown>,
    given: DeviceArray | undefined,
    stream: Stream,
  ): void {
    const names = this.#operandNames;
    const inputCount = this.signature.inputs.length;
    for (let j = 0; j < inputCount; j++) {
      const input = inputs[j];
      if (!DeviceArray.isInstance(input)) continue;
      assertSameContext(this.call, names[j]!, input, stream);
      if (given !== undefined)
        checkOutputApart(this.call, names[inputCount]!, given, names[j]!, input, false);
    }
    if (given !== undefined) assertSameContext(this.call, names[inputCount]!, given, stream);
  }

  /** The source a call with these arguments compiles (checked as a call would be). */
  sourceFor(inputs: ArrayLike<unknown>, out?: unknown): string {
    return this.variant(this.resolve(inputs, out).key).compiled.source;
  }

  /** Runs the reduction; returns the output (allocated when `out` is undefined). */
  run(
    inputs: ArrayLike<unknown>,
    out: unknown,
    options: ReductionCallOptions | undefined,
  ): DeviceArray {
    const { key, reference, given } = this.resolve(inputs, out);
    const layout = this.layout(reference, options?.axis);
    if (given !== undefined && given.length !== layout.shape.reduce((x, y) => x * y, 1)) {
      throw new CudaArgumentError(
        `${this.call}: the output must hold ${layout.shape[0]} element${layout.shape[0] === 1 ? '' : 's'} (shape [${layout.shape.join(', ')}]), got ${given}`,
      );
    }
    if (this.#nonEmpty && layout.length === 0 && layout.segments > 0) {
      throw new CudaArgumentError(
        `${this.call}: reducing zero elements has no result (no identity); the input has shape [${reference.shape.join(', ')}]`,
      );
    }
    const variant = this.variant(key);
    const stream: Stream = resolveStream(options?.stream);
    this.checkOperands(inputs, given, stream);
    const kernels = layout.segments > 0 ? variant.compiled.kernels(stream.context) : undefined;
    const output = given ?? DeviceArray.empty(variant.outputDType, layout.shape, { stream });
    if (kernels === undefined) return output;
    const inputCount = this.signature.inputs.length;
    const [blocks, threads, partials, vectors] = kernels as LoadedKernel[];
    const { segments, length } = layout;
    const useBlocks = layout.axis === undefined || (layout.axis === 0 && length >= SHORT_SEGMENT);
    // A full reduction of one array of 4- or 8-byte elements reads it in 16-byte vectors.
    const head =
      vectors !== undefined && layout.axis === undefined
        ? headOf(reference, variant.vectorElementBytes!)
        : undefined;
    let parts: number;
    let chunk: number;
    let scratch: DeviceBuffer | undefined;
    try {
      if (head !== undefined) {
        // At most one full wave of blocks (the device's resident blocks, from the occupancy
        // calculator), fewer when there are not enough vectors for them: one partial each.
        const width = VECTOR_BYTES / variant.vectorElementBytes!;
        const vectorCount = Math.floor((length - head) / width);
        const block = vectors!.blockSize;
        parts = Math.max(
          1,
          Math.min(vectors!.fullGrid, Math.ceil(vectorCount / (block * VECTOR_UNROLL))),
        );
        if (parts > 1)
          scratch = DeviceBuffer.allocate(parts * variant.accumulatorBytes, { stream });
        const args = variant.vectorsArgs;
        this.fillInputs(args, inputs, inputCount);
        args[inputCount] = output;
        args[inputCount + 1] = scratch ?? 0n;
        args[inputCount + 2] = length;
        args[inputCount + 3] = head;
        launchList(vectors!.kernel, stream, parts, block, args);
      } else if (useBlocks) {
        const block = Math.min(blocks!.blockSize, Math.max(32, largestPowerOfTwoAtMost(length)));
        const fullGrid = Math.max(1, Math.floor((blocks!.fullGrid * blocks!.blockSize) / block));
        parts =
          segments >= fullGrid || length === 0
            ? 1
            : Math.max(
                1,
                Math.min(
                  Math.ceil(fullGrid / segments),
                  Math.ceil(length / (block * ELEMENTS_PER_THREAD)),
                ),
              );
        chunk = Math.ceil(length / parts);
        if (chunk > 0) parts = Math.ceil(length / chunk);
        if (parts > 1)
          scratch = DeviceBuffer.allocate(segments * parts * variant.accumulatorBytes, { stream });
        const args = variant.blocksArgs;
        this.fillInputs(args, inputs, inputCount);
        args[inputCount] = output;
        args[inputCount + 1] = scratch ?? 0n;
        args[inputCount + 2] = length;
        args[inputCount + 3] = segments;
        args[inputCount + 4] = parts;
        args[inputCount + 5] = chunk;
        launchList(blocks!.kernel, stream, Math.min(segments * parts, MAX_GRID), block, args);
      } else {
        const block = threads!.blockSize;
        const resident = threads!.fullGrid * block;
        parts =
          segments >= resident || length === 0
            ? 1
            : Math.max(
                1,
                Math.min(Math.ceil(resident / segments), Math.ceil(length / ELEMENTS_PER_ITEM)),
              );
        chunk = Math.ceil(length / parts);
        if (chunk > 0) parts = Math.ceil(length / chunk);
        if (parts > 1)
          scratch = DeviceBuffer.allocate(segments * parts * variant.accumulatorBytes, { stream });
        const rows = reference.shape[0]!;
        const args = variant.threadsArgs;
        this.fillInputs(args, inputs, inputCount);
        args[inputCount] = output;
        args[inputCount + 1] = scratch ?? 0n;
        args[inputCount + 2] = length;
        args[inputCount + 3] = segments;
        args[inputCount + 4] = parts;
        args[inputCount + 5] = chunk;
        // Column-major: along axis 0 (short columns) segment s starts at s * rows; along axis
        // 1 row s starts at s and its elements are `rows` apart.
        args[inputCount + 6] = layout.axis === 0 ? rows : 1;
        args[inputCount + 7] = layout.axis === 0 ? 1 : rows;
        const grid = Math.min(Math.ceil((segments * parts) / block), MAX_GRID);
        launchList(threads!.kernel, stream, grid, block, args);
      }
      if (parts > 1) {
        const args = variant.partialsArgs;
        args[0] = scratch!;
        args[1] = output;
        args[2] = length;
        args[3] = segments;
        args[4] = parts;
        // A block per segment, its threads a few parts each (a power of two, 32 at least).
        const block = Math.min(
          partials!.blockSize,
          MAX_REDUCTION_BLOCK,
          Math.max(32, largestPowerOfTwoAtMost(Math.ceil(parts / 4))),
        );
        launchList(partials!.kernel, stream, Math.min(segments, MAX_GRID), block, args);
      }
    } catch (error) {
      if (given === undefined) output.dispose();
      throw error;
    } finally {
      scratch?.dispose();
    }
    return output;
  }

  private fillInputs(args: KernelArgument[], inputs: ArrayLike<unknown>, count: number): void {
    for (let j = 0; j < count; j++) {
      const value = inputs[j];
      args[j] = (
        typeof value === 'number'
          ? scalarValue(value, DTYPE_BY_CODE[this.#codes[j]! & 7]!, this.call, 'input')
          : value
      ) as KernelArgument;
    }
  }
}

/** What a reduction is made of (CUDA C expressions and statements). */
export interface ReductionDefinition {
  /** Each element's contribution, from the inputs' names and `i` (its index along the axis). */
  map: string;
  /** Combines two contributions `a` and `b` (must be associative and commutative). */
  reduce: string;
  /** The contribution of no element, e.g. `0` for a sum. */
  identity: string;
  /** Assigns the output from the result `a` and the count `n` (default: `y = a`). */
  post?: string;
  /** The accumulator's dtype (default: the output's; the half types accumulate in float). */
  accumulate?: DType;
}

/** A reduction kernel: call it with its inputs, optionally the output, optionally options. */
export interface ReductionKernel {
  /** Runs it: inputs, then optionally the output, then optionally `{ axis, stream }`. */
  (...args: (DeviceArray | number | ReductionCallOptions | undefined)[]): DeviceArray;
  /** The signature, whitespace folded. */
  readonly signature: string;
  /** The CUDA C source a call with these arguments compiles (no native call). */
  source(...args: (DeviceArray | number | ReductionCallOptions | undefined)[]): string;
}

/**
 * A reduction from a signature (inputs, one output) and its parts: `map` (each element's
 * contribution), `reduce` (combines `a` and `b`), `identity` and `post` (assigns the output
 * from `a` and the count `n`). Reduces all elements, or along `axis` 0 or 1 of a matrix;
 * deterministic for a given shape (a fixed order, no atomics). Compiled and cached like
 * `elementwise`.
 * @example
 * const l2norm = reduction('x: T -> y: T', { map: 'x * x', reduce: 'a + b', identity: '0', post: 'y = sqrt(a)' });
 * const norm = l2norm(v); // shape [1]
 * const columnNorms = l2norm(m, { axis: 0 });
 */
export function reduction(
  signature: string,
  definition: ReductionDefinition,
  options: { name?: string } = {},
): ReductionKernel {
  const call = options.name ?? 'reduction';
  if (typeof definition !== 'object' || definition === null)
    throw new CudaArgumentError(`${call}: expected { map, reduce, identity, post? }`);
  const map = checkCode(definition.map, call, 'map');
  const reduce = checkCode(definition.reduce, call, 'reduce');
  const identity = checkCode(definition.identity, call, 'identity');
  const accumulate = definition.accumulate;
  if (accumulate !== undefined && !Object.hasOwn(CTYPES, accumulate)) {
    throw new CudaArgumentError(`${call}: unknown accumulate dtype ${describeValue(accumulate)}`);
  }
  const program = new ReductionProgram(
    signature,
    (_inputs, output) => ({
      accumulator: CTYPES[accumulate ?? output.dtype].value,
      identity,
      map,
      reduce,
      post: definition.post ?? `${output.name} = a`,
    }),
    options,
  );
  const outputName = program.signature.outputs[0]!.name;
  if (definition.post !== undefined) {
    checkCode(definition.post, call, 'post');
    if (!assigns(definition.post, outputName)) {
      throw new CudaArgumentError(
        `${program.call}: post never assigns the output ${outputName} (e.g. "${outputName} = a")`,
      );
    }
  }
  const inputCount = program.signature.inputs.length;
  const split = (args: readonly unknown[]) => {
    let count = args.length;
    let options: ReductionCallOptions | undefined;
    if (count > inputCount && isOptions(args[count - 1])) {
      options = args[count - 1] as ReductionCallOptions;
      assertOptions(program.call, options, REDUCTION_OPTIONS);
      count--;
    }
    if (count < inputCount || count > inputCount + 1) {
      throw new CudaArgumentError(
        `${program.call}: takes ${inputCount} input${inputCount === 1 ? '' : 's'}, then optionally the output and { axis, stream }; got ${args.length} arguments`,
      );
    }
    return { out: count > inputCount ? args[inputCount] : undefined, options };
  };
  const kernel = ((...args: unknown[]) => {
    const { out, options } = split(args);
    return program.run(args, out, options);
  }) as unknown as ReductionKernel;
  Object.defineProperties(kernel, {
    signature: { value: program.signature.text, enumerable: true },
    source: { value: (...args: unknown[]) => program.sourceFor(args, split(args).out) },
  });
  return kernel;
}
