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
  contextSynchronizeBinding,
} from '../ffi/cuda.js';
import { cudadrvState } from '../process-state.js';
import { useClock } from '../progress.js';
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

const releaseCachedHooks = cudadrvState(
  'release-cached-hooks',
  () => new Set<(context: Context) => void>(),
);

/**
 * Registers a callback that `MemoryPool.releaseCached()` runs after giving the cached blocks
 * back: free the memory you keep for reuse (the task runtime's handle caches free their spare
 * workspaces here). It runs on out-of-memory too. Returns a function that unregisters it.
 */
export function onReleaseCached(hook: (context: Context) => void): () => void {
  releaseCachedHooks.add(hook);
  return () => releaseCachedHooks.delete(hook);
}

/** Runs the `onReleaseCached` hooks of `context`; throws what failed once all have run. */
function runReleaseCachedHooks(context: Context): void {
  const errors: unknown[] = [];
  for (const hook of releaseCachedHooks) {
    try {
      hook(context);
    } catch (error) {
      errors.push(error);
    }
  }
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) throw new AggregateError(errors, 'releaseCached: hooks failed');
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
   * go back by themselves when the stream is disposed or memory runs out. Then runs the
   * `onReleaseCached` hooks (the library handles' spare workspaces go back too).
   */
  releaseCached(): void {
    releaseCached(this.context);
    runReleaseCachedHooks(this.context);
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
   * it: a Number below 2^53, else a BigInt). On out-of-memory: gives the cached blocks back,
   * runs the out-of-memory hooks, waits for pending frees, trims the pool, retries once, then
   * throws CudaOutOfMemoryError with the pool's usage (while a stream of the context captures a
   * graph, it only trims and retries). Inside a capture the allocation is a node of the graph.
   *
   * Synchronous: the wait for pending frees blocks the thread (cuCtxSynchronize), and so the
   * event loop. `allocateAsync` waits without blocking it.
   */
  allocate(bytes: number, stream: Stream): number | bigint {
    const address = this.tryAllocate(bytes, stream);
    if (address !== undefined) return address;
    if (this.freeUp()) this.context.synchronize();
    return this.retry(bytes, stream);
  }

  /**
   * `allocate`, where the out-of-memory wait for pending frees does not block the event loop:
   * it runs on a worker thread (cuCtxSynchronize_v2 through koffi's async call). Without
   * memory pressure it costs what `allocate` does, plus a resolved promise. On a driver
   * without cuCtxSynchronize_v2 the wait is the blocking one.
   */
  async allocateAsync(bytes: number, stream: Stream): Promise<number | bigint> {
    const address = this.tryAllocate(bytes, stream);
    if (address !== undefined) return address;
    if (this.freeUp()) await waitForContext(this.context);
    return this.retry(bytes, stream);
  }

  /**
   * One cuMemAllocAsync: the address, or undefined when memory ran out. It does not wait for
   * the issue engine's launches on the stream (`rawFfiHandle`): memory allocated earlier in
   * the stream's order is usable by them and by everything after.
   */
  private tryAllocate(bytes: number, stream: Stream): number | bigint | undefined {
    this.context.makeCurrent();
    const out = scratch();
    const result = driver().cuMemAllocAsync(out.address, bytes, stream.rawFfiHandle);
    if (result === CUresult.CUDA_SUCCESS) return out.readAddress(0);
    if (result !== CUresult.CUDA_ERROR_OUT_OF_MEMORY) throw cudaError(result, 'cuMemAllocAsync');
    return undefined;
  }

  /**
   * Out of memory: gives the cached blocks back and runs the hooks; true when waiting for the
   * context's pending frees is allowed (no stream of it captures a graph: neither the hooks,
   * whose handle destroys synchronize, nor a context synchronize may run then).
   */
  private freeUp(): boolean {
    releaseCached(this.context);
    if (this.context.capturingStreams > 0) return false;
    runReleaseCachedHooks(this.context);
    for (const hook of outOfMemoryHooks) hook(this.context);
    return true;
  }

  /** After the frees completed: trims the pool and tries once more, else throws. */
  private retry(bytes: number, stream: Stream): number | bigint {
    this.context.makeCurrent();
    this.trim(0);
    const out = scratch();
    const result = driver().cuMemAllocAsync(out.address, bytes, stream.rawFfiHandle);
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

/**
 * Resolves when all work in `context` issued so far is done, waiting on a worker thread
 * (pending frees complete at that point, and the pool can give their memory back). Blocks
 * instead where the driver lacks cuCtxSynchronize_v2.
 */
export function waitForContext(context: Context): Promise<void> {
  const synchronize = contextSynchronizeBinding();
  if (synchronize === null) {
    context.synchronize();
    return Promise.resolve();
  }
  contextParts.issueAll();
  const stamp = useClock.value;
  return new Promise<void>((resolve, reject) => {
    synchronize.async(context.handle, (error: unknown, result: number) => {
      if (error) reject(error);
      else if (result !== CUresult.CUDA_SUCCESS) reject(cudaError(result, 'cuCtxSynchronize_v2'));
      else {
        if (stamp > context.completedThrough) context.completedThrough = stamp;
        resolve();
      }
    });
  });
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
