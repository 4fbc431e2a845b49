import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describeGpu } from '@cuda-tasks/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE,
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
  CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
  CU_MEMPOOL_ATTR_USED_MEM_HIGH,
  CU_STREAM_NON_BLOCKING,
} from './ffi/cuda.js';
import {
  CudaError,
  currentContext,
  currentStream,
  Device,
  DeviceArray,
  DeviceBuffer,
  DisposedError,
  type DType,
  driver,
  Event,
  type Kernel,
  launch,
  Module,
  PinnedHostBuffer,
  Stream,
  waitForStream,
} from './index.js';
import { Scratch } from './internal.js';

const fixtures = fileURLToPath(new URL('../test/fixtures/', import.meta.url));
const MiB = 1024 * 1024;
const KEEP_EVERYTHING = 0xffff_ffff_ffff_ffffn;

/** A pool attribute read straight from the driver, into an arena of our own. */
function poolAttribute(handle: bigint, attribute: number): bigint {
  const out = new Scratch(16);
  const result = driver().cuMemPoolGetAttribute(handle, attribute, out.pointer);
  expect(result).toBe(0);
  return out.u64[0]!;
}

/** Resets a pool high-water mark (the driver accepts only 0 for them). */
function resetPoolWatermark(handle: bigint, attribute: number): void {
  const zero = new Scratch(16);
  zero.u64[0] = 0n;
  expect(driver().cuMemPoolSetAttribute(handle, attribute, zero.pointer)).toBe(0);
}

/** The raw cuStreamGetFlags answer for a stream. */
function streamFlags(stream: Stream): number {
  const flags = [0];
  expect(driver().cuStreamGetFlags(stream.handle, flags)).toBe(0);
  return flags[0]!;
}

/** Next macrotask turn (setImmediate), for FinalizationRegistry callbacks and the young-buffer flush. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describeGpu('cudadrv on the GPU: more coverage', () => {
  // Loaded in beforeAll: the suite's body also runs (to list its skipped tests) without a GPU.
  let ptx: Module;
  let compiled: Module;
  let spin: Kernel;
  let spinThenFill: Kernel;
  let addOne: Kernel;
  let bounded: Kernel;
  beforeAll(() => {
    ptx = Module.fromPtx(readFileSync(`${fixtures}kernels.ptx`, 'utf8'));
    spin = ptx.kernel('spin_ns', ['uint64']);
    spinThenFill = ptx.kernel('spin_then_fill', ['int32*', 'int32', 'uint64', 'uint64']);
    compiled = Module.compile(
      `extern "C" __global__ void add_one(int *out, const int *in, unsigned long long n) {
         unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         if (i < n) out[i] = in[i] + 1;
       }
       extern "C" __global__ void __launch_bounds__(96) bounded(float *out) {
         out[threadIdx.x] = (float)threadIdx.x;
       }`,
      { name: 'more.cu' },
    );
    addOne = compiled.kernel('add_one', ['int32*', 'const int32*', 'uint64']);
    bounded = compiled.kernel('bounded', ['float32*']);
  });
  const streams: Stream[] = [];
  afterAll(() => {
    for (const s of streams) s.dispose();
    compiled.dispose();
    ptx.dispose();
  });

  it('100,000 alloc/free pairs past the block cache leave the pool where it started', async () => {
    const stream = currentStream();
    const pool = stream.context.memoryPool;
    await waitForStream(stream);
    stream.synchronize();
    const before = pool.statistics();
    resetPoolWatermark(pool.handle, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH);
    resetPoolWatermark(pool.handle, CU_MEMPOOL_ATTR_USED_MEM_HIGH);
    // All above the 64 KiB block-cache limit: every pair is a cuMemAllocAsync + cuMemFreeAsync.
    const sizes = [128 * 1024, 64 * 1024 + 1, 200_000, MiB, 2 * MiB + 512, 3 * MiB + 7];
    const pairs = 100_000;
    let checked = 0;
    for (let i = 0; i < pairs; i++) {
      const size = sizes[i % sizes.length]!;
      const buffer = DeviceBuffer.allocate(size, { stream });
      if (i % 9973 === 0) {
        // While it lives, the pool counts it as used (not a cached block).
        expect(pool.statistics().usedBytes).toBeGreaterThanOrEqual(before.usedBytes + size);
        checked++;
      }
      buffer.dispose();
    }
    expect(checked).toBeGreaterThan(5);
    stream.synchronize();
    const after = pool.statistics();
    expect(after.usedBytes).toBe(before.usedBytes);
    // None of it went to the JS block cache.
    expect(after.cachedBytes).toBe(before.cachedBytes);
    // The pool really was used: the used high-water mark saw the largest buffer...
    expect(after.usedHighBytes).toBeGreaterThanOrEqual(before.usedBytes + 3 * MiB + 7);
    // ...and freed blocks were reused on the stream: reservations grew by a few MiB, not by
    // the ~110 GiB that 100,000 allocations would take without reuse.
    expect(after.reservedHighBytes - before.reservedBytes).toBeLessThanOrEqual(256 * MiB);
    expect(after.reservedBytes - before.reservedBytes).toBeLessThanOrEqual(256 * MiB);
  });

  it('hands a buffer from a busy stream to another, without blocking the host', async () => {
    const a = Stream.create({ name: 'handoff-a' });
    const b = Stream.create({ name: 'handoff-b' });
    streams.push(a, b);
    const n = 1 << 16;
    const data = DeviceArray.zeros('int32', n, { stream: a });
    // Warm-up: the kernel is loaded (lazy module loading) before the part that is timed.
    const warm = DeviceArray.zeros('int32', 256, { stream: b });
    launch(addOne, { grid: 1, block: 256, stream: b }, warm, warm, 256);
    expect(Array.from(await warm.toHost({ stream: b }))).toEqual(new Array(256).fill(1));
    warm.dispose();
    a.synchronize(); // the zeros are in place before the test proper
    launch(spinThenFill, { grid: 1, block: 256, stream: a }, data, 1234, n, 100_000_000); // 100 ms
    const issued = performance.now();
    // Two reads on b: a device-to-device copy and a kernel that reads `data`.
    const copy = data.copy({ stream: b });
    const plusOne = DeviceArray.empty('int32', n, { stream: b });
    launch(addOne, { grid: Math.ceil(n / 256), block: 256, stream: b }, plusOne, data, n);
    const issuing = performance.now() - issued;
    // The calls returned while the producer still runs: the host did not wait for it...
    expect(a.query()).toBe(false);
    expect(issuing).toBeLessThan(50);
    // ...and b is held back on the GPU until the producer is done.
    expect(b.query()).toBe(false);
    const copied = await copy.toHost({ stream: b });
    const incremented = await plusOne.toHost({ stream: b });
    // Zeros would mean b read before the producer's fill.
    expect(copied.every((v) => v === 1234)).toBe(true);
    expect(incremented.every((v) => v === 1235)).toBe(true);
    for (const array of [copy, plusOne, data]) array.dispose();
  });

  it('[Symbol.dispose] disposes every owning type, and twice is safe', async () => {
    const stream = currentStream();
    const pool = stream.context.memoryPool;
    stream.synchronize();
    const usedBefore = pool.statistics().usedBytes;

    const buffer = DeviceBuffer.allocate(4 * MiB); // past the block cache: a real pool free
    expect(pool.statistics().usedBytes).toBeGreaterThanOrEqual(usedBefore + 4 * MiB);
    expect(buffer.disposed).toBe(false);
    buffer[Symbol.dispose]();
    expect(buffer.disposed).toBe(true);
    expect(() => buffer.pointer).toThrow(DisposedError);
    buffer[Symbol.dispose]();
    buffer.dispose();
    stream.synchronize();
    expect(pool.statistics().usedBytes).toBe(usedBefore);

    const array = DeviceArray.zeros('float32', [512, 1024]);
    const view = array.reshape([1024, 512]);
    view[Symbol.dispose](); // a view owns nothing
    expect(array.disposed).toBe(false);
    array[Symbol.dispose]();
    expect(array.disposed).toBe(true);
    expect(view.disposed).toBe(true);
    array[Symbol.dispose]();
    await expect(array.toHost()).rejects.toThrow(DisposedError);
    stream.synchronize();
    expect(pool.statistics().usedBytes).toBe(usedBefore);

    const owned = Stream.create();
    owned[Symbol.dispose]();
    expect(owned.disposed).toBe(true);
    expect(() => owned.query()).toThrow(DisposedError);
    owned[Symbol.dispose]();

    const event = Event.create();
    event.record();
    event[Symbol.dispose]();
    expect(() => event.query()).toThrow(DisposedError);
    event[Symbol.dispose]();

    const pinned = PinnedHostBuffer.allocate(4096);
    pinned[Symbol.dispose]();
    expect(pinned.disposed).toBe(true);
    pinned[Symbol.dispose]();

    const module = Module.fromPtx(readFileSync(`${fixtures}kernels.ptx`, 'utf8'));
    module[Symbol.dispose]();
    expect(module.disposed).toBe(true);
    module[Symbol.dispose]();
  });

  it('sets the pool release threshold, as the driver reads it back, and it takes effect', () => {
    const stream = currentStream();
    const pool = stream.context.memoryPool;
    // The default keeps everything.
    expect(poolAttribute(pool.handle, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)).toBe(KEEP_EVERYTHING);
    try {
      pool.setReleaseThreshold(123 * MiB + 5);
      expect(poolAttribute(pool.handle, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)).toBe(
        BigInt(123 * MiB + 5),
      );
      pool.setReleaseThreshold(2n ** 40n);
      expect(poolAttribute(pool.handle, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)).toBe(2n ** 40n);
      pool.setReleaseThreshold(Infinity);
      expect(poolAttribute(pool.handle, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)).toBe(KEEP_EVERYTHING);

      // Effect: freed memory stays reserved under "keep everything"...
      stream.synchronize();
      pool.trim(0);
      const base = pool.statistics().reservedBytes;
      const size = 256 * MiB;
      DeviceBuffer.allocate(size, { stream }).dispose();
      stream.synchronize();
      expect(pool.statistics().reservedBytes).toBeGreaterThanOrEqual(base + size);
      // ...and goes back to the system at the next synchronize with a threshold of 0.
      pool.setReleaseThreshold(0);
      expect(poolAttribute(pool.handle, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)).toBe(0n);
      DeviceBuffer.allocate(size, { stream }).dispose();
      stream.synchronize();
      expect(pool.statistics().reservedBytes).toBeLessThan(base + size);
    } finally {
      pool.setReleaseThreshold(Infinity);
    }
  });

  it('Stream.waitEvent orders a read on one stream after a write on another', async () => {
    const s1 = Stream.create({ name: 'wait-s1' });
    const s2 = Stream.create({ name: 'wait-s2' });
    const s3 = Stream.create({ name: 'wait-control' });
    streams.push(s1, s2, s3);
    const n = 1 << 14;
    const bytes = n * 4;
    const data = DeviceArray.zeros('int32', n, { stream: s1 });
    const ordered = DeviceArray.empty('int32', n, { stream: s2 });
    const unordered = DeviceArray.empty('int32', n, { stream: s3 });
    s1.synchronize();
    s2.synchronize();
    s3.synchronize();
    const event = Event.create();
    launch(spinThenFill, { grid: 1, block: 256, stream: s1 }, data, 77, n, 100_000_000); // 100 ms
    event.record(s1);
    s2.waitEvent(event);
    // Raw copies that bypass the buffers' own hand-off: only the event orders them.
    const api = driver();
    s1.context.makeCurrent();
    expect(api.cuMemcpyDtoDAsync_v2(ordered.pointer, data.pointer, bytes, s2.ffiHandle)).toBe(0);
    expect(api.cuMemcpyDtoDAsync_v2(unordered.pointer, data.pointer, bytes, s3.ffiHandle)).toBe(0);
    expect(s1.query()).toBe(false);
    expect(s2.query()).toBe(false); // held by the event
    const got = await ordered.toHost({ stream: s2 });
    expect(got.every((v) => v === 77)).toBe(true);
    // The control copy, not ordered after the fill, read the zeros: the check above can fail.
    const control = await unordered.toHost({ stream: s3 });
    expect(control.some((v) => v !== 77)).toBe(true);
    event.dispose();
    for (const array of [data, ordered, unordered]) array.dispose();
  });

  it('events have timing off by default; timing events measure kernels of known length', () => {
    const stream = currentStream();
    const plainStart = Event.create();
    const plainEnd = Event.create();
    expect(plainStart.timing).toBe(false);
    plainStart.record(stream);
    launch(spin, { grid: 1, block: 1, stream }, 1_000_000);
    plainEnd.record(stream);
    plainEnd.synchronize();
    let error: unknown;
    try {
      Event.elapsedTime(plainStart, plainEnd);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(CudaError);
    expect((error as CudaError).status).toBe('CUDA_ERROR_INVALID_HANDLE');
    expect((error as CudaError).call).toBe('cuEventElapsedTime');

    const start = Event.create({ timing: true });
    const middle = Event.create({ timing: true });
    const end = Event.create({ timing: true });
    expect(start.timing).toBe(true);
    const hostStart = performance.now();
    start.record(stream);
    launch(spin, { grid: 1, block: 1, stream }, 10_000_000); // 10 ms
    middle.record(stream);
    launch(spin, { grid: 1, block: 1, stream }, 30_000_000); // 30 ms
    end.record(stream);
    end.synchronize();
    const hostMs = performance.now() - hostStart;
    const first = Event.elapsedTime(start, middle);
    const second = Event.elapsedTime(middle, end);
    const total = Event.elapsedTime(start, end);
    expect(first).toBeGreaterThanOrEqual(9.9);
    expect(first).toBeLessThan(15);
    expect(second).toBeGreaterThanOrEqual(29.9);
    expect(second).toBeLessThan(35);
    expect(total).toBeCloseTo(first + second, 1);
    // The host clock saw at least as long as the GPU's own measurement.
    expect(hostMs).toBeGreaterThanOrEqual(total - 0.5);
    for (const event of [plainStart, plainEnd, start, middle, end]) event.dispose();
  });

  it('device and context synchronize return only once every stream is idle', () => {
    const device = Device.get(0);
    const context = device.primaryContext();
    const s = Stream.create({ name: 'sync' });
    streams.push(s);
    let started = performance.now();
    launch(spin, { grid: 1, block: 1, stream: s }, 100_000_000); // 100 ms
    expect(s.query()).toBe(false);
    device.synchronize();
    expect(performance.now() - started).toBeGreaterThanOrEqual(99);
    expect(s.query()).toBe(true);
    expect(driver().cuStreamQuery(s.ffiHandle)).toBe(0);

    started = performance.now();
    launch(spin, { grid: 1, block: 1, stream: s }, 100_000_000);
    launch(spin, { grid: 1, block: 1, stream: context.defaultStream }, 60_000_000);
    expect(s.query()).toBe(false);
    expect(context.defaultStream.query()).toBe(false);
    context.synchronize();
    expect(performance.now() - started).toBeGreaterThanOrEqual(99);
    expect(s.query()).toBe(true);
    expect(context.defaultStream.query()).toBe(true);
  });

  it('creates non-blocking streams, the context default stream included', () => {
    const created = Stream.create();
    const prioritized = Stream.create({
      priority: currentContext().streamPriorityRange().greatest,
    });
    const blocking = Stream.create({ blocking: true });
    streams.push(created, prioritized, blocking);
    expect(streamFlags(created) & CU_STREAM_NON_BLOCKING).toBe(CU_STREAM_NON_BLOCKING);
    expect(streamFlags(prioritized) & CU_STREAM_NON_BLOCKING).toBe(CU_STREAM_NON_BLOCKING);
    expect(streamFlags(currentContext().defaultStream) & CU_STREAM_NON_BLOCKING).toBe(
      CU_STREAM_NON_BLOCKING,
    );
    expect(currentStream()).toBe(currentContext().defaultStream);
    // The control: asked for, a blocking stream is reported as one.
    expect(streamFlags(blocking) & CU_STREAM_NON_BLOCKING).toBe(0);
  });

  it('zeros() reads back as 0 for every dtype, also over reused dirty memory', async () => {
    const stream = currentStream();
    const dtypes: DType[] = [
      'float32',
      'float64',
      'int32',
      'uint32',
      'int8',
      'uint8',
      'float16',
      'bfloat16',
    ];
    for (const dtype of dtypes) {
      // A small block goes to the stream's cache on dispose and comes back for the next
      // allocation of its size: zeros() must clear what `full` left there.
      const n = 3000;
      const dirty = DeviceArray.full(dtype, n, 3, { stream });
      expect(Array.from(await dirty.toHost({ stream })).every((v) => v === 3)).toBe(true);
      const address = dirty.buffer.address;
      dirty.dispose();
      const small = DeviceArray.zeros(dtype, n, { stream });
      expect(small.buffer.address).toBe(address);
      const values = await small.toHost({ stream });
      expect(values.length).toBe(n);
      expect(Array.from(values).every((v) => v === 0)).toBe(true);
      small.dispose();
      // A larger one, past the cache, shaped 2-D.
      const large = DeviceArray.zeros(dtype, [1031, 1029], { stream });
      const big = await large.toHost({ stream });
      expect(big.length).toBe(1031 * 1029);
      let nonzero = 0;
      for (let i = 0; i < big.length; i++) if (big[i] !== 0) nonzero++;
      expect(nonzero, dtype).toBe(0);
      large.dispose();
    }
  });

  it('suggests a block size that is a multiple of the warp size within the kernel limit', async () => {
    const device = Device.get(0);
    const warp = [0];
    expect(driver().cuDeviceGetAttribute(warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, device.handle)).toBe(
      0,
    );
    expect(warp[0]).toBe(32);
    for (const kernel of [addOne, bounded, spin, spinThenFill]) {
      const limit = [0];
      expect(
        driver().cuFuncGetAttribute(limit, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, kernel.handle),
      ).toBe(0);
      expect(kernel.maxThreadsPerBlock()).toBe(limit[0]);
      const { blockSize, minGridSize } = kernel.suggestBlockSize();
      expect(blockSize, kernel.name).toBeGreaterThan(0);
      expect(blockSize % warp[0]!, kernel.name).toBe(0);
      expect(blockSize, kernel.name).toBeLessThanOrEqual(limit[0]!);
      expect(minGridSize, kernel.name).toBeGreaterThan(0);
      const capped = kernel.suggestBlockSize(0, 64);
      expect(capped.blockSize).toBeLessThanOrEqual(64);
      expect(capped.blockSize % warp[0]!).toBe(0);
    }
    // __launch_bounds__(96) is what the driver reports, and bounds the suggestion.
    expect(bounded.maxThreadsPerBlock()).toBe(96);
    const { blockSize } = bounded.suggestBlockSize();
    expect(blockSize).toBeLessThanOrEqual(96);
    // The suggestion launches: every thread wrote its index.
    const out = DeviceArray.zeros('float32', blockSize);
    launch(bounded, { grid: 1, block: blockSize }, out);
    expect(Array.from(await out.toHost())).toEqual(Array.from({ length: blockSize }, (_, i) => i));
    out.dispose();
  });

  it('device attributes match the raw driver answer', () => {
    const device = Device.get(0);
    const raw = (attribute: number) => {
      const value = [0];
      expect(driver().cuDeviceGetAttribute(value, attribute, device.handle)).toBe(0);
      return value[0]!;
    };
    expect(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).toBe(16);
    const sms = raw(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    expect(sms).toBeGreaterThan(0);
    expect(device.attribute(16)).toBe(sms);
    expect(device.multiprocessorCount()).toBe(sms);
    expect(device.attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE)).toBe(
      raw(CU_DEVICE_ATTRIBUTE_WARP_SIZE),
    );
    const [major, minor] = device.computeCapability();
    expect(major).toBe(raw(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR));
    expect(minor).toBe(raw(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
  });

  it('frees a forgotten buffer through the FinalizationRegistry', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    expect(typeof gc).toBe('function');
    const stream = currentStream();
    const pool = stream.context.memoryPool;
    // First let the finalizer free what earlier tests left behind, so the baseline holds still.
    for (let i = 0; i < 3; i++) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    stream.synchronize();
    const usedBefore = pool.statistics().usedBytes;
    const size = 8 * MiB; // past the block cache: the finalizer's free goes to the pool
    // Allocated in a function of its own, so that no reference survives it.
    (function forget() {
      const buffer = DeviceBuffer.allocate(size, { stream });
      buffer.useOn(stream);
    })();
    expect(pool.statistics().usedBytes).toBeGreaterThanOrEqual(usedBefore + size);
    // A buffer is registered with the finalizer once it survives its first turn.
    await turn();
    await turn();
    let used = pool.statistics().usedBytes;
    for (let attempt = 0; attempt < 50 && used !== usedBefore; attempt++) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 10));
      stream.synchronize();
      used = pool.statistics().usedBytes;
    }
    expect(used).toBe(usedBefore);
  });
});
