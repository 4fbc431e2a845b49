/**
 * Bare koffi declarations of the hot driver calls, in several spellings, timed on the GPU
 * machine: which argument types koffi converts fastest (this decided the declarations in
 * packages/cudadrv/src/ffi/cuda.ts). Prints ns per call.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import koffi from 'koffi';
import { timeNs } from './harness.js';

const lib = koffi.load('libcuda.so.1');
const check = (r: number, what: string) => {
  if (r !== 0) throw new Error(`${what}: ${r}`);
};
check(lib.func('int cuInit(unsigned int)')(0), 'cuInit');
const ctx: (bigint | null)[] = [null];
check(lib.func('int cuDevicePrimaryCtxRetain(_Out_ void **c, int d)')(ctx, 0), 'retain');
check(lib.func('int cuCtxSetCurrent(void *c)')(ctx[0]), 'set');
const s: (bigint | null)[] = [null];
check(lib.func('int cuStreamCreate(_Out_ void **s, unsigned int f)')(s, 1), 'stream');
const stream = s[0] as bigint;
const sync = lib.func('int cuStreamSynchronize(void *s)');
const ptx = readFileSync(
  fileURLToPath(new URL('../../src/kernels/kernels.ptx', import.meta.url)),
  'utf8',
);
const mod: (bigint | null)[] = [null];
check(lib.func('int cuModuleLoadData(_Out_ void **m, const char *image)')(mod, ptx), 'module');
const fn: (bigint | null)[] = [null];
check(
  lib.func('int cuModuleGetFunction(_Out_ void **f, void *m, const char *n)')(
    fn,
    mod[0],
    'empty_kernel',
  ),
  'fn',
);
const f = fn[0] as bigint;
const pool: (bigint | null)[] = [null];
check(lib.func('int cuDeviceGetDefaultMemPool(_Out_ void **p, int d)')(pool, 0), 'pool');

const scratch = koffi.alloc('uint8_t', 64) as bigint;
const u64 = new BigUint64Array(koffi.view(scratch, 64));
const zeroSlot = scratch + 32n;

const time = (name: string, body: () => void) => timeNs(name, body, () => sync(stream));

const launchProto =
  'unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shm';
const launchNull = lib.func(
  `int cuLaunchKernel(void *f, ${launchProto}, void *s, void *p, void *e)`,
);
time('launch void* params=null extra=null', () =>
  launchNull(f, 1, 1, 1, 1, 1, 1, 0, stream, null, null),
);
const launchPtr = lib.func(
  `int cuLaunchKernel(void *f, ${launchProto}, void *s, void *p, void *e)`,
);
time('launch void* params=ptr extra=null', () =>
  launchPtr(f, 1, 1, 1, 1, 1, 1, 0, stream, scratch, null),
);
const launchInt = lib.func(
  `int cuLaunchKernel(void *f, ${launchProto}, void *s, uintptr_t p, uintptr_t e)`,
);
const scratchNumber = Number(scratch);
time('launch uintptr params=number extra=0', () =>
  launchInt(f, 1, 1, 1, 1, 1, 1, 0, stream, scratchNumber, 0),
);
time('launch uintptr params=0 extra=0', () => launchInt(f, 1, 1, 1, 1, 1, 1, 0, stream, 0, 0));

const launchI64 = lib.func(
  `int cuLaunchKernel(void *f, ${launchProto}, void *s, void *p, int64_t e)`,
);
time('launch void* params=ptr, int64 extra=0n', () =>
  launchI64(f, 1, 1, 1, 1, 1, 1, 0, stream, scratch, 0n),
);
time('launch void* params=ptr, void* extra=0n', () =>
  launchPtr(f, 1, 1, 1, 1, 1, 1, 0, stream, scratch, 0n),
);
const alloc1 = lib.func('int cuMemAllocAsync(void *d, size_t n, void *s)');
const free1 = lib.func('int cuMemFreeAsync(void *d, void *s)');
time('alloc(void*,size_t number,void*)+free(void*)', () => {
  alloc1(scratch, 256, stream);
  free1(u64[0]!, stream);
});
const free2 = lib.func('int cuMemFreeAsync(uint64_t d, void *s)');
time('alloc+free(uint64 bigint)', () => {
  alloc1(scratch, 256, stream);
  free2(u64[0]!, stream);
});
const alloc3 = lib.func('int cuMemAllocAsync(void *d, uint64_t n, void *s)');
time('alloc(uint64 number)+free(void*)', () => {
  alloc3(scratch, 256, stream);
  free1(u64[0]!, stream);
});
const query = lib.func('int cuStreamQuery(void *s)');
time('cuStreamQuery', () => query(stream));
const record = lib.func('int cuEventRecord(void *e, void *s)');
const ev: (bigint | null)[] = [null];
check(lib.func('int cuEventCreate(_Out_ void **e, unsigned int f)')(ev, 2), 'event');
const event = ev[0] as bigint;
time('cuEventRecord', () => record(event, stream));
void zeroSlot;
