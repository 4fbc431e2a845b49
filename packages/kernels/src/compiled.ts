/**
 * A generated source and its entry points, loaded lazily per context with each entry's
 * occupancy-chosen block size. The last context used is a field comparison away, so a launch
 * in steady state looks nothing up in a map.
 */
import type { Context, Kernel, KernelParameter } from '@cuda-tasks/cudadrv';
import { kernelCacheGeneration, loadCachedModule } from '@cuda-tasks/task-runtime';

/** One entry point of a generated source. */
export interface EntryPoint {
  /** The `extern "C"` kernel name. */
  readonly name: string;
  /** Its parameters, as `launch` checks them. */
  readonly parameters: readonly KernelParameter[];
  /** Round the block size down to a power of two (tree reductions need one). */
  readonly powerOfTwo?: boolean;
  /** The block size it is always launched with (its full grid is computed for that size). */
  readonly blockSize?: number;
}

/** A loaded entry point with the launch shape the occupancy calculator chose for it. */
export interface LoadedKernel {
  /** The kernel. */
  readonly kernel: Kernel;
  /** Threads per block (cuOccupancyMaxPotentialBlockSize's choice). */
  readonly blockSize: number;
  /**
   * Blocks that fill the device at that block size (one full wave): the multiprocessors times
   * the blocks resident on each, from the occupancy calculator.
   */
  readonly fullGrid: number;
}

function largestPowerOfTwoAtMost(value: number): number {
  return 2 ** Math.floor(Math.log2(Math.max(1, value)));
}

function loadEntry(module: ReturnType<typeof loadCachedModule>, entry: EntryPoint): LoadedKernel {
  const kernel = module.kernel(entry.name, entry.parameters);
  if (entry.blockSize !== undefined) {
    // The resident blocks of exactly that size on every multiprocessor.
    const perMultiprocessor = kernel.maxActiveBlocksPerMultiprocessor(entry.blockSize);
    const multiprocessors = module.context.device.multiprocessorCount();
    return {
      kernel,
      blockSize: entry.blockSize,
      fullGrid: Math.max(1, perMultiprocessor * multiprocessors),
    };
  }
  let { blockSize, minGridSize } = kernel.suggestBlockSize();
  if (entry.powerOfTwo && largestPowerOfTwoAtMost(blockSize) !== blockSize) {
    // Ask again within the power of two below: its own full grid comes with it.
    const limited = kernel.suggestBlockSize(0, largestPowerOfTwoAtMost(blockSize));
    blockSize = largestPowerOfTwoAtMost(limited.blockSize);
    minGridSize = limited.minGridSize;
  }
  return { kernel, blockSize, fullGrid: Math.max(1, minGridSize) };
}

/** A generated source, compiled and loaded on first use in each context. */
export class CompiledSource {
  /** The file name NVRTC's messages show. */
  readonly name: string;
  /** The CUDA C source. */
  readonly source: string;
  /** Its entry points. */
  readonly entries: readonly EntryPoint[];
  #context: Context | undefined;
  #kernels: LoadedKernel[] = [];
  #generation = -1;
  #others: Map<Context, LoadedKernel[]> | undefined;

  constructor(name: string, source: string, entries: readonly EntryPoint[]) {
    this.name = name;
    this.source = source;
    this.entries = entries;
  }

  /** The entry points loaded in `context` (compiling or reading the cache the first time). */
  kernels(context: Context): readonly LoadedKernel[] {
    const generation = kernelCacheGeneration();
    if (context === this.#context && generation === this.#generation) return this.#kernels;
    return this.switchContext(context, generation);
  }

  private switchContext(context: Context, generation: number): LoadedKernel[] {
    if (generation !== this.#generation) {
      // clearKernelCache ran: load everything again.
      this.#others = undefined;
      this.#context = undefined;
      this.#generation = generation;
    }
    if (this.#context !== undefined) (this.#others ??= new Map()).set(this.#context, this.#kernels);
    let kernels = this.#others?.get(context);
    if (kernels === undefined) {
      const module = loadCachedModule(this.source, context, this.name);
      kernels = this.entries.map((entry) => loadEntry(module, entry));
    }
    this.#context = context;
    this.#kernels = kernels;
    return kernels;
  }
}
