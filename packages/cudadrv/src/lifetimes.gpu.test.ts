/**
 * Lifetimes on the GPU (issue 14): blocks of another context, wrapped streams disposed with
 * work queued, disposed streams at the entries, and streams the GC takes. The multi-GPU test
 * runs where two or more devices answer and skips with a notice elsewhere.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describeGpu, gpuAvailable, thrown } from '@cuda-tasks/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CU_STREAM_NON_BLOCKING } from './ffi/cuda.js';
import {
  copyHostToDevice,
  currentContext,
  Device,
  DeviceArray,
  DeviceBuffer,
  DisposedError,
  deviceCount,
  driver,
  type Kernel,
  launch,
  Module,
  ModuleLoadError,
  onOutOfMemory,
  Stream,
  waitForStream,
} from './index.js';
import { Scratch } from './internal.js';

const fixtures = fileURLToPath(new URL('../test/fixtures/', import.meta.url));
const devices = gpuAvailable ? deviceCount() : 0;
if (gpuAvailable && devices < 2) {
  console.log(`[cuda-tasks] multi-GPU lifetime test skipped: this machine has ${devices} device`);
}

/** Collects garbage and lets finalizers run until `done()` holds; false if it never does. */
async function collectUntil(done: () => boolean): Promise<boolean> {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  for (let attempt = 0; attempt < 50; attempt++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 10));
    if (done()) return true;
  }
  return false;
}

describeGpu('lifetimes on the GPU (issue 14)', () => {
  let ptx: Module;
  let spinThenFill: Kernel;
  let spin: Kernel;
  beforeAll(() => {
    ptx = Module.fromPtx(readFileSync(`${fixtures}kernels.ptx`, 'utf8'));
    spin = ptx.kernel('spin_ns', ['uint64']);
    spinThenFill = ptx.kernel('spin_then_fill', ['int32*', 'int32', 'uint64', 'uint64']);
  });
  afterAll(() => ptx.dispose());

  it.runIf(devices >= 2)(
    'bug 1: a device-0 block last written on a device-1 stream goes back to device 0, not to that stream’s cache',
    async () => {
      const context0 = Device.get(0).primaryContext();
      const context1 = Device.get(1).primaryContext();
      const on0 = Stream.create({ context: context0, name: 'device 0' });
      const on1 = Stream.create({ context: context1, name: 'device 1' });
      try {
        const values = Int32Array.from({ length: 64 }, (_, i) => 3 * i + 1);
        const source = DeviceArray.fromHost(values, undefined, { stream: on1 }); // device 1
        const target = DeviceArray.zeros('int32', 64, { stream: on0 }); // device 0, 256 bytes
        await waitForStream(on0);
        const pool0 = context0.memoryPool;
        const pool1 = context1.memoryPool;
        const cached1 = pool1.statistics().cachedBytes;
        const cached0 = pool0.statistics().cachedBytes;
        // The device-1 stream writes the device-0 buffer (a peer copy), then it goes.
        target.copyFrom(source, { stream: on1 });
        // Read back on device 0: a reader of its own context besides the foreign writer.
        expect(Array.from(await target.toHost({ stream: on0 }))).toEqual(Array.from(values));
        const address = target.buffer.address;
        target.dispose();
        expect(pool1.statistics().cachedBytes).toBe(cached1);
        expect(pool0.statistics().cachedBytes).toBe(cached0);
        // The device-1 stream's next small buffer is device-1 memory (not the device-0 block),
        // and a round trip through it gives the values back.
        const next = DeviceArray.fromHost(values, undefined, { stream: on1 });
        expect(next.buffer.address).not.toBe(address);
        expect(next.buffer.context).toBe(context1);
        expect(Array.from(await next.toHost({ stream: on1 }))).toEqual(Array.from(values));
        next.dispose();
        source.dispose();
        // The device-0 block went back to device 0's pool once device 0 reached the free.
        context0.synchronize();
        context1.synchronize();
      } finally {
        on0.dispose();
        on1.dispose();
      }
    },
  );

  it('bug 1, one device: a block last written on another stream of its context is cached on that stream', async () => {
    const a = Stream.create({ name: 'writer a' });
    const b = Stream.create({ name: 'writer b' });
    try {
      const pool = a.context.memoryPool;
      const values = Int32Array.from({ length: 64 }, (_, i) => i * i);
      const first = DeviceArray.fromHost(values, undefined, { stream: a });
      const copy = DeviceArray.zeros('int32', 64, { stream: a });
      const cachedBefore = pool.statistics().cachedBytes;
      copy.copyFrom(first, { stream: b }); // b writes it last
      const address = copy.buffer.address;
      copy.dispose();
      expect(pool.statistics().cachedBytes).toBe(cachedBefore + 512);
      // b's next buffer of that size class is the block, ordered after the copy by b itself.
      const reused = DeviceArray.zeros('int32', 64, { stream: b });
      expect(reused.buffer.address).toBe(address);
      reused.copyFrom(first, { stream: b });
      expect(Array.from(await reused.toHost({ stream: b }))).toEqual(Array.from(values));
      reused.dispose();
      first.dispose();
    } finally {
      a.dispose();
      b.dispose();
    }
  });

  it('bug 2: a wrapped stream disposed with work queued: a read elsewhere waits for that work', async () => {
    const context = currentContext();
    context.makeCurrent();
    const raw: (bigint | null)[] = [null];
    expect(driver().cuStreamCreateWithPriority(raw, CU_STREAM_NON_BLOCKING, 0)).toBe(0);
    const handle = raw[0] as bigint;
    const foreign = Stream.wrap(handle, context, 'foreign');
    const reader = Stream.create({ name: 'reader' });
    try {
      const n = 1 << 16;
      const data = DeviceArray.zeros('int32', n, { stream: foreign });
      launch(spinThenFill, { grid: 1, block: 256, stream: foreign }, data, 55, n, 100_000_000);
      foreign.dispose(); // the wrapper only: the kernel runs on for 100 ms
      const host = await data.toHost({ stream: reader });
      expect(host.every((value) => value === 55)).toBe(true);
      // A small buffer last written there: its free waits for the tail, on the default stream.
      const small = DeviceArray.zeros('int32', 16, { stream: reader });
      const foreign2 = Stream.wrap(handle, context, 'foreign again');
      launch(spinThenFill, { grid: 1, block: 32, stream: foreign2 }, small, 9, 16, 50_000_000);
      foreign2.dispose();
      small.dispose();
      data.dispose();
      await waitForStream(context.defaultStream);
    } finally {
      reader.dispose();
      // The stream's owner destroys it.
      expect(driver().cuStreamSynchronize(handle)).toBe(0);
      expect(driver().cuStreamDestroy_v2(handle)).toBe(0);
    }
  });

  it('bug 5: a disposed stream is refused with a DisposedError naming it', async () => {
    const gone = Stream.create({ name: 'gone' });
    gone.dispose();
    const live = Stream.create({ name: 'live' });
    try {
      const values = Int32Array.from({ length: 256 }, (_, i) => i);
      const data = DeviceArray.fromHost(values, undefined, { stream: live });
      const message = 'Stream(gone) has been disposed and cannot be used';
      const refusals = [
        thrown(() => launch(spinThenFill, { grid: 1, block: 32, stream: gone }, data, 1, 256, 0)),
        thrown(() => data.copyFromHost(new Int32Array(256), { stream: gone })),
        thrown(() =>
          copyHostToDevice({ buffer: data.buffer }, new Int32Array(256), { stream: gone }),
        ),
        thrown(() => data.fill(7, { stream: gone })),
        thrown(() => DeviceBuffer.allocate(64, { stream: gone })),
        thrown(() => gone.waitFor(live)),
        await data.toHost({ stream: gone }).then(
          () => new Error('resolved'),
          (error: Error) => error,
        ),
        await waitForStream(gone).then(
          () => new Error('resolved'),
          (error: Error) => error,
        ),
      ];
      for (const error of refusals) {
        expect(error).toBeInstanceOf(DisposedError);
        expect(error.message).toBe(message);
      }
      // Nothing reached the data: it is what it was, and its last stream is still `live`.
      expect(data.buffer.lastStream).toBe(live);
      expect(Array.from(await data.toHost({ stream: live }))).toEqual(Array.from(values));
      // Waiting for a disposed owned stream's work needs nothing: its dispose drained it.
      live.waitFor(gone);
      data.dispose();
    } finally {
      live.dispose();
    }
  });

  it('bug 6: a stream dropped without dispose is collected, and its cached blocks go back', async () => {
    const pool = currentContext().memoryPool;
    const cachedBefore = pool.statistics().cachedBytes;
    const made: { ref?: WeakRef<Stream> } = {};
    (function dropped() {
      const stream = Stream.create({ name: 'dropped' });
      for (const size of [256, 1024, 4096, 65536])
        DeviceBuffer.allocate(size, { stream }).dispose();
      currentContext().defaultStream.waitFor(stream); // its hand-off event exists too
      made.ref = new WeakRef(stream);
    })();
    expect(pool.statistics().cachedBytes).toBe(cachedBefore + 512 + 1024 + 4096 + 65536);
    const released = await collectUntil(() => pool.statistics().cachedBytes === cachedBefore);
    expect(released).toBe(true);
    expect(made.ref!.deref()).toBeUndefined();
  });

  it('a PTX that fails to load: a ModuleLoadError whose log is the JIT log', () => {
    // The fixture's header (which loads), then a body ptxas rejects.
    const broken = [
      '.version 9.0',
      '.target sm_90',
      '.address_size 64',
      '.visible .entry broken() {',
      '  not_an_instruction %r1;',
      '  ret;',
      '}',
    ].join('\n');
    const error = thrown(() => Module.fromPtx(broken));
    expect(ModuleLoadError.isInstance(error)).toBe(true);
    const loadError = error as ModuleLoadError;
    expect(loadError.status).toBe('CUDA_ERROR_INVALID_PTX');
    expect(loadError.call).toBe('cuModuleLoadDataEx');
    // ptxas names the offending line (5) in its log.
    expect(loadError.log).toMatch(/line 5/);
    expect(loadError.log).toMatch(/error/i);
    expect(loadError.message).toContain(loadError.log);
    // The well-formed fixture still loads.
    expect(ptx.disposed).toBe(false);
  });

  it('allocateAsync out of memory: the wait for pending frees leaves the event loop running', async () => {
    const context = currentContext();
    const pool = context.memoryPool;
    /** Sets a CUmemPool_attribute of int type (the reuse policies). */
    const setReuse = (attribute: number, value: number) => {
      const arena = new Scratch(16);
      arena.i32[0] = value;
      expect(driver().cuMemPoolSetAttribute(pool.handle, attribute, arena.pointer)).toBe(0);
    };
    // CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC (2) and _INTERNAL_DEPENDENCIES (3) off: memory
    // freed on one stream is not handed to another before the free has run, so the second
    // allocation below runs out of memory until the free completes.
    setReuse(2, 0);
    setReuse(3, 0);
    const a = Stream.create({ name: 'frees late' });
    const b = Stream.create({ name: 'allocates' });
    let outOfMemory = 0;
    const off = onOutOfMemory(() => outOfMemory++);
    try {
      await waitForStream(context.defaultStream);
      context.synchronize();
      pool.trim(0);
      const MiB = 1024 * 1024;
      const size = Math.floor((context.device.memoryInfo().free * 0.7) / MiB) * MiB;
      const first = DeviceBuffer.allocate(size, { stream: a });
      launch(spin, { grid: 1, block: 1, stream: a }, 300_000_000); // 300 ms before the free
      first.dispose();
      let ticks = 0;
      const timer = setInterval(() => ticks++, 5);
      const started = performance.now();
      const second = await DeviceBuffer.allocateAsync(size, { stream: b });
      const waited = performance.now() - started;
      clearInterval(timer);
      expect(outOfMemory).toBe(1);
      expect(second.byteLength).toBe(size);
      // The allocation had to wait for the spin, and timers fired meanwhile: the loop ran.
      expect(waited).toBeGreaterThan(100);
      expect(ticks).toBeGreaterThan(5);
      second.dispose();
      await waitForStream(b);
    } finally {
      off();
      setReuse(2, 1);
      setReuse(3, 1);
      a.dispose();
      b.dispose();
    }
  });
});
