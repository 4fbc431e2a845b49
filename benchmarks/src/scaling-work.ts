/**
 * The concurrency scaling benchmark's jobs as ours runs them (see scaling.ts), written once for
 * the main thread's tasks (scaling.ts) and for the worker tasks (scaling-jobs.ts, run in a
 * `WorkerPool`'s workers): the job slots (buffers and a cuRAND generator per slot) and the
 * latency-bound, mixed and control jobs. Each thread loads the kernel and makes its own slots;
 * nothing here reads `process.argv` (a worker thread's holds no settings).
 */
import { readFileSync } from 'node:fs';
import { gemm } from '@cuda-tasks/cublas';
import { DeviceArray, type Kernel, launch, Module } from '@cuda-tasks/cudadrv';
import { Generator } from '@cuda-tasks/curand';
import { kernelsPtxPath } from '@cuda-tasks/examples/kernels';
import { synchronize } from '@cuda-tasks/task-runtime';
import { AXPB_PARAMETERS } from './bare.js';
import type { ScalingConfig } from './scaling-config.js';

/** Threads per block of every elementwise launch. */
export const BLOCK = 256;

/** A one-dimensional launch's grid and block. */
export interface LaunchShape {
  /** Blocks. */
  grid: number;
  /** Threads per block. */
  block: number;
}

/** What the jobs of one thread share: the settings, the kernel and the launch shapes. */
export interface ScalingWork {
  /** The benchmark's settings. */
  readonly config: ScalingConfig;
  /** `axpb_f32` from kernels.ptx: y = a x + b, x only read. */
  readonly axpb: Kernel;
  /** The latency-bound job's launch shape (over `latencyN` floats). */
  readonly latencyLaunch: LaunchShape;
  /** The mixed job's axpb launch shape (over `mixedCount` floats). */
  readonly mixedLaunch: LaunchShape;
  /** Floats of one mixed matrix (`mixedN` squared). */
  readonly mixedCount: number;
}

/** The launch shapes of the latency-bound and mixed jobs at `config`. */
export function launchShapes(config: ScalingConfig): {
  latencyLaunch: LaunchShape;
  mixedLaunch: LaunchShape;
  mixedCount: number;
} {
  const mixedCount = config.mixedN * config.mixedN;
  return {
    latencyLaunch: { grid: Math.ceil(config.latencyN / BLOCK), block: BLOCK },
    mixedLaunch: { grid: Math.ceil(mixedCount / BLOCK), block: BLOCK },
    mixedCount,
  };
}

/**
 * Loads kernels.ptx into the current context (once per thread that runs jobs) and returns the
 * jobs' shared state at `config`.
 */
export function loadScalingWork(config: ScalingConfig): ScalingWork {
  const module = Module.fromPtx(readFileSync(kernelsPtxPath, 'utf8'));
  const axpb = module.kernel('axpb_f32', [...AXPB_PARAMETERS]);
  return { config, axpb, ...launchShapes(config) };
}

/** What one job slot owns: its buffers and its own generator. */
export interface JobSlot {
  /** The latency-bound job's x (`latencyN` floats). */
  latencyX: DeviceArray<'float32'>;
  /** The latency-bound job's y (`latencyN` floats). */
  latencyY: DeviceArray<'float32'>;
  /** The mixed job's A (`mixedN` x `mixedN`), refilled by cuRAND each step. */
  mixedA: DeviceArray<'float32'>;
  /** The mixed job's B (`mixedN` x `mixedN`). */
  mixedB: DeviceArray<'float32'>;
  /** The mixed job's C = A B (`mixedN` x `mixedN`). */
  mixedC: DeviceArray<'float32'>;
  /** The control shape's matrices (absent in a slot made without them). */
  controlA?: DeviceArray<'float32'>;
  /** The control shape's B (absent in a slot made without the control matrices). */
  controlB?: DeviceArray<'float32'>;
  /** The control shape's C (absent in a slot made without the control matrices). */
  controlC?: DeviceArray<'float32'>;
  /** The slot's own Philox generator, seeded `seed + index`. */
  generator: Generator;
}

/**
 * Slot `index`: a Philox generator seeded `seed + index` and the buffers, each filled from it
 * (uniform in [0, 1)) in this order: the latency-bound pair, the mixed matrices, and unless
 * `control` is false the control matrices (last, so that leaving them out changes no other
 * buffer's values).
 */
export function makeJobSlot(
  config: ScalingConfig,
  index: number,
  options: { control: boolean },
): JobSlot {
  const generator = new Generator({ kind: 'curand-philox', seed: config.seed + index });
  const uniform = (shape: number | number[]) =>
    generator.uniform(DeviceArray.empty('float32', shape));
  const mixed = [config.mixedN, config.mixedN];
  const slot: JobSlot = {
    latencyX: uniform(config.latencyN),
    latencyY: uniform(config.latencyN),
    mixedA: uniform(mixed),
    mixedB: uniform(mixed),
    mixedC: uniform(mixed),
    generator,
  };
  if (options.control) {
    const control = [config.controlN, config.controlN];
    slot.controlA = uniform(control);
    slot.controlB = uniform(control);
    slot.controlC = uniform(control);
  }
  return slot;
}

/** Latency-bound: y = 0.5 x + 1 and x = 0.5 y + 1 in turn, awaiting every `latencySyncEvery`. */
export async function latencyJob(work: ScalingWork, slot: JobSlot): Promise<void> {
  const { latencySteps, latencySyncEvery, latencyN } = work.config;
  const { axpb, latencyLaunch } = work;
  for (let step = 0; step < latencySteps; step++) {
    if (step % 2 === 0) launch(axpb, latencyLaunch, slot.latencyY, slot.latencyX, 0.5, 1, latencyN);
    else launch(axpb, latencyLaunch, slot.latencyX, slot.latencyY, 0.5, 1, latencyN);
    if ((step + 1) % latencySyncEvery === 0 || step === latencySteps - 1) await synchronize();
  }
}

/** Mixed: A = uniform, C = A B, B = C / n per step; one await at the end. */
export async function mixedJob(work: ScalingWork, slot: JobSlot): Promise<void> {
  const { mixedSteps, mixedN } = work.config;
  const { axpb, mixedLaunch, mixedCount } = work;
  const scale = 1 / mixedN;
  for (let step = 0; step < mixedSteps; step++) {
    slot.generator.uniform(slot.mixedA);
    gemm(slot.mixedA, slot.mixedB, slot.mixedC);
    launch(axpb, mixedLaunch, slot.mixedB, slot.mixedC, scale, 0, mixedCount);
  }
  await synchronize();
}

/** GPU-filling control: C = A B, `controlSteps` times; one await at the end. */
export async function controlJob(work: ScalingWork, slot: JobSlot): Promise<void> {
  const { controlA, controlB, controlC } = slot;
  if (controlA === undefined || controlB === undefined || controlC === undefined) {
    throw new Error('scaling: this job slot was made without the control shape’s matrices');
  }
  for (let step = 0; step < work.config.controlSteps; step++) gemm(controlA, controlB, controlC);
  await synchronize();
}
