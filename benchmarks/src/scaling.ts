/**
 * Concurrency scaling, our side, as a program of its own (src/run.ts starts it): for each job
 * shape and each K, K jobs as K `task()`s started together and awaited with `Promise.all`
 * (each task gets its own stream, cuBLAS handle and default cuRAND generator from the runtime;
 * a synchronize point is `await synchronize()`), and a serial batch (one task running jobs one
 * after another). Prints one JSON line per (shape, K, mode), as c/scaling.cu does. The
 * latency-bound shape runs a second time with its steps captured once per job slot and
 * replayed (`system: 'ours_graph'`), reported beside the eager rows, and a third time as the
 * floor under ours from JavaScript (`system: 'ours_floor'`): the same launches as bare koffi
 * calls on streams of its own and waits on bare `cuStreamQuery` calls, from plain async
 * functions, no runtime (scaling-floor.ts), and a fourth time as that floor on `workers` worker
 * threads of its own (`system: 'ours_floor_workers'`), the floor under the worker tasks. The
 * latency-bound and mixed shapes also run as worker tasks
 * (`system: 'ours_workers'`): a `WorkerPool` of `workers` threads (scaling-jobs.ts) runs each
 * job as a task of its own on the least busy worker, `pool.run(shape, slot)`; the jobs are the
 * same code as the main thread's (scaling-work.ts). A `_meta` line gives the workers. They also
 * run as ours' jobs with the issue engine started (`system: 'ours_engine'`): the same K tasks on
 * the main thread, their launches made by `issuers` issuer threads (`startIssueEngine`). The
 * engine runs only during that variant's turns (started before its warm-up, stopped with
 * `stopIssueEngine` after its batches), so the other variants launch as without it; its `_meta`
 * line gives the issuers and what the engine counted over all its turns. The `systems` setting
 * runs some of these variants only (`systems=ours_floor_workers,ours_workers workers=32`).
 *
 * Usage: tsx --conditions=@cuda-tasks/source src/scaling.ts [key=value ...] (see
 * scaling-config.ts)
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import {
  driver,
  type Graph,
  issueEngineStatistics,
  type Kernel,
  launch,
  startIssueEngine,
  stopIssueEngine,
} from '@cuda-tasks/cudadrv';
import { capture, synchronize, task, WorkerPool } from '@cuda-tasks/task-runtime';
import { bareStreamWaiter } from './bare.js';
import {
  INTERLEAVE_ROUNDS,
  interleave,
  type OursSystem,
  parseScalingArguments,
  type ShapeName,
  samplesFor,
} from './scaling-config.js';
import {
  disposeFloorSlot,
  type FloorSlot,
  type FloorWorkers,
  floorJobOf,
  makeFloorSlot,
  startFloorWorkers,
} from './scaling-floor.js';
import {
  controlJob,
  type JobSlot,
  latencyJob,
  launchShapes,
  loadScalingWork,
  makeJobSlot,
  mixedJob,
  type ScalingWork,
} from './scaling-work.js';

const settings = process.argv.slice(2);
const config = parseScalingArguments(settings);
/** Whether ours' variant `system` runs (the `systems` setting). */
const wanted = (system: OursSystem) => config.systems.includes(system);
/** Whether a shape that is not the control runs (the floors, workers and engine run those). */
const eagerShapes = config.shapes.some((shape) => shape !== 'control');

/** `axpb_f32` from kernels.ptx (loaded in `main`): y = a x + b, x only read. */
let axpb: Kernel;
/** The jobs' shared state (loaded in `main`). */
let work: ScalingWork;

/** What one job slot owns: its buffers for every shape and its own generator (scaling-work.ts). */
interface Slot extends JobSlot {
  /**
   * The latency job's steps between two synchronize points, captured once (the graph variant):
   * one graph per parity of the first step, since the steps alternate x -> y and y -> x.
   */
  latencyGraphs: (Graph | undefined)[];
}

const { latencyLaunch } = launchShapes(config);

function makeSlot(index: number): Slot {
  return {
    ...makeJobSlot(config, index, { control: true }),
    latencyGraphs: [undefined, undefined],
  };
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

/** Each shape's job as the main thread's tasks run it (scaling-work.ts; `work` is loaded first). */
const JOBS: Record<ShapeName, (slot: Slot) => Promise<void>> = {
  latency: (slot) => latencyJob(work, slot),
  mixed: (slot) => mixedJob(work, slot),
  control: (slot) => controlJob(work, slot),
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
  system: Variant['system'],
  shape: ShapeName,
  k: number,
  mode: 'concurrent' | 'serial',
  jobs: number,
  seconds: readonly number[],
  turns: readonly number[],
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
      turns,
      loop_delay_max_ms: Math.round(loopDelayMaxMs * 1000) / 1000,
    }),
  );
}

/** One system's way of running a shape: a serial batch and a batch of K jobs together. */
interface Variant {
  system: OursSystem;
  shape: ShapeName;
  serial: () => Promise<unknown>;
  concurrent: (k: number) => Promise<unknown>;
  /** The untimed warm-up batch before each of its turns (default: `serial`). */
  warmup?: () => Promise<unknown>;
  /** Before each of its turns, before the warm-up (the issue engine's start). */
  enter?: () => void;
  /** After each of its turns (the issue engine's stop), also when a batch failed. */
  leave?: () => Promise<void>;
}

/** What the issue engine counted over the engine variant's turns (its `_meta` line). */
const engineCounts = {
  turns: 0,
  launches: 0,
  wakeUps: 0,
  fenceWaits: 0,
  roomWaits: 0,
  /** Waits whose stream the issuers were asked to query, and those they left to the thread. */
  queries: 0,
  queriesLeft: 0,
  /** The longest the engine held the main thread at once (a fence or a wait for room), ms. */
  longestWaitMs: 0,
};

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * Whether the issue engine works here: started, one job of ours run through it, stopped.
 * Returns why not (then the engine variant is left out with a `_skip` line), else undefined.
 */
async function probeEngine(job: () => Promise<unknown>): Promise<string | undefined> {
  try {
    startIssueEngine({ issuers: config.issuers, queriesOnIssuers: config.engineQueries === 1 });
  } catch (error) {
    return `startIssueEngine failed: ${messageOf(error)}`;
  }
  let failure: string | undefined;
  try {
    await job();
  } catch (error) {
    failure = `a job through the engine failed: ${messageOf(error)}`;
  }
  const statistics = issueEngineStatistics();
  await stopIssueEngine();
  if (failure !== undefined) return failure;
  if (statistics.failure !== undefined) return `an issuer failed: ${statistics.failure}`;
  if (statistics.launches === 0) return 'no launch of the job went through the engine';
  return undefined;
}

/** Starts the issue engine for a turn of the engine variant. */
function enterEngine(): void {
  startIssueEngine({ issuers: config.issuers, queriesOnIssuers: config.engineQueries === 1 });
}

/**
 * Stops the issue engine after a turn of the engine variant, adding its counts to
 * `engineCounts`; throws when an issuer thread failed during the turn (the turn's results
 * would not be the engine's). Its threads are kept asleep for the next turn (starting them
 * again each turn would add their start-up to the run); `main` ends them at the end.
 */
async function leaveEngine(): Promise<void> {
  const statistics = issueEngineStatistics();
  await stopIssueEngine({ keepThreads: true });
  engineCounts.turns++;
  engineCounts.launches += statistics.launches;
  engineCounts.wakeUps += statistics.wakeUps;
  engineCounts.fenceWaits += statistics.fenceWaits;
  engineCounts.roomWaits += statistics.roomWaits;
  engineCounts.queries += statistics.queries;
  engineCounts.queriesLeft += statistics.queriesLeft;
  engineCounts.longestWaitMs = Math.max(engineCounts.longestWaitMs, statistics.longestWaitMs);
  if (statistics.failure !== undefined) {
    throw new Error(`scaling: the issue engine failed: ${statistics.failure}`);
  }
}

/**
 * Starts the worker-tasks variant's pool: `config.workers` workers importing scaling-jobs.ts,
 * each given the settings by an `init` job. The W `init` calls start together, so that each goes
 * to another (least busy) worker; their thread ids say whether every worker ran one.
 */
async function startWorkers(): Promise<WorkerPool> {
  const pool = await WorkerPool.start(new URL('./scaling-jobs.ts', import.meta.url), {
    workers: config.workers,
    startTimeoutMs: 120_000,
  });
  try {
    const ids = await Promise.all(
      Array.from({ length: config.workers }, () => pool.run<number>('init', settings)),
    );
    if (new Set(ids).size !== config.workers) {
      throw new Error(
        `scaling: init reached ${new Set(ids).size} of the ${config.workers} workers (thread ids ${ids.join(', ')})`,
      );
    }
  } catch (error) {
    await pool.close();
    throw error;
  }
  return pool;
}

async function main(): Promise<void> {
  work = loadScalingWork(config);
  axpb = work.axpb;
  const maxK = Math.max(...config.ks);
  const slots = Array.from({ length: maxK }, (_, index) => makeSlot(index));
  await synchronize();
  const ofTasks = (
    system: Variant['system'],
    shape: ShapeName,
    job: (slot: Slot) => Promise<void>,
  ) => ({
    system,
    shape,
    serial: () =>
      task(async () => {
        for (let i = 0; i < config.serialJobs; i++) await job(slots[0]!);
      }),
    concurrent: (k: number) =>
      Promise.all(Array.from({ length: k }, (_, index) => task(() => job(slots[index]!)))),
  });
  // Each shape as the suite runs it (ours); the latency-bound shape also with its steps
  // captured once per job slot and replayed (ours_graph); the latency-bound and mixed shapes
  // also as the floor (ours_floor).
  const floorWait = bareStreamWaiter((stream) => driver().cuStreamQuery(stream));
  const floorSlots: FloorSlot[] =
    eagerShapes && wanted('ours_floor')
      ? slots.map((slot, index) => makeFloorSlot(work, slot, index))
      : [];
  // The floor on W threads (ours_floor_workers): the floor's jobs on `workers` worker threads
  // of their own (scaling-floor-worker.ts). One that fails to start leaves its rows out.
  let floorWorkers: FloorWorkers | undefined;
  if (eagerShapes && wanted('ours_floor_workers')) {
    try {
      floorWorkers = await startFloorWorkers(settings, config.workers);
    } catch (error) {
      const reason = messageOf(error);
      console.error(reason);
      console.log(JSON.stringify({ name: '_skip', system: 'ours_floor_workers', reason }));
    }
  }
  // The worker tasks: `workers` threads, each job one `pool.run(shape, slot)` (scaling-jobs.ts).
  // A pool that fails to start leaves its rows out (a `_skip` line), not the other variants'.
  let pool: WorkerPool | undefined;
  if (eagerShapes && wanted('ours_workers')) {
    try {
      pool = await startWorkers();
    } catch (error) {
      const reason = `the worker pool did not start: ${error instanceof Error ? error.message : String(error)}`;
      console.error(`scaling: ${reason}`);
      console.log(JSON.stringify({ name: '_skip', system: 'ours_workers', reason }));
    }
  }
  if (pool !== undefined) {
    console.log(
      JSON.stringify({
        name: '_meta',
        system: 'ours_workers',
        workers: pool.size,
        jobs: pool.jobs,
      }),
    );
  }
  // The issue engine, tried once on one job; a failure leaves its rows out (a `_skip` line).
  const engineShape = config.shapes.find((shape) => shape !== 'control');
  let engineWorks = false;
  if (engineShape !== undefined && wanted('ours_engine')) {
    const reason = await probeEngine(() => task(() => JOBS[engineShape](slots[0]!)));
    if (reason === undefined) engineWorks = true;
    else {
      console.error(`scaling: ${reason}`);
      console.log(
        JSON.stringify({
          name: '_skip',
          system: 'ours_engine',
          reason: `the issue engine: ${reason}`,
        }),
      );
    }
  }
  const variants: Variant[] = [];
  for (const shape of config.shapes) {
    if (wanted('ours')) variants.push(ofTasks('ours', shape, JOBS[shape]));
    if (shape === 'control') continue;
    if (pool !== undefined) {
      const workers = pool;
      const runSerial = async (slot: number) => {
        for (let i = 0; i < config.serialJobs; i++) await workers.run(shape, slot);
      };
      variants.push({
        system: 'ours_workers',
        shape,
        serial: () => runSerial(0),
        concurrent: (k) =>
          Promise.all(Array.from({ length: k }, (_, index) => workers.run(shape, index))),
        // A serial batch on every worker at once: each worker's own V8 warms its job code.
        warmup: () =>
          Promise.all(Array.from({ length: workers.size }, (_, index) => runSerial(index))),
      });
    }
    // Ours' jobs with the issue engine started for the variant's turns.
    if (engineWorks) {
      variants.push({
        ...ofTasks('ours_engine', shape, JOBS[shape]),
        enter: enterEngine,
        leave: leaveEngine,
      });
    }
    if (shape === 'latency' && wanted('ours_graph')) {
      variants.push(ofTasks('ours_graph', shape, latencyGraphJob));
    }
    const floorJob = floorJobOf(shape);
    if (wanted('ours_floor')) {
      variants.push({
        system: 'ours_floor',
        shape,
        serial: async () => {
          for (let i = 0; i < config.serialJobs; i++) {
            await floorJob(work, floorSlots[0]!, floorWait);
          }
        },
        concurrent: (k) =>
          Promise.all(
            Array.from({ length: k }, (_, index) => floorJob(work, floorSlots[index]!, floorWait)),
          ),
      });
    }
    if (floorWorkers !== undefined) {
      const threads = floorWorkers;
      variants.push({
        system: 'ours_floor_workers',
        shape,
        serial: () => threads.serial(shape, config.serialJobs),
        concurrent: (k) => threads.concurrent(shape, k),
      });
    }
  }
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  let warmed: Variant | undefined;
  /** One turn: `samples` timed batches of `batch` into `seconds`, the loop delay into `delay`. */
  const turn = async (
    variant: Variant,
    samples: number,
    batch: () => Promise<unknown>,
    seconds: number[],
    delay: { max: number },
  ) => {
    variant.enter?.();
    try {
      await warmAndMeasure(variant, samples, batch, seconds, delay);
    } finally {
      await variant.leave?.();
    }
  };
  const warmAndMeasure = async (
    variant: Variant,
    samples: number,
    batch: () => Promise<unknown>,
    seconds: number[],
    delay: { max: number },
  ) => {
    if (warmed !== variant || variant.enter !== undefined) {
      // V8 optimizes the launch and library paths after a few thousand calls; C has no JIT to
      // warm. A serial warm-up right before a variant's turn (not timed): another variant's
      // calls in between (captures, bare calls) can leave this one's code to be optimized
      // again while it is timed. A variant that starts something for its turn (the issue
      // engine) warms up every turn: the first batches also wait for its threads to start.
      const batches = Math.ceil((variant.shape === 'control' ? 25 : 200) / config.serialJobs);
      for (let i = 0; i < batches; i++) await (variant.warmup ?? variant.serial)();
      warmed = variant;
    }
    histogram.reset();
    histogram.enable();
    seconds.push(...(await measure(samples, batch)));
    histogram.disable();
    delay.max = Math.max(delay.max, histogram.max / 1e6);
  };
  for (const shape of config.shapes) {
    // The variants of a shape take turns at each row (interleave), so that a drift in the
    // machine's speed shows in all of them alike and their ratios hold.
    const ofShape = variants.filter((variant) => variant.shape === shape);
    const rows = [
      { mode: 'serial' as const, k: 1, jobs: config.serialJobs, samples: config.minSamples },
      ...config.ks.map((k) => ({
        mode: 'concurrent' as const,
        k,
        jobs: k,
        samples: samplesFor(config, k),
      })),
    ];
    for (const row of rows) {
      const seconds = ofShape.map(() => [] as number[]);
      const turns = ofShape.map(() => [] as number[]);
      const delays = ofShape.map(() => ({ max: 0 }));
      for (const { variant: index, samples } of interleave(
        ofShape.length,
        INTERLEAVE_ROUNDS,
        row.samples,
      )) {
        const variant = ofShape[index]!;
        const batch = row.mode === 'serial' ? variant.serial : () => variant.concurrent(row.k);
        await turn(variant, samples, batch, seconds[index]!, delays[index]!);
        turns[index]!.push(samples);
      }
      ofShape.forEach((variant, index) => {
        emit(
          variant.system,
          shape,
          row.k,
          row.mode,
          row.jobs,
          seconds[index]!,
          turns[index]!,
          delays[index]!.max,
        );
      });
    }
  }
  if (engineCounts.turns > 0) {
    console.log(
      JSON.stringify({
        name: '_meta',
        system: 'ours_engine',
        issuers: config.issuers,
        turns: engineCounts.turns,
        launches: engineCounts.launches,
        wake_ups: engineCounts.wakeUps,
        fence_waits: engineCounts.fenceWaits,
        room_waits: engineCounts.roomWaits,
        queries: engineCounts.queries,
        queries_left: engineCounts.queriesLeft,
        longest_wait_ms: Math.round(engineCounts.longestWaitMs * 1000) / 1000,
      }),
    );
  }
  for (const slot of floorSlots) disposeFloorSlot(slot);
  await floorWorkers?.close();
  await pool?.close();
  // The engine's threads kept asleep between its turns.
  await stopIssueEngine();
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
