import { check, driver } from '../driver.js';
import { CaptureError, CudaArgumentError, CudaUnavailableError } from '../errors.js';
import {
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
} from '../ffi/cuda.js';
import type { MemoryPool } from '../memory/memory-pool.js';
import { cudadrvState } from '../process-state.js';
import { useClock } from '../progress.js';
import type { Stream } from '../stream/stream.js';
import { launchGate, reopenLaunchGate } from './launch-gate.js';

interface Registry {
  devices: Map<number, Device>;
  /** The context handle that is current on the event loop's thread, as far as we set it. */
  current: bigint;
}
const registry: Registry = cudadrvState('contexts', () => ({
  devices: new Map(),
  current: -1n,
}));

/**
 * @internal How a context makes its default stream and its memory pool. Stream and MemoryPool
 * live in the layers above this one (stream/stream.ts, memory/memory-pool.ts); each installs
 * its factory here when it loads, so that this file imports nothing from above (the package
 * entry loads them all before any context exists).
 */
export const contextParts: {
  createStream: (context: Context) => Stream;
  createMemoryPool: (context: Context) => MemoryPool;
  /**
   * Waits until the issue engine (stream/issue-engine.ts) has issued every launch it holds:
   * before work that concerns every stream (a context synchronize, a module unload).
   */
  issueAll: () => void;
} = {
  createStream: () => partMissing('stream/stream.ts'),
  createMemoryPool: () => partMissing('memory/memory-pool.ts'),
  issueAll: () => {},
};

function partMissing(file: string): never {
  throw new Error(`@cuda-tasks/cudadrv: ${file} is not loaded; import the package entry`);
}

/**
 * Number of CUDA devices visible to this process: 0 where no driver library loads or the
 * driver finds no GPU (`availability()` says why), never a throw for those.
 * @example const gpus = deviceCount(); // 0 on a machine without an NVIDIA driver
 */
export function deviceCount(): number {
  try {
    return visibleDeviceCount();
  } catch (error) {
    if (CudaUnavailableError.isInstance(error)) return 0;
    throw error;
  }
}

/**
 * @internal The device count from the driver; throws the driver's CudaUnavailableError where
 * it does not load or finds no GPU (what `Device.get` reports).
 */
export function visibleDeviceCount(): number {
  const count = [0];
  check(driver().cuDeviceGetCount(count), 'cuDeviceGetCount');
  return count[0]!;
}

/**
 * A CUDA device by ordinal. Each device has one primary context, retained on first use and
 * kept for the life of the process.
 */
export class Device {
  /** The ordinal (0-based) as the driver numbers devices. */
  readonly ordinal: number;
  /** The CUdevice handle. */
  readonly handle: number;
  #context: Context | undefined;

  private constructor(ordinal: number, handle: number) {
    this.ordinal = ordinal;
    this.handle = handle;
  }

  /**
   * The device with this ordinal; throws a CudaArgumentError naming the valid range when it
   * does not exist.
   * @example const gpu = Device.get(0); console.log(gpu.name(), gpu.computeCapability());
   */
  static get(ordinal = 0): Device {
    const known = registry.devices.get(ordinal);
    if (known !== undefined) return known;
    if (!Number.isInteger(ordinal) || ordinal < 0) {
      throw new CudaArgumentError(`device ordinal must be a non-negative integer, got ${ordinal}`);
    }
    const count = visibleDeviceCount();
    if (ordinal >= count) {
      throw new CudaArgumentError(
        `device ${ordinal} does not exist: this process sees ${count} CUDA device${count === 1 ? '' : 's'} (ordinals 0..${count - 1})`,
      );
    }
    const handle = [0];
    check(driver().cuDeviceGet(handle, ordinal), 'cuDeviceGet');
    const device = new Device(ordinal, handle[0]!);
    registry.devices.set(ordinal, device);
    return device;
  }

  /** All visible devices: none where no driver loads or it finds no GPU (as `deviceCount()`). */
  static all(): Device[] {
    return Array.from({ length: deviceCount() }, (_, i) => Device.get(i));
  }

  /** The device's name, e.g. "NVIDIA H200". */
  name(): string {
    const buffer = new Uint8Array(256);
    check(driver().cuDeviceGetName(buffer, buffer.length, this.handle), 'cuDeviceGetName');
    const end = buffer.indexOf(0);
    return Buffer.from(buffer.subarray(0, end < 0 ? buffer.length : end)).toString('utf8');
  }

  /** Any CUdevice_attribute (see cuda.h), e.g. 16 for the multiprocessor count. */
  attribute(attribute: number): number {
    const value = [0];
    check(driver().cuDeviceGetAttribute(value, attribute, this.handle), 'cuDeviceGetAttribute');
    return value[0]!;
  }

  /** Compute capability as [major, minor]. */
  computeCapability(): [number, number] {
    return [
      this.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
      this.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
    ];
  }

  /** Number of streaming multiprocessors. */
  multiprocessorCount(): number {
    return this.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  }

  /** Total device memory in bytes. */
  totalMemory(): number {
    const bytes = [0];
    check(driver().cuDeviceTotalMem_v2(bytes, this.handle), 'cuDeviceTotalMem_v2');
    return Number(bytes[0]);
  }

  /** Free and total device memory in bytes (cuMemGetInfo in this device's primary context). */
  memoryInfo(): { free: number; total: number } {
    this.primaryContext().makeCurrent();
    const free = [0];
    const total = [0];
    check(driver().cuMemGetInfo_v2(free, total), 'cuMemGetInfo_v2');
    return { free: Number(free[0]), total: Number(total[0]) };
  }

  /** Free device memory in bytes. */
  freeMemory(): number {
    return this.memoryInfo().free;
  }

  /** The device UUID as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it. */
  uuid(): string {
    const bytes = new Uint8Array(16);
    check(driver().cuDeviceGetUuid(bytes, this.handle), 'cuDeviceGetUuid');
    const hex = Buffer.from(bytes).toString('hex');
    return `GPU-${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  /** Whether this device can map memory of `peer` directly (peer access). */
  canAccessPeer(peer: Device): boolean {
    const value = [0];
    check(driver().cuDeviceCanAccessPeer(value, this.handle, peer.handle), 'cuDeviceCanAccessPeer');
    return value[0] === 1;
  }

  /** The device's primary context, retained on first call. */
  primaryContext(): Context {
    if (this.#context === undefined) {
      const handle: (bigint | null)[] = [null];
      check(driver().cuDevicePrimaryCtxRetain(handle, this.handle), 'cuDevicePrimaryCtxRetain');
      this.#context = new Context(this, handle[0] as bigint);
    }
    return this.#context;
  }

  /** Waits (blocking the thread) until all work in this device's primary context is done. */
  synchronize(): void {
    this.primaryContext().synchronize();
  }

  /** `Device(ordinal)`. */
  toString(): string {
    return `Device(${this.ordinal})`;
  }
}

/**
 * A CUDA context (the primary context of a device). Owns the device's default stream, a
 * non-blocking stream created on first use (never the legacy NULL stream), and the device's
 * stream-ordered memory pool.
 */
export class Context {
  /** The device this is the primary context of. */
  readonly device: Device;
  /** The CUcontext handle. */
  readonly handle: bigint;
  /**
   * @internal The use-clock tick through which all work in this context is known complete
   * (a context synchronize; see progress.ts).
   */
  completedThrough = 0;
  /**
   * @internal Streams of this context capturing a graph now (see `StreamCapture`): while any
   * does, nothing may wait for the whole context.
   */
  capturingStreams = 0;
  #defaultStream: Stream | undefined;
  #memoryPool: MemoryPool | undefined;
  #priorityRange: { least: number; greatest: number } | undefined;

  /** @internal Use `Device.primaryContext()`. */
  constructor(device: Device, handle: bigint) {
    this.device = device;
    this.handle = handle;
  }

  /** Makes this context current on the calling thread; a no-op when it already is. */
  makeCurrent(): void {
    if (registry.current !== this.handle) {
      check(driver().cuCtxSetCurrent(this.handle), 'cuCtxSetCurrent');
      registry.current = this.handle;
      launchGate.current = this;
      reopenLaunchGate();
    }
  }

  /** The context's default stream: non-blocking, created on first use. */
  get defaultStream(): Stream {
    return (this.#defaultStream ??= contextParts.createStream(this));
  }

  /** The device's stream-ordered memory pool (the device's default pool). */
  get memoryPool(): MemoryPool {
    return (this.#memoryPool ??= contextParts.createMemoryPool(this));
  }

  /** Stream priorities this context supports: lower numbers are higher priority. */
  streamPriorityRange(): { least: number; greatest: number } {
    if (this.#priorityRange === undefined) {
      this.makeCurrent();
      const least = [0];
      const greatest = [0];
      check(driver().cuCtxGetStreamPriorityRange(least, greatest), 'cuCtxGetStreamPriorityRange');
      this.#priorityRange = { least: least[0]!, greatest: greatest[0]! };
    }
    return this.#priorityRange;
  }

  /**
   * Blocks the calling thread until all work in this context is done (cuCtxSynchronize). While
   * a stream of the context captures a graph, gives a CaptureError instead (the driver would
   * invalidate that capture).
   */
  synchronize(): void {
    if (this.capturingStreams > 0) {
      throw new CaptureError(
        'cuCtxSynchronize',
        `${this.capturingStreams} stream${this.capturingStreams === 1 ? '' : 's'} of ${this} ${this.capturingStreams === 1 ? 'is' : 'are'} capturing a graph, and a context synchronize would invalidate the capture: wait for your own stream instead (synchronize()), or after the capture has ended`,
      );
    }
    contextParts.issueAll();
    this.makeCurrent();
    const stamp = useClock.value;
    check(driver().cuCtxSynchronize(), 'cuCtxSynchronize');
    if (stamp > this.completedThrough) this.completedThrough = stamp;
  }

  /**
   * Enables access from this context to memory of `peer`'s context (cuCtxEnablePeerAccess);
   * true when enabled (or already was), false when the hardware does not allow it.
   */
  enablePeerAccess(peer: Context): boolean {
    if (peer === this) return true;
    if (!this.device.canAccessPeer(peer.device)) return false;
    this.makeCurrent();
    const result = driver().cuCtxEnablePeerAccess(peer.handle, 0);
    if (result !== 0 && result !== 704) check(result, 'cuCtxEnablePeerAccess');
    return true;
  }

  /** `Context(device ordinal)`. */
  toString(): string {
    return `Context(device ${this.device.ordinal})`;
  }
}
