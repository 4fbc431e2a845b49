import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { beforeEach, describe, expect, it, vi } from 'vitest';

// Streams the garbage collector takes instead of `dispose()` (issue 14, bug 6), against a driver
// that records what is destroyed and freed: nothing of theirs may outlive them, and nothing of
// this package may keep them alive.
const fake = vi.hoisted(() => {
  const state = { calls: [] as string[], nextHandle: 100, nextAddress: 0x10_0000 };
  const lastAllocation = { value: 0 };
  const api = {
    cuStreamCreateWithPriority(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextHandle++);
      return 0;
    },
    cuStreamDestroy_v2(stream: unknown) {
      state.calls.push(`destroy stream s${Number(stream)}`);
      return 0;
    },
    cuStreamSynchronize: () => 0,
    cuCtxSetCurrent: () => 0,
    cuEventCreate(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextHandle++);
      return 0;
    },
    cuEventDestroy_v2(event: unknown) {
      state.calls.push(`destroy event e${Number(event)}`);
      return 0;
    },
    cuEventRecord: () => 0,
    cuStreamWaitEvent: () => 0,
    cuMemAllocAsync() {
      lastAllocation.value = state.nextAddress;
      state.nextAddress += 0x1_0000;
      return 0;
    },
    cuMemFreeAsync(address: unknown, stream: unknown) {
      state.calls.push(`free 0x${Number(address).toString(16)} on s${Number(stream)}`);
      return 0;
    },
  };
  return { state, api, lastAllocation };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  class Scratch {
    readonly address = 1;
    readAddress(): number {
      return fake.lastAllocation.value;
    }
  }
  const arena = new Scratch();
  return { ...original, driver: () => fake.api, check: () => undefined, scratch: () => arena };
});

import { Context, type Device } from '../context/device.js';
import { cachedBytes } from '../memory/block-cache.js';
import { DeviceBuffer } from '../memory/memory.js';
import { MemoryPool } from '../memory/memory-pool.js';
import { Stream } from './stream.js';

const context = new Context({ ordinal: 0 } as unknown as Device, 77n);
const pool = Object.create(MemoryPool.prototype) as MemoryPool;
Object.assign(pool, { context, handle: 5n });
Object.defineProperty(context, 'memoryPool', { value: pool });
const other = Stream.create({ context, name: 'other' });

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/**
 * Collects garbage until `done()` holds (finalizers run in later turns): false if it never
 * does. `done` must not read a WeakRef: a target read stays alive for a while after.
 */
async function collectUntil(done: () => boolean): Promise<boolean> {
  for (let attempt = 0; attempt < 50; attempt++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 5));
    if (done()) return true;
  }
  return false;
}

beforeEach(() => {
  fake.state.calls.length = 0;
});

describe('a stream collected by the GC instead of disposed', () => {
  it('destroys its native stream and its hand-off event', async () => {
    const made: { ref?: WeakRef<Stream>; handle?: number; event?: number } = {};
    (function dropped() {
      const stream = Stream.create({ context, name: 'dropped' });
      other.waitFor(stream); // makes the stream's hand-off event
      made.ref = new WeakRef(stream);
      made.handle = Number(stream.handle);
      made.event = fake.state.nextHandle - 1;
    })();
    const destroyed = await collectUntil(() =>
      fake.state.calls.includes(`destroy stream s${made.handle}`),
    );
    expect(destroyed).toBe(true);
    expect(made.ref!.deref()).toBeUndefined();
    expect(fake.state.calls).toContain(`destroy event e${made.event}`);
  });

  it('a wrapped stream (not owned): its hand-off event is destroyed, the stream is not', async () => {
    const made: { event?: number } = {};
    (function dropped() {
      const stream = Stream.wrap(4242n, context, 'foreign');
      other.waitFor(stream);
      made.event = fake.state.nextHandle - 1;
    })();
    expect(
      await collectUntil(() => fake.state.calls.includes(`destroy event e${made.event}`)),
    ).toBe(true);
    expect(fake.state.calls).not.toContain('destroy stream s4242');
  });

  it('is not kept alive by its cached blocks, which are freed on it before it is destroyed', async () => {
    const made: { ref?: WeakRef<Stream>; handle?: number; address?: number } = {};
    (function dropped() {
      const stream = Stream.create({ context, name: 'dropped with blocks' });
      const buffer = DeviceBuffer.allocate(256, { stream });
      made.address = Number(buffer.address);
      buffer.dispose(); // kept in the stream's block cache
      made.ref = new WeakRef(stream);
      made.handle = Number(stream.handle);
    })();
    expect(cachedBytes(context)).toBe(512);
    const collected = await collectUntil(() =>
      fake.state.calls.includes(`destroy stream s${made.handle}`),
    );
    expect(collected).toBe(true);
    expect(made.ref!.deref()).toBeUndefined();
    const own = fake.state.calls.filter((call) => call.endsWith(`s${made.handle}`));
    expect(own).toEqual([
      `free 0x${made.address!.toString(16)} on s${made.handle}`,
      `destroy stream s${made.handle}`,
    ]);
    expect(cachedBytes(context)).toBe(0);
  });
});
