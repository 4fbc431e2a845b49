import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

// Out of memory on the awaitable allocation path (issue 14): the wait for pending frees runs
// off the event loop (cuCtxSynchronize_v2 through koffi's async call, on a worker thread),
// against a scripted driver.
const fake = vi.hoisted(() => {
  const state = {
    calls: [] as string[],
    nextAddress: 0x10_0000,
    nextHandle: 100,
    outOfMemory: 0,
    /** Callbacks of cuCtxSynchronize_v2.async calls not answered yet. */
    pendingSyncs: [] as ((error: unknown, result: number) => void)[],
    /** Whether the driver has cuCtxSynchronize_v2 (CUDA 12.5 drivers and newer). */
    hasContextSynchronize: true,
  };
  const lastAllocation = { value: 0 };
  const api = {
    cuStreamCreateWithPriority(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextHandle++);
      return 0;
    },
    cuStreamSynchronize: () => 0,
    cuStreamDestroy_v2: () => 0,
    cuCtxSetCurrent: () => 0,
    cuCtxSynchronize() {
      state.calls.push('cuCtxSynchronize (blocking)');
      return 0;
    },
    cuMemAllocAsync(_out: unknown, bytes: number, stream: unknown) {
      if (state.outOfMemory > 0) {
        state.outOfMemory--;
        state.calls.push(`alloc ${bytes} on s${Number(stream)}: out of memory`);
        return 2; // CUDA_ERROR_OUT_OF_MEMORY
      }
      state.calls.push(`alloc ${bytes} on s${Number(stream)}`);
      lastAllocation.value = state.nextAddress;
      state.nextAddress += 0x10_0000;
      return 0;
    },
    cuMemFreeAsync(address: unknown, stream: unknown) {
      state.calls.push(`free 0x${Number(address).toString(16)} on s${Number(stream)}`);
      return 0;
    },
    cuMemPoolTrimTo() {
      state.calls.push('trim');
      return 0;
    },
    cuMemPoolGetAttribute: () => 0,
    cuMemGetInfo_v2(free: number[], total: number[]) {
      free[0] = 0;
      total[0] = 1 << 30;
      return 0;
    },
  };
  const contextSynchronize = {
    async(context: unknown, callback: (error: unknown, result: number) => void) {
      state.calls.push(`cuCtxSynchronize_v2 of c${Number(context)} (worker thread)`);
      state.pendingSyncs.push(callback);
    },
  };
  return { state, api, lastAllocation, contextSynchronize };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  class Scratch {
    readonly address = 1;
    readonly pointer = 1n;
    readonly u64 = new BigUint64Array(2);
    readAddress(): number {
      return fake.lastAllocation.value;
    }
  }
  const arena = new Scratch();
  return {
    ...original,
    driver: () => fake.api,
    check: (result: number, call: string) => {
      if (result !== 0) throw new Error(`${call} returned ${result}`);
    },
    scratch: () => arena,
  };
});
vi.mock('../ffi/cuda.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../ffi/cuda.js')>();
  return {
    ...original,
    contextSynchronizeBinding: () =>
      fake.state.hasContextSynchronize ? fake.contextSynchronize : null,
  };
});

import { Context, type Device } from '../context/device.js';
import { CudaOutOfMemoryError } from '../errors.js';
import { Stream } from '../stream/stream.js';
import { DeviceArray } from './array.js';
import { cachedBytes } from './block-cache.js';
import { DeviceBuffer } from './memory.js';
import { MemoryPool, onOutOfMemory } from './memory-pool.js';

const context = new Context(
  { ordinal: 0, memoryInfo: () => ({ free: 0, total: 1 << 30 }) } as unknown as Device,
  77n,
);
const pool = Object.create(MemoryPool.prototype) as MemoryPool;
Object.assign(pool, { context, handle: 5n });
Object.defineProperty(context, 'memoryPool', { value: pool });
const stream = Stream.create({ context, name: 's' });
const s = `s${Number(stream.handle)}`;
const calls = () => fake.state.calls.splice(0);
const turn = () => new Promise((resolve) => setImmediate(resolve));

beforeEach(() => {
  pool.releaseCached();
  fake.state.hasContextSynchronize = true;
  calls();
});
afterEach(() => {
  for (const callback of fake.state.pendingSyncs.splice(0)) callback(null, 0);
});

describe('DeviceBuffer.allocateAsync on out-of-memory', () => {
  it('gives cached blocks back, runs the hooks, and waits for pending frees off the event loop', async () => {
    DeviceBuffer.allocate(256, { stream }).dispose(); // a cached block
    const hooked: unknown[] = [];
    const off = onOutOfMemory((c) => hooked.push(c));
    calls();
    fake.state.outOfMemory = 1;
    const pending = DeviceBuffer.allocateAsync(1 << 20, { stream });
    let buffer: DeviceBuffer | undefined;
    void pending.then((b) => {
      buffer = b;
    });
    await turn();
    await turn();
    // The event loop turns while the worker waits: nothing resolved, nothing blocked.
    expect(buffer).toBeUndefined();
    expect(calls()).toEqual([
      `alloc ${1 << 20} on ${s}: out of memory`,
      expect.stringMatching(new RegExp(`^free 0x[0-9a-f]+ on ${s}$`)),
      'cuCtxSynchronize_v2 of c77 (worker thread)',
    ]);
    expect(hooked).toEqual([context]);
    expect(cachedBytes(context)).toBe(0);
    fake.state.pendingSyncs.shift()!(null, 0);
    const allocated = await pending;
    expect(calls()).toEqual(['trim', `alloc ${1 << 20} on ${s}`]);
    expect(allocated.byteLength).toBe(1 << 20);
    expect(allocated.lastStream).toBe(stream);
    expect(allocated.context).toBe(context);
    off();
    allocated.dispose();
  });

  it('rejects with CudaOutOfMemoryError when the retry fails too', async () => {
    fake.state.outOfMemory = 2;
    const pending = DeviceBuffer.allocateAsync(1 << 20, { stream });
    const outcome = pending.then(
      () => undefined,
      (error: unknown) => error,
    );
    await turn();
    fake.state.pendingSyncs.shift()!(null, 0);
    const error = await outcome;
    expect(error).toBeInstanceOf(CudaOutOfMemoryError);
    expect((error as CudaOutOfMemoryError).requestedBytes).toBe(1 << 20);
  });

  it('a driver without cuCtxSynchronize_v2: the wait is the blocking one (documented)', async () => {
    fake.state.hasContextSynchronize = false;
    fake.state.outOfMemory = 1;
    const buffer = await DeviceBuffer.allocateAsync(4096 * 1024, { stream });
    expect(calls()).toEqual([
      `alloc ${4096 * 1024} on ${s}: out of memory`,
      'cuCtxSynchronize (blocking)',
      'trim',
      `alloc ${4096 * 1024} on ${s}`,
    ]);
    buffer.dispose();
  });

  it('without memory pressure: a cached block or one allocation, as allocate()', async () => {
    DeviceBuffer.allocate(256, { stream }).dispose();
    calls();
    const small = await DeviceBuffer.allocateAsync(300, { stream });
    expect(calls()).toEqual([]); // the cached block
    const array = await DeviceArray.emptyAsync('float32', [64, 64], { stream });
    expect(calls()).toEqual([`alloc ${64 * 64 * 4} on ${s}`]);
    expect(array.shape).toEqual([64, 64]);
    expect(array.buffer.byteLength).toBe(64 * 64 * 4);
    small.dispose();
    array.dispose();
  });

  it('the synchronous allocate() still waits in cuCtxSynchronize (it cannot await)', () => {
    fake.state.outOfMemory = 1;
    const buffer = DeviceBuffer.allocate(1 << 21, { stream });
    expect(calls()).toContain('cuCtxSynchronize (blocking)');
    buffer.dispose();
  });
});
