import { beforeEach, describe, expect, it, vi } from 'vitest';

// The per-stream cache of small freed blocks against a scripted driver: which allocations and
// frees reach it, on which stream.
const fake = vi.hoisted(() => {
  const state = {
    calls: [] as string[],
    nextAddress: 0x10_0000,
    nextHandle: 100,
    outOfMemory: 0,
  };
  const name = (handle: unknown) => `s${Number(handle)}`;
  const api = {
    cuStreamCreateWithPriority(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextHandle++);
      return 0;
    },
    cuStreamSynchronize: () => 0,
    cuStreamDestroy_v2: () => 0,
    cuCtxSetCurrent: () => 0,
    cuCtxSynchronize: () => 0,
    cuEventCreate(out: (bigint | null)[]) {
      out[0] = 9000n;
      return 0;
    },
    cuEventRecord(_event: unknown, stream: unknown) {
      state.calls.push(`record ${name(stream)}`);
      return 0;
    },
    cuStreamWaitEvent(stream: unknown) {
      state.calls.push(`wait ${name(stream)}`);
      return 0;
    },
    cuMemAllocAsync(_out: bigint, bytes: number, stream: unknown) {
      if (state.outOfMemory > 0) {
        state.outOfMemory--;
        return 2; // CUDA_ERROR_OUT_OF_MEMORY
      }
      state.calls.push(`alloc ${bytes} on ${name(stream)}`);
      lastAllocation.value = state.nextAddress;
      state.nextAddress += 0x1_0000;
      return 0;
    },
    cuMemFreeAsync(address: unknown, stream: unknown) {
      state.calls.push(`free 0x${Number(address).toString(16)} on ${name(stream)}`);
      return 0;
    },
    cuMemPoolTrimTo: () => 0,
  };
  const lastAllocation = { value: 0 };
  return { state, api, lastAllocation };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  // The scratch arena's address stands for the out-pointer: the double reports its last
  // allocation there.
  class Scratch {
    readonly address = 1;
    readAddress(): number {
      return fake.lastAllocation.value;
    }
  }
  const arena = new Scratch();
  return {
    ...original,
    driver: () => fake.api,
    check: () => undefined,
    scratch: () => arena,
  };
});

import { Context, type Device } from '../context/device.js';
import { onStreamDisposed, Stream } from '../stream/stream.js';
import {
  CACHE_BYTES_PER_STREAM,
  CACHE_MAX_BLOCK,
  cachedBytes,
  releaseStreamCache,
} from './block-cache.js';
import { DeviceBuffer } from './memory.js';
import { MemoryPool } from './memory-pool.js';

const context = new Context({ ordinal: 0 } as unknown as Device, 77n);
const pool = Object.create(MemoryPool.prototype) as MemoryPool;
Object.assign(pool, { context, handle: 5n });
Object.defineProperty(context, 'memoryPool', { value: pool });
const calls = () => fake.state.calls.splice(0);
// A second device's context, with a pool of its own.
const context1 = new Context({ ordinal: 1 } as unknown as Device, 78n);
const pool1 = Object.create(MemoryPool.prototype) as MemoryPool;
Object.assign(pool1, { context: context1, handle: 6n });
Object.defineProperty(context1, 'memoryPool', { value: pool1 });
const a = Stream.create({ context, name: 'a' });
const b = Stream.create({ context, name: 'b' });
const [sa, sb] = [a, b].map((s) => `s${Number(s.handle)}`) as [string, string];

beforeEach(() => {
  pool.releaseCached();
  pool1.releaseCached();
  calls();
});

describe('the per-stream cache of small freed blocks', () => {
  it('a freed small block comes back on the same stream without a driver call', () => {
    const first = DeviceBuffer.allocate(256, { stream: a });
    expect(calls()).toEqual([`alloc 512 on ${sa}`]); // rounded to its size class
    const address = first.address;
    first.dispose();
    expect(calls()).toEqual([]); // kept, not freed
    expect(cachedBytes(context)).toBe(512);
    const second = DeviceBuffer.allocate(300, { stream: a }); // the same size class
    expect(second.address).toBe(address);
    expect(calls()).toEqual([]);
    expect(cachedBytes(context)).toBe(0);
    expect(first.disposed).toBe(true);
    second.dispose();
  });

  it('releaseStreamCache frees one stream’s blocks, ordered on it, and leaves the others', () => {
    const onA = DeviceBuffer.allocate(256, { stream: a });
    const onB = DeviceBuffer.allocate(2048, { stream: b });
    const addressA = Number(onA.address);
    onA.dispose();
    onB.dispose();
    calls();
    expect(releaseStreamCache(a)).toBe(512);
    expect(calls()).toEqual([`free 0x${addressA.toString(16)} on ${sa}`]);
    expect(cachedBytes(context)).toBe(2048);
    expect(releaseStreamCache(a)).toBe(0);
    expect(calls()).toEqual([]);
  });

  it('never hands a block to another stream', () => {
    DeviceBuffer.allocate(256, { stream: a }).dispose();
    calls();
    const other = DeviceBuffer.allocate(256, { stream: b });
    expect(calls()).toEqual([`alloc 512 on ${sb}`]);
    other.dispose();
  });

  it('caches on the last writer, after waiting for the readers of other streams', () => {
    const buffer = DeviceBuffer.allocate(1024, { stream: a });
    buffer.ffiAddressOn(b, 'read');
    calls();
    buffer.dispose();
    expect(calls()).toEqual([`record ${sb}`, `wait ${sa}`]); // a waits for b's read; no free
    expect(cachedBytes(context)).toBe(1024);
  });

  it('frees large blocks, blocks of wrapped streams, and blocks beyond the per-stream bound', () => {
    const large = DeviceBuffer.allocate(CACHE_MAX_BLOCK + 1, { stream: a });
    large.dispose();
    expect(calls()).toEqual([
      `alloc ${CACHE_MAX_BLOCK + 1} on ${sa}`,
      expect.stringMatching(/^free .* on /),
    ]);
    const wrapped = Stream.wrap(b.handle, context, 'wrapped');
    DeviceBuffer.allocate(256, { stream: wrapped }).dispose();
    expect(calls()).toEqual([
      `alloc 512 on ${sb}`,
      expect.stringMatching(new RegExp(`^free .* on ${sb}$`)),
    ]);
    const count = CACHE_BYTES_PER_STREAM / CACHE_MAX_BLOCK;
    const buffers = Array.from({ length: count + 1 }, () =>
      DeviceBuffer.allocate(CACHE_MAX_BLOCK, { stream: a }),
    );
    calls();
    for (const buffer of buffers) buffer.dispose();
    expect(calls()).toEqual([expect.stringMatching(new RegExp(`^free .* on ${sa}$`))]);
    expect(cachedBytes(context)).toBe(CACHE_BYTES_PER_STREAM);
  });

  it('releaseCached and statistics: the blocks go back to the pool on their streams', () => {
    DeviceBuffer.allocate(256, { stream: a }).dispose();
    DeviceBuffer.allocate(2048, { stream: b }).dispose();
    calls();
    expect(cachedBytes(context)).toBe(512 + 2048);
    pool.releaseCached();
    expect(calls().sort()).toEqual(
      [
        expect.stringMatching(new RegExp(`on ${sa}$`)),
        expect.stringMatching(new RegExp(`on ${sb}$`)),
      ].sort(),
    );
    expect(cachedBytes(context)).toBe(0);
  });

  it('disposing a stream gives its blocks back before it is destroyed', () => {
    const c = Stream.create({ context, name: 'c' });
    const sc = `s${Number(c.handle)}`;
    DeviceBuffer.allocate(256, { stream: c }).dispose();
    calls();
    c.dispose();
    expect(calls()).toEqual([expect.stringMatching(new RegExp(`^free .* on ${sc}$`))]);
    expect(cachedBytes(context)).toBe(0);
  });

  it('a block freed by a disposed-listener that runs after the cache’s is freed, not cached', () => {
    const c = Stream.create({ context, name: 'c' });
    const sc = `s${Number(c.handle)}`;
    // Per-stream resources of a library (a HandleCache's unbindStream, say) freed on dispose.
    const perStream = DeviceBuffer.allocate(256, { stream: c });
    const off = onStreamDisposed((stream) => {
      if (stream === c) perStream.dispose();
    });
    calls();
    c.dispose();
    off();
    expect(calls()).toEqual([expect.stringMatching(new RegExp(`^free .* on ${sc}$`))]);
    expect(cachedBytes(context)).toBe(0);
  });

  it('out of memory: the cached blocks go back before the retry', () => {
    DeviceBuffer.allocate(256, { stream: a }).dispose();
    calls();
    fake.state.outOfMemory = 1;
    const buffer = DeviceBuffer.allocate(1 << 20, { stream: a });
    expect(calls()).toEqual([
      expect.stringMatching(new RegExp(`^free .* on ${sa}$`)),
      `alloc ${1 << 20} on ${sa}`,
    ]);
    expect(cachedBytes(context)).toBe(0);
    buffer.dispose();
  });
});

describe('a block last used on a stream of another context (issue 14, bug 1)', () => {
  const onDevice1 = Stream.create({ context: context1, name: 'device 1' });
  const s1 = `s${Number(onDevice1.handle)}`;
  const own = `s${Number(context.defaultStream.handle)}`;

  it('is freed on a stream of its own context, after the foreign stream, and never cached there', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    const address = Number(buffer.address);
    buffer.ffiAddressOn(onDevice1); // e.g. copyFrom inside withDevice(1): a device-1 stream writes it
    calls();
    buffer.dispose();
    expect(calls()).toEqual([
      `record ${s1}`,
      `wait ${own}`,
      `free 0x${address.toString(16)} on ${own}`,
    ]);
    expect(cachedBytes(context1)).toBe(0);
    expect(cachedBytes(context)).toBe(0);
    // The device-1 stream's next small allocation is device-1 memory, not that block.
    const next = DeviceBuffer.allocate(256, { stream: onDevice1 });
    expect(calls()).toEqual([`alloc 512 on ${s1}`]);
    expect(Number(next.address)).not.toBe(address);
    next.dispose();
  });

  it('a large block too: the free goes to its own context', () => {
    const buffer = DeviceBuffer.allocate(CACHE_MAX_BLOCK + 1, { stream: a });
    const address = Number(buffer.address);
    buffer.ffiAddressOn(onDevice1);
    calls();
    buffer.dispose();
    expect(calls()).toEqual([
      `record ${s1}`,
      `wait ${own}`,
      `free 0x${address.toString(16)} on ${own}`,
    ]);
  });

  it('a block read on another context but last written on its own is cached on its writer', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    buffer.ffiAddressOn(onDevice1, 'read');
    calls();
    buffer.dispose();
    expect(calls()).toEqual([`record ${s1}`, `wait ${sa}`]);
    expect(cachedBytes(context)).toBe(512);
    expect(cachedBytes(context1)).toBe(0);
  });
});
