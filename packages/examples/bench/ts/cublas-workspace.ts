/**
 * Is a small SGEMM slower through koffi, or with a user-set workspace? The bare
 * cublasSgemm_v2 8x8x8 on handles set up four ways, timed on the GPU machine (ns per call).
 */

import { handle } from '@cuda-tasks/cublas';
import { cublas } from '@cuda-tasks/cublas/ffi';
import { DeviceArray, DeviceBuffer } from '@cuda-tasks/cudadrv';
import { stream, task } from '@cuda-tasks/task-runtime';
import koffi from 'koffi';

await task(async () => {
  const s = stream();
  const api = cublas();
  const a = DeviceArray.zeros('float32', [8, 8]);
  const b = DeviceArray.zeros('float32', [8, 8]);
  const c = DeviceArray.zeros('float32', [8, 8]);
  const slots = koffi.alloc('uint8_t', 16) as bigint;
  new Float32Array(koffi.view(slots, 16)).set([1, 0, 0, 0]);
  const [pa, pb, pc] = [a.pointer, b.pointer, c.pointer];
  const time = (name: string, h: bigint) => {
    const n = 10_000;
    const samples: number[] = [];
    for (let r = 0; r < 10; r++) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < n; i++)
        api.cublasSgemm_v2(h, 0, 0, 8, 8, 8, slots, pa, 8, pb, 8, slots + 4n, pc, 8);
      samples.push(Number(process.hrtime.bigint() - t0) / n);
      s.synchronize();
    }
    samples.sort((x, y) => x - y);
    console.log(JSON.stringify({ name, ns: Math.round(samples[5]!) }));
  };
  const fresh = (workspaceBytes: number) => {
    const out: (bigint | null)[] = [null];
    api.cublasCreate_v2(out);
    const h = out[0] as bigint;
    api.cublasSetStream_v2(h, s.handle);
    if (workspaceBytes > 0) {
      const ws = DeviceBuffer.allocate(workspaceBytes, { stream: s });
      api.cublasSetWorkspace_v2(h, ws.pointer, workspaceBytes);
    }
    return h;
  };
  time('our task handle (32 MiB workspace from the pool)', handle());
  time('fresh handle, default workspace', fresh(0));
  time('fresh handle, 4 MiB workspace', fresh(4 << 20));
  time('fresh handle, 32 MiB workspace', fresh(32 << 20));
});
