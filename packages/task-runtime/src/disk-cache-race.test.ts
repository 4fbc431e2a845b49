import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, type MockInstance, vi } from 'vitest';
import { cacheFileName, readCached, resetKernelCacheWarnings, writeCached } from './disk-cache.js';

// A path swapped between the cache's judgement of its folder and its use of it. `node:fs` is
// wrapped so that a test can run a swap at the first call naming a given file, after the
// folder was judged: a folder of the path renamed away and a symbolic link put in its place,
// the way a member of a group-writable folder higher up could. The cache must keep working on
// the folder it judged (its descriptor), never on what the path names after the swap.

const hook = vi.hoisted(() => ({
  when: undefined as ((call: string, path: string) => boolean) | undefined,
  swap: undefined as (() => void) | undefined,
  fired: 0,
  // Hides /proc/self/fd, so that a fresh import of the cache takes its path-based fallback.
  noProc: false,
}));

function trigger(call: string, path: unknown): void {
  if (hook.when === undefined || !hook.when(call, String(path))) return;
  const swap = hook.swap;
  hook.when = undefined;
  hook.swap = undefined;
  hook.fired++;
  swap?.();
}

vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  const wrapped = {
    ...fs,
    existsSync: ((path: string) =>
      hook.noProc && path === '/proc/self/fd'
        ? false
        : fs.existsSync(path)) as typeof fs.existsSync,
    lstatSync: ((path: string, ...rest: never[]) => {
      trigger('lstatSync', path);
      return (fs.lstatSync as (...a: unknown[]) => unknown)(path, ...rest);
    }) as typeof fs.lstatSync,
    statSync: ((path: string, ...rest: never[]) => {
      trigger('statSync', path);
      return (fs.statSync as (...a: unknown[]) => unknown)(path, ...rest);
    }) as typeof fs.statSync,
    openSync: ((path: string, ...rest: never[]) => {
      trigger('openSync', path);
      return (fs.openSync as (...a: unknown[]) => unknown)(path, ...rest);
    }) as typeof fs.openSync,
    mkdirSync: ((path: string, ...rest: never[]) => {
      const made = (fs.mkdirSync as (...a: unknown[]) => unknown)(path, ...rest);
      trigger('mkdirSync', path);
      return made;
    }) as typeof fs.mkdirSync,
  };
  return { ...wrapped, default: wrapped };
});

const key = 'nvrtc 12.8\nsm_90\nextern "C" __global__ void raced() {}\n';
const GENUINE = Uint8Array.from({ length: 1000 }, (_, i) => (i * 5 + 3) & 255);
const PLANTED = Uint8Array.from({ length: 1000 }, (_, i) => (i * 31 + 7) & 255);

let root: string;
let warnings: MockInstance<typeof process.emitWarning>;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'cuda-tasks-cache-race-'));
  chmodSync(root, 0o700);
  resetKernelCacheWarnings();
  warnings = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
  hook.when = undefined;
  hook.swap = undefined;
  hook.fired = 0;
  hook.noProc = false;
});

afterEach(() => {
  warnings.mockRestore();
  rmSync(root, { recursive: true, force: true });
});

/**
 * `team/alice/kcache` (the cache, holding GENUINE under `key`) and an attacker's tree
 * `mallory/kcache` holding a well-formed entry of PLANTED under the same name. Every file is
 * this process's user's and every folder 0700, so that only the path's swap is under test.
 */
function layout() {
  const team = join(root, 'team');
  const alice = join(team, 'alice');
  const cache = join(alice, 'kcache');
  const mallory = join(root, 'mallory');
  const planted = join(mallory, 'kcache');
  for (const folder of [team, alice, cache, mallory, planted]) {
    mkdirSync(folder, { mode: 0o700 });
    chmodSync(folder, 0o700);
  }
  expect(writeCached(planted, key, PLANTED)).toBe(true);
  const moved = join(team, 'alice-away');
  /** Renames `alice` away and puts a symbolic link to the attacker's tree in its place. */
  const swap = () => {
    renameSync(alice, moved);
    symlinkSync(mallory, alice);
  };
  return { cache, planted, moved, swap };
}

describe('a folder swapped after it was judged', () => {
  it('a read opens the entry in the folder it judged, not what the path names after the swap', () => {
    const { cache, moved, swap } = layout();
    expect(writeCached(cache, key, GENUINE)).toBe(true);
    hook.when = (_, path) => path.endsWith(cacheFileName(key));
    hook.swap = swap;
    const read = readCached(cache, key);
    expect(hook.fired).toBe(1);
    expect(read.cubin).toEqual(GENUINE);
    expect(read.cubin).not.toEqual(PLANTED);
    // The swap did happen: the path now leads to the attacker's entry.
    expect(readdirSync(join(moved, 'kcache'))).toEqual([cacheFileName(key)]);
    expect(readCached(cache, key).cubin).toEqual(PLANTED);
  });

  it('a read whose folder holds no entry is a miss, not the entry planted behind the swap', () => {
    const { cache, swap } = layout();
    hook.when = (_, path) => path.endsWith(cacheFileName(key));
    hook.swap = swap;
    expect(readCached(cache, key)).toEqual({});
    expect(hook.fired).toBe(1);
  });

  it('a write lands in the folder it judged (temporary file and rename)', () => {
    const { cache, planted, moved, swap } = layout();
    rmSync(join(planted, cacheFileName(key)));
    hook.when = (_, path) => path.endsWith('.tmp');
    hook.swap = swap;
    expect(writeCached(cache, key, GENUINE)).toBe(true);
    expect(hook.fired).toBe(1);
    expect(readdirSync(planted)).toEqual([]);
    expect(readdirSync(join(moved, 'kcache'))).toEqual([cacheFileName(key)]);
    expect(readCached(join(moved, 'kcache'), key).cubin).toEqual(GENUINE);
  });
});

describe('a folder the cache creates', () => {
  it('is made 0700 through its descriptor: a link swapped in never redirects the chmod', () => {
    const shared = join(root, 'shared');
    mkdirSync(shared, { mode: 0o700 });
    const victim = join(root, 'notes.txt');
    writeFileSync(victim, 'the user file');
    chmodSync(victim, 0o644);
    const cache = join(shared, 'kcache');
    hook.when = (call, path) => call === 'mkdirSync' && path === cache;
    hook.swap = () => {
      renameSync(cache, join(shared, 'kcache-away'));
      symlinkSync(victim, cache);
    };
    expect(writeCached(cache, key, GENUINE)).toBe(false);
    expect(hook.fired).toBe(1);
    expect((statSync(victim).mode & 0o7777).toString(8)).toBe('644');
    expect(existsSync(join(shared, 'kcache-away'))).toBe(true);
  });
});

describe('where entries cannot be reached through the descriptor (no /proc)', () => {
  const fallback = async () => {
    hook.noProc = true;
    vi.resetModules();
    return import('./disk-cache.js');
  };

  it('the swap is seen after the open: refused (folder-replaced), the planted bytes not loaded', async () => {
    const cache = await fallback();
    const { cache: folder, swap } = layout();
    cache.resetKernelCacheWarnings();
    expect(cache.writeCached(folder, key, GENUINE)).toBe(true);
    expect(cache.readCached(folder, key).cubin).toEqual(GENUINE);
    hook.when = (_, path) => path.endsWith(cacheFileName(key));
    hook.swap = swap;
    expect(cache.readCached(folder, key)).toEqual({ refused: 'folder-replaced' });
    expect(hook.fired).toBe(1);
    expect(warnings.mock.calls.map((call) => (call[1] as { code: string }).code)).toEqual([
      'CUDA_TASKS_KERNEL_CACHE_FOLDER_REPLACED',
    ]);
  });

  it('a write whose folder is swapped fails and leaves nothing behind the swap', async () => {
    const cache = await fallback();
    const { cache: folder, planted, moved, swap } = layout();
    rmSync(join(planted, cacheFileName(key)));
    hook.when = (_, path) => path.endsWith('.tmp');
    hook.swap = swap;
    expect(cache.writeCached(folder, key, GENUINE)).toBe(false);
    expect(hook.fired).toBe(1);
    expect(readdirSync(planted)).toEqual([]);
    expect(readdirSync(join(moved, 'kcache'))).toEqual([]);
  });
});
