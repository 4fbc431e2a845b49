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
  /** Writer code per parameter. */
  readonly #writers: Uint8Array;
  /** 1 where a pointer parameter is only read (declared `const`). */
  readonly #readOnly: Uint8Array;
  /** dtype a pointer parameter requires, or undefined. */
  readonly #pointerDTypes: (DType | undefined)[];
  /** Address of the `void*[]` array. */
  readonly #argumentArray: bigint;
  readonly #slotBase: number;
  readonly #i8: Int8Array;
  readonly #u8: Uint8Array;
  readonly #i16: Int16Array;
  readonly #u16: Uint16Array;
  readonly #i32: Int32Array;
  readonly #u32: Uint32Array;
  readonly #u64: BigUint64Array;
  readonly #i64: BigInt64Array;
  readonly #f32: Float32Array;
  readonly #f64: Float64Array;

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
    this.#writers = new Uint8Array(count);
    this.#readOnly = new Uint8Array(count);
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
        this.#readOnly[i] = 1;
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
        this.#writers[i] = W_PTR;
        this.#pointerDTypes[i] = dtype as DType;
      } else {
        const writer = Object.hasOwn(writerOf, parameter) ? writerOf[parameter] : undefined;
        if (writer === undefined)
          throw new CudaArgumentError(
            `kernel ${name}: unknown parameter type ${JSON.stringify(declared)}`,
          );
        this.#writers[i] = writer;
      }
    });
    // Layout: [void* x count][8-byte slot x count]. The pointer array is written once.
    const k = koffi();
    const bytes = Math.max(16, count * 16);
    const arena = k.alloc('uint8_t', bytes) as bigint;
    const view = k.view(arena, bytes);
    this.#slotBase = count * 8;
    this.#i8 = new Int8Array(view);
    this.#u8 = new Uint8Array(view);
    this.#i16 = new Int16Array(view);
    this.#u16 = new Uint16Array(view);
    this.#i32 = new Int32Array(view);
    this.#u32 = new Uint32Array(view);
    this.#u64 = new BigUint64Array(view);
    this.#i64 = new BigInt64Array(view);
    this.#f32 = new Float32Array(view);
    this.#f64 = new Float64Array(view);
    for (let i = 0; i < count; i++) this.#u64[i] = arena + BigInt(this.#slotBase + i * 8);
    // Never NULL, even without parameters: koffi passes non-null pointers on its fast path.
    this.#argumentArray = arena;
    this.ffiArgumentArray = ffiValue(arena);
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
    const writers = this.#writers;
    const count = writers.length;
    if (args.length !== count) {
      throw new CudaArgumentError(
        `kernel ${this.name} takes ${count} argument${count === 1 ? '' : 's'} (${this.parameters.join(', ')}), got ${args.length}`,
      );
    }
    const base = this.#slotBase;
    let hasPointers = false;
    for (let i = 0; i < count; i++) {
      const value = args[i];
      const offset = base + i * 8;
      const writer = writers[i]!;
      if (writer === W_PTR) {
        // Checked now, declared used (and written) once every argument has passed.
        this.checkPointer(i, value);
        hasPointers = true;
      } else if (writer === W_F32 || writer === W_F64) {
        if (typeof value !== 'number') this.badArgument(i, value);
        if (writer === W_F32) this.#f32[offset >> 2] = value as number;
        else this.#f64[offset >> 3] = value as number;
      } else if (writer === W_I64 || writer === W_U64) {
        if (typeof value === 'bigint') {
          if (writer === W_I64) {
            if (value < INT64_MIN || value > INT64_MAX) this.badArgument(i, value);
            this.#i64[offset >> 3] = value;
          } else {
            if (value < 0n || value > UINT64_MAX) this.badArgument(i, value);
            this.#u64[offset >> 3] = value;
          }
        } else if (
          typeof value === 'number' &&
          Number.isSafeInteger(value) &&
          (writer === W_I64 || value >= 0)
        ) {
          // Two 32-bit halves: no BigInt allocated.
          const low = value >>> 0;
          const high = Math.floor(value / TWO_32);
          this.#u32[offset >> 2] = low;
          this.#i32[(offset >> 2) + 1] = high;
        } else this.badArgument(i, value);
      } else {
        const number = typeof value === 'boolean' ? (value ? 1 : 0) : value;
        const range = INTEGER_RANGES[writer]!;
        if (
          typeof number !== 'number' ||
          !Number.isInteger(number) ||
          number < range[0] ||
          number > range[1]
        ) {
          this.badArgument(i, value);
        }
        switch (writer) {
          case W_I8:
            this.#i8[offset] = number as number;
            break;
          case W_U8:
            this.#u8[offset] = number as number;
            break;
          case W_I16:
            this.#i16[offset >> 1] = number as number;
            break;
          case W_U16:
            this.#u16[offset >> 1] = number as number;
            break;
          case W_I32:
            this.#i32[offset >> 2] = number as number;
            break;
          default:
            this.#u32[offset >> 2] = number as number;
        }
      }
    }
    if (hasPointers) {
      for (let i = 0; i < count; i++) {
        if (writers[i] !== W_PTR) continue;
        const value = args[i] as DeviceArray | DeviceBuffer | bigint;
        const address =
          typeof value === 'bigint'
            ? value
            : value.ffiAddressOn(stream, this.#readOnly[i] === 1 ? 'read' : 'write');
        const offset = base + i * 8;
        if (typeof address === 'number') {
          // Two 32-bit halves: no BigInt made.
          this.#u32[offset >> 2] = address >>> 0;
          this.#u32[(offset >> 2) + 1] = (address / TWO_32) >>> 0;
        } else this.#u64[offset >> 3] = address;
      }
    }
    return this.#argumentArray;
  }

  /** Throws unless `value` fits pointer parameter `i`; declares nothing. */
  private checkPointer(i: number, value: unknown): void {
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

  private badArgument(i: number, value: unknown): never {
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
export function launch(kernel: Kernel, config: LaunchConfig, ...args: KernelArgument[]): void {
  const stream = resolveStream(config.stream);
  // The geometry first, then the arguments (marshal checks them all before declaring any
  // use): a rejected launch leaves no trace on any buffer or stream.
  const grid = config.grid;
  const block = config.block;
  const gx = typeof grid === 'number' ? grid : (grid[0] ?? 1);
  const bx = typeof block === 'number' ? block : (block[0] ?? 1);
  const gy = typeof grid === 'number' ? 1 : (grid[1] ?? 1);
  const gz = typeof grid === 'number' ? 1 : (grid[2] ?? 1);
  const by = typeof block === 'number' ? 1 : (block[1] ?? 1);
  const bz = typeof block === 'number' ? 1 : (block[2] ?? 1);
  const sharedMemory = config.sharedMemory ?? 0;
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
  issue(kernel, stream, gx, gy, gz, bx, by, bz, sharedMemory, args);
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
  issue(kernel, stream, grid, 1, 1, block, 1, 1, sharedMemory, args);
}

function checkKernel(kernel: Kernel, stream: Stream): void {
  if (kernel.module.disposed) throw new DisposedError(`kernel ${kernel.name}'s module`);
  if (stream.context !== kernel.module.context) {
    throw new CudaArgumentError(
      `launch: kernel ${kernel.name} belongs to ${kernel.module.context}, the stream to ${stream.context}`,
    );
  }
}

/** Checks the stream, the module and the arguments, then issues cuLaunchKernelEx. */
function issue(
  kernel: Kernel,
  stream: Stream,
  gx: number,
  gy: number,
  gz: number,
  bx: number,
  by: number,
  bz: number,
  sharedMemory: number,
  args: readonly KernelArgument[],
): void {
  stream.assertUsable();
  checkKernel(kernel, stream);
  kernel.marshal(args, stream);
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
