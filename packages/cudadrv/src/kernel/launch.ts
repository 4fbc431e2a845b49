import { resolveStream } from '../context/provider.js';
import { CudaArgumentError, describeValue } from '../errors.js';
import { assertOptions } from '../options-checks.js';
import type { Stream } from '../stream/stream.js';
import type { Kernel, KernelArgument } from './kernel.js';
import { MAX_POSITIONAL } from './marshal.js';

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

/** The names a launch config holds (any other is refused where a launch is refused anyway). */
const LAUNCH_CONFIG: readonly string[] = ['grid', 'block', 'sharedMemory', 'stream'];

/**
 * Why a launch that threw a bare TypeError threw it, when its config is at fault: a config
 * that is not an object (`null`, a number), or one without grid or block because a name is
 * misspelt (`{ Grid: 4, block: 256 }`). Called only on that failure: a launch that passes pays
 * nothing for it.
 */
function refuseConfig(config: unknown): void {
  if (typeof config !== 'object' || config === null) {
    throw new CudaArgumentError(
      `launch: config must be an object { grid, block, sharedMemory?, stream? }, got ${describeValue(config)}`,
    );
  }
  assertOptions('launch', config, LAUNCH_CONFIG);
  const { grid, block } = config as Partial<LaunchConfig>;
  if (grid === undefined || grid === null || block === undefined || block === null) {
    throw new CudaArgumentError(
      `launch: config must hold grid and block (a number or [x, y?, z?]), got grid ${describeValue(grid)}, block ${describeValue(block)}`,
    );
  }
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
export function launch(kernel: Kernel, config: LaunchConfig, ...args: KernelArgument[]): void;
// The arguments are taken one by one (the rest array above is the signature callers see): a
// launch of a kernel of up to `MAX_POSITIONAL` parameters makes no array (see `compileLaunch`).
export function launch(
  kernel: Kernel,
  config: LaunchConfig,
  a0?: unknown,
  a1?: unknown,
  a2?: unknown,
  a3?: unknown,
  a4?: unknown,
  a5?: unknown,
  a6?: unknown,
  a7?: unknown,
): void {
  // biome-ignore lint/complexity/noArguments: the count of the arguments passed, without an array
  const count = arguments.length - 2;
  // The common case: a kernel of up to `MAX_POSITIONAL` parameters, launched with a
  // one-dimensional geometry; its own launch function does it all (and returns false, having
  // done nothing, for any other geometry). The config is not checked on the way: reading a
  // `null` config, or the grid or block of one that misspells them, throws a bare TypeError,
  // which the catch below turns into a CudaArgumentError naming the fault (no cost until then).
  const direct = kernel.launchDirect;
  let grid: Dim3;
  let block: Dim3;
  let gx: number;
  let bx: number;
  try {
    if (
      direct !== undefined &&
      count <= MAX_POSITIONAL &&
      direct(config, count, a0, a1, a2, a3, a4, a5, a6, a7)
    ) {
      return;
    }
    grid = config.grid;
    block = config.block;
    gx = typeof grid === 'number' ? grid : (grid[0] ?? 1);
    bx = typeof block === 'number' ? block : (block[0] ?? 1);
  } catch (error) {
    if (error instanceof TypeError && !(error instanceof CudaArgumentError)) refuseConfig(config);
    throw error;
  }
  const sharedMemory = config.sharedMemory ?? 0;
  const positional = kernel.launchPositional;
  // The geometry first, then the arguments (checked before any use is declared).
  const gy = typeof grid === 'number' ? 1 : (grid[1] ?? 1);
  const gz = typeof grid === 'number' ? 1 : (grid[2] ?? 1);
  const by = typeof block === 'number' ? 1 : (block[1] ?? 1);
  const bz = typeof block === 'number' ? 1 : (block[2] ?? 1);
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
    // A refused geometry: the config's names are checked here, where it costs nothing.
    assertOptions('launch', config, LAUNCH_CONFIG);
    const stream = resolveStream(config.stream);
    stream.assertUsable();
    kernel.checkStream(stream);
    checkDim3('grid', grid);
    checkDim3('block', block);
    checkLimits([gx, gy, gz], [bx, by, bz], sharedMemory);
  }
  const stream = resolveStream(config.stream);
  stream.assertUsable();
  kernel.checkStream(stream);
  if (positional !== undefined && count <= MAX_POSITIONAL) {
    positional(stream, gx, gy, gz, bx, by, bz, sharedMemory, count, a0, a1, a2, a3, a4, a5, a6, a7);
  } else {
    // biome-ignore lint/complexity/noArguments: a kernel of many parameters: its list
    const args = Array.prototype.slice.call(arguments, 2) as KernelArgument[];
    kernel.launchList(args, stream, gx, gy, gz, bx, by, bz, sharedMemory);
  }
}

/**
 * `launch` for a library that launches one kernel many times: the stream already resolved
 * (`resolveStream`), a one-dimensional geometry it computed (`grid` and `block` positive
 * integers within the limits, `sharedMemory` a byte count that fits; not checked again), and
 * the arguments as a list the caller keeps and reuses, so that the call makes no array and
 * no configuration object. Checks the stream, the module and every argument as `launch` does,
 * before any buffer is declared used; then issues the launch as `launch` does (the kernel's
 * generated launch, taking the list). `@cuda-tasks/kernels` launches its cached kernels through it.
 * @example
 * const args: KernelArgument[] = [y, x, 2.0, n]; // kept, rewritten for each call
 * launchOn(saxpy, resolveStream(undefined), Math.ceil(n / 256), 256, 0, args);
 */
export function launchOn(
  kernel: Kernel,
  stream: Stream,
  grid: number,
  block: number,
  sharedMemory: number,
  args: readonly KernelArgument[],
): void {
  stream.assertUsable();
  kernel.checkStream(stream);
  kernel.launchList(args, stream, grid, 1, 1, block, 1, 1, sharedMemory);
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
