import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import {
  CaptureError,
  DeviceArray,
  type Graph,
  type Kernel,
  launch,
  Module,
  type Stream,
} from '@cuda-tasks/cudadrv';
import { describeGpu, randomFloat32 } from '@cuda-tasks/testing';
import { beforeAll, expect, it } from 'vitest';
import {
  capture,
  capturedGraphs,
  capturedOnce,
  deviceSynchronize,
  startTrace,
  stream,
  synchronize,
  task,
} from './index.js';

const ptxPath = fileURLToPath(new URL('../../cudadrv/test/fixtures/kernels.ptx', import.meta.url));

/** Kernels in the chain. */
const STEPS = 20;
/** Elements per array. */
const N = 1 << 16;
const CONFIG = { grid: 64, block: 256 };

/** The chain's coefficients: y = a x + b with |a| < 1, so that values stay bounded. */
function coefficients(seed: number): { a: number[]; b: number[] } {
  const a = Array.from({ length: STEPS }, (_, i) => 0.5 + 0.02 * ((i * 7 + seed) % 11));
  const b = Array.from({ length: STEPS }, (_, i) => 0.01 * ((i * 3 + seed) % 5) - 0.02);
  return { a, b };
}

/** The chain on the CPU in float64: what the GPU's float32 steps approximate. */
function reference(x: Float32Array, seed: number): Float64Array {
  const { a, b } = coefficients(seed);
  const y = Float64Array.from(x);
  for (let i = 0; i < STEPS; i++) for (let j = 0; j < y.length; j++) y[j] = a[i]! * y[j]! + b[i]!;
  return y;
}

function expectNear(actual: Float32Array, expected: Float64Array): void {
  let worst = 0;
  for (let j = 0; j < expected.length; j++) {
    worst = Math.max(worst, Math.abs(actual[j]! - expected[j]!) / (1 + Math.abs(expected[j]!)));
  }
  expect(worst).toBeLessThan(1e-5);
}

/** Bit-for-bit equality of two float32 arrays (NaN-safe, -0 vs 0 told apart). */
function expectSameBits(actual: Float32Array, expected: Float32Array): void {
  expect(actual.length).toBe(expected.length);
  const a = new Uint32Array(actual.buffer, actual.byteOffset, actual.length);
  const e = new Uint32Array(expected.buffer, expected.byteOffset, expected.length);
  let differing = 0;
  for (let j = 0; j < a.length; j++) if (a[j] !== e[j]) differing++;
  expect(differing).toBe(0);
}

describeGpu('graph capture and replay on the GPU', () => {
  let axpb: Kernel;
  let spin: Kernel;
  beforeAll(() => {
    const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
    axpb = module.kernel('axpb_f32', [
      'float32*',
      'const float32*',
      'float32',
      'float32',
      'uint64',
    ]);
    spin = module.kernel('spin_ns', ['uint64']);
    launch(spin, { grid: 1, block: 1 }, 1000); // load the module before any capture
  });

  /**
   * The 20-kernel chain: scratch <- a0 x + b0, out <- a1 scratch + b1, scratch <- ..., the last
   * kernel writing `out`. `x` is only read, so every replay computes the same thing.
   */
  function chain(
    x: DeviceArray<'float32'>,
    scratch: DeviceArray<'float32'>,
    out: DeviceArray<'float32'>,
    seed: number,
  ): void {
    const { a, b } = coefficients(seed);
    let source = x;
    for (let i = 0; i < STEPS; i++) {
      const target = i % 2 === 0 ? scratch : out;
      launch(axpb, CONFIG, target, source, a[i]!, b[i]!, N);
      source = target;
    }
  }

  it('a 20-kernel chain captured and replayed gives the eager result bit for bit', async () => {
    await task(async () => {
      const input = randomFloat32(N, 3);
      const x = DeviceArray.fromHost(input);
      const scratch = DeviceArray.empty('float32', N);
      const eager = DeviceArray.empty('float32', N);
      chain(x, scratch, eager, 1);
      await synchronize();
      const expected = await eager.toHost();
      expectNear(expected, reference(input, 1));

      const out = DeviceArray.zeros('float32', N);
      await synchronize();
      const graph = await capture(() => chain(x, scratch, out, 1));
      expect(graph.nodeCount).toBe(STEPS);
      // The capture ran nothing.
      expect((await out.toHost()).every((value) => value === 0)).toBe(true);
      for (let replay = 0; replay < 3; replay++) {
        out.fill(0);
        graph.launch();
        await synchronize();
        expectSameBits(await out.toHost(), expected);
      }
      graph.dispose();
      for (const array of [x, scratch, eager, out]) array.dispose();
    });
  });

  it('replays with updated arguments: new buffers and scalars, same topology', async () => {
    await task(async () => {
      const inputs = [randomFloat32(N, 5), randomFloat32(N, 6)];
      const xs = inputs.map((input) => DeviceArray.fromHost(input));
      const scratch = DeviceArray.empty('float32', N);
      const outs = [DeviceArray.zeros('float32', N), DeviceArray.zeros('float32', N)];
      const graph = await capture(() => chain(xs[0]!, scratch, outs[0]!, 2));
      graph.launch();
      await synchronize();
      const first = await outs[0]!.toHost();
      expectNear(first, reference(inputs[0]!, 2));
      // Same kernels in the same order, other buffers and coefficients: an update, no new graph.
      const updated = await capture(() => chain(xs[1]!, scratch, outs[1]!, 3), { update: graph });
      expect(updated).toBe(graph);
      graph.launch();
      await synchronize();
      expectNear(await outs[1]!.toHost(), reference(inputs[1]!, 3));
      // The first output was not touched by the updated graph.
      expectSameBits(await outs[0]!.toHost(), first);
      // A different topology (one kernel fewer) is refused, and the graph goes on as it was.
      await expect(
        capture(() => launch(axpb, CONFIG, outs[0]!, xs[0]!, 1, 0, N), { update: graph }),
      ).rejects.toThrow(/TOPOLOGY_CHANGED|topology/);
      outs[1]!.fill(0);
      graph.launch();
      await synchronize();
      expectNear(await outs[1]!.toHost(), reference(inputs[1]!, 3));
      graph.dispose();
      for (const array of [...xs, scratch, ...outs]) array.dispose();
    });
  });

  it('captures in one task while 8 other tasks launch, allocate and synchronize', async () => {
    const input = randomFloat32(N, 9);
    let captureStream: Stream | undefined;
    const capturing = task(async () => {
      const x = DeviceArray.fromHost(input);
      const scratch = DeviceArray.empty('float32', N);
      const out = DeviceArray.zeros('float32', N);
      await synchronize();
      const graph = await capture(async () => {
        captureStream = stream();
        const { a, b } = coefficients(4);
        let source = x;
        for (let i = 0; i < STEPS; i++) {
          const target = i % 2 === 0 ? scratch : out;
          launch(axpb, CONFIG, target, source, a[i]!, b[i]!, N);
          source = target;
          // Let the other tasks run between the captured launches.
          if (i % 4 === 3) await sleep(1);
        }
      });
      expect(captureStream!.capturing).toBe(false);
      graph.launch();
      await synchronize();
      const result = await out.toHost();
      graph.dispose();
      for (const array of [x, scratch, out]) array.dispose();
      return result;
    });
    const others = Array.from({ length: 8 }, (_, t) =>
      task(async () => {
        const data = randomFloat32(N, 100 + t);
        const results: Float32Array[] = [];
        for (let round = 0; round < 4; round++) {
          const x = DeviceArray.fromHost(data);
          const y = DeviceArray.empty('float32', N);
          // Small allocations and frees (the per-stream block cache) in between.
          for (let k = 0; k < 8; k++) DeviceArray.empty('float32', 64).dispose();
          launch(spin, { grid: 1, block: 1 }, 200_000);
          launch(axpb, CONFIG, y, x, t + 1, round, N);
          await synchronize();
          expect(stream().capturing).toBe(false);
          results.push(await y.toHost());
          x.dispose();
          y.dispose();
          await sleep(1);
        }
        return { data, results };
      }),
    );
    const [captured, ...done] = await Promise.all([capturing, ...others]);
    expectNear(captured, reference(input, 4));
    done.forEach(({ data, results }, t) => {
      results.forEach((y, round) => {
        for (let j = 0; j < N; j += 61) {
          const expected = (t + 1) * data[j]! + round;
          expect(Math.abs(y[j]! - expected)).toBeLessThan(1e-5 * (1 + Math.abs(expected)));
        }
      });
    });
  });

  it('a replay waits for another task’s write of a buffer the graph reads', async () => {
    await task(async () => {
      const first = randomFloat32(N, 11);
      const x = DeviceArray.fromHost(first);
      const scratch = DeviceArray.empty('float32', N);
      const out = DeviceArray.empty('float32', N);
      await synchronize();
      const graph = await capture(() => chain(x, scratch, out, 5));
      // Another task rewrites x after a 50 ms kernel (x = 2 * first + 1); the replay is issued
      // right after, with no host wait in between: only the hand-off orders it after the write.
      const writer = task(() => {
        launch(spin, { grid: 1, block: 1 }, 50_000_000);
        launch(axpb, CONFIG, x, x, 2, 1, N);
      });
      await writer;
      graph.launch();
      await synchronize();
      const rewritten = Float32Array.from(first, (value) => Math.fround(2 * value + 1));
      expectNear(await out.toHost(), reference(rewritten, 5));
      graph.dispose();
      for (const array of [x, scratch, out]) array.dispose();
    });
  });

  it('allocations inside the capture are graph memory; one that outlives it is an output', async () => {
    await task(async () => {
      const input = randomFloat32(N, 13);
      const x = DeviceArray.fromHost(input);
      await synchronize();
      let output: DeviceArray<'float32'> | undefined;
      const graph = await capture(() => {
        using scratch = DeviceArray.empty('float32', N);
        output = DeviceArray.empty('float32', N);
        chain(x, scratch, output, 6);
      });
      expect(graph.outputs).toEqual([output!.buffer]);
      // Its memory exists from the first launch on.
      await expect(output!.toHost()).rejects.toThrow(/launch the graph first/);
      for (let replay = 0; replay < 3; replay++) {
        graph.launch();
        await synchronize();
        expectNear(await output!.toHost(), reference(input, 6));
      }
      graph.dispose();
      // Still held after the graph went: the buffer's own, until disposed.
      expectNear(await output!.toHost(), reference(input, 6));
      output!.dispose();
      x.dispose();
    });
  });

  it('synchronize() inside a capture is a CaptureError; the stream is usable afterwards', async () => {
    await task(async () => {
      const input = randomFloat32(N, 17);
      const x = DeviceArray.fromHost(input);
      const scratch = DeviceArray.empty('float32', N);
      const out = DeviceArray.empty('float32', N);
      await synchronize();
      let captureStream: Stream | undefined;
      let error: unknown;
      try {
        await capture(async () => {
          captureStream = stream();
          chain(x, scratch, out, 7);
          await synchronize();
        });
      } catch (thrown) {
        error = thrown;
      }
      expect(CaptureError.isInstance(error)).toBe(true);
      expect((error as CaptureError).call).toBe('synchronize()');
      expect(captureStream!.capturing).toBe(false);
      // The stream that captured runs work again, and the task's own stream too.
      captureStream!.synchronize();
      launch(axpb, { ...CONFIG, stream: captureStream! }, out, x, 1, 0, N); // out = x
      captureStream!.synchronize();
      expectSameBits(await out.toHost({ stream: captureStream! }), input);
      chain(x, scratch, out, 7);
      await synchronize();
      expectNear(await out.toHost(), reference(input, 7));
      for (const array of [x, scratch, out]) array.dispose();
    });
  });

  it('toHost, pageable copies and a device synchronize inside or beside a capture are refused', async () => {
    await task(async () => {
      const input = randomFloat32(N, 19);
      const x = DeviceArray.fromHost(input);
      const scratch = DeviceArray.empty('float32', N);
      const out = DeviceArray.empty('float32', N);
      await synchronize();
      const refused: string[] = [];
      const graph = await capture(async () => {
        chain(x, scratch, out, 8);
        for (const attempt of [
          () => out.toHost(),
          async () => out.copyFromHost(new Float32Array(N)),
          // Another task's device-wide wait while this capture is in progress.
          () => task(() => deviceSynchronize()),
        ]) {
          try {
            await attempt();
          } catch (error) {
            if (CaptureError.isInstance(error)) refused.push(error.call);
            else throw error;
          }
        }
      });
      expect(refused).toEqual(['DeviceArray.toHost', 'copyHostToDevice', 'cuCtxSynchronize']);
      // Refused before any native call: the capture went on and its graph is whole.
      expect(graph.nodeCount).toBe(STEPS);
      graph.launch();
      await synchronize();
      expectNear(await out.toHost(), reference(input, 8));
      graph.dispose();
      for (const array of [x, scratch, out]) array.dispose();
    });
  });

  it('capturedOnce captures once per key; the trace shows a replay as one span with its node count', async () => {
    await task(async () => {
      const input = randomFloat32(N, 23);
      const x = DeviceArray.fromHost(input);
      const scratch = DeviceArray.empty('float32', N);
      const out = DeviceArray.empty('float32', N);
      await synchronize();
      let captures = 0;
      const step = () => {
        captures++;
        chain(x, scratch, out, 9);
      };
      const graphs: Graph[] = [];
      for (let i = 0; i < 3; i++) graphs.push(await capturedOnce('graphs.gpu.test chain', step));
      expect(captures).toBe(1);
      expect(new Set(graphs).size).toBe(1);
      const recorder = startTrace();
      graphs[0]!.launch();
      await synchronize();
      const trace = await recorder.stop();
      const spans = trace.traceEvents.filter((event) => event.cat === 'gpu');
      expect(spans.map((event) => event.name)).toEqual([`graph (${STEPS} nodes)`]);
      expect(spans[0]!.args).toMatchObject({ nodes: STEPS });
      expect(spans[0]!.dur!).toBeGreaterThan(0);
      expectNear(await out.toHost(), reference(input, 9));
      capturedGraphs().delete('graphs.gpu.test chain');
      expect(graphs[0]!.disposed).toBe(true);
      for (const array of [x, scratch, out]) array.dispose();
    });
  });
});
