import { CudaError, CudaUnavailableError } from './errors.js';
import { CUresult, type CudaBindings, cuda, STICKY_ERRORS } from './ffi/cuda.js';
import { koffi } from './ffi/library.js';
import { cudadrvState } from './process-state.js';

interface DriverState {
  initialized: boolean;
  /** The first sticky error seen, e.g. "CUDA_ERROR_ILLEGAL_ADDRESS in cuStreamSynchronize". */
  stickyError: string | undefined;
}

// Process-wide: a second loaded copy of this package shares the same state.
const state: DriverState = cudadrvState('driver', () => ({
  initialized: false,
  stickyError: undefined,
}));

let bindings: CudaBindings | undefined;

/**
 * The libcuda bindings after `cuInit(0)` has succeeded once. Throws CudaUnavailableError when
 * the driver library is missing or no GPU answers.
 */
export function driver(): CudaBindings {
  if (bindings !== undefined) return bindings;
  const api = cuda();
  if (!state.initialized) {
    const result = api.cuInit(0);
    if (result === CUresult.CUDA_ERROR_NO_DEVICE || result === CUresult.CUDA_ERROR_INVALID_DEVICE) {
      throw new CudaUnavailableError(
        'The NVIDIA driver is installed but reports no CUDA-capable GPU (cuInit: CUDA_ERROR_NO_DEVICE). Run on a machine with an NVIDIA GPU, and check that CUDA_VISIBLE_DEVICES does not hide it.',
        'GPU',
      );
    }
    if (result !== CUresult.CUDA_SUCCESS) {
      const { name, message } = describeResult(api, result);
      throw new CudaUnavailableError(
        `The CUDA driver failed to initialize: cuInit returned ${name} (${result}): ${message}. Check the NVIDIA driver installation (nvidia-smi should list the GPU).`,
        'libcuda',
      );
    }
    state.initialized = true;
  }
  bindings = api;
  return api;
}

function describeResult(api: CudaBindings, result: number): { name: string; message: string } {
  const name: (string | null)[] = [null];
  const message: (string | null)[] = [null];
  api.cuGetErrorName(result, name);
  api.cuGetErrorString(result, message);
  return { name: name[0] ?? `CUresult ${result}`, message: message[0] ?? 'unknown error' };
}

/**
 * Turns a CUresult into a CudaError naming the call. Sticky errors (an illegal address, a
 * failed launch) are remembered: every later failure says that the context is unusable.
 */
export function check(result: number, call: string): void {
  if (result !== 0) throw cudaError(result, call);
}

/** The CudaError for a non-zero CUresult (see `check`). */
export function cudaError(result: number, call: string): CudaError {
  const { name, message } = describeResult(cuda(), result);
  let text = message;
  if (STICKY_ERRORS.has(result)) {
    if (state.stickyError === undefined) {
      state.stickyError = `${name} in ${call}`;
      text +=
        '. This error is sticky: the CUDA context is now unusable and the process must restart to use the GPU again';
    } else {
      text += `. The CUDA context is unusable since an earlier ${state.stickyError}; restart the process`;
    }
  }
  return new CudaError(result, name, call, text);
}

/** The sticky error that made the context unusable, if one happened. */
export function stickyError(): string | undefined {
  return state.stickyError;
}

/** The driver's CUDA version as major * 1000 + minor * 10 (e.g. 13000). */
export function driverVersion(): number {
  const version = [0];
  check(driver().cuDriverGetVersion(version), 'cuDriverGetVersion');
  return version[0]!;
}

/**
 * A reused native scratch arena for out-parameters on hot paths (cuMemAllocAsync's device
 * pointer, pool attributes, elapsed times), so those calls allocate nothing per call.
 * Only one call at a time uses it (the event loop's thread).
 */
export class Scratch {
  /** The arena's native address. */
  readonly pointer: bigint;
  /** `pointer` as koffi's fastest argument (see `ffiValue`). */
  readonly address: number | bigint;
  /** The arena as 64-bit unsigned words. */
  readonly u64: BigUint64Array;
  /** The arena as 32-bit unsigned words. */
  readonly u32: Uint32Array;
  /** The arena as 32-bit signed words. */
  readonly i32: Int32Array;
  /** The arena as float32 values. */
  readonly f32: Float32Array;
  constructor(bytes = 64) {
    const k = koffi();
    this.pointer = k.alloc('uint8_t', bytes) as bigint;
    this.address = ffiValue(this.pointer);
    const view = k.view(this.pointer, bytes);
    this.u64 = new BigUint64Array(view);
    this.u32 = new Uint32Array(view);
    this.i32 = new Int32Array(view);
    this.f32 = new Float32Array(view);
  }

  /** Reads the 64-bit value at `index` (in 8-byte units) as `ffiValue` would give it. */
  readAddress(index = 0): number | bigint {
    const high = this.u32[2 * index + 1]!;
    // Below 2^53 the Number is exact; above, keep the BigInt.
    return high < 0x200000 ? this.u32[2 * index]! + high * 4294967296 : this.u64[index]!;
  }
}

/**
 * A native handle or address in the form koffi converts fastest for a `uint64_t` parameter: a
 * Number when it is exact (below 2^53, where every x86-64 and arm64 user-space and CUDA
 * unified address lies), else the BigInt itself. koffi takes either; from a Number it needs
 * no BigInt work, and the hot paths keep addresses as Numbers so that they make no BigInt per
 * call (docs/decisions/0002-number-addresses.md).
 */
export function ffiValue(handle: bigint): number | bigint {
  return handle <= 0x1f_ffff_ffff_ffffn && handle >= 0n ? Number(handle) : handle;
}

/**
 * The low 32 bits of a 64-bit address or handle (an `ffiValue`), as a signed integer: V8 keeps
 * it in the object that holds it, where the value itself above 2^31 is a heap number of its own.
 * The launch code stores it with `int32High`'s into an `Int32Array`, with no branch.
 */
export function int32Low(value: number | bigint): number {
  return typeof value === 'number' ? value | 0 : Number(BigInt.asIntN(32, value));
}

/** The high 32 bits of a 64-bit address or handle, as a signed integer (see `int32Low`). */
export function int32High(value: number | bigint): number {
  return typeof value === 'number'
    ? (value / 4294967296) | 0
    : Number(BigInt.asIntN(32, BigInt.asUintN(64, value) >> 32n));
}

let scratchArena: Scratch | undefined;
/** The process's scratch arena (see `Scratch`). */
export function scratch(): Scratch {
  return (scratchArena ??= new Scratch());
}
