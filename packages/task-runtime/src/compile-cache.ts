/**
 * The kit's NVRTC compile cache, the one every library that compiles CUDA C++ at run time uses
 * (the kernels package's generated kernels, cuSOLVER's helpers): per (source, NVRTC version,
 * device architecture) a cubin, kept in memory and in the on-disk cache (disk-cache.ts, with
 * its trust rules), and per context one loaded module, kept for the process. The cache is
 * process-wide state (`processWide`), so two loaded copies of this package share it.
 * Decision 0040 says why it lives here.
 */
import { type Context, CudaArgumentError, compileToCubin, Module } from '@cuda-tasks/cudadrv';
import { nvrtc } from '@cuda-tasks/cudadrv/ffi';
import {
  clearCacheFolder,
  defaultCacheDirectory,
  readCached,
  removeCached,
  writeCached,
} from './disk-cache.js';
import { processWide } from './process-wide.js';

/** What the kernel cache has done since the process started (or since `clearKernelCache`). */
export interface KernelCacheStatistics {
  /** Sources compiled with NVRTC. */
  compiled: number;
  /** Cubins found in memory (another kernel with the same source, or another context). */
  memoryHits: number;
  /** Cubins read from the on-disk cache. */
  diskHits: number;
  /**
   * Entries of the on-disk cache not loaded because the trust rules refused them or their
   * folder, or because they were damaged (each reason is also a `KernelCacheWarning`, once).
   */
  diskRefused: number;
  /** Cubins written to the on-disk cache. */
  diskWrites: number;
  /** Writes to the on-disk cache that failed (the kernels still work). */
  diskWriteFailures: number;
  /** Modules loaded into a context. */
  modulesLoaded: number;
}

interface CacheState {
  /** undefined until first needed: then the environment's choice (see `defaultCacheDirectory`). */
  directory: string | null | undefined;
  cubins: Map<string, Uint8Array>;
  modules: Map<string, Map<Context, Module>>;
  /** Every module loaded: kept loaded for the process's life (work may still use them). */
  retained: Module[];
  /** Bumped by `clearKernelCache`: kernels loaded before it are looked up again. */
  generation: number;
  statistics: KernelCacheStatistics;
  compilerVersion: string | undefined;
  architectures: WeakMap<Context, string>;
}

const state: CacheState = processWide(
  'compile-cache',
  (): CacheState => ({
    directory: undefined,
    cubins: new Map(),
    modules: new Map(),
    retained: [],
    generation: 0,
    statistics: emptyStatistics(),
    compilerVersion: undefined,
    architectures: new WeakMap(),
  }),
);

function emptyStatistics(): KernelCacheStatistics {
  return {
    compiled: 0,
    memoryHits: 0,
    diskHits: 0,
    diskRefused: 0,
    diskWrites: 0,
    diskWriteFailures: 0,
    modulesLoaded: 0,
  };
}

/**
 * Points the on-disk kernel cache at `directory`, or turns it off with `null`. Without a call,
 * the folder is `$CUDA_TASKS_KERNEL_CACHE` (`0`/`off`: no disk cache), else
 * `$XDG_CACHE_HOME/cuda-tasks/kernels`, else `~/.cache/cuda-tasks/kernels`.
 * @example setKernelCacheDirectory('/var/cache/my-service/kernels');
 */
export function setKernelCacheDirectory(directory: string | null): void {
  if (directory !== null && (typeof directory !== 'string' || directory === '')) {
    throw new CudaArgumentError(
      `setKernelCacheDirectory: expected a folder path or null, got ${JSON.stringify(directory)}`,
    );
  }
  state.directory = directory;
}

/** The on-disk kernel cache's folder, or null when the disk cache is off. */
export function kernelCacheDirectory(): string | null {
  if (state.directory === undefined) state.directory = defaultCacheDirectory();
  return state.directory;
}

/** A copy of the kernel cache's counters. */
export function kernelCacheStatistics(): KernelCacheStatistics {
  return { ...state.statistics };
}

/**
 * Forgets the compiled kernels held in memory and resets the counters: the next call of each
 * kernel reads the on-disk cache (or compiles). With `{ disk: true }` it also deletes the disk
 * cache's own entries (`cuda-tasks-<hex>.kernel`), never other files of the folder, and
 * nothing in a folder the trust rules refuse. Modules already loaded stay loaded (queued work
 * may still run them).
 */
export function clearKernelCache(options: { disk?: boolean } = {}): void {
  state.cubins.clear();
  state.modules.clear();
  state.generation++;
  state.statistics = emptyStatistics();
  const directory = kernelCacheDirectory();
  if (options.disk && directory !== null) clearCacheFolder(directory);
}

/**
 * A number that changes each time `clearKernelCache` forgets the cache: a library that keeps
 * the kernels of a module from `loadCachedModule` (to launch them without a lookup) compares
 * it with the one it loaded them in, and loads them again when it moved on.
 */
export function kernelCacheGeneration(): number {
  return state.generation;
}

function compilerVersion(): string {
  if (state.compilerVersion === undefined) {
    const major = [0];
    const minor = [0];
    nvrtc().nvrtcVersion(major, minor);
    state.compilerVersion = `nvrtc ${major[0]}.${minor[0]}`;
  }
  return state.compilerVersion;
}

function architecture(context: Context): string {
  let arch = state.architectures.get(context);
  if (arch === undefined) {
    const [major, minor] = context.device.computeCapability();
    arch = `sm_${major}${minor}`;
    state.architectures.set(context, arch);
  }
  return arch;
}

/**
 * The module for `source` in `context`: loaded once per context and kept loaded for the
 * process (do not dispose it); its cubin compiled once per architecture (from memory, else the
 * on-disk cache, else NVRTC, which throws CompileError with the source and the log). `name` is
 * the file name NVRTC's messages show. `kernelCacheStatistics()` counts what it did.
 * @example
 * const module = loadCachedModule(source, stream.context, 'my-helpers.cu');
 * const scale = module.kernel('scale_f32', ['float32*', 'float32', 'int32']);
 */
export function loadCachedModule(source: string, context: Context, name: string): Module {
  const key = `${compilerVersion()}\n${architecture(context)}\n${source}`;
  let byContext = state.modules.get(key);
  const loaded = byContext?.get(context);
  if (loaded !== undefined) return loaded;
  let cubin = state.cubins.get(key);
  if (cubin !== undefined) state.statistics.memoryHits++;
  const directory = kernelCacheDirectory();
  let fromDisk = false;
  if (cubin === undefined && directory !== null) {
    const read = readCached(directory, key);
    cubin = read.cubin;
    if (cubin !== undefined) {
      fromDisk = true;
      state.statistics.diskHits++;
    } else if (read.refused !== undefined) {
      state.statistics.diskRefused++;
    }
  }
  let module: Module | undefined;
  if (cubin !== undefined) {
    try {
      module = Module.fromCubin(cubin, { context });
    } catch (error) {
      // A cubin the driver refuses (written by another NVRTC build?): compile afresh.
      if (!fromDisk) throw error;
      removeCached(directory!, key);
      state.statistics.diskHits--;
      cubin = undefined;
    }
  }
  if (cubin === undefined) {
    cubin = compileToCubin(source, context, { name });
    state.statistics.compiled++;
    if (directory !== null) {
      if (writeCached(directory, key, cubin)) state.statistics.diskWrites++;
      else state.statistics.diskWriteFailures++;
    }
  }
  state.cubins.set(key, cubin);
  module ??= Module.fromCubin(cubin, { context });
  state.statistics.modulesLoaded++;
  state.retained.push(module);
  if (byContext === undefined) state.modules.set(key, (byContext = new Map()));
  byContext.set(context, module);
  return module;
}
