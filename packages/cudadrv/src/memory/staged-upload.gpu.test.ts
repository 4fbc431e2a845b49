import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describeGpu } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DeviceArray, HostView, type Kernel, launch, Module, Stream } from '../index.js';
import {
  copyHostToDevice,
  STAGED_UPLOAD_MAX_BYTES,
  STAGED_UPLOAD_MIN_BYTES,
  stagingPool,
} from './transfer.js';

const fixtures = fileURLToPath(new URL('../../test/fixtures/', import.meta.url));
const MiB = 1024 * 1024;

function pattern(bytes: number, seed: number): Uint8Array {
  const out = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) out[i] = (seed * 131 + i * 7 + (i >> 9)) & 0xff;
  return out;
}

function same(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.length).equals(
    Buffer.from(b.buffer, b.byteOffset, b.length),
  );
}

describeGpu('uploads from typed arrays, staged in pinned memory of our own', () => {
  let ptx: Module;
  let spin: Kernel;
  const streams: Stream[] = [];
  beforeAll(() => {
    ptx = Module.fromPtx(readFileSync(`${fixtures}kernels.ptx`, 'utf8'));
    spin = ptx.kernel('spin_ns', ['uint64']);
  });
  afterAll(() => {
    for (const s of streams) s.dispose();
    ptx.dispose();
  });

  it('an upload behind a 100 ms kernel returns at once, and the device gets the bytes of the call', async () => {
    const stream = Stream.create({ name: 'busy' });
    streams.push(stream);
    const bytes = 4 * MiB;
    const host = pattern(bytes, 1);
    const target = DeviceArray.empty('uint8', bytes, { stream });
    launch(spin, { grid: 1, block: 1, stream }, 100_000_000); // 100 ms
    const start = performance.now();
    target.copyFromHost(host, { stream });
    const callMs = performance.now() - start;
    host.fill(0); // the typed array is free for reuse once the call returns
    const back = await target.toHost({ stream });
    console.log(
      `[staged upload] ${bytes} bytes behind a 100 ms kernel: the call took ${callMs.toFixed(3)} ms`,
    );
    expect(callMs).toBeLessThan(20);
    expect(same(back, pattern(bytes, 1))).toBe(true);
    target.dispose();
  });

  it('64 uploads queued behind a kernel on two streams each land their own bytes (no staging reused early)', async () => {
    const a = Stream.create({ name: 'uploads a' });
    const b = Stream.create({ name: 'uploads b' });
    streams.push(a, b);
    const bytes = 64 * 1024 + 8;
    launch(spin, { grid: 1, block: 1, stream: a }, 30_000_000);
    launch(spin, { grid: 1, block: 1, stream: b }, 10_000_000);
    const targets: DeviceArray<'uint8'>[] = [];
    for (let i = 0; i < 64; i++) {
      const stream = i % 2 === 0 ? a : b;
      const target = DeviceArray.empty('uint8', bytes, { stream });
      target.copyFromHost(pattern(bytes, 100 + i), { stream });
      targets.push(target);
    }
    expect(stagingPool.pendingUploadBytes).toBeGreaterThan(0);
    for (const [i, target] of targets.entries()) {
      const stream = i % 2 === 0 ? a : b;
      expect(same(await target.toHost({ stream }), pattern(bytes, 100 + i))).toBe(true);
      target.dispose();
    }
  });

  it("an upload from a HostView's typed array is not staged (its memory is pinned already)", async () => {
    const stream = Stream.create({ name: 'host view' });
    streams.push(stream);
    const bytes = 256 * 1024;
    const view = HostView.allocate('uint8', bytes);
    view.array.set(pattern(bytes, 9));
    const target = DeviceArray.empty('uint8', bytes, { stream });
    const before = stagingPool.pendingUploadBytes;
    target.copyFromHost(view.array, { stream });
    expect(stagingPool.pendingUploadBytes).toBe(before);
    expect(same(await target.toHost({ stream }), pattern(bytes, 9))).toBe(true);
    target.dispose();
    view.dispose();
  });

  it('any size and offset, around the staging bounds: the device holds what was sent', async () => {
    const stream = Stream.create({ name: 'sizes' });
    streams.push(stream);
    const sizes = fc.oneof(
      fc.integer({ min: 1, max: 4096 }),
      fc.integer({ min: STAGED_UPLOAD_MIN_BYTES - 64, max: STAGED_UPLOAD_MIN_BYTES + 64 }),
      fc.integer({ min: STAGED_UPLOAD_MIN_BYTES, max: 2 * MiB }),
      fc.integer({ min: STAGED_UPLOAD_MAX_BYTES - 64, max: STAGED_UPLOAD_MAX_BYTES + 64 }),
    );
    await fc.assert(
      fc.asyncProperty(
        sizes,
        fc.integer({ min: 0, max: 15 }),
        fc.nat(1000),
        async (n, lead, seed) => {
          // A Float32Array at a byte offset into its ArrayBuffer, so the view's bytes are sent.
          const whole = pattern(lead * 4 + n * 4 + 8, seed);
          const source = new Float32Array(whole.buffer, lead * 4, n);
          const target = DeviceArray.empty('uint8', n * 4 + 256, { stream });
          const offset = 4 * (seed % 64);
          copyHostToDevice({ buffer: target.buffer, byteOffset: offset }, source, { stream });
          const back = await target.toHost({ stream });
          expect(
            same(
              back.subarray(offset, offset + n * 4),
              new Uint8Array(whole.buffer, lead * 4, n * 4),
            ),
          ).toBe(true);
          target.dispose();
        },
      ),
      { numRuns: 40 },
    );
  });
});
