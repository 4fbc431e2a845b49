import { type Context, contextParts } from '../context/device.js';
import { check, cudaError, driver, scratch } from '../driver.js';
import { CudaOutOfMemoryError } from '../errors.js';
import {
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
  CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
  CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
  CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
  CU_MEMPOOL_ATTR_USED_MEM_HIGH,
  CUresult,
} from '../ffi/cuda.js';
import { cudadrvState } from '../process-state.js';
import type { Stream } from '../stream/stream.js';
import { cachedBytes, releaseCached } from './block-cache.js';

/** Usage of a stream-ordered memory pool, in bytes. */
export interface PoolStatistics {
  /** Device memory the pool holds (in use or cached for reuse). */
  reservedBytes: number;
  /** Memory handed out and not yet freed (frees count once their stream reaches them). */
  usedBytes: number;
  /** The most `reservedBytes` has been since the pool was created or its watermarks reset. */
  reservedHighBytes: number;
  /** The most `usedBytes` has been since the pool was created or its watermarks reset. */
  usedHighBytes: number;
  /**
   * Of `usedBytes`, small freed blocks kept per stream for reuse (see `releaseCached`): used
   * as far as the pool knows, held by no buffer.
   */
  cachedBytes: number;
}

const outOfMemoryHooks = cudadrvState('oom-hooks', () => new Set<(context: Context) => void>());

/**
 * Registers a callback that runs when an allocation fails for lack of memory, before the
 * retry: release what you cache (the task runtime destroys idle library handles here).
 * Returns a function that unregisters it.
 */
export function onOutOfMemory(hook: (context: Context) => void): () => void {
  outOfMemoryHooks.add(hook);
  return () => outOfMemoryHooks.delete(hook);
}

/** The release threshold new pools get: keep freed memory cached (like CUDA.jl and CuPy). */
const DEFAULT_RELEASE_THRESHOLD = 0xffff_ffff_ffff_ffffn;

/**
 * A device's stream-ordered memory pool (cuMemAllocAsync / cuMemFreeAsync). Freed memory
 * stays reserved up to the release threshold, so steady-state allocation costs no system call.
 */
export class MemoryPool {
  /** The context whose device this pool allocates from. */
  readonly context: Context;
  /** The CUmemoryPool handle. */
  readonly handle: bigint;

  /** @internal Use `context.memoryPool`. */
  constructor(context: Context, handle: bigint) {
    this.context = context;
    this.handle = handle;
    this.setReleaseThreshold(DEFAULT_RELEASE_THRESHOLD);
  }

  /**
   * Bytes the pool keeps reserved after frees before returning memory to the system at a
   * synchronization point (`Infinity` or a bigint for "keep everything").
   */
  setReleaseThreshold(bytes: number | bigint): void {
    const out = scratch();
    out.u64[0] =
      typeof bytes === 'bigint'
        ? bytes
        : bytes === Infinity
          ? DEFAULT_RELEASE_THRESHOLD
          : BigInt(bytes);
    check(
      driver().cuMemPoolSetAttribute(this.handle, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, out.pointer),
      'cuMemPoolSetAttribute',
    );
  }

  /** The pool's reserved and used bytes (and their high-water marks). */
  statistics(): PoolStatistics {
    return {
      reservedBytes: this.attribute(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT),
      usedBytes: this.attribute(CU_MEMPOOL_ATTR_USED_MEM_CURRENT),
      reservedHighBytes: this.attribute(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH),
      usedHighBytes: this.attribute(CU_MEMPOOL_ATTR_USED_MEM_HIGH),
      cachedBytes: cachedBytes(this.context),
    };
  }

  /**
   * Gives the small blocks that disposed buffers left in per-stream caches back to the pool
   * (each free ordered on its stream). Disposing a buffer of up to 64 KiB keeps its block
   * for the next allocation of that size on the same stream, so that a loop allocating and
   * freeing small buffers makes no driver call; at most 4 MiB per stream are kept, and they
   * go back by themselves when the stream is disposed or memory runs out.
   */
  releaseCached(): void {
    releaseCached(this.context);
  }

  private attribute(attribute: number): number {
    const out = scratch();
    check(
      driver().cuMemPoolGetAttribute(this.handle, attribute, out.pointer),
      'cuMemPoolGetAttribute',
    );
    return Number(out.u64[0]);
  }

  /** Returns cached memory to the system, keeping at least `minBytesToKeep` reserved. */
  trim(minBytesToKeep = 0): void {
    check(driver().cuMemPoolTrimTo(this.handle, minBytesToKeep), 'cuMemPoolTrimTo');
  }

  /**
   * Allocates `bytes` ordered on `stream`; returns the device pointer (as `ffiValue` gives
   * it: a Number below 2^53, else a BigInt). On out-of-memory:
   * runs the out-of-memory hooks, trims the pool, waits for pending frees, retries once, then
   * throws CudaOutOfMemoryError with the pool's usage (while a stream of the context captures a
   * graph, it only trims and retries). Inside a capture the allocation is a node of the graph.
   */
  allocate(bytes: number, stream: Stream): number | bigint {
    this.context.makeCurrent();
    const api = driver();
    const out = scratch();
    let result = api.cuMemAllocAsync(out.address, bytes, stream.ffiHandle);
    if (result === CUresult.CUDA_SUCCESS) return out.readAddress(0);
    if (result !== CUresult.CUDA_ERROR_OUT_OF_MEMORY) throw cudaError(result, 'cuMemAllocAsync');
    releaseCached(this.context);
    // While a stream of the context captures, neither the hooks (destroying library handles
    // synchronizes) nor a context synchronize may run: either would invalidate the capture.
    if (this.context.capturingStreams === 0) {
      for (const hook of outOfMemoryHooks) hook(this.context);
      // Pending frees complete at the next synchronization; then the pool can give memory back.
      check(api.cuCtxSynchronize(), 'cuCtxSynchronize');
    }
    this.trim(0);
    result = api.cuMemAllocAsync(out.address, bytes, stream.ffiHandle);
    if (result === CUresult.CUDA_SUCCESS) return out.readAddress(0);
    if (result !== CUresult.CUDA_ERROR_OUT_OF_MEMORY) throw cudaError(result, 'cuMemAllocAsync');
    // A failed attempt can leave the pool holding what it grew by; give it back.
    this.trim(0);
    const stats = this.statistics();
    const info = this.context.device.memoryInfo();
    throw new CudaOutOfMemoryError(result, 'CUDA_ERROR_OUT_OF_MEMORY', bytes, {
      reservedBytes: stats.reservedBytes,
      usedBytes: stats.usedBytes,
      freeDeviceBytes: info.free,
      totalDeviceBytes: info.total,
    });
  }
}

// A context's memory pool is its device's default pool.
contextParts.createMemoryPool = (context) => {
  const pool: (bigint | null)[] = [null];
  check(
    driver().cuDeviceGetDefaultMemPool(pool, context.device.handle),
    'cuDeviceGetDefaultMemPool',
  );
  return new MemoryPool(context, pool[0] as bigint);
};
