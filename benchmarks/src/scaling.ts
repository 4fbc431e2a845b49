/**
 * Concurrency scaling, our side, as a program of its own (src/run.ts starts it): for each job
 * shape and each K, K jobs as K `task()`s started together and awaited with `Promise.all`
 * (each task gets its own stream, cuBLAS handle and default cuRAND generator from the runtime;
 * a synchronize point is `await synchronize()`), and a serial batch (one task running jobs one
 * after another). Prints one JSON line per (shape, K, mode), as c/scaling.cu does. The
 * latency-bound shape runs a second time with its steps captured once per job slot and
 * replayed (`system: 'ours_graph'`), reported beside the eager rows.
 *
 * Usage: tsx --conditions=@cuda-tasks/source src/scaling.ts [key=value ...] (see
 * scaling-config.ts)
 */
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { gemm } from '@cuda-tasks/cublas';
import { DeviceArray, type Graph, type Kernel, launch, Module } from '@cuda-tasks/cudadrv';
import { Generator } from '@cuda-tasks/curand';
import { kernelsPtxPath } from '@cuda-tasks/examples/kernels';
import { capture, synchronize, task } from '@cuda-tasks/task-runtime';
import { parseScalingArguments, type ShapeName, samplesFor } from './scaling-config.js';

const config = parseScalingArguments(process.argv.slice(2));

/** `axpb_f32` from kernels.ptx (loaded in `main`): y = a x + b, x only read. */
let axpb: Kernel;

/** What one job slot owns: its buffers for every shape and its own generator. */
interface Slot {
  latencyX: DeviceArray<'float32'>;
  latencyY: DeviceArray<'float32'>;
  mixedA: DeviceArray<'float32'>;
  mixedB: DeviceArray<'float32'>;
  mixedC: DeviceArray<'float32'>;
  controlA: DeviceArray<'float32'>;
  controlB: DeviceArray<'float32'>;
  controlC: DeviceArray<'float32'>;
  generator: Generator;
  /**
   * The latency job's steps between two synchronize points, captured once (the graph variant):
   * one graph per parity of the first step, since the steps alternate x -> y and y -> x.
   */
  latencyGraphs: (Graph | undefined)[];
}

const BLOCK = 256;
const latencyLaunch = { grid: Math.ceil(config.latencyN / BLOCK), block: BLOCK };
const mixedCount = config.mixedN * config.mixedN;
const mixedLaunch = { grid: Math.ceil(mixedCount / BLOCK), block: BLOCK };

function makeSlot(index: number): Slot {
  const generator = new Generator({ kind: 'philox', seed: config.seed + index });
  const uniform = (shape: number | number[]) =>
    generator.uniform(DeviceArray.empty('float32', shape));
  const mixed = [config.mixedN, config.mixedN];
  const control = [config.controlN, config.controlN];
  return {
    latencyX: uniform(config.latencyN),
    latencyY: uniform(config.latencyN),
    mixedA: uniform(mixed),
    mixedB: uniform(mixed),
    mixedC: uniform(mixed),
    controlA: uniform(control),
    controlB: uniform(control),
    controlC: uniform(control),
    generator,
    latencyGraphs: [undefined, undefined],
  };
}

/** Latency-bound: y = 0.5 x + 1 and x = 0.5 y + 1 in turn, awaiting every `latencySyncEvery`. */
async function latencyJob(slot: Slot): Promise<void> {
  const { latencySteps, latencySyncEvery, latencyN } = config;
  for (let step = 0; step < latencySteps; step++) {
    if (step % 2 === 0) launch(axpb, latencyLaunch, slot.latencyY, slot.latencyX, 0.5, 1, latencyN);
    else launch(axpb, latencyLaunch, slot.latencyX, slot.latencyY, 0.5, 1, latencyN);
    if ((step + 1) % latencySyncEvery === 0 || step === latencySteps - 1) await synchronize();
  }
}

/**
 * The latency-bound job with its steps captured once per job slot and replayed: the same
 * kernels, one `graph.launch()` per `latencySyncEvery` steps, awaited as often as the eager job.
 */
async function latencyGraphJob(slot: Slot): Promise<void> {
  const { latencySteps, latencySyncEvery, latencyN } = config;
  for (let first = 0; first < latencySteps; first += latencySyncEvery) {
    const steps = Math.min(latencySyncEvery, latencySteps - first);
    const parity = first % 2;
    let graph = steps === latencySyncEvery ? slot.latencyGraphs[parity] : undefined;
    if (graph === undefined) {
      graph = await capture(() => {
        for (let step = first; step < first + steps; step++) {
          if (step % 2 === 0) {
            launch(axpb, latencyLaunch, slot.latencyY, slot.latencyX, 0.5, 1, latencyN);
          } else launch(axpb, latencyLaunch, slot.latencyX, slot.latencyY, 0.5, 1, latencyN);
        }
      });
      if (steps === latencySyncEvery) slot.latencyGraphs[parity] = graph;
    }
    graph.launch();
    if (steps !== latencySyncEvery) graph.dispose();
    await synchronize();
  }
}

/** Mixed: A = uniform, C = A B, B = C / n per step; one await at the end. */
async function mixedJob(slot: Slot): Promise<void> {
  const scale = 1 / config.mixedN;
  for (let step = 0; step < config.mixedSteps; step++) {
    slot.generator.uniform(slot.mixedA);
    gemm(slot.mixedA, slot.mixedB, slot.mixedC);
    launch(axpb, mixedLaunch, slot.mixedB, slot.mixedC, scale, 0, mixedCount);
  }
  await synchronize();
}

/** GPU-filling control: C = A B, `controlSteps` times; one await at the end. */
async function controlJob(slot: Slot): Promise<void> {
  for (let step = 0; step < config.controlSteps; step++) {
    gemm(slot.controlA, slot.controlB, slot.controlC);
  }
  await synchronize();
}

const JOBS: Record<ShapeName, (slot: Slot) => Promise<void>> = {
  latency: latencyJob,
  mixed: mixedJob,
  control: controlJob,
};

/** Seconds of wall time of `batch`, run `warmups` times untimed first, `samples` times timed. */
async function measure(samples: number, batch: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < config.warmups; i++) await batch();
  const seconds: number[] = [];
  for (let i = 0; i < samples; i++) {
    const start = performance.now();
    await batch();
    seconds.push((performance.now() - start) / 1000);
  }
  return seconds;
}

function emit(
  system: 'ours' | 'ours_graph',
  shape: ShapeName,
  k: number,
  mode: 'concurrent' | 'serial',
  jobs: number,
  seconds: readonly number[],
  loopDelayMaxMs: number,
): void {
  console.log(
    JSON.stringify({
      name: 'scaling',
      system,
      shape,
      k,
      mode,
      jobs,
      seconds: seconds.map((value) => Number(value.toPrecision(9))),
      loop_delay_max_ms: Math.round(loopDelayMaxMs * 1000) / 1000,
    }),
  );
}

async function main(): Promise<void> {
  const module = Module.fromPtx(readFileSync(kernelsPtxPath, 'utf8'));
  axpb = module.kernel('axpb_f32', ['float32*', 'const float32*', 'float32', 'float32', 'uint64']);
  const maxK = Math.max(...config.ks);
  const slots = Array.from({ length: maxK }, (_, index) => makeSlot(index));
  await synchronize();
  // Each shape as the suite runs it (ours); the latency-bound shape also with its steps
  // captured once per job slot and replayed (ours_graph), reported beside it.
  const variants = config.shapes.flatMap((shape) => [
    { system: 'ours' as const, shape, job: JOBS[shape] },
    ...(shape === 'latency'
      ? [{ system: 'ours_graph' as const, shape, job: latencyGraphJob }]
      : []),
  ]);
  // V8 optimizes the launch and library paths after a few thousand calls; C has no JIT to
  // warm. A serial warm-up per shape, not timed.
  for (const { shape, job } of variants) {
    await task(async () => {
      for (let i = 0; i < (shape === 'control' ? 25 : 200); i++) await job(slots[0]!);
    });
  }
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  for (const { system, shape, job } of variants) {
    histogram.reset();
    histogram.enable();
    const serial = await measure(config.minSamples, () =>
      task(async () => {
        for (let i = 0; i < config.serialJobs; i++) await job(slots[0]!);
      }),
    );
    histogram.disable();
    emit(system, shape, 1, 'serial', config.serialJobs, serial, histogram.max / 1e6);
    for (const k of config.ks) {
      const batch = () =>
        Promise.all(Array.from({ length: k }, (_, index) => task(() => job(slots[index]!))));
      histogram.reset();
      histogram.enable();
      const seconds = await measure(samplesFor(config, k), batch);
      histogram.disable();
      emit(system, shape, k, 'concurrent', k, seconds, histogram.max / 1e6);
    }
  }
}

try {
  await main();
  process.exit(0);
} catch (error) {
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  console.error(message);
  const unavailable = error instanceof Error && error.name === 'CudaUnavailableError';
  if (!unavailable && error instanceof Error && error.stack) console.error(error.stack);
  process.exit(unavailable ? 3 : 1);
}
