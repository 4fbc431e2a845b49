import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  clearKernelCache,
  kernelCacheDirectory,
  kernelCacheStatistics,
  setKernelCacheDirectory,
} from './compile.js';
import {
  cacheFileName,
  defaultCacheDirectory,
  readCached,
  removeCached,
  writeCached,
} from './disk-cache.js';

const folders: string[] = [];
const temporaryFolder = () => {
  const folder = mkdtempSync(join(tmpdir(), 'cuda-tasks-kernel-cache-'));
  folders.push(folder);
  return folder;
};
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

describe('where the cache lives', () => {
  it('CUDA_TASKS_KERNEL_CACHE names the folder or turns the cache off', () => {
    expect(defaultCacheDirectory({ CUDA_TASKS_KERNEL_CACHE: '/srv/kernels' })).toBe('/srv/kernels');
    for (const off of ['0', 'off', 'OFF', 'false', 'none', '']) {
      expect(defaultCacheDirectory({ CUDA_TASKS_KERNEL_CACHE: off })).toBeNull();
    }
    expect(defaultCacheDirectory({ XDG_CACHE_HOME: '/home/u/.xdg' })).toBe(
      '/home/u/.xdg/cuda-tasks/kernels',
    );
    expect(defaultCacheDirectory({})).toMatch(/\.cache\/cuda-tasks\/kernels$/);
  });

  it('setKernelCacheDirectory overrides the environment; null turns it off', () => {
    const before = kernelCacheDirectory();
    try {
      setKernelCacheDirectory('/tmp/elsewhere');
      expect(kernelCacheDirectory()).toBe('/tmp/elsewhere');
      setKernelCacheDirectory(null);
      expect(kernelCacheDirectory()).toBeNull();
      expect(() => setKernelCacheDirectory('' as never)).toThrow(/folder path or null/);
    } finally {
      setKernelCacheDirectory(before);
    }
  });
});

describe('cache files', () => {
  const key = 'nvrtc 13.0\nsm_90\nextern "C" __global__ void k() {}\n';
  const cubin = Uint8Array.from({ length: 300 }, (_, i) => (i * 7) & 255);

  it('round-trips a cubin under a name derived from the key', () => {
    const folder = temporaryFolder();
    expect(readCached(folder, key)).toBeUndefined();
    expect(writeCached(folder, key, cubin)).toBe(true);
    expect(readdirSync(folder)).toEqual([cacheFileName(key)]);
    expect(readCached(folder, key)).toEqual(cubin);
    expect(readCached(folder, `${key} `)).toBeUndefined();
    expect(cacheFileName(key)).toMatch(/^[0-9a-f]{40}\.cubin$/);
    expect(cacheFileName(`${key} `)).not.toBe(cacheFileName(key));
    removeCached(folder, key);
    expect(readCached(folder, key)).toBeUndefined();
  });

  it('a damaged or truncated file is a miss', () => {
    const folder = temporaryFolder();
    writeCached(folder, key, cubin);
    const path = join(folder, cacheFileName(key));
    const bytes = readFileSync(path);
    bytes[10] = bytes[10]! ^ 1;
    writeFileSync(path, bytes);
    expect(readCached(folder, key)).toBeUndefined();
    writeFileSync(path, bytes.subarray(0, 20));
    expect(readCached(folder, key)).toBeUndefined();
  });

  it('a folder that cannot be written is a failed write, not an error', () => {
    const folder = temporaryFolder();
    const blocker = join(folder, 'file');
    writeFileSync(blocker, 'not a folder');
    expect(writeCached(join(blocker, 'kernels'), key, cubin)).toBe(false);
  });

  it('clearKernelCache({ disk: true }) deletes the cubins only', () => {
    const folder = temporaryFolder();
    const before = kernelCacheDirectory();
    try {
      setKernelCacheDirectory(folder);
      writeCached(folder, key, cubin);
      writeFileSync(join(folder, 'notes.txt'), 'keep me');
      clearKernelCache({ disk: true });
      expect(readdirSync(folder)).toEqual(['notes.txt']);
      expect(kernelCacheStatistics().compiled).toBe(0);
    } finally {
      setKernelCacheDirectory(before);
    }
  });
});
