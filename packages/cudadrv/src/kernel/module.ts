import { type Context, contextParts } from '../context/device.js';
import { currentContext } from '../context/provider.js';
import { check, cudaError, driver } from '../driver.js';
import { CudaArgumentError, CudaError, DisposedError, markErrorClass } from '../errors.js';
import { koffi } from '../ffi/library.js';
import { NVRTC_SUCCESS, nvrtc } from '../ffi/nvrtc.js';
import { Kernel, type KernelParameter } from './kernel.js';

const CU_JIT_ERROR_LOG_BUFFER = 5;
const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

/**
 * NVRTC failed to compile: `log` carries the compiler's output and `source` the text it was
 * given; the message shows both, the source with line numbers (the log's `name(line)` refers
 * to them).
 */
export class CompileError extends CudaError {
  /** True for any CompileError, also one thrown by another loaded copy of this package. */
  static override readonly isInstance = markErrorClass(CompileError, '@cuda-tasks/CompileError');
  /** The compiler's log. */
  readonly log: string;
  /** The source that failed to compile ('' when not known). */
  readonly source: string;
  constructor(code: number, status: string, log: string, name: string, source = '') {
    super(
      code,
      status,
      'nvrtcCompileProgram',
      `compiling ${name} failed:\n${log}${source ? `\n\n${name}:\n${numberLines(source)}` : ''}`,
    );
    this.name = 'CompileError';
    this.log = log;
    this.source = source;
  }
}

/**
 * The driver could not load a module (`Module.fromPtx`, `fromCubin`, `compile`): `log` carries
 * the JIT compiler's error log ('' when the driver wrote none, e.g. a cubin built for another
 * GPU), as `CompileError.log` carries NVRTC's; the message shows it too. `code`, `status` and
 * `call` (`cuModuleLoadDataEx`) are those of the failed load. A separate class from
 * `CompileError`, which is about CUDA C++ source: here the input was PTX or a binary image.
 * @example
 * try { Module.fromPtx(ptx); }
 * catch (error) { if (ModuleLoadError.isInstance(error)) console.error(error.log); }
 */
export class ModuleLoadError extends CudaError {
  /** True for any ModuleLoadError, also one thrown by another loaded copy of this package. */
  static override readonly isInstance = markErrorClass(
    ModuleLoadError,
    '@cuda-tasks/ModuleLoadError',
  );
  /** The JIT compiler's error log ('' when there is none). */
  readonly log: string;
  constructor(code: number, status: string, log: string) {
    super(
      code,
      status,
      'cuModuleLoadDataEx',
      log ? `module load failed:\n${log}` : 'module load failed',
    );
    this.name = 'ModuleLoadError';
    this.log = log;
  }
}

/** `source` with each line prefixed by its 1-based number, as compiler logs count them. */
export function numberLines(source: string): string {
  const lines = source.replace(/\n$/, '').split('\n');
  const width = String(lines.length).length;
  return lines.map((line, i) => `${String(i + 1).padStart(width)} | ${line}`).join('\n');
}

/** Options for `Module.compile`. */
export interface CompileOptions {
  /** File name shown in compiler messages (default "kernel.cu"). */
  name?: string;
  /** Extra NVRTC options, e.g. ["-use_fast_math", "-DN=4"]. */
  options?: readonly string[];
  /** In-memory headers: include name -> source. */
  headers?: Readonly<Record<string, string>>;
  /** The context to load the module in (default: the current context, the current device's). */
  context?: Context;
}

function checkNvrtc(result: number, call: string): void {
  if (result !== NVRTC_SUCCESS) {
    throw new CudaError(
      result,
      nvrtc().nvrtcGetErrorString(result) ?? `nvrtcResult ${result}`,
      call,
      'NVRTC call failed',
    );
  }
}

const finalizer = new FinalizationRegistry<bigint>((handle) => {
  try {
    contextParts.issueAll();
    driver().cuModuleUnload(handle);
  } catch {
    // Teardown.
  }
});

/** A loaded CUDA module (PTX or cubin) in one context. */
export class Module {
  /** The CUmodule handle. */
  readonly handle: bigint;
  /** The context the module is loaded in. */
  readonly context: Context;
  #disposed = false;

  private constructor(handle: bigint, context: Context) {
    this.handle = handle;
    this.context = context;
    finalizer.register(this, handle, this);
  }

  /**
   * Loads PTX text (JIT-compiled by the driver for this GPU). A load error is a
   * ModuleLoadError whose `log` is the JIT log.
   * @example const module = Module.fromPtx(readFileSync('kernels.ptx', 'utf8'));
   */
  static fromPtx(ptx: string, options: { context?: Context } = {}): Module {
    if (typeof ptx !== 'string' || ptx.length === 0)
      throw new CudaArgumentError('fromPtx: expected PTX text');
    return Module.load(Buffer.from(`${ptx}\0`, 'utf8'), options.context ?? currentContext());
  }

  /** Loads a cubin (or fatbin) image; a load error is a ModuleLoadError. */
  static fromCubin(image: Uint8Array, options: { context?: Context } = {}): Module {
    if (!(image instanceof Uint8Array) || image.length === 0)
      throw new CudaArgumentError('fromCubin: expected a non-empty Uint8Array');
    return Module.load(image, options.context ?? currentContext());
  }

  private static load(image: Uint8Array, context: Context): Module {
    context.makeCurrent();
    const logSize = 8192;
    const k = koffi();
    const logPointer = k.alloc('uint8_t', logSize) as bigint;
    new Uint8Array(k.view(logPointer, logSize)).fill(0);
    const handle: (bigint | null)[] = [null];
    const api = driver();
    // JIT option values are pointer-sized: the log buffer's address, then its size.
    const result = api.cuModuleLoadDataEx(
      handle,
      image,
      2,
      new Int32Array([CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]),
      new BigUint64Array([logPointer, BigInt(logSize)]),
    );
    if (result !== 0) {
      const jitLog = Buffer.from(k.view(logPointer, logSize))
        .toString('utf8')
        .replace(/\0.*$/s, '')
        .trim();
      k.free(logPointer);
      throw new ModuleLoadError(result, cudaError(result, 'cuModuleLoadDataEx').status, jitLog);
    }
    k.free(logPointer);
    return new Module(handle[0] as bigint, context);
  }

  /**
   * Compiles CUDA C++ source with NVRTC for this context's GPU and loads it. Kernels meant to
   * be found by name should be `extern "C"`. A compile error is a CompileError with the log.
   * @example
   * const module = Module.compile('extern "C" __global__ void twice(float *x) { x[threadIdx.x] *= 2; }');
   */
  static compile(source: string, options: CompileOptions = {}): Module {
    const context = options.context ?? currentContext();
    const image = compileToCubin(source, context, options);
    return Module.fromCubin(image, { context });
  }

  /**
   * A kernel by name, with its declared parameter list (checked at each launch).
   * @example const axpy = module.kernel('axpy', ['float32*', 'float32*', 'float32', 'uint64']);
   */
  kernel(name: string, parameters: readonly KernelParameter[]): Kernel {
    if (this.#disposed) throw new DisposedError('Module');
    this.context.makeCurrent();
    const handle: (bigint | null)[] = [null];
    check(
      driver().cuModuleGetFunction(handle, this.handle, name),
      `cuModuleGetFunction("${name}")`,
    );
    return new Kernel(this, name, handle[0] as bigint, parameters);
  }

  /** Unloads the module; kernels from it become unusable. Safe to call twice. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    finalizer.unregister(this);
    // Launches of its kernels the issue engine has not issued yet go first.
    contextParts.issueAll();
    this.context.makeCurrent();
    check(driver().cuModuleUnload(this.handle), 'cuModuleUnload');
  }

  /** Whether `dispose()` has unloaded the module (its kernels can no longer launch). */
  get disposed(): boolean {
    return this.#disposed;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** Compiles source to a cubin for the context's device (`-arch=sm_XY`). */
export function compileToCubin(
  source: string,
  context: Context,
  options: CompileOptions = {},
): Uint8Array {
  if (typeof source !== 'string' || source.length === 0)
    throw new CudaArgumentError('compile: expected CUDA source text');
  const api = nvrtc();
  const [major, minor] = context.device.computeCapability();
  const name = options.name ?? 'kernel.cu';
  const headerNames = Object.keys(options.headers ?? {});
  const headerSources = headerNames.map((key) => options.headers![key]!);
  const program: (bigint | null)[] = [null];
  checkNvrtc(
    api.nvrtcCreateProgram(program, source, name, headerNames.length, headerSources, headerNames),
    'nvrtcCreateProgram',
  );
  const handle = program[0] as bigint;
  try {
    const args = [`--gpu-architecture=sm_${major}${minor}`, ...(options.options ?? [])];
    const result = api.nvrtcCompileProgram(handle, args.length, args);
    if (result !== NVRTC_SUCCESS) {
      const size = [0];
      api.nvrtcGetProgramLogSize(handle, size);
      const log = new Uint8Array(Number(size[0]));
      api.nvrtcGetProgramLog(handle, log);
      const text = Buffer.from(log).toString('utf8').replace(/\0+$/, '').trim();
      throw new CompileError(
        result,
        api.nvrtcGetErrorString(result) ?? 'NVRTC_ERROR_COMPILATION',
        text,
        name,
        source,
      );
    }
    const size = [0];
    checkNvrtc(api.nvrtcGetCUBINSize(handle, size), 'nvrtcGetCUBINSize');
    const cubin = new Uint8Array(Number(size[0]));
    checkNvrtc(api.nvrtcGetCUBIN(handle, cubin), 'nvrtcGetCUBIN');
    return cubin;
  } finally {
    api.nvrtcDestroyProgram([handle]);
  }
}
