import { check, driver, ffiValue } from '../driver.js';
import { DTYPES, type DType } from '../dtype.js';
import { CudaArgumentError, DisposedError } from '../errors.js';
import { CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK } from '../ffi/cuda.js';
import { koffi } from '../ffi/library.js';
import { DeviceArray } from '../memory/array.js';
import { DeviceBuffer } from '../memory/memory.js';
import type { Stream } from '../stream/stream.js';
import {
  type ArenaViews,
  type ArgumentLayout,
  compileLaunch,
  type DirectLaunch,
  describe,
  LAUNCH_CONFIG_BYTES,
  type ListLaunch,
  type ListMarshal,
  type PositionalLaunch,
  W_PTR,
  writerOf,
} from './marshal.js';
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
  /** This kernel's own marshaller of an argument list (see `compileLaunch`). */
  readonly #marshal: ListMarshal;
  /** The text of the launch code generated for this kernel. */
  readonly #launchSource: string;
  /**
   * @internal The whole launch on a checked stream and geometry, the arguments as a list
   * (checked, stored, declared used, then cuLaunchKernelEx with the kernel's own launch
   * configuration): `launchOn`, and `launch` past the two paths below.
   */
  readonly launchList: ListLaunch;
  /**
   * @internal The whole launch on a checked stream and geometry: the count and up to
   * `MAX_POSITIONAL` arguments one by one (so that `launch` makes no array), checked, stored,
   * declared used, then cuLaunchKernelEx with the kernel's own launch configuration;
   * undefined for a kernel of more parameters.
   */
  readonly launchPositional: PositionalLaunch | undefined;
  /**
   * @internal `launchPositional` from `launch()`'s own arguments: it resolves the stream and
   * checks a one-dimensional geometry itself (false, having done nothing, for any other
   * geometry); undefined for a kernel of more parameters.
   */
  readonly launchDirect: DirectLaunch | undefined;
  /**
   * @internal The address of the kernel's own CUlaunchConfig in its arena (no attributes), as
   * koffi converts it fastest: what every launch of the kernel passes to cuLaunchKernelEx.
   */
  readonly launchConfigAddress: number | bigint;

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
        if (!Object.hasOwn(DTYPES, dtype)) {
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
    this.launchConfigAddress = layout.configAddress;
    const compiled = compileLaunch(layout);
    this.#marshal = compiled.marshal;
    this.#launchSource = compiled.source;
    this.launchList = compiled.list;
    this.launchPositional = compiled.positional;
    this.launchDirect = compiled.direct;
  }

  /**
   * The JavaScript generated for this kernel's launches (its argument checks and stores, the
   * buffer hand-off, cuLaunchKernelEx), exactly the text compiled: a function expression of
   * the parts it closes over (see `LAUNCH_FACTORY_PARAMETERS`) that returns the kernel's
   * marshaller and launches. Its last line, `//# sourceURL=cuda-tasks/launch/<name>-<n>.js`,
   * is the name stack traces and debuggers give the generated code.
   * @example console.log(kernel.launchSource());
   */
  launchSource(): string {
    return this.#launchSource;
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

  /**
   * @internal Throws unless the kernel can be launched on `stream`: its module loaded, and the
   * stream of the module's context.
   */
  checkStream(stream: Stream): void {
    if (this.module.disposed) throw new DisposedError(`kernel ${this.name}'s module`);
    if (stream.context !== this.module.context) {
      throw new CudaArgumentError(
        `launch: kernel ${this.name} belongs to ${this.module.context}, the stream to ${stream.context}`,
      );
    }
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
