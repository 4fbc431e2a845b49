import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describeGpu, randomFloat32, rng } from '@cuda-tasks/testing';
import { afterAll, expect, it } from 'vitest';
import {
  CompileError,
  CudaArgumentError,
  CudaOutOfMemoryError,
  currentStream,
  Device,
  DeviceArray,
  DeviceBuffer,
  DisposedError,
  type DType,
  deviceCount,
  driverVersion,
  Event,
  launch,
  Module,
  Stream,
  waitForStream,
} from './index.js';

const fixtures = fileURLToPath(new URL('../test/fixtures/', import.meta.url));

describeGpu('cudadrv on the GPU', () => {
  const ptx = () => Module.fromPtx(readFileSync(`${fixtures}kernels.ptx`, 'utf8'));
  const streams: Stream[] = [];
  afterAll(() => {
    for (const s of streams) s.dispose();
  });

  it('queries devices', () => {
    expect(deviceCount()).toBeGreaterThan(0);
    const device = Device.get(0);
    expect(device.name()).toMatch(/NVIDIA/);
    const [major, minor] = device.computeCapability();
    expect(major).toBeGreaterThanOrEqual(5);
    expect(minor).toBeGreaterThanOrEqual(0);
    const { free, total } = device.memoryInfo();
    expect(total).toBe(device.totalMemory());
    expect(free).toBeGreaterThan(0);
    expect(free).toBeLessThanOrEqual(total);
    expect(device.uuid()).toMatch(
      /^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
    );
    expect(device.attribute(16)).toBe(device.multiprocessorCount());
    expect(device.multiprocessorCount()).toBeGreaterThan(0);
    expect(driverVersion()).toBeGreaterThanOrEqual(12000);
    expect(() => Device.get(deviceCount())).toThrow(CudaArgumentError);
  });

  it('creates non-blocking streams with priorities and wraps foreign handles', () => {
    const { least, greatest } = Device.get(0).primaryContext().streamPriorityRange();
    const high = Stream.create({ priority: greatest });
    streams.push(high);
    expect(high.priority()).toBe(greatest);
    expect(least).toBeGreaterThanOrEqual(greatest);
    const defaultStream = currentStream();
    expect(defaultStream.handle).not.toBe(0n); // never the legacy NULL stream
    const wrapped = Stream.wrap(high.handle);
    wrapped.dispose(); // does not destroy the native stream
    expect(high.query()).toBe(true);
    const owned = Stream.create();
    owned.dispose();
    owned.dispose(); // safe twice
    expect(() => owned.query()).toThrow(DisposedError);
  });

  it('runs a PTX kernel and an NVRTC kernel that match a CPU reference', async () => {
    const n = 100_003;
    const x = randomFloat32(n, 1);
    const module = ptx();
    const axpb = module.kernel('axpb_f32', [
      'float32*',
      'float32*',
      'float32',
      'float32',
      'uint64',
    ]);
    const dx = DeviceArray.fromHost(x);
    const dy = DeviceArray.empty('float32', n);
    launch(axpb, { grid: 256, block: 256 }, dy, dx, 2.5, -1, n);
    const y = await dy.toHost();
    for (let i = 0; i < n; i++) expect(y[i]).toBeCloseTo(Math.fround(2.5 * x[i]! - 1), 5);

    const compiled = Module.compile(
      `extern "C" __global__ void cube(double *out, const double *in, int n) {
         int i = blockIdx.x * blockDim.x + threadIdx.x;
         if (i < n) out[i] = in[i] * in[i] * in[i];
       }`,
    );
    const cube = compiled.kernel('cube', ['float64*', 'float64*', 'int32']);
    const input = Float64Array.from({ length: 1000 }, (_, i) => i / 7 - 50);
    const din = DeviceArray.fromHost(input);
    const dout = DeviceArray.empty('float64', 1000);
    const { blockSize } = cube.suggestBlockSize();
    expect(blockSize).toBeGreaterThan(0);
    launch(cube, { grid: Math.ceil(1000 / blockSize), block: blockSize }, dout, din, 1000);
    const out = await dout.toHost();
    for (let i = 0; i < 1000; i++) expect(out[i]).toBeCloseTo(input[i]! ** 3, 9);
    for (const a of [dx, dy, din, dout]) a.dispose();
  });

  it('marshals every scalar type correctly', async () => {
    const kernel = ptx().kernel('scalars', [
      'float64*',
      'int8',
      'uint8',
      'int16',
      'uint16',
      'int32',
      'uint32',
      'int64',
      'uint64',
      'float32',
      'float64',
    ]);
    const out = DeviceArray.zeros('float64', 10);
    const args = [
      -7,
      200,
      -30000,
      60000,
      -2_000_000_000,
      4_000_000_000,
      -(2 ** 40) - 3,
      2 ** 50 + 1,
      1.5,
      Math.PI,
    ];
    launch(kernel, { grid: 1, block: 1 }, out, ...args);
    expect(Array.from(await out.toHost())).toEqual(
      args.map((v, i) => (i === 8 ? Math.fround(v) : v)),
    );
    launch(kernel, { grid: 1, block: 1 }, out, 1, 2, 3, 4, 5, 6, -5n, 2n ** 63n, 0.25, -0.5);
    expect(Array.from(await out.toHost())).toEqual([1, 2, 3, 4, 5, 6, -5, 2 ** 63, 0.25, -0.5]);
    expect(() => launch(kernel, { grid: 1, block: 1 }, out, 1)).toThrow(/takes 11 arguments/);
    out.dispose();
  });

  it('reports compile errors with the compiler log', () => {
    let error: unknown;
    try {
      Module.compile('extern "C" __global__ void broken() { this is not cuda; }', {
        name: 'broken.cu',
      });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(CompileError);
    expect((error as CompileError).log).toMatch(/broken\.cu/);
  });

  it('round-trips random data of several sizes and every dtype', async () => {
    const next = rng(7);
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
      for (const n of [1, 1000, (1 << 20) + 3]) {
        const host =
          dtype === 'float64'
            ? Float64Array.from({ length: n }, () => next() * 2e6 - 1e6)
            : dtype === 'int32'
              ? Int32Array.from({ length: n }, () => Math.floor(next() * 2 ** 32) - 2 ** 31)
              : dtype === 'uint32'
                ? Uint32Array.from({ length: n }, () => Math.floor(next() * 2 ** 32))
                : dtype === 'int8'
                  ? Int8Array.from({ length: n }, () => Math.floor(next() * 256) - 128)
                  : dtype === 'uint8'
                    ? Uint8Array.from({ length: n }, () => Math.floor(next() * 256))
                    : dtype === 'float16'
                      ? Float32Array.from({ length: n }, () => Math.floor(next() * 2048) / 16) // exact in fp16
                      : dtype === 'bfloat16'
                        ? Float32Array.from({ length: n }, () => Math.floor(next() * 256) / 4) // exact in bf16
                        : Float32Array.from({ length: n }, () => next() * 2 - 1);
        const device = DeviceArray.fromHost(host, [n], { dtype });
        const copy = device.copy();
        const back = await copy.toHost();
        expect(back.constructor).toBe(host.constructor);
        expect(back.length).toBe(n);
        let mismatches = 0;
        for (let i = 0; i < n; i++) if (back[i] !== host[i]) mismatches++;
        expect(mismatches, `${dtype} x ${n}`).toBe(0);
        device.dispose();
        copy.dispose();
      }
    }
  });

  it('copies 2-D views with leading dimensions and fills', async () => {
    const rows = 37;
    const columns = 23;
    const host = randomFloat32(rows * columns, 3);
    const a = DeviceArray.fromHost(host, [rows, columns]);
    const block = a.block(5, 4, 10, 7);
    expect(block.leadingDimension).toBe(rows);
    expect(block.contiguous).toBe(false);
    const got = await block.toHost();
    for (let j = 0; j < 7; j++)
      for (let i = 0; i < 10; i++) expect(got[i + j * 10]).toBe(host[5 + i + (4 + j) * rows]);
    block.fill(3.5);
    const after = await a.toHost();
    for (let j = 0; j < columns; j++) {
      for (let i = 0; i < rows; i++) {
        const inside = i >= 5 && i < 15 && j >= 4 && j < 11;
        expect(after[i + j * rows]).toBe(inside ? 3.5 : host[i + j * rows]);
      }
    }
    const f64 = DeviceArray.full('float64', [3, 3], -0.125);
    expect(Array.from(await f64.toHost())).toEqual(new Array(9).fill(-0.125));
    const i8 = DeviceArray.full('int8', 5, -3);
    expect(Array.from(await i8.toHost())).toEqual([-3, -3, -3, -3, -3]);
    for (const array of [a, f64, i8]) array.dispose();
    await expect(block.toHost()).rejects.toThrow(DisposedError);
  });

  it('leaves pool usage where it started after 100,000 alloc/free pairs', async () => {
    const stream = currentStream();
    const pool = stream.context.memoryPool;
    await waitForStream(stream);
    // Held by buffers: what the pool counts as used, less the small blocks kept for reuse.
    const held = () => {
      const statistics = pool.statistics();
      return statistics.usedBytes - statistics.cachedBytes;
    };
    const before = held();
    for (let i = 0; i < 100_000; i++) {
      const buffer = DeviceBuffer.allocate(256 + (i % 7) * 512, { stream });
      buffer.dispose();
    }
    await waitForStream(stream);
    expect(held()).toBe(before);
    // One block per size class stays cached (7 classes of 512 B steps, 512..3584 B).
    expect(pool.statistics().cachedBytes).toBeGreaterThanOrEqual(14_336);
    expect(pool.statistics().cachedBytes).toBeLessThanOrEqual(4 * 1024 * 1024);
    const kept = DeviceBuffer.allocate(1 << 20);
    expect(held()).toBeGreaterThanOrEqual(before + (1 << 20));
    kept.dispose();
    await waitForStream(stream);
    expect(held()).toBe(before);
    // Released, the cached blocks leave the pool's used memory too.
    const usedWithCache = pool.statistics().usedBytes;
    const cached = pool.statistics().cachedBytes;
    pool.releaseCached();
    await waitForStream(stream);
    expect(pool.statistics().cachedBytes).toBe(0);
    expect(pool.statistics().usedBytes).toBe(usedWithCache - cached);
  });

  it('a small block reused from the cache is not overwritten before another stream has read it', async () => {
    const producer = Stream.create({ name: 'cache-producer' });
    const consumer = Stream.create({ name: 'cache-consumer' });
    // The consumer starts 5 ms late: a reuse of the producer's block that did not wait for
    // the consumer's read would overwrite the data before it is copied.
    launch(ptx().kernel('spin_ns', ['uint64']), { grid: 1, block: 1, stream: consumer }, 5_000_000);
    const rounds = 40;
    const copies: DeviceArray<'float32'>[] = [];
    let reused = 0;
    let previous: number | bigint | undefined;
    for (let round = 0; round < rounds; round++) {
      const values = Float32Array.from({ length: 64 }, (_, i) => round * 100 + i);
      const array = DeviceArray.fromHost(values, [64], { stream: producer });
      if (array.buffer.address === previous) reused++;
      previous = array.buffer.address;
      const copy = DeviceArray.empty('float32', [64], { stream: consumer });
      copy.copyFrom(array, { stream: consumer });
      copies.push(copy);
      array.dispose(); // cached on the producer, after the consumer's read
    }
    expect(reused).toBe(rounds - 1); // every round after the first reused the block
    for (let round = 0; round < rounds; round++) {
      const expected = Array.from({ length: 64 }, (_, i) => round * 100 + i);
      expect(Array.from(await copies[round]!.toHost({ stream: consumer }))).toEqual(expected);
      copies[round]!.dispose();
    }
    producer.dispose();
    consumer.dispose();
  });

  it('times a kernel of known length with events', () => {
    const spin = ptx().kernel('spin_ns', ['uint64']);
    const start = Event.create({ timing: true });
    const end = Event.create({ timing: true });
    start.record();
    launch(spin, { grid: 1, block: 1 }, 20_000_000); // 20 ms
    end.record();
    expect(end.query()).toBe(false);
    end.synchronize();
    expect(end.query()).toBe(true);
    const ms = Event.elapsedTime(start, end);
    expect(ms).toBeGreaterThanOrEqual(19.9);
    expect(ms).toBeLessThan(25);
    start.dispose();
    end.dispose();
    start.dispose();
  });

  it('orders a buffer written on one stream and read on another, with no host synchronize', async () => {
    const producer = Stream.create();
    const consumer = Stream.create();
    streams.push(producer, consumer);
    const fill = ptx().kernel('spin_then_fill', ['int32*', 'int32', 'uint64', 'uint64']);
    const n = 1 << 16;
    const data = DeviceArray.empty('int32', n, { stream: producer });
    launch(fill, { grid: 1, block: 256, stream: producer }, data, 42, n, 50_000_000); // 50 ms, then fill
    expect(producer.query()).toBe(false);
    const copy = data.copy({ stream: consumer }); // must wait for the producer, on the GPU
    expect(data.buffer.lastStream).toBe(producer); // the last writer
    expect(data.buffer.readers).toEqual([consumer]); // a read since
    const values = await copy.toHost({ stream: consumer });
    expect(values.every((v) => v === 42)).toBe(true);
    copy.dispose();
    data.dispose(); // freed on the producer stream, after the consumer's read
  });

  it('a read on another stream does not wait for a long read on the writer stream', async () => {
    const writer = Stream.create();
    const reader = Stream.create();
    streams.push(writer, reader);
    const fill = ptx().kernel('spin_then_fill', ['int32*', 'int32', 'uint64', 'uint64']);
    const spin = ptx().kernel('spin_ns', ['uint64']);
    const n = 1 << 16;
    const data = DeviceArray.empty('int32', n, { stream: writer });
    launch(fill, { grid: 1, block: 256, stream: writer }, data, 7, n, 0);
    writer.synchronize(); // the write is done
    // The writer stream now "reads" data for 300 ms: declared as a read, then a spin.
    data.useOn(writer, 'read');
    launch(spin, { grid: 1, block: 1, stream: writer }, 300_000_000);
    const copy = data.copy({ stream: reader }); // a read: must not queue behind the spin
    const values = await copy.toHost({ stream: reader });
    expect(writer.query()).toBe(false); // the reader finished while the writer still spins
    expect(values.every((v) => v === 7)).toBe(true);
    copy.dispose();
    data.dispose(); // freed on the writer stream, after its read
    writer.synchronize();
  });

  it('gives a clear out-of-memory error for an allocation larger than the GPU, and recovers', () => {
    const total = Device.get(0).totalMemory();
    let error: unknown;
    try {
      DeviceBuffer.allocate(total * 2);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(CudaOutOfMemoryError);
    expect((error as CudaOutOfMemoryError).status).toBe('CUDA_ERROR_OUT_OF_MEMORY');
    expect((error as Error).message).toMatch(/pool reserved .* in use .*device free/);
    const small = DeviceBuffer.allocate(1024);
    expect(small.pointer).not.toBe(0n);
    small.dispose();
  });

  it('rejects bad input before any native call', () => {
    const array = DeviceArray.zeros('float32', 4);
    array.dispose();
    array.dispose();
    expect(() => array.pointer).toThrow(DisposedError);
    const kernel = ptx().kernel('axpb_f32', [
      'float32*',
      'float32*',
      'float32',
      'float32',
      'uint64',
    ]);
    const f64 = DeviceArray.zeros('float64', 4);
    expect(() => launch(kernel, { grid: 1, block: 1 }, f64, f64, 1, 1, 4)).toThrow(
      /must be a DeviceArray of float32/,
    );
    expect(() => launch(kernel, { grid: 1, block: 1 }, array, array, 1, 1, 4)).toThrow(
      DisposedError,
    );
    expect(() => DeviceArray.fromHost(new Float32Array(6), [4, 2])).toThrow(CudaArgumentError);
    f64.dispose();
  });

  it.each([
    ['', []],
    [' (the issue engine’s issuer finds it)', ['--engine']],
  ])(
    'reports an illegal address as a CudaError and the process survives to report it%s',
    (_how, extra) => {
      const script = fileURLToPath(new URL('../test/illegal-address.ts', import.meta.url));
      const tsx = fileURLToPath(new URL('../../../node_modules/.bin/tsx', import.meta.url));
      const result = spawnSync(tsx, ['--conditions=@cuda-tasks/source', script, ...extra], {
        encoding: 'utf8',
        timeout: 60_000,
      });
      const last = result.stdout.trim().split('\n').pop() ?? '';
      expect(last.startsWith('{'), `child printed: ${result.stdout}\n${result.stderr}`).toBe(true);
      const report = JSON.parse(last);
      const child = `child printed: ${last}\n${result.stderr}`;
      expect(report.first?.name, child).toBe('CudaError');
      expect(report.first?.status, child).toBe('CUDA_ERROR_ILLEGAL_ADDRESS');
      expect(report.first?.message, child).toMatch(/sticky/);
      if (extra.length > 0) {
        expect(report.first?.call, child).toMatch(
          /cuStreamQuery on Stream\(.*\), made by the issue engine/,
        );
        // The issuer's query found it; the engine stops cleanly after.
        expect(report.engine?.queries, child).toBeGreaterThanOrEqual(1);
        expect(report.engine?.queriesLeft, child).toBe(0);
        expect(report.stop, child).toBeUndefined();
      }
      expect(report.later?.message, child).toMatch(
        /unusable since an earlier CUDA_ERROR_ILLEGAL_ADDRESS/,
      );
      expect(result.status, child).toBe(0);
    },
  );
});
