import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CompileError, DeviceArray } from '@cuda-tasks/cudadrv';
import { describeGpu } from '@cuda-tasks/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  clearKernelCache,
  elementwise,
  kernelCacheDirectory,
  kernelCacheStatistics,
  setKernelCacheDirectory,
} from './index.js';

// The kernel cache: NVRTC once per source and architecture, then memory, then disk (also
// from a second process); the cache folder can be moved or turned off; a body that does not
// compile is a CompileError with NVRTC's log and the generated source, numbered. Entries are
// written 0700/0600 with a header, read back only when trusted, and an entry that its group or
// others could write is compiled again instead of loaded.

const packageRoot = fileURLToPath(new URL('..', import.meta.url));
// A body no earlier run has compiled: the first call must compile.
const unique = () => `y = x * ${Math.floor(Math.random() * 1e9)}.0f + ${Date.now() % 1000}.0f`;

describeGpu('the kernel cache', () => {
  let folder: string;
  let before: string | null;
  beforeAll(() => {
    before = kernelCacheDirectory();
    folder = mkdtempSync(join(tmpdir(), 'cuda-tasks-kernel-cache-'));
    setKernelCacheDirectory(folder);
  });
  afterAll(() => {
    setKernelCacheDirectory(before);
    rmSync(folder, { recursive: true, force: true });
  });

  it('compiles once, then hits memory; after clearKernelCache() it hits disk', async () => {
    clearKernelCache();
    const body = unique();
    const x = DeviceArray.fromHost(new Float32Array([1, 2, 3]));
    const first = elementwise('x: float32 -> y: float32', body);
    const y1 = first(x);
    expect(kernelCacheStatistics()).toMatchObject({ compiled: 1, diskHits: 0, diskWrites: 1 });
    expect(readdirSync(folder).filter((name) => name.endsWith('.kernel'))).toHaveLength(1);
    // Another kernel object with the same source: the module in memory.
    const again = elementwise('x: float32 -> y: float32', body);
    const y2 = again(x);
    expect(kernelCacheStatistics()).toMatchObject({ compiled: 1, diskHits: 0 });
    clearKernelCache();
    const y3 = first(x);
    expect(kernelCacheStatistics()).toMatchObject({ compiled: 0, diskHits: 1 });
    const [a, b, c] = await Promise.all([y1.toHost(), y2.toHost(), y3.toHost()]);
    expect(Array.from(b)).toEqual(Array.from(a));
    expect(Array.from(c)).toEqual(Array.from(a));
    for (const array of [x, y1, y2, y3]) array.dispose();
  });

  it('a kernel round-trips through the hardened cache: written 0600, read back, same results', async () => {
    clearKernelCache({ disk: true });
    const offset = 1 + Math.floor(Math.random() * 1000);
    const body = `y = x * 2.5f + ${offset}.0f`;
    const n = 100_000;
    const input = Float32Array.from({ length: n }, (_, i) => i - 50_000);
    // Integers and halves below 2^23 are exact in float32: the float64 reference is exact.
    const reference = Array.from(input, (value) => value * 2.5 + offset);
    const x = DeviceArray.fromHost(input);

    let start = performance.now();
    const compiled = elementwise('x: float32 -> y: float32', body)(x);
    const compileMs = performance.now() - start;
    expect(kernelCacheStatistics()).toMatchObject({ compiled: 1, diskWrites: 1, diskRefused: 0 });
    const [name] = readdirSync(folder).filter((file) => file.endsWith('.kernel'));
    expect(name).toMatch(/^cuda-tasks-[0-9a-f]{64}\.kernel$/);
    const path = join(folder, name!);
    expect((statSync(folder).mode & 0o777).toString(8)).toBe('700');
    expect((statSync(path).mode & 0o777).toString(8)).toBe('600');
    const entry = readFileSync(path);
    expect(entry.subarray(0, 8).toString('latin1')).toBe('CTKERNEL');

    // A fresh cache state: nothing in memory, the entry read back from disk.
    clearKernelCache();
    start = performance.now();
    const fromDisk = elementwise('x: float32 -> y: float32', body)(x);
    const diskMs = performance.now() - start;
    expect(kernelCacheStatistics()).toMatchObject({ compiled: 0, diskHits: 1, diskRefused: 0 });

    // An entry its group or others could write is refused and compiled again.
    chmodSync(path, 0o666);
    clearKernelCache();
    const recompiled = elementwise('x: float32 -> y: float32', body)(x);
    expect(kernelCacheStatistics()).toMatchObject({ compiled: 1, diskHits: 0, diskRefused: 1 });
    expect((statSync(path).mode & 0o777).toString(8)).toBe('600');

    for (const result of [compiled, fromDisk, recompiled]) {
      expect(Array.from(await result.toHost())).toEqual(reference);
      result.dispose();
    }
    x.dispose();
    console.log(
      `[kernel cache] entry ${entry.length} bytes; first call compiling ${compileMs.toFixed(1)} ms, ` +
        `from the disk cache ${diskMs.toFixed(1)} ms; results equal the float64 reference (n = ${n})`,
    );
  });

  it('a second process finds the cubin on disk and compiles nothing', () => {
    const body = 'y = x * 3.0f + 1.0f';
    const run = () => {
      const child = spawnSync(
        join(packageRoot, 'node_modules/.bin/tsx'),
        ['--conditions=@cuda-tasks/source', 'test/cache-child.ts', folder, body],
        { cwd: packageRoot, encoding: 'utf8', timeout: 100_000 },
      );
      expect(child.status, child.stderr).toBe(0);
      return JSON.parse(child.stdout.trim().split('\n').at(-1)!) as {
        values: number[];
        statistics: { compiled: number; diskHits: number };
      };
    };
    rmSync(folder, { recursive: true, force: true });
    const first = run();
    const second = run();
    expect(first.values).toEqual([4, 7, 10, 13]);
    expect(second.values).toEqual([4, 7, 10, 13]);
    expect(first.statistics).toMatchObject({ compiled: 1, diskHits: 0 });
    expect(second.statistics).toMatchObject({ compiled: 0, diskHits: 1 });
  });

  it('a damaged cache file is compiled again and rewritten', async () => {
    clearKernelCache({ disk: true });
    const body = unique();
    const x = DeviceArray.fromHost(new Float32Array([5]));
    elementwise('x: float32 -> y: float32', body)(x).dispose();
    const [name] = readdirSync(folder).filter((file) => file.endsWith('.kernel'));
    writeFileSync(join(folder, name!), 'not a cubin at all, but long enough to have a digest');
    clearKernelCache();
    const y = elementwise('x: float32 -> y: float32', body)(x);
    expect(kernelCacheStatistics()).toMatchObject({
      compiled: 1,
      diskHits: 0,
      diskRefused: 1,
      diskWrites: 1,
    });
    expect((await y.toHost())[0]).toBeGreaterThan(0);
    x.dispose();
    y.dispose();
  });

  it('with the disk cache off nothing is written', () => {
    clearKernelCache({ disk: true });
    setKernelCacheDirectory(null);
    try {
      const x = DeviceArray.fromHost(new Float32Array([5]));
      elementwise('x: float32 -> y: float32', unique())(x).dispose();
      expect(kernelCacheStatistics()).toMatchObject({ compiled: 1, diskWrites: 0, diskHits: 0 });
      expect(readdirSync(folder)).toEqual([]);
      x.dispose();
    } finally {
      setKernelCacheDirectory(folder);
    }
  });

  it('a body that does not compile: CompileError with the NVRTC log and the numbered source', () => {
    const broken = elementwise('x: float32 -> y: float32', 'y = x * undefined_thing');
    const x = DeviceArray.fromHost(new Float32Array([1]));
    let error: unknown;
    try {
      broken(x);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(CompileError);
    const compileError = error as CompileError;
    expect(compileError.log).toMatch(/undefined_thing/);
    expect(compileError.log).toMatch(/elementwise\.cu\(\d+\)/);
    expect(compileError.source).toContain('y = x * undefined_thing');
    const line = compileError.source.split('\n').indexOf('y = x * undefined_thing;') + 1;
    expect(line).toBeGreaterThan(0);
    // The log's line number points at the body's line in the numbered source of the message.
    expect(compileError.log).toContain(`elementwise.cu(${line})`);
    expect(compileError.message).toContain(`${line} | y = x * undefined_thing;`);
    x.dispose();
  });
});
