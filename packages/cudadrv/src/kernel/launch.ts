import { resolveStream } from '../context/provider.js';
import { check, driver, ffiValue } from '../driver.js';
import type { DType } from '../dtype.js';
import { CudaArgumentError, DisposedError } from '../errors.js';
import { CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK } from '../ffi/cuda.js';
import { koffi } from '../ffi/library.js';
import { DeviceArray } from '../memory/array.js';
import { DeviceBuffer } from '../memory/memory.js';
import { beginOperation, endOperation } from '../stream/observer.js';
import type { Stream } from '../stream/stream.js';
import type { Module } from './module.js';

/**
 * A kernel parameter's declared type. Scalars by C type; pointers as `'pointer'` (any
 * DeviceArray, DeviceBuffer or bigint address) or `'<dtype>*'` (a DeviceArray of that dtype,
 * checked at launch). Prefix a pointer with `const ` when the kernel only reads it: concurrent
 * readers on different streams then do not wait for each other.
 */
export type KernelParameter =
  | 'int8'
  | 'uint8'
  | 'int16'
  | 'uint16'
  | 'int32'
  | 'uint32'
  | 'int64'
  | 'uint64'
  | 'float32'
  | 'float64'
  | 'pointer'
  | 'const pointer'
  | `${DType}*`
  | `const ${DType}*`;

/** A kernel argument value. */
export type KernelArgument = number | bigint | boolean | DeviceArray | DeviceBuffer;

/** Launch geometry: a number is the x dimension. */
export type Dim3 = number | readonly [number, number?, number?];

/** How to launch a kernel. */
export interface LaunchConfig {
  /** Blocks per grid: a number or [x, y?, z?]. */
  grid: Dim3;
  /** Threads per block: a number or [x, y?, z?]. */
  block: Dim3;
  /** Dynamic shared memory in bytes (default 0). */
  sharedMemory?: number;
  /** Default: `currentStream()`. */
  stream?: Stream;
}

// Writer codes, one per parameter, so the launch loop is a switch on small integers.
const W_I8 = 0;
const W_U8 = 1;
const W_I16 = 2;
const W_U16 = 3;
const W_I32 = 4;
const W_U32 = 5;
const W_I64 = 6;
const W_U64 = 7;
const W_F32 = 8;
const W_F64 = 9;
const W_PTR = 10;

const writerOf: Record<string, number> = {
  int8: W_I8,
  uint8: W_U8,
  int16: W_I16,
  uint16: W_U16,
  int32: W_I32,
  uint32: W_U32,
  int64: W_I64,
  uint64: W_U64,
  float32: W_F32,
  float64: W_F64,
  pointer: W_PTR,
};
const INTEGER_RANGES: Record<number, [number, number]> = {
  [W_I8]: [-128, 127],
  [W_U8]: [0, 255],
  [W_I16]: [-32768, 32767],
  [W_U16]: [0, 65535],
  [W_I32]: [-2147483648, 2147483647],
  [W_U32]: [0, 4294967295],
};
const TWO_32 = 4294967296;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

/**
 * A kernel from a loaded module with its declared parameters. Arguments are marshalled into
 * a native arena allocated once per kernel (one 8-byte slot per parameter plus the `void*`
 * array cuLaunchKernel reads), so a launch allocates nothing.
 */
export class Kernel {
  /** The module the kernel was taken from (it must stay loaded while the kernel is used). */
  readonly module: Module;
  /** The kernel's name in the module (the mangled name for C++ kernels not declared extern "C"). */
  readonly name: string;
  /** The CUfunction handle. */
  readonly handle: bigint;
  /** The handle as koffi converts it fastest (see `ffiValue`). */
  readonly ffiHandle: number | bigint;
  /** @internal The `void*[]` argument array's address as koffi converts it fastest. */
  readonly ffiArgumentArray: number | bigint;
  /** The declared parameter list `launch` checks its arguments against. */
  readonly parameters: readonly KernelParameter[];
  /** dtype a pointer parameter requires, or undefined. */
  readonly #pointerDTypes: (DType | undefined)[];
  /** Address of the `void*[]` array. */
  readonly #argumentArray: bigint;
  /** This kernel's own marshaller of an argument list (see `compileMarshal`). */
  readonly #marshal: ListMarshal;
  /**
   * @internal The whole launch on a checked stream and geometry: the count and up to
   * `MAX_POSITIONAL` arguments one by one (so that `launch` makes no array), checked, stored,
   * declared used, then cuLaunchKernelEx with the kernel's own launch configuration;
   * undefined for a kernel of more parameters.
   */
  readonly launchPositional: PositionalLaunch | undefined;

  /** @internal Use `module.kernel(name, parameters)`. */
  constructor(
    module: Module,
    name: string,
    handle: bigint,
    parameters: readonly KernelParameter[],
  ) {
    this.module = module;
    this.name = name;
    this.handle = handle;
    this.ffiHandle = ffiValue(handle);
    this.parameters = Object.freeze([...parameters]);
    const count = parameters.length;
    // Writer code per parameter, and 1 where a pointer parameter is only read (`const`).
    const writers = new Uint8Array(count);
    const readOnly = new Uint8Array(count);
    this.#pointerDTypes = new Array(count);
    parameters.forEach((declared, i) => {
      let parameter: string = declared;
      if (typeof parameter === 'string' && parameter.startsWith('const ')) {
        parameter = parameter.slice(6);
        if (parameter !== 'pointer' && !parameter.endsWith('*')) {
          throw new CudaArgumentError(
            `kernel ${name}: only pointers can be const, got ${JSON.stringify(declared)}`,
          );
        }
        readOnly[i] = 1;
      }
      if (typeof parameter === 'string' && parameter.endsWith('*')) {
        const dtype = parameter.slice(0, -1);
        if (
          ![
            'float32',
            'float64',
            'int32',
            'uint32',
            'int8',
            'uint8',
            'float16',
            'bfloat16',
          ].includes(dtype)
        ) {
          throw new CudaArgumentError(
            `kernel ${name}: unknown parameter type ${JSON.stringify(declared)}`,
          );
        }
        writers[i] = W_PTR;
        this.#pointerDTypes[i] = dtype as DType;
      } else {
        const writer = Object.hasOwn(writerOf, parameter) ? writerOf[parameter] : undefined;
        if (writer === undefined)
          throw new CudaArgumentError(
            `kernel ${name}: unknown parameter type ${JSON.stringify(declared)}`,
          );
        writers[i] = writer;
      }
    });
    // Layout: [void* x count][8-byte slot x count]. The pointer array is written once.
    const k = koffi();
    // [void* per parameter][an 8-byte slot per parameter][the CUlaunchConfig, 64 bytes]
    const configBase = Math.max(16, count * 16);
    const bytes = configBase + LAUNCH_CONFIG_BYTES;
    const arena = k.alloc('uint8_t', bytes) as bigint;
    const view = k.view(arena, bytes);
    const slotBase = count * 8;
    const views: ArenaViews = {
      i8: new Int8Array(view),
      u8: new Uint8Array(view),
      i16: new Int16Array(view),
      u16: new Uint16Array(view),
      i32: new Int32Array(view),
      u32: new Uint32Array(view),
      i64: new BigInt64Array(view),
      u64: new BigUint64Array(view),
      f32: new Float32Array(view),
      f64: new Float64Array(view),
    };
    for (let i = 0; i < count; i++) views.u64[i] = arena + BigInt(slotBase + i * 8);
    // The launch configuration: no attributes (attrs = NULL, numAttrs = 0) until written.
    views.u8.fill(0, configBase, bytes);
    // Never NULL, even without parameters: koffi passes non-null pointers on its fast path.
    this.#argumentArray = arena;
    this.ffiArgumentArray = ffiValue(arena);
    const layout: ArgumentLayout = {
      kernel: this,
      writers,
      readOnly,
      dtypes: this.#pointerDTypes,
      slotBase,
      views,
      configBase,
      configAddress: ffiValue(arena + BigInt(configBase)),
    };
    this.#marshal = compileMarshal(layout, false) as ListMarshal;
    this.launchPositional =
      count <= MAX_POSITIONAL ? (compileMarshal(layout, true) as PositionalLaunch) : undefined;
  }

  /** The largest block this kernel can be launched with. */
  maxThreadsPerBlock(): number {
    const value = [0];
    check(
      driver().cuFuncGetAttribute(value, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, this.handle),
      'cuFuncGetAttribute',
    );
    return value[0]!;
  }

  /**
   * The block size that maximizes occupancy (cuOccupancyMaxPotentialBlockSize), and the
   * smallest grid that reaches it.
   */
  suggestBlockSize(
    sharedMemory = 0,
    blockSizeLimit = 0,
  ): { blockSize: number; minGridSize: number } {
    this.module.context.makeCurrent();
    const minGrid = [0];
    const block = [0];
    check(
      driver().cuOccupancyMaxPotentialBlockSize(
        minGrid,
        block,
        this.handle,
        null,
        sharedMemory,
        blockSizeLimit,
      ),
      'cuOccupancyMaxPotentialBlockSize',
    );
    return { blockSize: block[0]!, minGridSize: minGrid[0]! };
  }

  /**
   * How many blocks of `blockSize` threads (and `sharedMemory` bytes of dynamic shared memory)
   * fit on one multiprocessor at once (cuOccupancyMaxActiveBlocksPerMultiprocessor): times the
   * device's multiprocessor count, the blocks of one full wave.
   */
  maxActiveBlocksPerMultiprocessor(blockSize: number, sharedMemory = 0): number {
    this.module.context.makeCurrent();
    const blocks = [0];
    check(
      driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(
        blocks,
        this.handle,
        blockSize,
        sharedMemory,
      ),
      'cuOccupancyMaxActiveBlocksPerMultiprocessor',
    );
    return blocks[0]!;
  }

  /**
   * @internal Writes the arguments into the arena and returns the `void**` for cuLaunchKernel.
   * Every argument is checked before any buffer is declared used on `stream`: a rejected call
   * leaves no trace on a buffer or a stream (the arena is rewritten by each call anyway).
   */
  marshal(args: readonly KernelArgument[], stream: Stream): bigint {
    this.#marshal(args, stream);
    return this.#argumentArray;
  }

  /** @internal The argument count error `marshal` throws. */
  wrongCount(got: number): never {
    const count = this.parameters.length;
    throw new CudaArgumentError(
      `kernel ${this.name} takes ${count} argument${count === 1 ? '' : 's'} (${this.parameters.join(', ')}), got ${got}`,
    );
  }

  /** Throws unless `value` fits pointer parameter `i`; declares nothing. */
  /** @internal */
  checkPointer(i: number, value: unknown): void {
    if (DeviceArray.isInstance(value)) {
      const dtype = this.#pointerDTypes[i];
      if (dtype !== undefined && value.dtype !== dtype) {
        throw new CudaArgumentError(
          `kernel ${this.name}: argument ${i} must be a DeviceArray of ${dtype}, got ${value.dtype}`,
        );
      }
      if (value.disposed)
        throw new DisposedError(`kernel ${this.name}: argument ${i} (DeviceArray)`);
      return;
    }
    if (DeviceBuffer.isInstance(value) && this.#pointerDTypes[i] === undefined) {
      if (value.disposed)
        throw new DisposedError(`kernel ${this.name}: argument ${i} (DeviceBuffer)`);
      return;
    }
    if (typeof value === 'bigint' && this.#pointerDTypes[i] === undefined) return;
    this.badArgument(i, value);
  }

  /** @internal */
  badArgument(i: number, value: unknown): never {
    const shown =
      typeof value === 'bigint'
        ? `${value}n`
        : DeviceArray.isInstance(value)
          ? String(value)
          : typeof value === 'object' && value !== null
            ? value.constructor.name
            : JSON.stringify(value);
    throw new CudaArgumentError(
      `kernel ${this.name}: argument ${i} must be ${describe(this.parameters[i]!)}, got ${shown}`,
    );
  }
}

/** Kernels of up to this many parameters are launched without an argument array. */
const MAX_POSITIONAL = 8;

/** Bytes of a CUlaunchConfig (7 dimensions and sizes, the stream, attrs, numAttrs), rounded up. */
const LAUNCH_CONFIG_BYTES = 64;

/**
 * A whole launch taking the geometry (checked), the argument count and the arguments one by
 * one.
 */
type PositionalLaunch = (
  stream: Stream,
  gx: number,
  gy: number,
  gz: number,
  bx: number,
  by: number,
  bz: number,
  sharedMemory: number,
  count: number,
  a0: unknown,
  a1: unknown,
  a2: unknown,
  a3: unknown,
  a4: unknown,
  a5: unknown,
  a6: unknown,
  a7: unknown,
) => void;

/** A marshaller taking the arguments as a list. */
type ListMarshal = (args: readonly KernelArgument[], stream: Stream) => void;

/** What a kernel's marshaller is made from. */
interface ArgumentLayout {
  kernel: Kernel;
  /** Writer code per parameter. */
  writers: Uint8Array;
  /** 1 where a pointer parameter is only read (declared `const`). */
  readOnly: Uint8Array;
  /** The dtype a pointer parameter requires, or undefined (any pointer, or not a pointer). */
  dtypes: readonly (DType | undefined)[];
  /** Byte offset of the first argument slot in the arena (after the `void*` array). */
  slotBase: number;
  views: ArenaViews;
  /** Byte offset of the kernel's CUlaunchConfig in the arena. */
  configBase: number;
  /** Its address as koffi converts it fastest. */
  configAddress: number | bigint;
}

/** The typed views of a kernel's argument arena. */
interface ArenaViews {
  i8: Int8Array;
  u8: Uint8Array;
  i16: Int16Array;
  u16: Uint16Array;
  i32: Int32Array;
  u32: Uint32Array;
  i64: BigInt64Array;
  u64: BigUint64Array;
  f32: Float32Array;
  f64: Float64Array;
}

/**
 * A marshaller made for one kernel's parameter list: straight-line code with each parameter's
 * check and store written out (no loop, no switch on the parameter type), so that the checks
 * cost what they would in hand-written code and the branches are the same at every launch
 * (docs/decisions/0027-launch-marshals-per-kernel.md).
 * Every argument is checked (an error names the argument and the declared type) before any
 * pointer argument is declared used on `stream`.
 *
 * `positional`: the whole launch instead (`Kernel.launchPositional`): the arguments one by one,
 * then the kernel's own CUlaunchConfig written (geometry, stream) and cuLaunchKernelEx called
 * with the configuration, function and argument addresses as constants of the code, so that
 * a launch reads no shared configuration and passes nothing on to another function
 * (docs/decisions/0028-launch-is-one-function-per-kernel.md).
 */
function compileMarshal(
  { kernel, writers, readOnly, dtypes, slotBase, views, configBase, configAddress }: ArgumentLayout,
  positional: boolean,
): ListMarshal | PositionalLaunch {
  const count = writers.length;
  const lines: string[] = positional
    ? [`if (count !== ${count}) kernel.wrongCount(count);`]
    : [`if (args.length !== ${count}) kernel.wrongCount(args.length);`];
  const pointers: number[] = [];
  for (let i = 0; i < count; i++) {
    const offset = slotBase + i * 8;
    const v = `v${i}`;
    if (!positional) lines.push(`const ${v} = args[${i}];`);
    switch (writers[i]) {
      case W_PTR: {
        // The valid cases inline (a live DeviceArray of the declared dtype; for an untyped
        // pointer also a bigint address), checkPointer for the rest: it accepts a live
        // DeviceBuffer for an untyped pointer and throws the argument's error otherwise.
        const dtype = dtypes[i];
        lines.push(
          dtype === undefined
            ? `if (typeof ${v} !== 'bigint' && !(DeviceArray.isInstance(${v}) && !${v}.disposed)) kernel.checkPointer(${i}, ${v});`
            : `if (!DeviceArray.isInstance(${v}) || ${v}.dtype !== ${JSON.stringify(dtype)} || ${v}.disposed) kernel.checkPointer(${i}, ${v});`,
        );
        pointers.push(i);
        break;
      }
      case W_F32:
      case W_F64: {
        const view = writers[i] === W_F32 ? `f32[${offset >> 2}]` : `f64[${offset >> 3}]`;
        lines.push(
          `if (typeof ${v} !== 'number') kernel.badArgument(${i}, ${v});`,
          `${view} = ${v};`,
        );
        break;
      }
      case W_I64:
      case W_U64: {
        const signed = writers[i] === W_I64;
        const bigintCheck = signed
          ? `${v} < INT64_MIN || ${v} > INT64_MAX`
          : `${v} < 0n || ${v} > UINT64_MAX`;
        lines.push(
          `if (typeof ${v} === 'bigint') {`,
          `  if (${bigintCheck}) kernel.badArgument(${i}, ${v});`,
          `  ${signed ? 'i64' : 'u64'}[${offset >> 3}] = ${v};`,
          `} else if (typeof ${v} === 'number' && Number.isSafeInteger(${v})${signed ? '' : ` && ${v} >= 0`}) {`,
          `  u32[${offset >> 2}] = ${v} >>> 0;`,
          `  i32[${(offset >> 2) + 1}] = Math.floor(${v} / ${TWO_32});`,
          `} else kernel.badArgument(${i}, ${v});`,
        );
        break;
      }
      default: {
        const writer = writers[i]!;
        const [low, high] = INTEGER_RANGES[writer]!;
        const n = `n${i}`;
        const view = {
          [W_I8]: `i8[${offset}]`,
          [W_U8]: `u8[${offset}]`,
          [W_I16]: `i16[${offset >> 1}]`,
          [W_U16]: `u16[${offset >> 1}]`,
          [W_I32]: `i32[${offset >> 2}]`,
          [W_U32]: `u32[${offset >> 2}]`,
        }[writer];
        lines.push(
          `const ${n} = typeof ${v} === 'boolean' ? (${v} ? 1 : 0) : ${v};`,
          `if (typeof ${n} !== 'number' || !Number.isInteger(${n}) || ${n} < ${low} || ${n} > ${high}) kernel.badArgument(${i}, ${v});`,
          `${view} = ${n};`,
        );
      }
    }
  }
  // Every argument has passed: the pointers are declared used (and written).
  for (const i of pointers) {
    const offset = slotBase + i * 8;
    const v = `v${i}`;
    const p = `p${i}`;
    const access = readOnly[i] === 1 ? 'read' : 'write';
    lines.push(
      `const ${p} = typeof ${v} === 'bigint' ? ${v} : ${v}.ffiAddressOn(stream, '${access}');`,
      `if (typeof ${p} === 'number') {`,
      `  u32[${offset >> 2}] = ${p} >>> 0;`,
      `  u32[${(offset >> 2) + 1}] = (${p} / ${TWO_32}) >>> 0;`,
      `} else u64[${offset >> 3}] = ${p};`,
    );
  }
  if (positional) {
    // The launch itself (see `submit`, which the other paths take).
    const word = configBase >> 2;
    lines.push(
      // A captured kernel needs its module loaded for as long as the graph lives.
      'const capture = stream.capture;',
      'if (capture !== null) capture.retainModule(module);',
      'stream.context.makeCurrent();',
      `u32[${word}] = gx;`,
      `u32[${word + 1}] = gy;`,
      `u32[${word + 2}] = gz;`,
      `u32[${word + 3}] = bx;`,
      `u32[${word + 4}] = by;`,
      `u32[${word + 5}] = bz;`,
      `u32[${word + 6}] = sharedMemory;`,
      'const streamHandle = stream.ffiHandle;',
      `if (typeof streamHandle === 'number') {`,
      `  u32[${word + 8}] = streamHandle >>> 0;`,
      `  u32[${word + 9}] = (streamHandle / ${TWO_32}) >>> 0;`,
      `} else u64[${(configBase >> 3) + 4}] = streamHandle;`,
      'const token = beginOperation(name, stream);',
      'const result = driver().cuLaunchKernelEx(CONFIG, FUNCTION, ARGUMENTS, 0);',
      'endOperation(token);',
      `if (result !== 0) check(result, 'cuLaunchKernelEx(' + name + ')');`,
    );
  }
  const parameters = positional
    ? `stream, gx, gy, gz, bx, by, bz, sharedMemory, count, ${Array.from({ length: MAX_POSITIONAL }, (_, i) => `v${i}`).join(', ')}`
    : 'args, stream';
  const factory = new Function(
    'kernel',
    'views',
    'INT64_MIN',
    'INT64_MAX',
    'UINT64_MAX',
    'launch',
    `'use strict';
const { i8, u8, i16, u16, i32, u32, i64, u64, f32, f64 } = views;
const { module, name, CONFIG, FUNCTION, ARGUMENTS, driver, check, beginOperation, endOperation, DeviceArray } = launch;
return function ${positional ? 'launchKernel' : 'marshal'}(${parameters}) {
${lines.join('\n')}
};`,
  ) as (...parts: unknown[]) => ListMarshal | PositionalLaunch;
  return factory(kernel, views, INT64_MIN, INT64_MAX, UINT64_MAX, {
    module: kernel.module,
    name: kernel.name,
    CONFIG: configAddress,
    FUNCTION: kernel.ffiHandle,
    ARGUMENTS: kernel.ffiArgumentArray,
    driver,
    check,
    beginOperation,
    endOperation,
    DeviceArray,
  });
}

function describe(declared: KernelParameter): string {
  const parameter = declared.startsWith('const ') ? declared.slice(6) : declared;
  if (parameter === 'pointer') return 'a DeviceArray, DeviceBuffer or bigint device address';
  if (parameter.endsWith('*')) return `a DeviceArray of ${parameter.slice(0, -1)}`;
  if (parameter === 'int64' || parameter === 'uint64')
    return `an integer (${parameter}, number or bigint)`;
  if (parameter === 'float32' || parameter === 'float64') return `a number (${parameter})`;
  return `an integer in the ${parameter} range`;
}

function dimension(value: Dim3, index: 0 | 1 | 2): number {
  if (typeof value === 'number') return index === 0 ? value : 1;
  return value[index] ?? 1;
}

function checkDim3(what: string, value: Dim3): void {
  for (const index of [0, 1, 2] as const) {
    const d = dimension(value, index);
    if (!Number.isInteger(d) || d < 1)
      throw new CudaArgumentError(
        `launch: ${what} must be positive integers, got ${JSON.stringify(value)}`,
      );
  }
}

/**
 * Launches `kernel` on the config's stream (default: the current stream). Arguments are
 * checked against the declared parameter list before the native call; device arrays used on
 * another stream before are ordered after that stream's work on the GPU. Everything is checked
 * (the stream, the geometry, every argument) before any buffer is declared used: a launch that
 * throws a CudaArgumentError or DisposedError leaves no trace on any buffer or stream.
 * @example launch(saxpy, { grid: Math.ceil(n / 256), block: 256 }, y, x, 2.0, n);
 */
export function launch(kernel: Kernel, config: LaunchConfig, ...args: KernelArgument[]): void;
// The arguments are taken one by one (the rest array above is the signature callers see): a
// launch of a kernel of up to `MAX_POSITIONAL` parameters makes no array (see `issue`).
export function launch(
  kernel: Kernel,
  config: LaunchConfig,
  a0?: unknown,
  a1?: unknown,
  a2?: unknown,
  a3?: unknown,
  a4?: unknown,
  a5?: unknown,
  a6?: unknown,
  a7?: unknown,
): void {
  // biome-ignore lint/complexity/noArguments: the count of the arguments passed, without an array
  const count = arguments.length - 2;
  const stream = resolveStream(config.stream);
  const grid = config.grid;
  const block = config.block;
  const sharedMemory = config.sharedMemory ?? 0;
  const positional = kernel.launchPositional;
  // The common case first: a one-dimensional geometry (x >>> 0 === x: an integer in
  // [0, 2^32 - 1]) and a kernel launched without an argument list.
  if (
    typeof grid === 'number' &&
    typeof block === 'number' &&
    grid >>> 0 === grid &&
    grid !== 0 &&
    block >>> 0 === block &&
    block !== 0 &&
    sharedMemory >>> 0 === sharedMemory &&
    positional !== undefined &&
    count <= MAX_POSITIONAL
  ) {
    // The stream, then the arguments (checked before any use is declared): a rejected
    // launch leaves no trace on any buffer or stream.
    stream.assertUsable();
    checkKernel(kernel, stream);
    positional(
      stream,
      grid,
      1,
      1,
      block,
      1,
      1,
      sharedMemory,
      count,
      a0,
      a1,
      a2,
      a3,
      a4,
      a5,
      a6,
      a7,
    );
    return;
  }
  // The geometry first, then the arguments (checked before any use is declared).
  const gx = typeof grid === 'number' ? grid : (grid[0] ?? 1);
  const bx = typeof block === 'number' ? block : (block[0] ?? 1);
  const gy = typeof grid === 'number' ? 1 : (grid[1] ?? 1);
  const gz = typeof grid === 'number' ? 1 : (grid[2] ?? 1);
  const by = typeof block === 'number' ? 1 : (block[1] ?? 1);
  const bz = typeof block === 'number' ? 1 : (block[2] ?? 1);
  if (
    !(
      Number.isInteger(gx) &&
      gx >= 1 &&
      Number.isInteger(gy) &&
      gy >= 1 &&
      Number.isInteger(gz) &&
      gz >= 1 &&
      Number.isInteger(bx) &&
      bx >= 1 &&
      Number.isInteger(by) &&
      by >= 1 &&
      Number.isInteger(bz) &&
      bz >= 1 &&
      gx <= 0xffff_ffff &&
      gy <= 0xffff &&
      gz <= 0xffff &&
      bx <= 0xffff_ffff &&
      by <= 0xffff_ffff &&
      bz <= 0xffff_ffff &&
      Number.isInteger(sharedMemory) &&
      sharedMemory >= 0 &&
      sharedMemory <= 0xffff_ffff
    )
  ) {
    stream.assertUsable();
    checkKernel(kernel, stream);
    checkDim3('grid', grid);
    checkDim3('block', block);
    checkLimits([gx, gy, gz], [bx, by, bz], sharedMemory);
  }
  stream.assertUsable();
  checkKernel(kernel, stream);
  if (positional !== undefined && count <= MAX_POSITIONAL) {
    positional(stream, gx, gy, gz, bx, by, bz, sharedMemory, count, a0, a1, a2, a3, a4, a5, a6, a7);
  } else {
    // biome-ignore lint/complexity/noArguments: a kernel of many parameters: its list
    kernel.marshal(Array.prototype.slice.call(arguments, 2) as KernelArgument[], stream);
    submit(kernel, stream, gx, gy, gz, bx, by, bz, sharedMemory);
  }
}

/**
 * `launch` for a caller that has resolved the stream (`resolveStream`) and computed
 * a one-dimensional geometry itself (`grid` and `block` positive integers within the limits,
 * `sharedMemory` a byte count that fits): the arguments come as a list the caller reuses, so
 * the call makes no array. Checks the stream, the module and the arguments as `launch` does
 * (before any buffer is declared used). The kernels package launches its cached kernels
 * through it; only `@cuda-tasks/cudadrv/internal` exports it.
 */
export function launchOn(
  kernel: Kernel,
  stream: Stream,
  grid: number,
  block: number,
  sharedMemory: number,
  args: readonly KernelArgument[],
): void {
  stream.assertUsable();
  checkKernel(kernel, stream);
  kernel.marshal(args, stream);
  submit(kernel, stream, grid, 1, 1, block, 1, 1, sharedMemory);
}

function checkKernel(kernel: Kernel, stream: Stream): void {
  if (kernel.module.disposed) throw new DisposedError(`kernel ${kernel.name}'s module`);
  if (stream.context !== kernel.module.context) {
    throw new CudaArgumentError(
      `launch: kernel ${kernel.name} belongs to ${kernel.module.context}, the stream to ${stream.context}`,
    );
  }
}

/**
 * Issues cuLaunchKernelEx of `kernel` (its arguments marshalled, everything checked) on
 * `stream`.
 */
function submit(
  kernel: Kernel,
  stream: Stream,
  gx: number,
  gy: number,
  gz: number,
  bx: number,
  by: number,
  bz: number,
  sharedMemory: number,
): void {
  // A captured kernel needs its module loaded for as long as the graph lives.
  stream.capture?.retainModule(kernel.module);
  stream.context.makeCurrent();
  // cuLaunchKernelEx with a CUlaunchConfig in a reused arena: four arguments for koffi to
  // convert instead of eleven (measured faster than cuLaunchKernel, in C too).
  const launchConfig = launchConfiguration();
  const words = launchConfig.u32;
  words[0] = gx;
  words[1] = gy;
  words[2] = gz;
  words[3] = bx;
  words[4] = by;
  words[5] = bz;
  words[6] = sharedMemory;
  const streamHandle = stream.ffiHandle;
  if (typeof streamHandle === 'number') {
    words[8] = streamHandle >>> 0;
    words[9] = (streamHandle / TWO_32) >>> 0;
  } else launchConfig.u64[4] = streamHandle;
  const token = beginOperation(kernel.name, stream);
  const result = driver().cuLaunchKernelEx(
    launchConfig.address,
    kernel.ffiHandle,
    kernel.ffiArgumentArray,
    0,
  );
  endOperation(token);
  if (result !== 0) check(result, `cuLaunchKernelEx(${kernel.name})`);
}

/** The CUlaunchConfig arena (56 bytes: 7 dimensions and sizes, the stream, no attributes). */
interface LaunchConfigArena {
  address: number | bigint;
  u32: Uint32Array;
  u64: BigUint64Array;
}

let launchConfigArena: LaunchConfigArena | undefined;

function launchConfiguration(): LaunchConfigArena {
  if (launchConfigArena === undefined) {
    const k = koffi();
    const pointer = k.alloc('uint8_t', 64) as bigint;
    const view = k.view(pointer, 64);
    const u32 = new Uint32Array(view);
    u32.fill(0); // attrs = NULL, numAttrs = 0
    launchConfigArena = { address: ffiValue(pointer), u32, u64: new BigUint64Array(view) };
  }
  return launchConfigArena;
}

function checkLimits(grid: number[], block: number[], sharedMemory: number): void {
  if (grid[0]! > 0xffff_ffff || grid[1]! > 0xffff || grid[2]! > 0xffff) {
    throw new CudaArgumentError(
      `launch: grid dimensions must be at most [2^32 - 1, 65535, 65535], got ${JSON.stringify(grid)}`,
    );
  }
  if (block.some((d) => d > 0xffff_ffff)) {
    throw new CudaArgumentError(
      `launch: block dimensions must fit in 32 bits, got ${JSON.stringify(block)}`,
    );
  }
  if (!Number.isInteger(sharedMemory) || sharedMemory < 0 || sharedMemory > 0xffff_ffff) {
    throw new CudaArgumentError(
      `launch: sharedMemory must be a non-negative integer of bytes, got ${sharedMemory}`,
    );
  }
}
