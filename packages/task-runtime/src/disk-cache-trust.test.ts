import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  closeSync,
  ftruncateSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Context } from '@cuda-tasks/cudadrv';
import { afterEach, beforeEach, describe, expect, it, type MockInstance, vi } from 'vitest';
import {
  clearKernelCache,
  kernelCacheDirectory,
  kernelCacheStatistics,
  loadCachedModule,
  setKernelCacheDirectory,
} from './compile-cache.js';
import { resetKernelCacheWarnings } from './disk-cache.js';

// The on-disk cache's trust rules, on a real filesystem. NVRTC and the driver are recorders:
// `compileToCubin` returns the COMPILED bytes, `Module.fromCubin` records what it was given.
// Each test plants a well-formed entry holding the PLANTED bytes (written by the cache itself,
// so that only the trust rule under test can refuse it), makes it untrustworthy the way a
// local attacker or a loose umask would, and shows that the planted bytes never reach the
// loader, that the kernel is compiled instead, and which warning says why. "Another user" is
// uid 65534 through chown, which only root may do: those cases run as root (CI, the GPU
// machine) and are skipped for other users; every other case runs for anyone.

const fake = vi.hoisted(() => ({
  next: new Uint8Array(0),
  compiled: 0,
  loaded: [] as Uint8Array[],
}));

vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => ({
  ...(await importOriginal<object>()),
  compileToCubin: () => {
    fake.compiled++;
    return fake.next;
  },
  Module: {
    fromCubin: (cubin: Uint8Array) => {
      fake.loaded.push(new Uint8Array(cubin));
      return { loaded: fake.loaded.length };
    },
  },
}));

vi.mock('@cuda-tasks/cudadrv/ffi', async (importOriginal) => ({
  ...(await importOriginal<object>()),
  nvrtc: () => ({
    nvrtcVersion(major: number[], minor: number[]) {
      major[0] = 12;
      minor[0] = 8;
    },
  }),
}));

const PLANTED = Uint8Array.from({ length: 4096 }, (_, i) => (i * 31 + 7) & 255);
const COMPILED = Uint8Array.from({ length: 2048 }, (_, i) => (i * 13 + 1) & 255);
const context = { device: { computeCapability: () => [9, 0] } } as unknown as Context;
const OTHER_USER = 65534;
/** Cases that give a file to another user (chown) need root. */
const asRoot = it.runIf(process.getuid?.() === 0);

let root: string;
let folder: string;
let before: string | null;
let warnings: MockInstance<typeof process.emitWarning>;
let sourceCount = 0;
const newSource = () => `extern "C" __global__ void k${sourceCount++}_${Date.now()}() {}\n`;

const entries = () => readdirSync(folder).filter((name) => !name.startsWith('.'));
const warningCodes = () =>
  warnings.mock.calls.map((call) => (call[1] as { code?: string } | undefined)?.code);

/** Writes a well-formed entry holding PLANTED for `source` through the cache; its path. */
function plant(source: string): string {
  const known = new Set(readdirSync(folder, { withFileTypes: false }).map(String));
  fake.next = PLANTED;
  loadCachedModule(source, context, 'k.cu');
  clearKernelCache();
  fake.next = COMPILED;
  fake.compiled = 0;
  fake.loaded = [];
  warnings.mockClear();
  const added = entries().filter((name) => !known.has(name));
  expect(added).toHaveLength(1);
  return join(folder, added[0]!);
}

/** Loads `source` and checks that it was compiled and the PLANTED bytes never loaded. */
function expectCompiledInstead(source: string): void {
  loadCachedModule(source, context, 'k.cu');
  expect(fake.compiled).toBe(1);
  expect(fake.loaded).toEqual([COMPILED]);
  for (const bytes of fake.loaded) expect(bytes).not.toEqual(PLANTED);
  expect(kernelCacheStatistics()).toMatchObject({ compiled: 1, diskHits: 0 });
}

beforeEach(() => {
  before = kernelCacheDirectory();
  root = mkdtempSync(join(tmpdir(), 'cuda-tasks-cache-trust-'));
  folder = join(root, 'kernels');
  mkdirSync(folder, { mode: 0o700 });
  chmodSync(folder, 0o700);
  setKernelCacheDirectory(folder);
  clearKernelCache();
  resetKernelCacheWarnings();
  warnings = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
  fake.compiled = 0;
  fake.loaded = [];
});

afterEach(() => {
  warnings.mockRestore();
  setKernelCacheDirectory(before);
  rmSync(root, { recursive: true, force: true });
});

describe('a trusted entry', () => {
  it('is loaded without compiling (the planting itself is sound)', () => {
    const source = newSource();
    plant(source);
    loadCachedModule(source, context, 'k.cu');
    expect(fake.compiled).toBe(0);
    expect(fake.loaded).toEqual([PLANTED]);
    expect(kernelCacheStatistics()).toMatchObject({ compiled: 0, diskHits: 1, diskRefused: 0 });
    expect(warningCodes()).toEqual([]);
  });

  it('a folder reached through a symbolic link to a folder of ours is trusted', () => {
    const source = newSource();
    plant(source);
    const link = join(root, 'link');
    symlinkSync(folder, link);
    setKernelCacheDirectory(link);
    loadCachedModule(source, context, 'k.cu');
    expect(fake.loaded).toEqual([PLANTED]);
    expect(warningCodes()).toEqual([]);
  });

  it('a missing folder is a quiet miss; the folder is then created', () => {
    setKernelCacheDirectory(join(root, 'absent', 'kernels'));
    loadCachedModule(newSource(), context, 'k.cu');
    expect(fake.compiled).toBe(1);
    expect(warningCodes()).toEqual([]);
    expect(readdirSync(join(root, 'absent', 'kernels'))).toHaveLength(1);
  });
});

describe('entries that are refused', () => {
  asRoot('an entry owned by another user', () => {
    const source = newSource();
    chownSync(plant(source), OTHER_USER, OTHER_USER);
    expectCompiledInstead(source);
    expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_ENTRY_OWNER']);
    expect(kernelCacheStatistics().diskRefused).toBe(1);
  });

  it('an entry that its group or others can write (0666, 0620)', () => {
    for (const mode of [0o666, 0o620]) {
      const source = newSource();
      chmodSync(plant(source), mode);
      resetKernelCacheWarnings();
      expectCompiledInstead(source);
      expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_ENTRY_WRITABLE']);
      clearKernelCache();
      fake.compiled = 0;
      fake.loaded = [];
      warnings.mockClear();
    }
  });

  it('a symbolic link at the entry name, even to a well-formed entry of ours', () => {
    const source = newSource();
    const path = plant(source);
    const elsewhere = join(root, 'elsewhere');
    renameSync(path, elsewhere);
    symlinkSync(elsewhere, path);
    expectCompiledInstead(source);
    expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_ENTRY_SYMLINK']);
  });

  it('a FIFO at the entry name is refused without being opened (no blocked event loop)', () => {
    const source = newSource();
    const path = plant(source);
    rmSync(path);
    execFileSync('mkfifo', ['-m', '600', path]);
    // Should the FIFO be opened, this writer releases the read after 2 s instead of never.
    const writer: ChildProcess = spawn('sh', ['-c', 'sleep 2; printf xx > "$0"', path], {
      stdio: 'ignore',
    });
    try {
      const start = performance.now();
      expectCompiledInstead(source);
      expect(performance.now() - start).toBeLessThan(1000);
      expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_ENTRY_NOT_REGULAR']);
    } finally {
      writer.kill();
    }
  });

  it('a folder at the entry name', () => {
    const source = newSource();
    const path = plant(source);
    rmSync(path);
    mkdirSync(path, { mode: 0o700 });
    expectCompiledInstead(source);
    expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_ENTRY_NOT_REGULAR']);
  });

  it('an entry larger than the cap is refused without being read', () => {
    const source = newSource();
    const path = plant(source);
    const descriptor = openSync(path, 'r+');
    ftruncateSync(descriptor, 65 * 1024 * 1024);
    closeSync(descriptor);
    expectCompiledInstead(source);
    expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_ENTRY_TOO_LARGE']);
  });

  it('a damaged or truncated entry', () => {
    const source = newSource();
    const path = plant(source);
    const bytes = readFileSync(path);
    bytes[bytes.length - 100] = bytes[bytes.length - 100]! ^ 1;
    writeFileSync(path, bytes);
    expectCompiledInstead(source);
    expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_ENTRY_DAMAGED']);

    const second = newSource();
    const truncated = plant(second);
    writeFileSync(truncated, readFileSync(truncated).subarray(0, 3000));
    expectCompiledInstead(second);
  });

  it("another kernel's entry renamed to this kernel's name", () => {
    const victim = newSource();
    const victimPath = plant(victim);
    const other = newSource();
    const otherPath = plant(other);
    // The other entry holds PLANTED too; move it over the victim's name.
    renameSync(otherPath, victimPath);
    expectCompiledInstead(victim);
    expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_ENTRY_DAMAGED']);
  });

  asRoot('one warning per reason, not one per entry or call', () => {
    const sources = [newSource(), newSource(), newSource()];
    for (const source of sources) chownSync(plant(source), OTHER_USER, OTHER_USER);
    for (const source of sources) loadCachedModule(source, context, 'k.cu');
    expect(fake.compiled).toBe(3);
    expect(fake.loaded).toEqual([COMPILED, COMPILED, COMPILED]);
    expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_ENTRY_OWNER']);
    const [message, options] = warnings.mock.calls[0]! as [string, { type: string }];
    expect(options.type).toBe('KernelCacheWarning');
    expect(message).toMatch(/uid 65534/);
    expect(message).toMatch(/compil/);
  });
});

describe('folders that are refused', () => {
  asRoot('a cache folder owned by another user (created first by someone else)', () => {
    const source = newSource();
    const path = plant(source);
    chownSync(folder, OTHER_USER, OTHER_USER);
    expectCompiledInstead(source);
    expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_FOLDER_OWNER']);
    // Nothing was written into it either.
    expect(readFileSync(path).includes(Buffer.from(COMPILED))).toBe(false);
    expect(kernelCacheStatistics()).toMatchObject({ diskWrites: 0, diskWriteFailures: 1 });
  });

  it('a cache folder that its group or others can write (0775, 0777, 1777)', () => {
    for (const mode of [0o775, 0o777, 0o1777]) {
      const source = newSource();
      plant(source);
      chmodSync(folder, mode);
      resetKernelCacheWarnings();
      expectCompiledInstead(source);
      expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_FOLDER_WRITABLE']);
      expect(kernelCacheStatistics()).toMatchObject({ diskWrites: 0, diskWriteFailures: 1 });
      chmodSync(folder, 0o700);
      clearKernelCache();
      fake.compiled = 0;
      fake.loaded = [];
      warnings.mockClear();
    }
  });

  asRoot('a symbolic link at the folder path to a folder owned by another user', () => {
    const source = newSource();
    plant(source);
    chownSync(folder, OTHER_USER, OTHER_USER);
    const link = join(root, 'link');
    symlinkSync(folder, link);
    setKernelCacheDirectory(link);
    expectCompiledInstead(source);
    expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_FOLDER_OWNER']);
  });

  it('a parent folder others can write without the sticky bit; with it, trusted', () => {
    const source = newSource();
    plant(source);
    chmodSync(root, 0o777);
    expectCompiledInstead(source);
    expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_PARENT_WRITABLE']);

    chmodSync(root, 0o1777);
    clearKernelCache();
    fake.compiled = 0;
    fake.loaded = [];
    const second = newSource();
    plant(second);
    loadCachedModule(second, context, 'k.cu');
    expect(fake.loaded).toEqual([PLANTED]);
  });

  asRoot('a parent folder owned by another user', () => {
    const source = newSource();
    plant(source);
    chownSync(root, OTHER_USER, OTHER_USER);
    expectCompiledInstead(source);
    expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_PARENT_OWNER']);
  });

  /** `root/<path>` made of folders 0700 (the last one the cache), used as the cache. */
  function nestedCache(...names: string[]): string {
    let path = root;
    for (const name of names) {
      path = join(path, name);
      mkdirSync(path, { mode: 0o700 });
      chmodSync(path, 0o700);
    }
    folder = path;
    setKernelCacheDirectory(folder);
    return path;
  }

  it('a folder higher up the path that others can write without the sticky bit', () => {
    // team/alice/kernels with team 0777: a member could rename alice away and put in its place
    // any folder of the user's (every folder below team passes the other rules).
    nestedCache('team', 'alice', 'kernels');
    const source = newSource();
    plant(source);
    chmodSync(join(root, 'team'), 0o777);
    expectCompiledInstead(source);
    expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_PARENT_WRITABLE']);
    expect(String(warnings.mock.calls[0]![0])).toContain(join(root, 'team'));
  });

  it('a link planted higher up the path to a folder of the user’s holding chosen bytes', () => {
    // The user's clone of someone's repository (folders 0755, files 0644, all the user's)
    // holds an entry with bytes its author chose; a member of the 0777 team folder replaces
    // team/alice with a link to it. No race is needed: the path leads there before any check.
    const clone = nestedCache('clone', 'sub', 'kernels');
    const source = newSource();
    plant(source);
    for (const path of [join(root, 'clone'), join(root, 'clone', 'sub'), clone]) {
      chmodSync(path, 0o755);
    }
    nestedCache('team');
    chmodSync(join(root, 'team'), 0o777);
    symlinkSync(join(root, 'clone', 'sub'), join(root, 'team', 'alice'));
    folder = clone;
    setKernelCacheDirectory(join(root, 'team', 'alice', 'kernels'));
    expectCompiledInstead(source);
    expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_PARENT_WRITABLE']);
  });

  it('a folder higher up with the sticky bit (as /tmp) is trusted', () => {
    nestedCache('shared', 'alice', 'kernels');
    chmodSync(join(root, 'shared'), 0o1777);
    const source = newSource();
    plant(source);
    loadCachedModule(source, context, 'k.cu');
    expect(fake.loaded).toEqual([PLANTED]);
    expect(warningCodes()).toEqual([]);
  });

  asRoot('a symbolic link on the path that belongs to another user', () => {
    // In a sticky folder anyone may add a name: a link another user made there is theirs to
    // replace.
    const source = newSource();
    plant(source);
    chmodSync(root, 0o1777);
    const link = join(root, 'link');
    symlinkSync(folder, link);
    lchownSync(link, OTHER_USER, OTHER_USER);
    setKernelCacheDirectory(link);
    expectCompiledInstead(source);
    expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_LINK_OWNER']);
  });
});

describe('what the cache writes', () => {
  it('folders 0700 and entries 0600 whatever the umask (002, 277)', () => {
    for (const umask of [0o002, 0o277]) {
      const previous = process.umask(umask);
      try {
        const base = join(root, `umask-${umask.toString(8)}`);
        const cache = join(base, 'cuda-tasks', 'kernels');
        setKernelCacheDirectory(cache);
        loadCachedModule(newSource(), context, 'k.cu');
        expect(kernelCacheStatistics().diskWrites).toBe(1);
        for (const created of [base, join(base, 'cuda-tasks'), cache]) {
          expect((statSync(created).mode & 0o7777).toString(8)).toBe('700');
        }
        const names = readdirSync(cache);
        expect(names).toHaveLength(1);
        expect((statSync(join(cache, names[0]!)).mode & 0o7777).toString(8)).toBe('600');
        clearKernelCache();
      } finally {
        process.umask(previous);
      }
    }
    expect(warningCodes()).toEqual([]);
  });

  it('a symbolic link at the entry name is replaced, its target left alone', () => {
    const source = newSource();
    const path = plant(source);
    const target = join(root, 'target');
    writeFileSync(target, 'the user file');
    rmSync(path);
    symlinkSync(target, path);
    expectCompiledInstead(source);
    expect(readFileSync(target, 'utf8')).toBe('the user file');
    expect(lstatSync(path).isFile()).toBe(true);
  });
});

describe('clearKernelCache({ disk: true })', () => {
  it("deletes this cache's entries and leftovers only", () => {
    const source = newSource();
    plant(source);
    const mine = [
      'gemm_sm90.cubin',
      'notes.txt',
      '0123456789abcdef0123456789abcdef01234567.cubin',
      'kernel.tmp',
    ];
    for (const name of mine) writeFileSync(join(folder, name), name);
    const stale = entries().find((name) => !mine.includes(name))!;
    writeFileSync(join(folder, `.${stale}.0123456789abcdef.tmp`), 'half written');
    clearKernelCache({ disk: true });
    expect(readdirSync(folder).sort()).toEqual([...mine].sort());
    expect(readFileSync(join(folder, 'gemm_sm90.cubin'), 'utf8')).toBe('gemm_sm90.cubin');
  });

  it('an untrusted folder is left untouched', () => {
    plant(newSource());
    chmodSync(folder, 0o777);
    const listed = readdirSync(folder).sort();
    clearKernelCache({ disk: true });
    expect(readdirSync(folder).sort()).toEqual(listed);
    expect(warningCodes()).toEqual(['CUDA_TASKS_KERNEL_CACHE_FOLDER_WRITABLE']);
  });
});
