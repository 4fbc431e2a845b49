import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

type NvtxModule = typeof import('./nvtx.js');

const savedEnv = process.env.CUDA_TASKS_LIBNVTX;

afterEach(() => {
  vi.doUnmock('@cuda-tasks/cudadrv/ffi');
  vi.resetModules();
  if (savedEnv === undefined) delete process.env.CUDA_TASKS_LIBNVTX;
  else process.env.CUDA_TASKS_LIBNVTX = savedEnv;
});

describe('range() without libnvtx3interop (no-op path)', () => {
  let nvtx: NvtxModule;
  beforeEach(async () => {
    // A library path that cannot exist: the real koffi fails to load it, as on a machine
    // without NVTX, whatever this machine has installed.
    process.env.CUDA_TASKS_LIBNVTX = '/nonexistent/cuda-tasks-test/libnvtx3interop.so.1';
    vi.resetModules();
    nvtx = await import('./nvtx.js');
  });

  it('reports NVTX as unavailable', () => {
    expect(nvtx.nvtxAvailable()).toBe(false);
  });

  it("returns a sync function's own result, calling it once", () => {
    const result = { value: 7 };
    const fn = vi.fn(() => result);
    expect(nvtx.range('sync', fn)).toBe(result);
    expect(fn).toHaveBeenCalledTimes(1);
    expect(nvtx.range('number', () => 3)).toBe(3);
    expect(nvtx.range('undefined', () => undefined)).toBeUndefined();
  });

  it("returns an async function's promise, which resolves to its value", async () => {
    let resolved = false;
    const promise = nvtx.range('async', async () => {
      await sleep(5);
      resolved = true;
      return 'done';
    });
    expect(promise).toBeInstanceOf(Promise);
    expect(resolved).toBe(false);
    await expect(promise).resolves.toBe('done');
    expect(resolved).toBe(true);
  });

  it('propagates a throw, the same error object', () => {
    const error = new Error('sync boom');
    let caught: unknown;
    try {
      nvtx.range('throws', () => {
        throw error;
      });
    } catch (e) {
      caught = e;
    }
    expect(caught).toBe(error);
  });

  it('propagates a rejection, the same error object', async () => {
    const error = new Error('async boom');
    await expect(
      nvtx.range('rejects', async () => {
        await sleep(1);
        throw error;
      }),
    ).rejects.toBe(error);
  });
});

describe('range() with an NVTX library (present path, through a stand-in library)', () => {
  let nvtx: NvtxModule;
  let log: string[];
  let loaded: string[];
  beforeEach(async () => {
    delete process.env.CUDA_TASKS_LIBNVTX;
    log = [];
    loaded = [];
    let nextId = 100;
    vi.resetModules();
    vi.doMock('@cuda-tasks/cudadrv/ffi', () => ({
      cudaLibraryCandidates: (name: string, versions: string[]) => [`${name}.${versions[0]}`, name],
      koffi: () => ({
        load(name: string) {
          loaded.push(name);
          if (!name.startsWith('libnvtx3interop')) throw new Error(`cannot load ${name}`);
          return {
            func(signature: string) {
              if (signature.includes('nvtxRangeStartA')) {
                return (message: string) => {
                  const id = ++nextId;
                  log.push(`start ${message} #${id}`);
                  return id;
                };
              }
              if (signature.includes('nvtxRangeEnd')) {
                return (id: number) => {
                  log.push(`end #${id}`);
                };
              }
              throw new Error(`unexpected declaration ${signature}`);
            },
          };
        },
      }),
    }));
    nvtx = await import('./nvtx.js');
  });

  it('finds the library and reports NVTX as available', () => {
    expect(nvtx.nvtxAvailable()).toBe(true);
    expect(loaded).toEqual(['libnvtx3interop.so.1']);
  });

  it('opens the range before a sync function runs and closes it after, once', () => {
    const result = { value: 1 };
    const seenInside: string[][] = [];
    expect(
      nvtx.range('sync', () => {
        seenInside.push([...log]);
        return result;
      }),
    ).toBe(result);
    expect(seenInside).toEqual([['start sync #101']]);
    expect(log).toEqual(['start sync #101', 'end #101']);
  });

  it('closes the range when a sync function throws, and rethrows the same error', () => {
    const error = new Error('sync boom');
    let caught: unknown;
    try {
      nvtx.range('throws', () => {
        throw error;
      });
    } catch (e) {
      caught = e;
    }
    expect(caught).toBe(error);
    expect(log).toEqual(['start throws #101', 'end #101']);
  });

  it('closes an async range only when the promise settles, with its value', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const promise = nvtx.range('async', async () => {
      await gate;
      return 'done';
    });
    await sleep(2);
    expect(log).toEqual(['start async #101']);
    release();
    await expect(promise).resolves.toBe('done');
    expect(log).toEqual(['start async #101', 'end #101']);
  });

  it('closes an async range on rejection, and rejects with the same error', async () => {
    const error = new Error('async boom');
    await expect(
      nvtx.range('rejects', async () => {
        await sleep(1);
        throw error;
      }),
    ).rejects.toBe(error);
    expect(log).toEqual(['start rejects #101', 'end #101']);
  });

  it('ends interleaved async ranges by their own ids', async () => {
    const first = nvtx.range('first', async () => {
      await sleep(10);
      return 1;
    });
    const second = nvtx.range('second', async () => {
      await sleep(1);
      return 2;
    });
    expect(await Promise.all([first, second])).toEqual([1, 2]);
    expect(log).toEqual(['start first #101', 'start second #102', 'end #102', 'end #101']);
  });
});
