/**
 * The floors under ours from JavaScript in the concurrency scaling benchmark (see scaling.ts):
 * C's calls as bare koffi calls, no runtime.
 *
 * - `ours_floor`: K plain async functions on the main thread, waits on a bare `cuStreamQuery`
 *   round-robin (`bareStreamWaiter`).
 * - `ours_floor_workers`: the same jobs on W worker threads (scaling-floor-worker.ts), batches
 *   handed out through a `SharedArrayBuffer` (`Atomics.notify` wakes only the workers that have
 *   jobs, as C's pool posts only the semaphores of its K threads): what any JavaScript program
 *   reaches issuing from W threads, the floor under ours' worker tasks. A thread with one job
 *   in a batch waits in `cuStreamSynchronize`, as C's threads do (`floor_sync`, on by default);
 *   one with several queries them round-robin.
 *
 * Per job slot a stream, CUlaunchConfigs and argument arrays made once, and for the mixed shape
 * a cuBLAS handle and a Philox cuRAND generator of its own on that stream, as C's slots have.
 * Per step the bare koffi calls: the `cuLaunchKernelEx` that `launch()` makes, and C's
 * `curandGenerateUniform` and `cublasSgemm_v2`. No task, no current-stream lookup, no argument
 * checks, no buffer bookkeeping.
 */
import { Worker } from 'node:worker_threads';
import { check as checkCublas } from '@cuda-tasks/cublas';
import {
  CUBLAS_DEFAULT_MATH,
  CUBLAS_OP_N,
  CUBLAS_POINTER_MODE_HOST,
  cublas,
} from '@cuda-tasks/cublas/ffi';
import { check, driver, Stream } from '@cuda-tasks/cudadrv';
import { check as checkCurand } from '@cuda-tasks/curand';
import { curand } from '@cuda-tasks/curand/ffi';
import koffi from 'koffi';
import { bareAxpbArguments, bareLaunchConfig } from './bare.js';
import type { ShapeName } from './scaling-config.js';
import { BLOCK, type JobSlot, type ScalingWork } from './scaling-work.js';

/** One job slot of a floor: its stream, launch configs, arguments and library objects. */
export interface FloorSlot {
  /** The slot's stream (non-blocking, made for the floor). */
  stream: Stream;
  /** Its handle as koffi takes it fastest (a number). */
  ffiStream: number;
  /** The latency-bound job's CUlaunchConfig on the stream (its address). */
  config: number;
  /** Argument arrays: [0] y = a x + b, [1] x = a y + b. */
  args: [number, number];
  /** The mixed shape's launch config (B = C / n). */
  mixedConfig: number;
  /** The mixed shape's axpb arguments (B = C / n). */
  mixedArgs: number;
  /** The slot's cuBLAS handle (host scalars, plain FP32, on the stream). */
  cublas: bigint;
  /** The slot's Philox generator (seeded seed + slot, on the stream). */
  curand: bigint;
  /** The mixed job's matrices A, B, C (addresses), and A's as a pointer for cuRAND. */
  mixed: { a: number; b: number; c: number; aPointer: bigint };
  /** What the slot allocated with koffi (freed by `disposeFloorSlot`). */
  pointers: bigint[];
}

/** A floor's wait for a stream's work (a bare `cuStreamQuery` round-robin). */
export type FloorWait = (stream: number | bigint) => Promise<void>;

/** Host scalars of the floor's SGEMMs (pointer mode host): alpha = 1, beta = 0 (per thread). */
let floorScalars: { alpha: number; beta: number; pointer: bigint } | undefined;

/** curandRngType_t CURAND_RNG_PSEUDO_PHILOX4_32_10. */
const CURAND_RNG_PSEUDO_PHILOX4_32_10 = 161;

/** The floor's slot `index` over `slot`'s buffers, in the calling thread's context. */
export function makeFloorSlot(work: ScalingWork, slot: JobSlot, index: number): FloorSlot {
  const { config, latencyLaunch, mixedLaunch, mixedCount } = work;
  const stream = Stream.create({ name: 'scaling-floor' });
  const launchConfig = bareLaunchConfig(stream.handle, latencyLaunch.grid, BLOCK);
  const forward = bareAxpbArguments(
    slot.latencyY.pointer,
    slot.latencyX.pointer,
    0.5,
    1,
    config.latencyN,
  );
  const backward = bareAxpbArguments(
    slot.latencyX.pointer,
    slot.latencyY.pointer,
    0.5,
    1,
    config.latencyN,
  );
  const mixedConfig = bareLaunchConfig(stream.handle, mixedLaunch.grid, BLOCK);
  const mixedArgs = bareAxpbArguments(
    slot.mixedB.pointer,
    slot.mixedC.pointer,
    1 / config.mixedN,
    0,
    mixedCount,
  );
  // C's slot: a cuBLAS handle (host scalars, default math: plain FP32) and a Philox generator
  // seeded seed + slot, both on the slot's stream.
  const blas = cublas();
  const handleOut: (bigint | null)[] = [null];
  checkCublas(blas.cublasCreate_v2(handleOut), 'cublasCreate_v2');
  const cublasHandle = handleOut[0] as bigint;
  checkCublas(blas.cublasSetStream_v2(cublasHandle, stream.handle), 'cublasSetStream_v2');
  checkCublas(
    blas.cublasSetPointerMode_v2(cublasHandle, CUBLAS_POINTER_MODE_HOST),
    'cublasSetPointerMode_v2',
  );
  checkCublas(blas.cublasSetMathMode(cublasHandle, CUBLAS_DEFAULT_MATH), 'cublasSetMathMode');
  const rand = curand();
  const generatorOut: (bigint | null)[] = [null];
  checkCurand(
    rand.curandCreateGenerator(generatorOut, CURAND_RNG_PSEUDO_PHILOX4_32_10),
    'curandCreateGenerator',
  );
  const generator = generatorOut[0] as bigint;
  checkCurand(
    rand.curandSetPseudoRandomGeneratorSeed(generator, BigInt(config.seed + index)),
    'curandSetPseudoRandomGeneratorSeed',
  );
  checkCurand(rand.curandSetStream(generator, stream.handle), 'curandSetStream');
  if (floorScalars === undefined) {
    const pointer = koffi.alloc('float', 2) as bigint;
    new Float32Array(koffi.view(pointer, 8)).set([1, 0]);
    floorScalars = { alpha: Number(pointer), beta: Number(pointer) + 4, pointer };
  }
  return {
    stream,
    ffiStream: Number(stream.handle),
    config: Number(launchConfig),
    args: [Number(forward), Number(backward)],
    mixedConfig: Number(mixedConfig),
    mixedArgs: Number(mixedArgs),
    cublas: cublasHandle,
    curand: generator,
    mixed: {
      a: Number(slot.mixedA.pointer),
      b: Number(slot.mixedB.pointer),
      c: Number(slot.mixedC.pointer),
      aPointer: slot.mixedA.pointer,
    },
    pointers: [launchConfig, forward, backward, mixedConfig, mixedArgs],
  };
}

/** Frees what `makeFloorSlot` made (not the job slot's buffers). */
export function disposeFloorSlot(slot: FloorSlot): void {
  cublas().cublasDestroy_v2(slot.cublas);
  curand().curandDestroyGenerator(slot.curand);
  slot.stream.dispose();
  for (const pointer of slot.pointers) koffi.free(pointer);
}

/** The latency-bound job with bare koffi calls: a wait every `latencySyncEvery` steps. */
export async function floorLatencyJob(
  work: ScalingWork,
  slot: FloorSlot,
  wait: FloorWait,
): Promise<void> {
  const { latencySteps, latencySyncEvery } = work.config;
  const api = driver();
  const kernel = work.axpb.ffiHandle;
  for (let step = 0; step < latencySteps; step++) {
    check(api.cuLaunchKernelEx(slot.config, kernel, slot.args[step & 1]!, 0), 'cuLaunchKernelEx');
    if ((step + 1) % latencySyncEvery === 0 || step === latencySteps - 1) {
      await wait(slot.ffiStream);
    }
  }
}

/** The mixed job as C issues it (`issue_segment`), with bare koffi calls; one wait at the end. */
export async function floorMixedJob(
  work: ScalingWork,
  slot: FloorSlot,
  wait: FloorWait,
): Promise<void> {
  const api = driver();
  const blas = cublas();
  const rand = curand();
  const n = work.config.mixedN;
  const count = work.mixedCount;
  const kernel = work.axpb.ffiHandle;
  const { a, b, c, aPointer } = slot.mixed;
  const scalars = floorScalars!;
  for (let step = 0; step < work.config.mixedSteps; step++) {
    checkCurand(rand.curandGenerateUniform(slot.curand, aPointer, count), 'curandGenerateUniform');
    checkCublas(
      blas.cublasSgemm_v2(
        slot.cublas,
        CUBLAS_OP_N,
        CUBLAS_OP_N,
        n,
        n,
        n,
        scalars.alpha,
        a,
        n,
        b,
        n,
        scalars.beta,
        c,
        n,
      ),
      'cublasSgemm_v2',
    );
    check(api.cuLaunchKernelEx(slot.mixedConfig, kernel, slot.mixedArgs, 0), 'cuLaunchKernelEx');
  }
  await wait(slot.ffiStream);
}

/** The floor job of `shape` (the latency-bound or the mixed one). */
export function floorJobOf(shape: ShapeName): typeof floorLatencyJob {
  if (shape === 'latency') return floorLatencyJob;
  if (shape === 'mixed') return floorMixedJob;
  throw new Error(`scaling: the floor has no ${shape} job`);
}

/**
 * The words of the worker floor's control buffer (an Int32Array over a SharedArrayBuffer):
 * the batch, then one `go` word per worker from `GO`.
 */
export const FLOOR_CONTROL = {
  /** Jobs in the batch (for a serial batch: the jobs worker 0 runs one after another). */
  K: 0,
  /** 0: latency-bound, 1: mixed. */
  SHAPE: 1,
  /** 1: a serial batch (worker 0 alone, slot 0). */
  SERIAL: 2,
  /** Workers done with the batch (each adds 1). */
  DONE: 3,
  /** Workers started and ready (each adds 1 once). */
  READY: 4,
  /** Set to 1 to end the workers (with a bump of every `go` word). */
  QUIT: 5,
  /** A worker's job failed: 1 (the worker printed why). */
  FAILED: 6,
  /** Worker w's wake-up word is `GO + w`: bumped when w has jobs in the batch. */
  GO: 8,
} as const;

type WaitAsync = (
  array: Int32Array,
  index: number,
  value: number,
  timeoutMs?: number,
) => { async: false; value: string } | { async: true; value: Promise<string> };
/** `Atomics.waitAsync` (ES2024; the TypeScript library here predates it). */
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

/** A batch of the worker floor that takes longer has hung: an error, not a wait forever. */
const BATCH_TIMEOUT_MS = 60_000;

/** The data each worker floor thread starts with. */
export interface FloorWorkerData {
  /** The scaling settings (`key=value`), as scaling.ts got them. */
  settings: string[];
  /** The control buffer (see `FLOOR_CONTROL`). */
  control: SharedArrayBuffer;
  /** This worker's index. */
  index: number;
  /** Workers in all. */
  workers: number;
}

/** The worker floor's threads, started and ready (`startFloorWorkers`). */
export interface FloorWorkers {
  /** The worker threads. */
  readonly workers: number;
  /** One batch of `k` jobs of `shape`, job j on worker j % W (on its slot j). */
  concurrent(shape: ShapeName, k: number): Promise<void>;
  /** `jobs` jobs of `shape` one after another on worker 0's slot 0. */
  serial(shape: ShapeName, jobs: number): Promise<void>;
  /** Ends the workers (they free their slots first). */
  close(): Promise<void>;
}

/**
 * Starts `workers` worker floor threads (scaling-floor-worker.ts, each making the slots j with
 * j % workers equal to its index, for j below the largest K) and waits until every one is
 * ready, or throws after `timeoutMs` or when one fails to start.
 */
export async function startFloorWorkers(
  settings: readonly string[],
  workers: number,
  timeoutMs = 120_000,
): Promise<FloorWorkers> {
  const control = new SharedArrayBuffer(4 * (FLOOR_CONTROL.GO + workers));
  const words = new Int32Array(control);
  const threads: Worker[] = [];
  const failures: string[] = [];
  const entry = new URL('./scaling-floor-entry.mjs', import.meta.url);
  for (let index = 0; index < workers; index++) {
    const data: FloorWorkerData = { settings: [...settings], control, index, workers };
    // From the packages' source, as the benchmark runs (tsx with the source condition).
    const thread = new Worker(entry, {
      workerData: data,
      execArgv: [...process.execArgv, '--conditions=@cuda-tasks/source'],
    });
    thread.on('error', (error) => failures.push(`worker ${index}: ${error.message}`));
    thread.on('exit', (code) => {
      if (code !== 0) failures.push(`worker ${index} exited with code ${code}`);
    });
    threads.push(thread);
  }
  const started = performance.now();
  while (Atomics.load(words, FLOOR_CONTROL.READY) < workers) {
    if (failures.length > 0 || performance.now() - started > timeoutMs) {
      await Promise.all(threads.map((thread) => thread.terminate()));
      throw new Error(
        `scaling: the worker floor did not start (${failures.join('; ') || `not ready after ${timeoutMs} ms`})`,
      );
    }
    const ready = Atomics.load(words, FLOOR_CONTROL.READY);
    const result = waitAsync(words, FLOOR_CONTROL.READY, ready, 100);
    if (result.async) await result.value;
  }
  /** Wakes workers 0..active-1 for the batch written, and waits until each is done. */
  const run = async (active: number) => {
    Atomics.store(words, FLOOR_CONTROL.DONE, 0);
    for (let w = 0; w < active; w++) {
      Atomics.add(words, FLOOR_CONTROL.GO + w, 1);
      Atomics.notify(words, FLOOR_CONTROL.GO + w, 1);
    }
    const since = performance.now();
    for (;;) {
      const done = Atomics.load(words, FLOOR_CONTROL.DONE);
      if (done >= active) break;
      if (failures.length > 0) {
        throw new Error(`scaling: the worker floor failed: ${failures.join('; ')}`);
      }
      if (performance.now() - since > BATCH_TIMEOUT_MS) {
        throw new Error(
          `scaling: a batch of the worker floor did not end in ${BATCH_TIMEOUT_MS / 1000} s (${done} of ${active} workers done)`,
        );
      }
      const result = waitAsync(words, FLOOR_CONTROL.DONE, done, 10_000);
      if (result.async) await result.value;
    }
    if (Atomics.load(words, FLOOR_CONTROL.FAILED) !== 0) {
      throw new Error('scaling: a job of the worker floor failed (see its message above)');
    }
  };
  const shapeCode = (shape: ShapeName) => {
    if (shape === 'latency') return 0;
    if (shape === 'mixed') return 1;
    throw new Error(`scaling: the worker floor has no ${shape} job`);
  };
  return {
    workers,
    concurrent(shape, k) {
      words[FLOOR_CONTROL.K] = k;
      words[FLOOR_CONTROL.SHAPE] = shapeCode(shape);
      words[FLOOR_CONTROL.SERIAL] = 0;
      return run(Math.min(k, workers));
    },
    serial(shape, jobs) {
      words[FLOOR_CONTROL.K] = jobs;
      words[FLOOR_CONTROL.SHAPE] = shapeCode(shape);
      words[FLOOR_CONTROL.SERIAL] = 1;
      return run(1);
    },
    async close() {
      Atomics.store(words, FLOOR_CONTROL.QUIT, 1);
      for (let w = 0; w < workers; w++) {
        Atomics.add(words, FLOOR_CONTROL.GO + w, 1);
        Atomics.notify(words, FLOOR_CONTROL.GO + w, 1);
      }
      await Promise.all(
        threads.map(
          (thread) =>
            new Promise<void>((resolve) => {
              const timer = setTimeout(() => void thread.terminate().then(() => resolve()), 10_000);
              thread.once('exit', () => {
                clearTimeout(timer);
                resolve();
              });
            }),
        ),
      );
    },
  };
}
