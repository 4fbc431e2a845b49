import { spawnSync } from 'node:child_process';

/** Whether a CUDA device answers here, and if not, why (asked in a child process). */
export function probeGpu(): { available: boolean; reason: string } {
  if (process.env.CUDA_TASKS_GPU === '0') {
    return { available: false, reason: 'CUDA_TASKS_GPU=0 is set' };
  }
  const script = `
    const koffi = require('koffi');
    let lib;
    try { lib = koffi.load(process.env.CUDA_TASKS_LIBCUDA || 'libcuda.so.1'); }
    catch (e) { console.log('no CUDA driver: libcuda.so.1 could not be loaded (install the NVIDIA driver)'); process.exit(1); }
    const cuInit = lib.func('int cuInit(unsigned int)');
    const cuDeviceGetCount = lib.func('int cuDeviceGetCount(_Out_ int *count)');
    const r = cuInit(0);
    if (r !== 0) { console.log('cuInit failed with CUresult ' + r + ' (no usable GPU)'); process.exit(1); }
    const n = [0]; cuDeviceGetCount(n);
    if (n[0] < 1) { console.log('the CUDA driver reports no device'); process.exit(1); }
    console.log(n[0] + ' device(s)');`;
  const result = spawnSync(process.execPath, ['-e', script], {
    encoding: 'utf8',
    cwd: new URL('../../cudadrv/', import.meta.url),
  });
  const reason = (result.stdout || result.stderr || '').trim().split('\n').pop() ?? 'unknown';
  return { available: result.status === 0, reason };
}
