/**
 * The C test doubles in packages/testing/native, and how a test builds them: the stand-in
 * libcuda (stubcuda.c: every function returns at once, for the host benchmark; pressure.c:
 * its launch with a driver call's cache footprint, for `bench:host --pressure`) and the
 * stand-ins for libcublas, libcublasLt and libcurand beside it (stublibs.c), and the CPU
 * doubles of libcuda and NVRTC (cpucuda.c, cpunvrtc.c and cuda-on-cpu.h: generated kernels run
 * on the CPU, so that tests on a machine without a GPU check their results).
 *
 * Built with the host's C compiler into a folder of their own (mkdtemp, mode 0700) once per
 * process: nothing is read back from a shared cache folder, where another user could have put
 * a library of their own.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The folder of the C sources. */
export const NATIVE_SOURCES = fileURLToPath(new URL('../native/', import.meta.url));

/** The stand-in libcuda's C source. */
export const STAND_IN_SOURCE = join(NATIVE_SOURCES, 'stubcuda.c');

/**
 * The C source of the stand-ins for libcublas, libcublasLt and libcurand (every function the
 * bindings declare returns success at once): one library that `CUDA_TASKS_LIBCUBLAS`,
 * `CUDA_TASKS_LIBCUBLASLT` and `CUDA_TASKS_LIBCURAND` all name, beside the stand-in libcuda.
 */
export const STAND_IN_LIBRARIES_SOURCE = join(NATIVE_SOURCES, 'stublibs.c');

/**
 * The C source of a cuLaunchKernelEx with a driver call's footprint on the core (pressure.c),
 * built over the stand-in libcuda by `buildPressureStandIn`.
 */
export const STAND_IN_PRESSURE_SOURCE = join(NATIVE_SOURCES, 'pressure.c');

const built = new Map<string, string>();
let folder: string | undefined;

/** This process's build folder, removed when it exits. */
function buildFolder(): string {
  if (folder === undefined) {
    const made = mkdtempSync(join(tmpdir(), 'cuda-tasks-native-'));
    folder = made;
    process.once('exit', () => rmSync(made, { recursive: true, force: true }));
  }
  return folder;
}

/**
 * Builds `sources` (paths) with `$CC` (default `cc`) and `flags` into the shared library
 * `name`, once per process, and returns its path. Throws an Error naming the compiler and its
 * output when the build fails.
 * @example buildNativeLibrary('libstubcuda.so', [STAND_IN_SOURCE]);
 */
export function buildNativeLibrary(
  name: string,
  sources: readonly string[],
  flags: readonly string[] = [],
): string {
  const key = JSON.stringify([name, sources, flags]);
  const known = built.get(key);
  if (known !== undefined) return known;
  const library = join(buildFolder(), name);
  const compiler = process.env.CC ?? 'cc';
  const build = spawnSync(
    compiler,
    ['-O2', '-shared', '-fPIC', ...flags, '-o', library, ...sources],
    { encoding: 'utf8' },
  );
  if (build.status !== 0) {
    const why = build.error?.message ?? build.stderr.trim();
    throw new Error(
      `could not build ${name} with ${compiler} (${why}); install a C compiler or set CC`,
    );
  }
  built.set(key, library);
  return library;
}

/**
 * Builds the stand-in libcuda with pressure.c's cuLaunchKernelEx in place of its own (every
 * other function as in stubcuda.c) and returns the library's path: each launch runs through
 * 32 KiB of code and 32 KiB of data, as a real driver call evicts what its caller used. For
 * `bench:host --pressure`. Throws as `buildNativeLibrary` does.
 * @example process.env.CUDA_TASKS_LIBCUDA = buildPressureStandIn();
 */
export function buildPressureStandIn(): string {
  return buildNativeLibrary(
    'libstubcuda-pressure.so',
    [STAND_IN_SOURCE, STAND_IN_PRESSURE_SOURCE],
    ['-DSTAND_IN=__attribute__((weak))'],
  );
}

/** Whether `$CC` (default `cc`) and `$CXX` (default `c++`) both run: what the CPU doubles need. */
export function cpuCudaBuildable(): boolean {
  const runs = (command: string) => spawnSync(command, ['--version']).status === 0;
  return runs(process.env.CC ?? 'cc') && runs(process.env.CXX ?? 'c++');
}

/**
 * Builds the CPU doubles of libcuda and NVRTC and returns the variables that make the packages
 * load them (`CUDA_TASKS_LIBCUDA`, `CUDA_TASKS_LIBNVRTC`) and keep no kernel cache on disk
 * (`CUDA_TASKS_KERNEL_CACHE=off`: a cached "cubin" would be a shared library for this machine,
 * and tests would share compiled kernels through the disk).
 * Set them before the first driver call of the process.
 * @example Object.assign(process.env, cpuCudaEnvironment());
 */
export function cpuCudaEnvironment(): Record<string, string> {
  const header = join(NATIVE_SOURCES, 'cuda-on-cpu.h');
  const libcuda = buildNativeLibrary(
    'libcpucuda.so',
    [STAND_IN_SOURCE, join(NATIVE_SOURCES, 'cpucuda.c')],
    ['-DSTAND_IN=__attribute__((weak))', '-ldl'],
  );
  const libnvrtc = buildNativeLibrary(
    'libcpunvrtc.so',
    [join(NATIVE_SOURCES, 'cpunvrtc.c')],
    [`-DCPU_CUDA_HEADER="${header}"`],
  );
  return {
    CUDA_TASKS_LIBCUDA: libcuda,
    CUDA_TASKS_LIBNVRTC: libnvrtc,
    CUDA_TASKS_KERNEL_CACHE: 'off',
  };
}

/**
 * For a test file that runs a GPU suite on the CPU doubles: sets the variables of
 * `cpuCudaEnvironment` and `CUDA_TASKS_GPU=1` (so that the suite's `describeGpu` runs), raises
 * the timeouts (each kernel is compiled by the C++ compiler and run by one core), and returns
 * true; returns false, with a warning, where no C or C++ compiler runs. Call it at the top of
 * the file, before the suite is imported (vitest runs each file in a process of its own).
 * @example if (useCpuCuda('topk')) await import('./topk.gpu.test.js');
 */
export async function useCpuCuda(suite: string): Promise<boolean> {
  if (!cpuCudaBuildable()) {
    console.warn(
      `[cuda-tasks] ${suite} on the CPU doubles skipped: no C and C++ compiler (cc, c++; or set CC and CXX)`,
    );
    return false;
  }
  const { vi } = await import('vitest');
  vi.setConfig({ testTimeout: 300_000, hookTimeout: 300_000 });
  Object.assign(process.env, cpuCudaEnvironment(), { CUDA_TASKS_GPU: '1' });
  const { gpuAvailable } = await import('./gpu.js');
  if (!gpuAvailable) {
    throw new Error(
      `${suite} on the CPU doubles: @cuda-tasks/testing was loaded before CUDA_TASKS_GPU was set, so the suite would be skipped; call useCpuCuda first`,
    );
  }
  return true;
}
