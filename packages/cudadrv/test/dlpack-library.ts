/**
 * Builds test/fixtures/dlpack-library.c with the system C compiler into a temporary folder and
 * binds it with koffi, for the DLPack tests; answers the reason instead where no compiler runs.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const source = fileURLToPath(new URL('./fixtures/dlpack-library.c', import.meta.url));

/** The library's functions (see dlpack-library.c). */
export interface DLPackLibrary {
  describeTensor(tensor: bigint): number[];
  releaseNow(tensor: bigint): void;
  releaseOnThread(tensor: bigint): number;
  sumDeviceFloat32(tensor: bigint): number;
  deletedCount(): number;
  makeTensor(
    data: bigint,
    deviceType: number,
    deviceId: number,
    rows: number,
    columns: number,
    rowMajor: boolean,
    flags: bigint,
  ): bigint;
}

/** The built library, or why it could not be built (no C compiler, a failed build). */
export function buildDLPackLibrary(): DLPackLibrary | string {
  const compiler = process.env.CC ?? 'cc';
  const folder = mkdtempSync(join(tmpdir(), 'cuda-tasks-dlpack-'));
  const output = join(folder, 'libdlpack-test.so');
  try {
    execFileSync(compiler, ['-shared', '-fPIC', '-O1', '-o', output, source, '-ldl', '-lpthread'], {
      stdio: 'pipe',
    });
  } catch (error) {
    return `no working C compiler (${compiler}): ${(error as Error).message.split('\n')[0]}`;
  }
  const koffi = createRequire(import.meta.url)('koffi');
  const lib = koffi.load(output);
  const describe = lib.func('int describe_tensor(uint64_t t, _Out_ int64_t *out, int capacity)');
  const releaseNow = lib.func('void release_now(uint64_t t)');
  const releaseOnThread = lib.func('int release_on_thread(uint64_t t)');
  const sum = lib.func('double sum_device_float32(uint64_t t)');
  const deletedCount = lib.func('int deleted_count(void)');
  const makeTensor = lib.func(
    'uint64_t make_tensor(uint64_t data, int32_t deviceType, int32_t deviceId, int64_t rows, int64_t columns, int32_t rowMajor, uint64_t flags)',
  );
  return {
    describeTensor(tensor) {
      const out = new BigInt64Array(11 + 2 * 64);
      const count = describe(tensor, out, out.length);
      return Array.from(out.subarray(0, count), Number);
    },
    releaseNow: (tensor) => releaseNow(tensor),
    releaseOnThread: (tensor) => releaseOnThread(tensor),
    sumDeviceFloat32: (tensor) => sum(tensor),
    deletedCount: () => deletedCount(),
    makeTensor: (data, deviceType, deviceId, rows, columns, rowMajor, flags) =>
      BigInt(makeTensor(data, deviceType, deviceId, rows, columns, rowMajor ? 1 : 0, flags)),
  };
}
