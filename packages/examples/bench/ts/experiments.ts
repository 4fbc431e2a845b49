/**
 * Measurement experiments on the GPU machine, to decide hot-path declarations: launch through
 * cuLaunchKernel vs cuLaunchKernelEx (a prefilled CUlaunchConfig in native memory), handles as
 * BigInt `void *` vs Number `uint64_t`, the alloc+free pair piece by piece, and which
 * libcublas this process loaded (the seed iteration step by step is experiments-seed.ts).
 * Prints one JSON line per figure.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DeviceBuffer, driver, launch, Module, scratch } from '@cuda-tasks/cudadrv';
import { stream, task } from '@cuda-tasks/task-runtime';
import koffi from 'koffi';
import { timeNs as time } from './harness.js';

const ptx = readFileSync(
  fileURLToPath(new URL('../../src/kernels/kernels.ptx', import.meta.url)),
  'utf8',
);
const lib = koffi.load('libcuda.so.1');
const libc = koffi.load('libc.so.6');

await task(async () => {
  const s = stream();
  const sync = () => s.synchronize();
  const module = Module.fromPtx(ptx);
  const empty = module.kernel('empty_kernel', []);
  const f = empty.handle;
  const h = s.handle;
  const params = empty.marshal([], s);
  const api = driver();

  // koffi's own floor: a trivial libc call with 1 and with 11 arguments.
  const labs = libc.func('long labs(long x)');
  time('koffi floor: labs(int) 1 arg', () => labs(5));
  const getpid = libc.func('int getpid()');
  time('koffi floor: getpid() 0 args', () => getpid());

  time(
    'cuLaunchKernel (current declaration)',
    () => api.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, h, params, 0n),
    sync,
  );
  time('launch(empty, {grid,block}) wrapper', () => launch(empty, { grid: 1, block: 1 }), sync);

  // cuLaunchKernelEx with a CUlaunchConfig in a koffi arena.
  const cfg = koffi.alloc('uint8_t', 64) as bigint;
  const cfgView = koffi.view(cfg, 64);
  const c32 = new Uint32Array(cfgView);
  const c64 = new BigUint64Array(cfgView);
  c32.set([1, 1, 1, 1, 1, 1, 0]);
  c64[4] = h; // hStream at offset 32
  c64[5] = 0n; // attrs
  c32[12] = 0; // numAttrs
  const ex = lib.func('int cuLaunchKernelEx(void *config, void *f, void *params, int64_t extra)');
  time('cuLaunchKernelEx(void* cfg bigint) fixed cfg', () => ex(cfg, f, params, 0n), sync);
  time(
    'cuLaunchKernelEx + write 7 dims + stream each call',
    () => {
      c32[0] = 1;
      c32[1] = 1;
      c32[2] = 1;
      c32[3] = 1;
      c32[4] = 1;
      c32[5] = 1;
      c32[6] = 0;
      c64[4] = h;
      ex(cfg, f, params, 0n);
    },
    sync,
  );
  const exN = lib.func(
    'int cuLaunchKernelEx(uint64_t config, uint64_t f, uint64_t params, uint64_t extra)',
  );
  const cfgN = Number(cfg);
  const fN = Number(f);
  const pN = Number(params);
  time('cuLaunchKernelEx all uint64 Numbers', () => exN(cfgN, fN, pN, 0), sync);
  const lkN = lib.func(
    'int cuLaunchKernel(uint64_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shm, uint64_t s, uint64_t p, uint64_t e)',
  );
  const hN = Number(h);
  time('cuLaunchKernel all uint64 Numbers', () => lkN(fN, 1, 1, 1, 1, 1, 1, 0, hN, pN, 0), sync);
  const lkVoidNumber = lib.func(
    'int cuLaunchKernel(void *f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shm, void *s, void *p, void *e)',
  );
  time(
    'cuLaunchKernel void* decl, Number values',
    () => lkVoidNumber(fN, 1, 1, 1, 1, 1, 1, 0, hN, pN, 0),
    sync,
  );
  time(
    'cuLaunchKernel uint64 decl, BigInt values',
    () => lkN(f, 1, 1, 1, 1, 1, 1, 0, h, params, 0n),
    sync,
  );
  const lkI = lib.func(
    'int cuLaunchKernel(void *f, int gx, int gy, int gz, int bx, int by, int bz, int shm, void *s, void *p, int64_t e)',
  );
  time('cuLaunchKernel int (signed) dims', () => lkI(f, 1, 1, 1, 1, 1, 1, 0, h, params, 0n), sync);

  // alloc + free, piece by piece.
  const sc = scratch();
  time(
    'bare cuMemAllocAsync + cuMemFreeAsync',
    () => {
      api.cuMemAllocAsync(sc.pointer, 256, h);
      api.cuMemFreeAsync(sc.u64[0]!, h);
    },
    sync,
  );
  const pool = s.context.memoryPool;
  time(
    'pool.allocate + bare free',
    () => {
      const p = pool.allocate(256, s);
      api.cuMemFreeAsync(p, h);
    },
    sync,
  );
  time(
    'DeviceBuffer.allocate(256).dispose()',
    () => DeviceBuffer.allocate(256, { stream: s }).dispose(),
    sync,
  );
  const opts = { stream: s };
  time(
    'DeviceBuffer.allocate(256, opts) reused opts',
    () => DeviceBuffer.allocate(256, opts).dispose(),
    sync,
  );
  const freeN = lib.func('int cuMemFreeAsync(uint64_t d, uint64_t s)');
  const allocN = lib.func('int cuMemAllocAsync(uint64_t d, uint64_t n, uint64_t s)');
  const u32 = new Uint32Array(sc.u64.buffer, sc.u64.byteOffset, 2);
  const scN = Number(sc.pointer);
  time(
    'alloc+free all uint64 Numbers',
    () => {
      allocN(scN, 256, hN);
      freeN(u32[0]! + u32[1]! * 4294967296, hN);
    },
    sync,
  );
  time('cuStreamQuery bigint', () => api.cuStreamQuery(h));
  const qN = lib.func('int cuStreamQuery(uint64_t s)');
  time('cuStreamQuery Number', () => qN(hN));
});

// cuBLAS: which library, and the small sgemm through several declarations.
{
  const { handle, gemm } = await import('@cuda-tasks/cublas');
  const { cublas } = await import('@cuda-tasks/cublas/ffi');
  const { DeviceArray } = await import('@cuda-tasks/cudadrv');
  await task(async () => {
    const s = stream();
    const sync = () => s.synchronize();
    const h = handle();
    // The libcublas this process mapped, once handle() has loaded it (the path starts at '/').
    const maps = readFileSync('/proc/self/maps', 'utf8')
      .split('\n')
      .filter((line) => line.includes('libcublas'))
      .map((line) => line.slice(line.indexOf('/')));
    const v = [0];
    cublas().cublasGetVersion_v2(h, v);
    console.log(JSON.stringify({ name: 'cublas', version: v[0], libs: [...new Set(maps)] }));
    const a = DeviceArray.zeros('float32', [8, 8]);
    const b = DeviceArray.zeros('float32', [8, 8]);
    const c = DeviceArray.zeros('float32', [8, 8]);
    const api = cublas();
    const slots = koffi.alloc('uint8_t', 16) as bigint;
    new Float32Array(koffi.view(slots, 16)).set([1, 0, 0, 0]);
    const [pa, pb, pc] = [a.pointer, b.pointer, c.pointer];
    time(
      'bare cublasSgemm_v2 8 (our handle)',
      () => api.cublasSgemm_v2(h, 0, 0, 8, 8, 8, slots, pa, 8, pb, 8, slots + 4n, pc, 8),
      sync,
    );
    time('gemm() 8', () => gemm(a, b, c), sync);
    const [hN, aN, bN, cN, sN] = [h, pa, pb, pc, slots].map(Number) as number[];
    time(
      'cublasSgemm_v2 8 all Numbers (uint64_t declaration)',
      () => api.cublasSgemm_v2(hN, 0, 0, 8, 8, 8, sN, aN, 8, bN, 8, sN! + 4, cN, 8),
      sync,
    );
    const out: (bigint | null)[] = [null];
    api.cublasCreate_v2(out);
    const fresh = out[0] as bigint;
    api.cublasSetStream_v2(fresh, s.handle);
    time(
      'bare sgemm 8, fresh handle default workspace',
      () => api.cublasSgemm_v2(fresh, 0, 0, 8, 8, 8, slots, pa, 8, pb, 8, slots + 4n, pc, 8),
      sync,
    );
    const ws = DeviceBuffer.allocate(32 << 20, { stream: s });
    api.cublasSetWorkspace_v2(fresh, ws.pointer, 32 << 20);
    time(
      'bare sgemm 8, fresh handle 32 MiB user workspace',
      () => api.cublasSgemm_v2(fresh, 0, 0, 8, 8, 8, slots, pa, 8, pb, 8, slots + 4n, pc, 8),
      sync,
    );
    // Rebinding cost: what one task switch costs the handle.
    const t2 = (await import('@cuda-tasks/cudadrv')).Stream.create();
    let flip = false;
    time(
      'cublasSetStream alternate 2 streams',
      () => {
        flip = !flip;
        api.cublasSetStream_v2(fresh, flip ? t2.handle : s.handle);
      },
      () => {},
      2000,
    );
    time(
      'cublasSetStream + SetWorkspace(32 MiB)',
      () => {
        flip = !flip;
        api.cublasSetStream_v2(fresh, flip ? t2.handle : s.handle);
        api.cublasSetWorkspace_v2(fresh, ws.pointer, 32 << 20);
      },
      () => {},
      2000,
    );
    time(
      'alloc 32 MiB + free (pool)',
      () => {
        DeviceBuffer.allocate(32 << 20, { stream: s }).dispose();
      },
      sync,
      2000,
    );
    api.cublasSetStream_v2(fresh, 0n);
    api.cublasDestroy_v2(fresh);
    ws.dispose();
    t2.dispose();
  });
}

process.exit(0);
