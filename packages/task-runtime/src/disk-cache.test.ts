import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  clearKernelCache,
  kernelCacheDirectory,
  kernelCacheStatistics,
  setKernelCacheDirectory,
} from './compile-cache.js';
import {
  cacheFileName,
  defaultCacheDirectory,
  isCacheFileName,
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
    expect(readCached(folder, key)).toEqual({});
    expect(writeCached(folder, key, cubin)).toBe(true);
    expect(readdirSync(folder)).toEqual([cacheFileName(key)]);
    expect(readCached(folder, key)).toEqual({ cubin });
    expect(readCached(folder, `${key} `)).toEqual({});
    const digest = createHash('sha256').update(key).digest('hex');
    expect(cacheFileName(key)).toBe(`cuda-tasks-${digest}.kernel`);
    expect(isCacheFileName(cacheFileName(key))).toBe(true);
    for (const name of [
      'gemm_sm90.cubin',
      `${digest.slice(0, 40)}.cubin`,
      `x${cacheFileName(key)}`,
    ]) {
      expect(isCacheFileName(name)).toBe(false);
    }
    expect(cacheFileName(`${key} `)).not.toBe(cacheFileName(key));
    removeCached(folder, key);
    expect(readCached(folder, key)).toEqual({});
  });

  it('an entry is a header (magic, version, key digest, length, payload digest) and the cubin', () => {
    const folder = temporaryFolder();
    writeCached(folder, key, cubin);
    const bytes = readFileSync(join(folder, cacheFileName(key)));
    expect(bytes.length).toBe(88 + cubin.length);
    expect(bytes.subarray(0, 8).toString('latin1')).toBe('CTKERNEL');
    expect(bytes.readUInt32LE(8)).toBe(1);
    expect(bytes.readUInt32LE(12)).toBe(88);
    expect(bytes.subarray(16, 48)).toEqual(createHash('sha256').update(key).digest());
    expect(bytes.readBigUInt64LE(48)).toBe(300n);
    expect(bytes.subarray(56, 88)).toEqual(createHash('sha256').update(cubin).digest());
    expect(new Uint8Array(bytes.subarray(88))).toEqual(cubin);
  });

  it('an entry of another format version is a quiet miss', () => {
    const folder = temporaryFolder();
    writeCached(folder, key, cubin);
    const path = join(folder, cacheFileName(key));
    const bytes = readFileSync(path);
    bytes.writeUInt32LE(2, 8);
    writeFileSync(path, bytes);
    expect(readCached(folder, key)).toEqual({});
  });

  it('a folder that cannot be written is a failed write, not an error', () => {
    const folder = temporaryFolder();
    const blocker = join(folder, 'file');
    writeFileSync(blocker, 'not a folder');
    expect(writeCached(join(blocker, 'kernels'), key, cubin)).toBe(false);
    expect(readdirSync(folder)).toEqual(['file']);
  });

  it('clearKernelCache({ disk: true }) deletes the entries only', () => {
    const folder = temporaryFolder();
    const before = kernelCacheDirectory();
    try {
      setKernelCacheDirectory(folder);
      writeCached(folder, key, cubin);
      writeFileSync(join(folder, 'notes.txt'), 'keep me');
      writeFileSync(join(folder, 'gemm_sm90.cubin'), 'keep me too');
      clearKernelCache({ disk: true });
      expect(readdirSync(folder).sort()).toEqual(['gemm_sm90.cubin', 'notes.txt']);
      expect(kernelCacheStatistics().compiled).toBe(0);
    } finally {
      setKernelCacheDirectory(before);
    }
  });
});
