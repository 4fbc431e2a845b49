/**
 * The same-process comparison: C's loops from c/inproc.cu (a shared library built with
 * nvcc beside the bench binary, called through koffi) and ours, in one process, on the same
 * context, kernel and stream, batch after batch alternating (C first in even pairs, ours
 * first in odd ones). Two processes run one after the other also measure the host's drift
 * between them; here both sides of a pair run within milliseconds of each other.
 *
 * Prints one JSON line per benchmark: `{ name, paired: true, ours_us, c_us, ratio, ratio_lo,
 * ratio_hi, pairs, c_call }`, where `ours_us` and `c_us` are medians over the pairs, `ratio`
 * the median of the per-pair ratios ours/C and `ratio_lo`..`ratio_hi` its 95% interval
 * (order statistics, no assumption on the distribution).
 *
 * The issue engine's rows (`runEnginePairs`, issue 34) run last, with the engine started for
 * them alone and stopped after (`stopIssueEngine`), so that every other row launches without
 * it; besides the paired lines they print one `engine_idle: true` line per issuer count (the
 * process's CPU time over a second of idle with the engine started, see `EngineIdleLine`).
 *
 * Usage: tsx --conditions=@cuda-tasks/source src/paired.ts path/to/libinproc.so
 * [--only graphs|tasks100|latency|engine|withstream] (`--only graphs`: the graph rows alone,
 * see `runGraphPairs`; `--only tasks100`: the 100-task rows alone, see `runTasksPairs`;
 * `--only latency`: the latency-bound job's rows alone, see `runLatencyPairs`; `--only engine`:
 * the issue engine's rows alone, see `runEnginePairs`; `--only withstream`: the withStream rows
 * and their floors, see `runWithStreamPairs`) [--issuers 4,8] (the engine rows'
 * issuer counts, default `ENGINE_ISSUERS`)
 */

import { readFileSync } from 'node:fs';
import { handle as cublasHandle, gemm } from '@cuda-tasks/cublas';
import {
  check,
  DeviceArray,
  DeviceBuffer,
  driver,
  Event,
  issueEngineStatistics,
  launch,
  Module,
  Stream,
  startIssueEngine,
  stopIssueEngine,
} from '@cuda-tasks/cudadrv';
import { handle as curandHandle, rand } from '@cuda-tasks/curand';
import { handle as cusolverHandle } from '@cuda-tasks/cusolver';
import { kernelsPtxPath } from '@cuda-tasks/examples/kernels';
import { concurrentIteration, serialIteration } from '@cuda-tasks/examples/seed';
import { capture, stream, synchronize, synchronizeSync, task } from '@cuda-tasks/task-runtime';
import koffi from 'koffi';
import { AXPB_PARAMETERS, bareAxpbArguments, bareLaunchConfig, bareStreamWaiter } from './bare.js';
import { launchBatch, seedWorkload, tasksRound, timedOnce, withStreamBatch } from './batches.js';
import { median, medianInterval, nowUs, warmJit } from './harness.js';

/**
 * Pairs per benchmark after the warm-up pairs (25: the median ratio's 95% interval is the
 * 8th to the 18th ratio); single-iteration benchmarks take more.
 */
const PAIRS = 25;
const WARMUP_PAIRS = 3;

const ptxPath = kernelsPtxPath;

/** One same-process result line. */
export interface PairedLine {
  /** The benchmark's id, as in the cross-process table. */
  name: string;
  /** Marks a same-process line (the report picks these out). */
  paired: true;
  /** Our median over the pairs, microseconds per operation. */
  ours_us: number;
  /** C's median over the pairs, microseconds per operation. */
  c_us: number;
  /** The median of the per-pair ratios ours/C. */
  ratio: number;
  /** Lower end of the median ratio's 95% interval. */
  ratio_lo: number;
  /** Upper end of the median ratio's 95% interval. */
  ratio_hi: number;
  /** Timed pairs (warm-up pairs not counted). */
  pairs: number;
  /** What C's side calls, e.g. `cuLaunchKernel`. */
  c_call: string;
}

type Batch = () => number | Promise<number>;

/** C's batch value, checked: inproc.cu returns a negative status on failure. */
function checked(what: string, value: number): number {
  if (!(value >= 0)) throw new Error(`inproc ${what} failed with status ${-value}`);
  return value;
}

/**
 * Runs `warmups` then `pairs` pairs of (C batch, ours batch), alternating which goes first;
 * prints and returns the line.
 */
async function pair(
  name: string,
  cCall: string,
  c: Batch,
  ours: Batch,
  pairs = PAIRS,
  warmups = WARMUP_PAIRS,
): Promise<PairedLine> {
  const oursSamples: number[] = [];
  const cSamples: number[] = [];
  const ratios: number[] = [];
  for (let i = 0; i < warmups + pairs; i++) {
    let cValue: number;
    let oursValue: number;
    if (i % 2 === 0) {
      cValue = await c();
      oursValue = await ours();
    } else {
      oursValue = await ours();
      cValue = await c();
    }
    if (i < warmups) continue;
    oursSamples.push(oursValue);
    cSamples.push(cValue);
    ratios.push(oursValue / cValue);
  }
  const [low, high] = medianInterval(ratios);
  const line: PairedLine = {
    name,
    paired: true,
    ours_us: median(oursSamples),
    c_us: median(cSamples),
    ratio: median(ratios),
    ratio_lo: low,
    ratio_hi: high,
    pairs,
    c_call: cCall,
  };
  console.log(JSON.stringify(line));
  return line;
}

/**
 * Runs the whole same-process comparison against the C loops of the `libinproc.so` at
 * `libraryPath` (built by c/build.sh): withStream + launch (`runWithStreamPairs`, first),
 * launch, launch + wait, alloc + free, event record, SGEMM, withStream + launch again
 * (`withstream_launch_later`, decision 0048), the seed workload, the 100 tasks, the graph rows
 * (`runGraphPairs`) and last the issue engine's rows with `engineIssuers` issuer threads
 * (`runEnginePairs`), each as `PAIRS` pairs after `WARMUP_PAIRS`. Prints one JSON line per
 * benchmark and returns them.
 * @example const lines = await runPaired('/tmp/cuda-tasks-bench/libinproc.so');
 */
export async function runPaired(
  libraryPath: string,
  engineIssuers: readonly number[] = ENGINE_ISSUERS,
): Promise<PairedLine[]> {
  const lib = koffi.load(libraryPath);
  const C = {
    launchEmpty: lib.func('double inproc_launch_empty(uint64_t f, uint64_t s, int n)'),
    launchEmptyEx: lib.func('double inproc_launch_empty_ex(uint64_t f, uint64_t s, int n)'),
    noop: lib.func('int inproc_noop(uint64_t a, uint64_t b, uint64_t c, uint64_t d)'),
    noopLoop: lib.func('double inproc_noop_loop(int n)'),
    launchSync: lib.func('double inproc_launch_sync(uint64_t f, uint64_t s, int n)'),
    allocFree: lib.func('double inproc_alloc_free(uint64_t s, uint64_t bytes, int n)'),
    eventRecord: lib.func('double inproc_event_record(uint64_t s, int n)'),
    cublasCreate: lib.func('uint64_t inproc_cublas_create(uint64_t s)'),
    cublasDestroy: lib.func('int inproc_cublas_destroy(uint64_t h)'),
    sgemm: lib.func(
      'double inproc_sgemm(uint64_t h, uint64_t s, int n, uint64_t a, uint64_t b, uint64_t c, int calls)',
    ),
    seed: lib.func(
      'double inproc_seed(uint64_t h1, uint64_t h2, uint64_t s1, uint64_t s2, uint64_t sin_f, int n, uint64_t a1, uint64_t b1, uint64_t c1, uint64_t a2, uint64_t b2, uint64_t c2, int concurrent)',
    ),
  };

  const lines: PairedLine[] = [];
  const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
  const empty = module.kernel('empty_kernel', []);
  const sinKernel = module.kernel('sin_inplace', ['float32*', 'uint64']);
  const config = { grid: 1, block: 1 };
  const launches = 10_000;
  const roundTrips = 2_000;

  // First, while launch() has seen no other kernel or config shape and no library handle is
  // alive in the process; `withstream_launch_later` below measures the same batch again after
  // the other launch rows.
  lines.push(...(await runWithStreamPairs(lib)));

  await task(
    async () => {
      const s = stream();
      const sh = s.handle;
      const f = empty.handle;
      const cLaunchEmpty = () => checked('launch_empty', C.launchEmpty(f, sh, launches));
      const oursLaunch = launchBatch(empty, config, s, launches);
      lines.push(await pair('launch_empty', 'cuLaunchKernel', cLaunchEmpty, oursLaunch));

      // Where the difference goes: the bare koffi calls (no wrapper), paired with the same C
      // loop. cuLaunchKernel with C's arguments, and cuLaunchKernelEx as launch() calls it.
      const api = driver();
      const parameters = empty.ffiArgumentArray;
      const ffiStream = s.ffiHandle;
      lines.push(
        await pair('koffi_cuLaunchKernel', 'cuLaunchKernel', cLaunchEmpty, () => {
          const t0 = nowUs();
          for (let i = 0; i < launches; i++)
            api.cuLaunchKernel(empty.ffiHandle, 1, 1, 1, 1, 1, 1, 0, ffiStream, parameters, 0);
          const t1 = nowUs();
          s.synchronize();
          return (t1 - t0) / launches;
        }),
      );

      // A CUlaunchConfig of our own, as launch() keeps one.
      const configPointer = bareLaunchConfig(s.handle);
      const configAddress = Number(configPointer);
      const bareLaunchEx = () => {
        const t0 = nowUs();
        for (let i = 0; i < launches; i++)
          api.cuLaunchKernelEx(configAddress, empty.ffiHandle, parameters, 0);
        const t1 = nowUs();
        s.synchronize();
        return (t1 - t0) / launches;
      };
      lines.push(
        await pair('koffi_cuLaunchKernelEx', 'cuLaunchKernel', cLaunchEmpty, bareLaunchEx),
      );
      // The same call against C's loop of cuLaunchKernelEx: the driver entry point alike on
      // both sides, so the ratio is koffi plus calling from JavaScript.
      lines.push(
        await pair(
          'koffi_cuLaunchKernelEx_vs_c_ex',
          'cuLaunchKernelEx',
          () => checked('launch_empty_ex', C.launchEmptyEx(f, sh, launches)),
          bareLaunchEx,
        ),
      );
      // koffi's own cost: a C function that does nothing, with the same four arguments,
      // from a JavaScript loop (ours_us) and from a C loop (c_us). If the bare launch's excess
      // over C is about this, the excess is koffi's call; if it is larger, the driver itself
      // runs slower between JavaScript calls (caches, branch predictors).
      lines.push(
        await pair(
          'koffi_noop_call',
          'a no-op C function through a function pointer',
          () => checked('noop_loop', C.noopLoop(launches)),
          () => {
            const noop = C.noop;
            const t0 = nowUs();
            for (let i = 0; i < launches; i++) noop(configAddress, empty.ffiHandle, parameters, 0);
            return (nowUs() - t0) / launches;
          },
        ),
      );
      // Our wrapper against the bare koffi call it makes (no C in this pair): what launch()
      // itself adds, whatever koffi costs.
      lines.push(
        await pair(
          'launch_over_bare_koffi',
          'bare koffi cuLaunchKernelEx (JavaScript, not C)',
          bareLaunchEx,
          oursLaunch,
        ),
      );

      lines.push(
        await pair(
          'launch_sync',
          'cuLaunchKernel + cuStreamSynchronize',
          () => checked('launch_sync', C.launchSync(f, sh, roundTrips)),
          async () => {
            const t0 = nowUs();
            for (let i = 0; i < roundTrips; i++) {
              launch(empty, config);
              await synchronize();
            }
            return (nowUs() - t0) / roundTrips;
          },
        ),
      );
      lines.push(
        await pair(
          'launch_sync_blocking',
          'cuLaunchKernel + cuStreamSynchronize',
          () => checked('launch_sync', C.launchSync(f, sh, roundTrips)),
          () => {
            const t0 = nowUs();
            for (let i = 0; i < roundTrips; i++) {
              launch(empty, config);
              synchronizeSync();
            }
            return (nowUs() - t0) / roundTrips;
          },
        ),
      );

      const pairs = (bytes: number) => () => {
        const t0 = nowUs();
        for (let i = 0; i < launches; i++) DeviceBuffer.allocate(bytes, { stream: s }).dispose();
        const t1 = nowUs();
        s.synchronize();
        return (t1 - t0) / launches;
      };
      lines.push(
        await pair(
          'alloc_free',
          'cuMemAllocAsync(256 B) + cuMemFreeAsync',
          () => checked('alloc_free', C.allocFree(sh, 256, launches)),
          pairs(256),
        ),
      );
      lines.push(
        await pair(
          'alloc_free_driver',
          'cuMemAllocAsync(128 KiB) + cuMemFreeAsync',
          () => checked('alloc_free', C.allocFree(sh, 128 * 1024, launches)),
          pairs(128 * 1024),
        ),
      );

      const event = Event.create();
      lines.push(
        await pair(
          'event_record',
          'cuEventRecord',
          () => checked('event_record', C.eventRecord(sh, launches)),
          () => {
            const t0 = nowUs();
            for (let i = 0; i < launches; i++) event.record(s);
            const t1 = nowUs();
            s.synchronize();
            return (t1 - t0) / launches;
          },
        ),
      );
      event.dispose();

      // cuBLAS: C's own handle on the same stream, C's loop; ours through gemm().
      const h = C.cublasCreate(sh) as number | bigint;
      if (!h) throw new Error('inproc_cublas_create failed');
      {
        const calls = 10_000;
        const a = rand('float32', [8, 8]);
        const b = rand('float32', [8, 8]);
        const c = rand('float32', [8, 8]);
        s.synchronize();
        lines.push(
          await pair(
            'sgemm_8',
            'cublasSgemm 8x8x8',
            () => checked('sgemm', C.sgemm(h, sh, 8, a.pointer, b.pointer, c.pointer, calls)),
            () => {
              const t0 = nowUs();
              for (let i = 0; i < calls; i++) gemm(a, b, c);
              const t1 = nowUs();
              s.synchronize();
              return (t1 - t0) / calls;
            },
          ),
        );
        for (const array of [a, b, c]) array.dispose();
      }
      C.cublasDestroy(h);

      koffi.free(configPointer);
    },
    { name: 'paired' },
  );
  lines.push(...(await runWithStreamPairs(lib, { later: true })));

  // The seed workload, one iteration per batch. C: two streams of its own with a cuBLAS
  // handle each (bench.cu's setup), the same arrays (every batch ends synchronized).
  {
    const n = 1024;
    const workload = await seedWorkload();
    const jobs = workload.jobs;
    const cs1 = Stream.create({ name: 'paired-c-1' });
    const cs2 = Stream.create({ name: 'paired-c-2' });
    const h1 = C.cublasCreate(cs1.handle) as number | bigint;
    const h2 = C.cublasCreate(cs2.handle) as number | bigint;
    if (!h1 || !h2) throw new Error('inproc_cublas_create failed');
    const [j1, j2] = [jobs[0]!, jobs[1]!];
    const seed = (concurrent: number) => () =>
      checked(
        'seed',
        C.seed(
          h1,
          h2,
          cs1.handle,
          cs2.handle,
          sinKernel.handle,
          n,
          j1.a.pointer,
          j1.b.pointer,
          j1.c.pointer,
          j2.a.pointer,
          j2.b.pointer,
          j2.c.pointer,
          concurrent,
        ),
      );
    const iterations = 201;
    lines.push(
      await pair(
        'seed_serial',
        '2 x (cublasSgemm 1024 + sin_inplace) on one stream, cuStreamSynchronize',
        seed(0),
        timedOnce(() => serialIteration(jobs)),
        iterations,
        20,
      ),
    );
    lines.push(
      await pair(
        'seed_concurrent',
        '2 x (cublasSgemm 1024 + sin_inplace) on two streams, cuStreamSynchronize each',
        seed(1),
        timedOnce(() => concurrentIteration(jobs)),
        iterations,
        20,
      ),
    );
    C.cublasDestroy(h1);
    C.cublasDestroy(h2);
    workload.dispose();
    cs1.dispose();
    cs2.dispose();
  }

  module.dispose();
  lines.push(...(await runTasksPairs(lib)));
  lines.push(...(await runLatencyPairs(lib)));
  lines.push(...(await runGraphPairs(lib)));
  lines.push(...(await runEnginePairs(lib, engineIssuers)));
  return lines;
}

/** Rows of the same-process comparison that run with the issue engine: its issuer threads. */
export interface EngineRowOptions {
  /** Issuer threads (`startIssueEngine({ issuers })`); absent: the rows without the engine. */
  issuers?: number;
}

/**
 * Starts the issue engine with `issuers` issuer threads, runs `body`, and stops the engine
 * (also when `body` throws). Throws when an issuer failed meanwhile, or when no launch went
 * through the engine (then the rows would not measure it).
 */
async function withEngine<T>(rows: string, issuers: number, body: () => Promise<T>): Promise<T> {
  startIssueEngine({ issuers, ...engineStart });
  let statistics: ReturnType<typeof issueEngineStatistics>;
  let result: T;
  try {
    result = await body();
  } finally {
    statistics = issueEngineStatistics();
    await stopIssueEngine();
  }
  checkEngine(rows, issuers, statistics);
  return result;
}

/**
 * After engine rows: prints what the engine counted over them (an `engine_stats: true` line:
 * launches, the wake-ups of sleeping issuers and the fences that had to wait, which say how
 * the time went), and throws when an issuer failed or no launch went through the engine.
 */
function checkEngine(
  rows: string,
  issuers: number,
  statistics: ReturnType<typeof issueEngineStatistics>,
): void {
  console.log(
    JSON.stringify({
      name: `engine_stats_${rows}_w${issuers}`,
      engine_stats: true,
      issuers,
      launches: statistics.launches,
      wake_ups: statistics.wakeUps,
      fence_waits: statistics.fenceWaits,
      room_waits: statistics.roomWaits,
      queries: statistics.queries,
      queries_left: statistics.queriesLeft,
      longest_wait_ms: Math.round(statistics.longestWaitMs * 1000) / 1000,
      ...(statistics.failure === undefined ? {} : { failure: statistics.failure }),
    }),
  );
  if (statistics.failure !== undefined) {
    throw new Error(`the issue engine failed (${rows} rows): ${statistics.failure}`);
  }
  if (statistics.launches === 0) {
    throw new Error(`the issue engine's ${rows} rows made no launch through the engine`);
  }
}

/** Tasks in the `tasks100` rows' batch. */
const TASKS = 100;

/**
 * The 100-task rows. `tasks100`: C launches an empty kernel on each of 100 streams of its own,
 * then cuStreamSynchronize each; ours starts 100 tasks that each `launch()` it and
 * `await synchronize()`, Promise.all. `tasks100_bare_koffi`, the floor under any per-task
 * await from JavaScript: 100 async functions, each the bare koffi cuLaunchKernelEx that
 * launch() makes (on the same 100 streams as C) and an await of a promise that a round-robin
 * of bare cuStreamQuery calls resolves (`bareStreamWaiter`), Promise.all; no runtime
 * around them, but their promises pay AsyncLocalStorage's hooks as every promise of a process
 * that runs tasks does. `tasks100_over_floor`: ours against that floor (no C in that pair).
 */
export async function runTasksPairs(
  lib: ReturnType<typeof koffi.load>,
  options: EngineRowOptions = {},
): Promise<PairedLine[]> {
  const tasksC = lib.func('double inproc_tasks(uint64_t f, const uint64_t *streams, int count)');
  const lines: PairedLine[] = [];
  const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
  const empty = module.kernel('empty_kernel', []);
  const config = { grid: 1, block: 1 };
  const streams = Array.from({ length: TASKS }, (_, i) => Stream.create({ name: `paired-${i}` }));
  const handles = BigUint64Array.from(streams.map((x) => x.handle));
  const c = () => checked('tasks', tasksC(empty.handle, handles, TASKS));
  const round = tasksRound(empty, config);
  if (options.issuers !== undefined) {
    // With the engine: ours' 100 tasks launch through its issuers; C as in `tasks100`.
    try {
      await withEngine('tasks100', options.issuers, async () => {
        await warmJit(round, 30);
        lines.push(
          await pair(
            `tasks100_engine_w${options.issuers}`,
            'cuLaunchKernel on 100 streams, then cuStreamSynchronize each',
            c,
            timedOnce(round),
          ),
        );
      });
    } finally {
      for (const x of streams) x.dispose();
      module.dispose();
    }
    return lines;
  }
  await warmJit(round, 30);

  const api = driver();
  const parameters = empty.ffiArgumentArray;
  const configs = streams.map((x) => bareLaunchConfig(x.handle));
  const configAddresses = configs.map(Number);
  const ffiStreams = streams.map((x) => x.ffiHandle);
  // The floor's waits: bare cuStreamQuery calls, round-robin over the pending streams.
  const waitFor = bareStreamWaiter((x) => api.cuStreamQuery(x));
  const bareWait = (index: number) => waitFor(ffiStreams[index]!);
  const bareTask = async (index: number) => {
    check(
      api.cuLaunchKernelEx(configAddresses[index]!, empty.ffiHandle, parameters, 0),
      'cuLaunchKernelEx',
    );
    await bareWait(index);
  };
  const bareRound = () => Promise.all(Array.from({ length: TASKS }, (_, i) => bareTask(i)));
  await warmJit(bareRound, 30);

  lines.push(
    await pair(
      'tasks100',
      'cuLaunchKernel on 100 streams, then cuStreamSynchronize each',
      c,
      timedOnce(round),
    ),
  );
  lines.push(
    await pair(
      'tasks100_bare_koffi',
      'cuLaunchKernel on 100 streams, then cuStreamSynchronize each',
      c,
      timedOnce(bareRound),
    ),
  );
  lines.push(
    await pair(
      'tasks100_over_floor',
      'tasks100_bare_koffi (JavaScript, not C)',
      timedOnce(bareRound),
      timedOnce(round),
    ),
  );
  for (const pointer of configs) koffi.free(pointer);
  for (const x of streams) x.dispose();
  module.dispose();
  return lines;
}

/** The latency-bound job of the scaling benchmark (scaling-config.ts's defaults): its launches. */
const LATENCY_STEPS = 20;
/** A wait after every this many launches (and after the last). */
const LATENCY_SYNC_EVERY = 5;
/** Floats each launch reads and writes. */
const LATENCY_N = 65536;
/** Jobs per batch, one after another. */
const LATENCY_JOBS = 20;

/**
 * The latency-bound job of the scaling benchmark at K = 1, in one process: 20 `axpb_f32`
 * launches over 65,536 floats (y <- 0.5 x + 1 and x <- 0.5 y + 1 in turn), a wait after every
 * 5; a batch is 20 jobs one after another, microseconds per job. `latency_job`: ours, each job
 * its own task as the scaling benchmark starts it at K = 1 (`Promise.all` of one `task()`,
 * `launch()`, `await synchronize()`), against C's one thread polling (cuLaunchKernel, a
 * cuStreamQuery spin), its faster variant at K = 1; `latency_job_c_sync`: ours against C
 * waiting with cuStreamSynchronize (its K-threads variant at K = 1). `latency_job_bare_koffi`:
 * the Node floor (bare koffi cuLaunchKernelEx, a round-robin of bare cuStreamQuery, no runtime)
 * against C's polling; `latency_job_over_floor`: ours against that floor. The scaling
 * benchmark's target at K = 1 (ours >= 0.9x the better C variant's jobs/s) is ours' time
 * <= 1.11x C's here. The results are checked once against a float64 CPU run of the same steps.
 */
export async function runLatencyPairs(
  lib: ReturnType<typeof koffi.load>,
  options: EngineRowOptions = {},
): Promise<PairedLine[]> {
  const latencyC = lib.func(
    'double inproc_latency_jobs(uint64_t f, uint64_t s, uint64_t x, uint64_t y, unsigned long long n, unsigned int grid, unsigned int block, float a, float b, int steps, int sync_every, int poll, int jobs)',
  );
  const lines: PairedLine[] = [];
  const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
  const axpb = module.kernel('axpb_f32', [...AXPB_PARAMETERS]);
  const block = 256;
  const grid = LATENCY_N / block;
  const config = { grid, block };
  const [a, b] = [0.5, 1];
  const start = Float32Array.from({ length: LATENCY_N }, (_, i) => (i % 97) / 97);
  // Ours' buffers, and C's and the floor's (raw addresses on a stream of their own).
  const oursX = DeviceArray.fromHost(start);
  const oursY = DeviceArray.fromHost(start);
  const bareX = DeviceArray.fromHost(start);
  const bareY = DeviceArray.fromHost(start);
  const bareStream = Stream.create({ name: 'paired-latency' });
  await synchronize();
  const job = async () => {
    for (let step = 0; step < LATENCY_STEPS; step++) {
      if (step % 2 === 0) launch(axpb, config, oursY, oursX, a, b, LATENCY_N);
      else launch(axpb, config, oursX, oursY, a, b, LATENCY_N);
      if ((step + 1) % LATENCY_SYNC_EVERY === 0 || step === LATENCY_STEPS - 1) {
        await synchronize();
      }
    }
  };
  const ours = async () => {
    const t0 = nowUs();
    for (let i = 0; i < LATENCY_JOBS; i++) await Promise.all([task(job)]);
    return (nowUs() - t0) / LATENCY_JOBS;
  };
  const c = (poll: boolean) => () =>
    checked(
      'latency_jobs',
      latencyC(
        axpb.handle,
        bareStream.handle,
        bareX.pointer,
        bareY.pointer,
        LATENCY_N,
        grid,
        block,
        a,
        b,
        LATENCY_STEPS,
        LATENCY_SYNC_EVERY,
        poll ? 1 : 0,
        LATENCY_JOBS,
      ),
    );
  const api = driver();
  const launchConfig = bareLaunchConfig(bareStream.handle, grid, block);
  const launchConfigAddress = Number(launchConfig);
  const bareArguments = [
    bareAxpbArguments(bareY.pointer, bareX.pointer, a, b, LATENCY_N),
    bareAxpbArguments(bareX.pointer, bareY.pointer, a, b, LATENCY_N),
  ];
  const bareArgumentAddresses = bareArguments.map(Number);
  const waitFor = bareStreamWaiter((x) => api.cuStreamQuery(x));
  const bareJob = async () => {
    for (let step = 0; step < LATENCY_STEPS; step++) {
      check(
        api.cuLaunchKernelEx(
          launchConfigAddress,
          axpb.ffiHandle,
          bareArgumentAddresses[step & 1]!,
          0,
        ),
        'cuLaunchKernelEx',
      );
      if ((step + 1) % LATENCY_SYNC_EVERY === 0 || step === LATENCY_STEPS - 1) {
        await waitFor(bareStream.ffiHandle);
      }
    }
  };
  const floor = async () => {
    const t0 = nowUs();
    for (let i = 0; i < LATENCY_JOBS; i++) await bareJob();
    return (nowUs() - t0) / LATENCY_JOBS;
  };
  const engineIssuers = options.issuers;
  if (engineIssuers !== undefined) startIssueEngine({ issuers: engineIssuers, ...engineStart });
  let engineStatistics: ReturnType<typeof issueEngineStatistics> | undefined;
  try {
    // One job each, checked against float64 on the CPU: the same steps, rounded to float32.
    await Promise.all([task(job)]);
    await bareJob();
    const reference = latencyReference(start, a, b);
    for (const [label, array] of [
      ['ours', oursX],
      ['the floor', bareX],
    ] as const) {
      const got = await array.toHost();
      for (let i = 0; i < LATENCY_N; i++) {
        if (Math.abs(got[i]! - reference[i]!) > 1e-5 * Math.max(1, Math.abs(reference[i]!))) {
          throw new Error(
            `latency job (${label}): x[${i}] = ${got[i]}, expected ${reference[i]} (float64 on the CPU)`,
          );
        }
      }
    }
    await warmJit(ours, 100);
    if (engineIssuers !== undefined) {
      // With the engine: ours' job (checked above through the engine) against C's polling.
      lines.push(
        await pair(
          `latency_job_engine_w${engineIssuers}`,
          '20 x cuLaunchKernel (axpb, 65,536 floats), a cuStreamQuery spin every 5',
          c(true),
          ours,
        ),
      );
    } else {
      await warmJit(floor, 100);
      lines.push(
        await pair(
          'latency_job',
          '20 x cuLaunchKernel (axpb, 65,536 floats), a cuStreamQuery spin every 5',
          c(true),
          ours,
        ),
      );
      lines.push(
        await pair(
          'latency_job_c_sync',
          '20 x cuLaunchKernel (axpb, 65,536 floats), cuStreamSynchronize every 5',
          c(false),
          ours,
        ),
      );
      lines.push(
        await pair(
          'latency_job_bare_koffi',
          '20 x cuLaunchKernel (axpb, 65,536 floats), a cuStreamQuery spin every 5',
          c(true),
          floor,
        ),
      );
      lines.push(
        await pair(
          'latency_job_over_floor',
          'latency_job_bare_koffi (JavaScript, not C)',
          floor,
          ours,
        ),
      );
    }
  } finally {
    if (engineIssuers !== undefined) {
      engineStatistics = issueEngineStatistics();
      await stopIssueEngine();
    }
    koffi.free(launchConfig);
    for (const pointer of bareArguments) koffi.free(pointer);
    for (const array of [oursX, oursY, bareX, bareY]) array.dispose();
    bareStream.dispose();
    module.dispose();
  }
  if (engineStatistics !== undefined) checkEngine('latency_job', engineIssuers!, engineStatistics);
  return lines;
}

/**
 * x after one latency-bound job from x = y = `start`, in float64 with each step rounded to
 * float32 as the kernel stores it: y <- a x + b, x <- a y + b, ... (`LATENCY_STEPS` steps; the
 * last, an odd step, writes x).
 */
export function latencyReference(start: Float32Array, a: number, b: number): Float64Array {
  const x = Float64Array.from(start);
  const y = Float64Array.from(start);
  for (let step = 0; step < LATENCY_STEPS; step++) {
    const [to, from] = step % 2 === 0 ? [y, x] : [x, y];
    for (let i = 0; i < to.length; i++) to[i] = Math.fround(a * from[i]! + b);
  }
  return x;
}

/** The engine rows' issuer counts (issue 34: W = 4 and 8). */
export const ENGINE_ISSUERS: readonly number[] = [4, 8];
/** Launches per batch of the engine's push rows. */
const PUSH_LAUNCHES = 10_000;
/** Streams the spread push row launches on in turn. */
const PUSH_STREAMS = 8;
/** Milliseconds of each idle measurement of `EngineIdleLine`. */
const IDLE_MS = 1000;

/**
 * The process idle with the issue engine started (issue 34: no busy core while idle): the
 * process's CPU time (`process.cpuUsage`, user + system, every thread) over `wall_ms` of an
 * idle event loop after the engine's rows, and over the same wait after `stopIssueEngine`. An
 * issuer spinning instead of sleeping would show as about one busy core.
 */
export interface EngineIdleLine {
  /** `engine_idle_w<issuers>`. */
  name: string;
  /** Marks an idle line (the report picks these out). */
  engine_idle: true;
  /** Issuer threads. */
  issuers: number;
  /** The idle wait with the engine started, ms (wall time). */
  wall_ms: number;
  /** CPU time of the process over it, ms. */
  cpu_ms: number;
  /** `cpu_ms / wall_ms`: cores kept busy. */
  busy_cores: number;
  /** The same wait after the engine stopped, ms. */
  stopped_wall_ms: number;
  /** CPU time of the process over that wait, ms. */
  stopped_cpu_ms: number;
  /** `stopped_cpu_ms / stopped_wall_ms`. */
  stopped_busy_cores: number;
}

/** One idle measurement: the wall time of an idle wait and the process's CPU time over it. */
export interface IdleSample {
  /** The wait's wall time, ms. */
  wall_ms: number;
  /** The process's CPU time over the wait (user + system, every thread), ms. */
  cpu_ms: number;
}

/**
 * The idle line of `issuers` issuer threads from the measurement with the engine started and
 * the one after it stopped; figures rounded to 3 decimals. Throws for a wall time that is not
 * positive (no wait measured).
 * @example engineIdleLine(8, { wall_ms: 1000, cpu_ms: 2 }, { wall_ms: 1000, cpu_ms: 1 });
 */
export function engineIdleLine(
  issuers: number,
  started: IdleSample,
  stopped: IdleSample,
): EngineIdleLine {
  for (const sample of [started, stopped]) {
    if (!(sample.wall_ms > 0) || !(sample.cpu_ms >= 0)) {
      throw new Error(
        `engine idle: a wait of ${sample.wall_ms} ms with ${sample.cpu_ms} ms of CPU time`,
      );
    }
  }
  const round = (value: number) => Math.round(value * 1000) / 1000;
  return {
    name: `engine_idle_w${issuers}`,
    engine_idle: true,
    issuers,
    wall_ms: round(started.wall_ms),
    cpu_ms: round(started.cpu_ms),
    busy_cores: round(started.cpu_ms / started.wall_ms),
    stopped_wall_ms: round(stopped.wall_ms),
    stopped_cpu_ms: round(stopped.cpu_ms),
    stopped_busy_cores: round(stopped.cpu_ms / stopped.wall_ms),
  };
}

/** Waits `ms` with nothing to do; the wall time and the process's CPU time over the wait. */
async function idleSample(ms: number): Promise<IdleSample> {
  const before = process.cpuUsage();
  const t0 = performance.now();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const used = process.cpuUsage(before);
  return { wall_ms: performance.now() - t0, cpu_ms: (used.user + used.system) / 1000 };
}

/**
 * The main thread's cost per launch with the issue engine (issue 34: <= 1 us): 10,000
 * `launch()` of the empty kernel pushed without waiting for the GPU, the time of the loop
 * over 10,000 (the drain after it not timed), beside C's loop of 10,000 cuLaunchKernel for
 * scale (the target is on ours' microseconds, not the ratio). `engine_push_w<W>`: on the
 * task's stream (one issuer drains it); `engine_push_8streams_w<W>`: on 8 streams in turn
 * (`launch()` given the stream), spread over the issuers. Then the idle line
 * (`EngineIdleLine`): one second idle with the engine started, and one after it stopped.
 */
export async function runEnginePushPairs(
  lib: ReturnType<typeof koffi.load>,
  issuers: number,
): Promise<PairedLine[]> {
  const launchEmpty = lib.func('double inproc_launch_empty(uint64_t f, uint64_t s, int n)');
  const lines: PairedLine[] = [];
  const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
  const empty = module.kernel('empty_kernel', []);
  const config = { grid: 1, block: 1 };
  const spread = Array.from({ length: PUSH_STREAMS }, (_, i) =>
    Stream.create({ name: `paired-push-${i}` }),
  );
  const explicit = spread.map((on) => ({ ...config, stream: on }));
  const cCall = "cuLaunchKernel, C's loop (for scale: the target is ours' us, <= 1 us)";
  let started: IdleSample | undefined;
  try {
    await withEngine('engine_push', issuers, () =>
      task(
        async () => {
          const s = stream();
          const sh = s.handle;
          const c = () => checked('launch_empty', launchEmpty(empty.handle, sh, PUSH_LAUNCHES));
          const oneStream = launchBatch(empty, config, s, PUSH_LAUNCHES);
          const spreadBatch = () => {
            const t0 = nowUs();
            for (let i = 0; i < PUSH_LAUNCHES; i++) launch(empty, explicit[i % PUSH_STREAMS]!);
            const t1 = nowUs();
            for (const on of spread) on.synchronize();
            return (t1 - t0) / PUSH_LAUNCHES;
          };
          await warmJit(oneStream, 5);
          await warmJit(spreadBatch, 5);
          lines.push(await pair(`engine_push_w${issuers}`, cCall, c, oneStream));
          lines.push(await pair(`engine_push_8streams_w${issuers}`, cCall, c, spreadBatch));
          started = await idleSample(IDLE_MS);
        },
        { name: 'paired-engine-push' },
      ),
    );
  } finally {
    for (const on of spread) on.dispose();
    module.dispose();
  }
  const stopped = await idleSample(IDLE_MS);
  console.log(JSON.stringify(engineIdleLine(issuers, started!, stopped)));
  return lines;
}

/**
 * The issue engine's rows (issue 34), for each issuer count W of `issuers` (default 4 and 8),
 * each with the engine started for it alone and stopped after: `tasks100_engine_w<W>` (the 100
 * tasks of `tasks100` against the same C; target <= 1.0x), `latency_job_engine_w<W>` (the job
 * of `latency_job` against C's polling, checked against float64 on the CPU through the engine;
 * target <= 1.12x), `engine_push_w<W>` and `engine_push_8streams_w<W>` (the main thread's cost
 * per launch; target <= 1 us), and an `engine_idle_w<W>` line (see `runEnginePushPairs`).
 * Throws when an issuer failed or no launch went through the engine.
 */
export async function runEnginePairs(
  lib: ReturnType<typeof koffi.load>,
  issuers: readonly number[] = ENGINE_ISSUERS,
): Promise<PairedLine[]> {
  const lines: PairedLine[] = [];
  for (const w of issuers) {
    lines.push(...(await runTasksPairs(lib, { issuers: w })));
    lines.push(...(await runLatencyPairs(lib, { issuers: w })));
    lines.push(...(await runEnginePushPairs(lib, w)));
  }
  return lines;
}

/**
 * The withStream rows (`--only withstream`), against C's loop that launches the empty kernel
 * alternating two streams (`inproc_launch_switch`): `withstream_launch` (a launch inside
 * `withStream`, the streams alternating), `withstream_launch_libs` (the same once the task holds
 * cuBLAS, cuRAND and cuSOLVER handles), and the floors under them, `koffi_launch_switch` (the
 * bare koffi call) and `launch_switch_explicit` (`launch()` given the stream). `runPaired` runs
 * them first, while no library handle is alive in the process and `launch()` has seen no other
 * kernel or config shape. With `later`, only the first batch, as `withstream_launch_later`
 * (no target): `runPaired` runs it after its other launch rows, where V8's feedback at
 * `launch()` and at `resolveStream` holds the other rows' kernels and configs, as in a process
 * that launches many kernels in many ways.
 * @example const lines = await runWithStreamPairs(koffi.load('/tmp/cuda-tasks-bench/libinproc.so'));
 */
export async function runWithStreamPairs(
  lib: ReturnType<typeof koffi.load>,
  options: { later?: boolean } = {},
): Promise<PairedLine[]> {
  const launchSwitch = lib.func(
    'double inproc_launch_switch(uint64_t f, uint64_t s1, uint64_t s2, int n)',
  );
  const lines: PairedLine[] = [];
  const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
  const empty = module.kernel('empty_kernel', []);
  const config = { grid: 1, block: 1 };
  const launches = 10_000;
  const api = driver();
  const parameters = empty.ffiArgumentArray;
  await task(
    async () => {
      const s1 = Stream.create({ name: 'paired-1' });
      const s2 = Stream.create({ name: 'paired-2' });
      try {
        await withStreamRows(s1, s2);
      } finally {
        s1.dispose();
        s2.dispose();
      }
    },
    { name: 'paired-withstream' },
  );
  module.dispose();
  return lines;

  async function withStreamRows(s1: Stream, s2: Stream): Promise<void> {
    const cLaunchSwitch = () =>
      checked('launch_switch', launchSwitch(empty.handle, s1.handle, s2.handle, launches));
    const oursWithStream = withStreamBatch(s1, s2, () => launch(empty, config), launches);
    lines.push(
      await pair(
        options.later === true ? 'withstream_launch_later' : 'withstream_launch',
        'cuLaunchKernel alternating two streams',
        cLaunchSwitch,
        oursWithStream,
      ),
    );
    if (options.later === true) return;
    // withStream + launch once the task holds cuBLAS, cuRAND and cuSOLVER handles.
    cublasHandle();
    curandHandle();
    cusolverHandle();
    lines.push(
      await pair(
        'withstream_launch_libs',
        'cuLaunchKernel alternating two streams',
        cLaunchSwitch,
        oursWithStream,
      ),
    );
    // The floor under the withStream rows (after them: a launch() config with a `stream` key
    // is a second object shape at launch()'s property reads): the bare koffi call alternating
    // the two streams (a config arena per stream), and launch() given the stream explicitly
    // (no withStream).
    const configAddresses = [s1, s2].map((on) => bareLaunchConfig(on.handle));
    const [config1, config2] = configAddresses.map(Number) as [number, number];
    try {
      lines.push(
        await pair(
          'koffi_launch_switch',
          'cuLaunchKernel alternating two streams',
          cLaunchSwitch,
          () => {
            const t0 = nowUs();
            for (let i = 0; i < launches; i++)
              api.cuLaunchKernelEx(i % 2 ? config2 : config1, empty.ffiHandle, parameters, 0);
            const t1 = nowUs();
            s1.synchronize();
            s2.synchronize();
            return (t1 - t0) / launches;
          },
        ),
      );
    } finally {
      for (const copy of configAddresses) koffi.free(copy);
    }
    const explicit1 = { ...config, stream: s1 };
    const explicit2 = { ...config, stream: s2 };
    lines.push(
      await pair(
        'launch_switch_explicit',
        'cuLaunchKernel alternating two streams',
        cLaunchSwitch,
        () => {
          const t0 = nowUs();
          for (let i = 0; i < launches; i++) launch(empty, i % 2 ? explicit2 : explicit1);
          const t1 = nowUs();
          s1.synchronize();
          s2.synchronize();
          return (t1 - t0) / launches;
        },
      ),
    );
  }
}

/** What paired.ts is asked to run (`parsePairedArguments`). */
export interface PairedArguments {
  /** The libinproc.so path. */
  path: string;
  /** One group of rows alone, else all. */
  only?: 'graphs' | 'tasks100' | 'latency' | 'engine' | 'withstream';
  /** The engine rows' issuer counts. */
  issuers: number[];
  /**
   * Who queries a stream for a wait with the engine (`--engine-queries issuers|caller`,
   * `startIssueEngine`'s `queriesOnIssuers`); absent: the engine's default (its issuers).
   */
  engineQueries?: 'issuers' | 'caller';
}

/** `startIssueEngine`'s `queriesOnIssuers` for the engine rows (`--engine-queries`). */
const engineStart = { queriesOnIssuers: true };

const ONLY = ['graphs', 'tasks100', 'latency', 'engine', 'withstream'] as const;

/** The usage line printed for bad arguments. */
export const PAIRED_USAGE =
  'usage: paired.ts path/to/libinproc.so [--only graphs|tasks100|latency|engine|withstream] [--issuers 4,8] [--engine-queries issuers|caller]';

/**
 * Parses paired.ts's arguments (after the script): the library path first, then
 * `--only GROUP`, `--issuers W,W...` (integers 1..64, startIssueEngine's range) and
 * `--engine-queries issuers|caller` in any order. Throws an Error naming what is wrong.
 * @example parsePairedArguments(['lib.so', '--only', 'engine', '--issuers', '8']);
 */
export function parsePairedArguments(argv: readonly string[]): PairedArguments {
  const [path, ...rest] = argv;
  if (!path || path.startsWith('--'))
    throw new Error('paired.ts: the libinproc.so path is missing');
  const parsed: PairedArguments = { path, issuers: [...ENGINE_ISSUERS] };
  for (let i = 0; i < rest.length; i += 2) {
    const flag = rest[i]!;
    const value = rest[i + 1];
    if (value === undefined) throw new Error(`paired.ts: ${flag} needs a value`);
    if (flag === '--only') {
      if (!ONLY.includes(value as (typeof ONLY)[number])) {
        throw new Error(`paired.ts: --only must be one of ${ONLY.join(', ')}, got '${value}'`);
      }
      parsed.only = value as (typeof ONLY)[number];
    } else if (flag === '--issuers') {
      const counts = value.split(',').map(Number);
      if (!counts.every((w) => Number.isInteger(w) && w >= 1 && w <= 64)) {
        throw new Error(
          `paired.ts: --issuers must be integers from 1 to 64, separated by commas, got '${value}'`,
        );
      }
      parsed.issuers = counts;
    } else if (flag === '--engine-queries') {
      if (value !== 'issuers' && value !== 'caller') {
        throw new Error(`paired.ts: --engine-queries must be issuers or caller, got '${value}'`);
      }
      parsed.engineQueries = value;
    } else {
      throw new Error(`paired.ts: unknown argument '${flag}'`);
    }
  }
  return parsed;
}

/** Kernels in the graph benchmarks' chain. */
const CHAIN_STEPS = 20;
/** Floats each kernel of the chain reads and writes. */
const CHAIN_N = 4096;
/** Chains per batch (issued back to back, then drained). */
const CHAINS = 100;

/**
 * The graph rows: a chain of 20 `axpb_f32` kernels over 4,096 floats (scratch <- a x + b,
 * out <- a scratch + b, ..., each reading what the one before wrote), 100 chains per batch
 * issued back to back and drained, host time per chain with the drain: eager (20 `launch()`
 * against C's 20 cuLaunchKernel) and replayed (`graph.launch()` of a graph captured with
 * `capture()`, against C's cuGraphLaunch of the same CUgraphExec), and the replay against C's
 * eager chain. The replay's result is checked once against the eager chain's, bit for bit.
 */
export async function runGraphPairs(lib: ReturnType<typeof koffi.load>): Promise<PairedLine[]> {
  const C = {
    chainEager: lib.func(
      'double inproc_chain_eager(uint64_t f, uint64_t s, uint64_t x, uint64_t scratch, uint64_t out, unsigned long long n, int steps, unsigned int grid, unsigned int block, float a, float b, int chains)',
    ),
    graphLaunch: lib.func('double inproc_graph_launch(uint64_t exec, uint64_t s, int chains)'),
  };
  const lines: PairedLine[] = [];
  const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
  const axpb = module.kernel('axpb_f32', [...AXPB_PARAMETERS]);
  const config = { grid: CHAIN_N / 256, block: 256 };
  const [a, b] = [0.75, 0.01];
  await task(
    async () => {
      const s = stream();
      const x = rand('float32', CHAIN_N);
      const scratch = DeviceArray.empty('float32', CHAIN_N);
      const out = DeviceArray.empty('float32', CHAIN_N);
      const chain = () => {
        let source = x;
        for (let i = 0; i < CHAIN_STEPS; i++) {
          const target = i % 2 === 0 ? scratch : out;
          launch(axpb, config, target, source, a, b, CHAIN_N);
          source = target;
        }
      };
      const graph = await capture(chain);
      chain();
      s.synchronize();
      const eager = new Uint32Array((await out.toHost()).buffer);
      out.fill(0);
      graph.launch();
      s.synchronize();
      const replayed = new Uint32Array((await out.toHost()).buffer);
      if (replayed.some((bits, i) => bits !== eager[i])) {
        throw new Error('graph replay of the chain differs from the eager chain');
      }
      const oursEager = () => {
        const t0 = nowUs();
        for (let c = 0; c < CHAINS; c++) chain();
        s.synchronize();
        return (nowUs() - t0) / CHAINS;
      };
      const oursGraph = () => {
        const t0 = nowUs();
        for (let c = 0; c < CHAINS; c++) graph.launch();
        s.synchronize();
        return (nowUs() - t0) / CHAINS;
      };
      const cEager = () =>
        checked(
          'chain_eager',
          C.chainEager(
            axpb.handle,
            s.handle,
            x.pointer,
            scratch.pointer,
            out.pointer,
            CHAIN_N,
            CHAIN_STEPS,
            config.grid,
            config.block,
            a,
            b,
            CHAINS,
          ),
        );
      const cGraph = () =>
        checked('graph_launch', C.graphLaunch(graph.execHandle, s.handle, CHAINS));
      await warmJit(oursEager, 5);
      await warmJit(oursGraph, 5);
      lines.push(
        await pair('chain20_eager', '20 x cuLaunchKernel per chain, drained', cEager, oursEager),
      );
      lines.push(
        await pair(
          'chain20_graph',
          'cuGraphLaunch of the same CUgraphExec per chain, drained',
          cGraph,
          oursGraph,
        ),
      );
      lines.push(
        await pair(
          'chain20_graph_vs_c_eager',
          "C's eager chain: 20 x cuLaunchKernel per chain, drained",
          cEager,
          oursGraph,
        ),
      );
      graph.dispose();
      for (const array of [x, scratch, out]) array.dispose();
    },
    { name: 'paired-graphs' },
  );
  module.dispose();
  return lines;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  let parsed: PairedArguments;
  try {
    parsed = parsePairedArguments(process.argv.slice(2));
  } catch (error) {
    console.error(`${error instanceof Error ? error.message : String(error)}\n${PAIRED_USAGE}`);
    process.exit(2);
  }
  const { path, only, issuers } = parsed;
  engineStart.queriesOnIssuers = parsed.engineQueries !== 'caller';
  try {
    if (only === 'graphs') await runGraphPairs(koffi.load(path));
    else if (only === 'tasks100') await runTasksPairs(koffi.load(path));
    else if (only === 'latency') await runLatencyPairs(koffi.load(path));
    else if (only === 'engine') await runEnginePairs(koffi.load(path), issuers);
    else if (only === 'withstream') await runWithStreamPairs(koffi.load(path));
    else await runPaired(path, issuers);
    process.exit(0);
  } catch (error) {
    console.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
    process.exit(1);
  }
}
