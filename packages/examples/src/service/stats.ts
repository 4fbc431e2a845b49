/**
 * What the service holds in memory, for `GET /stats` and the soak (soak.ts): the process's
 * RSS and heap, and on the GPU the memory pool's used and reserved bytes (with the small
 * blocks cached per stream), the task streams, the library handles with their workspaces,
 * and the kernel modules loaded. Reading them makes no allocation on the device.
 */
import { handleCache } from '@cuda-tasks/cublas';
import { CudaUnavailableError, Device, type PoolStatistics } from '@cuda-tasks/cudadrv';
import { handles as cusolverHandles } from '@cuda-tasks/cusolver';
import { kernelCacheStatistics } from '@cuda-tasks/kernels';
import { type StreamPoolStatistics, streamPoolStatistics } from '@cuda-tasks/task-runtime';

/** One library's handles now (`HandleCache.statistics()`, in part). */
export interface HandleFigures {
  /** Handles alive (idle or leased). */
  handles: number;
  /** Task leases held now. */
  leased: number;
  /** Workspaces the handles hold, bound or spare. */
  workspaces: number;
  /** Their bytes. */
  workspaceBytes: number;
}

/** What `GET /stats` answers. */
export interface MemoryStatistics {
  /** The process's resident set, bytes (`process.memoryUsage().rss`). */
  rssBytes: number;
  /** V8's heap in use, bytes. */
  heapUsedBytes: number;
  /** Device 0's stream-ordered pool (absent without a usable GPU; see `reason`). */
  pool?: PoolStatistics;
  /** The task streams of device 0. */
  streams?: StreamPoolStatistics;
  /** Handles by library: cuBLAS (with its 32 MiB workspaces) and cuSOLVER. */
  handles?: { cublas: HandleFigures; cusolver: HandleFigures };
  /** Kernel modules loaded since the process started. */
  modulesLoaded?: number;
  /** Why the GPU figures are missing. */
  reason?: string;
}

function figures(statistics: {
  handles: number;
  leased: number;
  workspaces?: number;
  workspaceBytes?: number;
}): HandleFigures {
  return {
    handles: statistics.handles,
    leased: statistics.leased,
    workspaces: statistics.workspaces ?? 0,
    workspaceBytes: statistics.workspaceBytes ?? 0,
  };
}

/**
 * The service's memory figures now. The GPU ones are left out, with a `reason`, where there
 * is no usable GPU or reading them fails (a sticky error).
 * @example const { pool } = memoryStatistics(); // pool?.reservedBytes, pool?.usedBytes
 */
export function memoryStatistics(): MemoryStatistics {
  const memory = process.memoryUsage();
  const result: MemoryStatistics = { rssBytes: memory.rss, heapUsedBytes: memory.heapUsed };
  try {
    const context = Device.get(0).primaryContext();
    result.pool = context.memoryPool.statistics();
    result.streams = streamPoolStatistics(0);
    result.handles = {
      cublas: figures(handleCache().statistics()),
      cusolver: figures(cusolverHandles.statistics()),
    };
    result.modulesLoaded = kernelCacheStatistics().modulesLoaded;
  } catch (error) {
    result.reason = CudaUnavailableError.isInstance(error)
      ? 'no usable GPU'
      : `reading the GPU figures failed: ${error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error)}`;
  }
  return result;
}
