import { beforeEach, describe, expect, it, vi } from 'vitest';

// Uploads from typed arrays through pinned staging memory of our own (transfer.ts), against a
// driver double: which host memory each copy reads, what it holds when queued, and that a
// staging buffer is reused only once the event recorded after its copy has completed.
const fake = vi.hoisted(() => {
  const state = {
    nextHandle: 100,
    nextAddress: 0x10_0000,
    /** Each queued upload: the host source (a bigint address or the typed array) and its bytes then. */
    copies: [] as { source: unknown; bytes: Uint8Array }[],
    /** Events whose query answers NOT_READY (600). */
    notReady: new Set<number>(),
    recorded: [] as number[],
    failRecord: false,
    failEventCreate: false,
    eventsCreated: 0,
    failHostAlloc: false,
    /** The stand-in pinned allocations, kept alive for the whole file. */
    hostMemory: [] as unknown[],
  };
  const lastAllocation = { value: 0 };
  return { state, lastAllocation };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  const { koffi } = await import('../ffi/library.js');
  const api = {
    cuStreamCreateWithPriority(out: (bigint | null)[]) {
      out[0] = BigInt(fake.state.nextHandle++);
      return 0;
    },
    cuStreamDestroy_v2: () => 0,
    cuStreamSynchronize: () => 0,
    cuCtxSetCurrent: () => 0,
    cuEventCreate(out: (bigint | null)[]) {
      if (fake.state.failEventCreate) return 2; // CUDA_ERROR_OUT_OF_MEMORY
      fake.state.eventsCreated++;
      out[0] = BigInt(fake.state.nextHandle++);
      return 0;
    },
    cuEventDestroy_v2: () => 0,
    cuEventRecord(event: number) {
      if (fake.state.failRecord) return 999;
      fake.state.recorded.push(Number(event));
      return 0;
    },
    cuEventQuery: (event: number) => (fake.state.notReady.has(Number(event)) ? 600 : 0),
    cuStreamWaitEvent: () => 0,
    cuMemAllocAsync() {
      fake.lastAllocation.value = fake.state.nextAddress;
      fake.state.nextAddress += 0x10_0000;
      return 0;
    },
    cuMemFreeAsync: () => 0,
    // Real host memory stands in for pinned memory, so that views of it work.
    cuMemHostAlloc(out: (bigint | null)[], bytes: number) {
      if (fake.state.failHostAlloc) return 2; // CUDA_ERROR_OUT_OF_MEMORY
      const memory = koffi().alloc('uint8', bytes);
      fake.state.hostMemory.push(memory);
      out[0] = koffi().address(memory) as bigint;
      return 0;
    },
    cuMemFreeHost: () => 0,
    cuMemcpyHtoDAsync_v2(_device: unknown, source: unknown, bytes: number) {
      const view =
        typeof source === 'bigint'
          ? new Uint8Array(koffi().view(source, bytes))
          : new Uint8Array((source as Uint8Array).buffer, (source as Uint8Array).byteOffset, bytes);
      fake.state.copies.push({ source, bytes: view.slice() });
      return 0;
    },
  };
  class Scratch {
    readonly address = 1;
    readAddress(): number {
      return fake.lastAllocation.value;
    }
  }
  const arena = new Scratch();
  const { CudaError } = await import('../errors.js');
  return {
    ...original,
    driver: () => api,
    check: (result: number, call: string) => {
      if (result !== 0) throw new CudaError(result, `CUresult ${result}`, call, 'from the double');
    },
    scratch: () => arena,
  };
});

import { Context, type Device } from '../context/device.js';
import { Stream } from '../stream/stream.js';
import { DeviceBuffer } from './memory.js';
import { MemoryPool } from './memory-pool.js';
import {
  copyHostToDevice,
  pinnedArrayBuffers,
  STAGED_UPLOAD_MAX_BYTES,
  STAGED_UPLOAD_MIN_BYTES,
  stagingPool,
} from './transfer.js';

const context = new Context({ ordinal: 0 } as unknown as Device, 77n);
const pool = Object.create(MemoryPool.prototype) as MemoryPool;
Object.assign(pool, { context, handle: 5n });
Object.defineProperty(context, 'memoryPool', { value: pool });
const stream = Stream.create({ context, name: 'uploads' });

/** Whether two byte arrays hold the same bytes (no diff of megabytes on a failure). */
function same(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.length).equals(
    Buffer.from(b.buffer, b.byteOffset, b.length),
  );
}

function filled(bytes: number, seed: number): Uint8Array {
  const out = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) out[i] = (seed * 31 + i * 7) & 0xff;
  return out;
}

beforeEach(() => {
  fake.state.copies.length = 0;
  fake.state.recorded.length = 0;
  fake.state.notReady.clear();
  fake.state.failRecord = false;
  fake.state.failEventCreate = false;
  fake.state.failHostAlloc = false;
  stagingPool.reclaim();
});

describe('uploads from typed arrays', () => {
  it('copies one of STAGED_UPLOAD_MIN_BYTES or more into pinned memory and queues the copy from there', () => {
    const buffer = DeviceBuffer.allocate(STAGED_UPLOAD_MIN_BYTES * 4, { stream });
    const source = new Float64Array(filled(STAGED_UPLOAD_MIN_BYTES * 2, 1).buffer);
    copyHostToDevice({ buffer }, source, { stream });
    expect(fake.state.copies).toHaveLength(1);
    const [copy] = fake.state.copies;
    expect(typeof copy!.source).toBe('bigint'); // staging memory, not the typed array
    expect(same(copy!.bytes, new Uint8Array(source.buffer))).toBe(true);
    expect(fake.state.recorded).toHaveLength(1); // the event that frees the staging buffer
    // The typed array is free for reuse at once: what was queued does not change.
    source.fill(0);
    expect(same(copy!.bytes, filled(STAGED_UPLOAD_MIN_BYTES * 2, 1))).toBe(true);
  });

  it('leaves smaller and larger ones to the driver, which reads the typed array', () => {
    const buffer = DeviceBuffer.allocate(STAGED_UPLOAD_MAX_BYTES + 8, { stream });
    const small = filled(STAGED_UPLOAD_MIN_BYTES - 1, 2);
    const large = new Uint8Array(STAGED_UPLOAD_MAX_BYTES + 8);
    copyHostToDevice({ buffer }, small, { stream });
    copyHostToDevice({ buffer }, large, { stream });
    expect(fake.state.copies.map((c) => c.source === small || c.source === large)).toEqual([
      true,
      true,
    ]);
    expect(fake.state.copies[0]!.source === small).toBe(true);
    expect(fake.state.recorded).toHaveLength(0);
  });

  it("leaves a typed array over pinned memory (a HostView's) to the driver: no staging", () => {
    const buffer = DeviceBuffer.allocate(STAGED_UPLOAD_MIN_BYTES * 2, { stream });
    const pinned = filled(STAGED_UPLOAD_MIN_BYTES * 2, 9);
    pinnedArrayBuffers.add(pinned.buffer);
    copyHostToDevice({ buffer }, pinned, { stream });
    expect(fake.state.copies[0]!.source === pinned).toBe(true);
    expect(fake.state.recorded).toHaveLength(0);
  });

  it('leaves an upload to the driver when no pinned memory can be allocated', () => {
    // A size class no other test uses, so that the pool has no idle buffer of it.
    const bytes = STAGED_UPLOAD_MIN_BYTES * 64;
    const buffer = DeviceBuffer.allocate(bytes, { stream });
    const source = filled(bytes, 10);
    fake.state.failHostAlloc = true;
    copyHostToDevice({ buffer }, source, { stream });
    expect(fake.state.copies[0]!.source === source).toBe(true);
    expect(fake.state.recorded).toHaveLength(0);
  });

  it('reuses a staging buffer only once the event after its copy has completed', () => {
    const bytes = STAGED_UPLOAD_MIN_BYTES * 8;
    const buffer = DeviceBuffer.allocate(bytes, { stream });
    copyHostToDevice({ buffer }, filled(bytes, 3), { stream });
    const first = fake.state.copies[0]!.source as bigint;
    fake.state.notReady.add(fake.state.recorded[0]!); // the GPU has not read it yet
    copyHostToDevice({ buffer }, filled(bytes, 4), { stream });
    const second = fake.state.copies[1]!.source as bigint;
    expect(second).not.toBe(first);
    fake.state.notReady.clear(); // both read now
    copyHostToDevice({ buffer }, filled(bytes, 5), { stream });
    const third = fake.state.copies[2]!.source as bigint;
    expect([first, second]).toContain(third);
    // Every queued copy held its own bytes when queued.
    fake.state.copies.forEach((copy, i) => {
      expect(same(copy.bytes, filled(bytes, 3 + i))).toBe(true);
    });
  });

  it('never reuses a staging buffer whose event could not be recorded', () => {
    const bytes = STAGED_UPLOAD_MIN_BYTES * 16;
    const buffer = DeviceBuffer.allocate(bytes, { stream });
    fake.state.failRecord = true;
    expect(() => copyHostToDevice({ buffer }, filled(bytes, 6), { stream })).toThrow(
      /cuEventRecord failed/,
    );
    const lost = fake.state.copies[0]!.source as bigint;
    fake.state.failRecord = false;
    for (let i = 0; i < 4; i++) copyHostToDevice({ buffer }, filled(bytes, 7 + i), { stream });
    expect(fake.state.copies.slice(1).map((c) => c.source)).not.toContain(lost);
  });

  it('holds at most maxPendingUploadBytes in staging the GPU has not read, then leaves uploads to the driver', () => {
    const bytes = STAGED_UPLOAD_MAX_BYTES;
    const buffer = DeviceBuffer.allocate(bytes, { stream });
    const source = filled(bytes, 8);
    const limit = stagingPool.maxPendingUploadBytes / bytes;
    for (let i = 0; i < limit + 2; i++) {
      copyHostToDevice({ buffer }, source, { stream });
      for (const event of fake.state.recorded) fake.state.notReady.add(event);
    }
    const staged = fake.state.copies.filter((c) => typeof c.source === 'bigint').length;
    expect(staged).toBe(limit);
    expect(stagingPool.pendingUploadBytes).toBe(stagingPool.maxPendingUploadBytes);
    expect(fake.state.copies.at(-1)!.source === source).toBe(true);
    fake.state.notReady.clear();
    for (let i = 0; i < limit; i++) stagingPool.reclaim();
    expect(stagingPool.pendingUploadBytes).toBe(0);
  });

  it('names cuEventCreate when the event after a staged copy cannot be made, and never reuses that buffer', () => {
    const bytes = STAGED_UPLOAD_MIN_BYTES;
    const buffer = DeviceBuffer.allocate(bytes, { stream });
    // Uploads the GPU has not read until one needs an event of its own: no free event is left.
    const created = fake.state.eventsCreated;
    for (let i = 0; fake.state.eventsCreated === created; i++) {
      copyHostToDevice({ buffer }, filled(bytes, 30 + i), { stream });
      for (const event of fake.state.recorded) fake.state.notReady.add(event);
    }
    fake.state.failEventCreate = true;
    expect(() => copyHostToDevice({ buffer }, filled(bytes, 12), { stream })).toThrow(
      /cuEventCreate failed/,
    );
    const lost = fake.state.copies.at(-1)!.source as bigint;
    fake.state.failEventCreate = false;
    fake.state.notReady.clear();
    for (let i = 0; i < 4; i++) copyHostToDevice({ buffer }, filled(bytes, 13 + i), { stream });
    expect(fake.state.copies.slice(-4).map((c) => c.source)).not.toContain(lost);
  });

  it('counts the whole staging buffer against maxPendingUploadBytes: never more pending than the bound', () => {
    const mib = 1024 * 1024;
    const buffer = DeviceBuffer.allocate(16 * mib, { stream });
    // 15 x 16 MiB + 8 MiB + 2 MiB leave 6 MiB under the bound: a 5 MiB upload's bytes would fit,
    // its staging buffer (8 MiB) would not.
    const sizes = [
      ...Array.from({ length: 15 }, () => 16 * mib),
      8 * mib,
      2 * mib,
      5 * mib,
      5 * mib,
    ];
    const before = fake.state.copies.length;
    for (const [i, bytes] of sizes.entries()) {
      copyHostToDevice({ buffer }, filled(bytes, 40 + i), { stream });
      for (const event of fake.state.recorded) fake.state.notReady.add(event);
      expect(stagingPool.pendingUploadBytes).toBeLessThanOrEqual(stagingPool.maxPendingUploadBytes);
    }
    const staged = fake.state.copies.slice(before).map((c) => typeof c.source === 'bigint');
    expect(staged).toEqual([...Array.from({ length: 17 }, () => true), false, false]);
    expect(stagingPool.pendingUploadBytes).toBe(250 * mib);
    fake.state.notReady.clear();
    for (let i = 0; i < 8; i++) stagingPool.reclaim();
    expect(stagingPool.pendingUploadBytes).toBe(0);
  });
});
