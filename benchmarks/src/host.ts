/**
 * Our host cost, without a GPU (`pnpm --filter @cuda-tasks/benchmarks bench:host`): the same
 * work as ours and as bare koffi calls of the same driver functions, both against a stand-in
 * libcuda (@cuda-tasks/testing's `native/stubcuda.c`, built with the C compiler) whose functions
 * return at once and whose streams are always complete. What is left is what our JavaScript adds to each call
 * (argument checks and marshalling, the current-stream lookup, buffer bookkeeping, the task, the
 * waiter): the part of `ours/floor` in the GPU benchmarks that is ours to cut. The driver's own
 * cost and the GPU's are not in it: use `pnpm bench` on a GPU machine for those.
 *
 * Rows (ours against bare, median of the rounds, ours and bare taking turns in each round):
 * - launch: `launch()` of a kernel with two arrays and three scalars, per call;
 * - launch_no_arguments: `launch()` of a kernel without parameters, per call;
 * - withstream_launch: `withStream` over two streams in turn around a launch without parameters,
 *   against the bare launch alternating the same two streams;
 * - launch_synchronize: one launch and `await synchronize()` in a task, against a bare launch
 *   and an await of a bare `cuStreamQuery` waiter;
 * - task: a task whose body launches once and awaits, against the same body run without a
 *   task;
 * - latency_job_k{1,4,16}: the scaling benchmark's latency-bound job (20 launches, a wait every
 *   5), K at once, per job, against the Node floor's job;
 * - gemm: `gemm()` of 256 x 256 float32 matrices, against the bare `cublasLtMatmul` it makes;
 * - uniform: a generator's `uniform()` fill, against the bare `curandGenerateUniform`;
 * - mixed_job_k{1,16}: the scaling benchmark's mixed job (10 x (uniform fill, SGEMM, launch),
 *   one wait), K at once, per job, against the Node floor's job (its SGEMMs `cublasSgemm_v2`,
 *   as C's).
 *
 * The library rows run against stand-ins of libcublas, libcublasLt and libcurand beside the
 * stand-in libcuda (@cuda-tasks/testing's `native/stublibs.c`), whose functions also return at
 * once.
 *
 * With `--pressure`, the stand-in's cuLaunchKernelEx runs through 32 KiB of code and 32 KiB of
 * data (@cuda-tasks/testing's `native/pressure.c`), as a real driver call evicts what its caller
 * used from the core's first-level caches and branch predictors; only the launch rows run
 * (through latency_job_k16). What it reproduces of the real driver: decision 0050.
 *
 * Usage: tsx --conditions=@cuda-tasks/source src/host.ts [--quick] [--pressure]
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  buildNativeLibrary,
  buildPressureStandIn,
  STAND_IN_LIBRARIES_SOURCE,
  STAND_IN_SOURCE,
} from '@cuda-tasks/testing/native';
import { AXPB_PARAMETERS, bareAxpbArguments, bareLaunchConfig, bareStreamWaiter } from './bare.js';
import { alignColumns } from './report.js';

/**
 * Builds the stand-in libcuda (@cuda-tasks/testing's native/stubcuda.c) with `$CC` (default
 * `cc`) into a folder of this process's own, and returns the library's path. Throws an Error
 * naming the compiler and its output when the build fails.
 */
export function buildStandIn(): string {
  return buildNativeLibrary('libstubcuda.so', [STAND_IN_SOURCE]);
}

/**
 * Builds the stand-ins for libcublas, libcublasLt and libcurand (@cuda-tasks/testing's
 * native/stublibs.c, one library) with `$CC` into a folder of this process's own, and returns
 * its path. Throws an Error naming the compiler and its output when the build fails.
 */
export function buildLibraryStandIns(): string {
  return buildNativeLibrary('libstublibs.so', [STAND_IN_LIBRARIES_SOURCE]);
}

/** One row of the table: ours and bare, in `unit` per operation. */
export interface HostRow {
  /** The row's name, e.g. `launch`. */
  name: string;
  /** What one operation is, in words. */
  what: string;
  /** Ours: `unit`s per operation. */
  ours: number;
  /** The bare koffi calls: `unit`s per operation. */
  bare: number;
  /** Nanoseconds or microseconds. */
  unit: 'ns' | 'us';
}

/**
 * The table `bench:host` prints: per row ours, bare, ours - bare and ours / bare.
 * @example formatHostTable([{ name: 'launch', what: 'launch()', ours: 310, bare: 95, unit: 'ns' }]);
 */
export function formatHostTable(rows: readonly HostRow[]): string {
  const number = (value: number, unit: string) =>
    `${value >= 100 ? value.toFixed(0) : value.toFixed(value >= 10 ? 1 : 2)} ${unit}`;
  const header = ['row', 'ours', 'bare', 'ours - bare', 'ours/bare', 'operation'];
  const lines = rows.map((row) => [
    row.name,
    number(row.ours, row.unit),
    number(row.bare, row.unit),
    number(row.ours - row.bare, row.unit),
    `${(row.ours / row.bare).toFixed(2)}x`,
    row.what,
  ]);
  return alignColumns(header, lines).join('\n');
}

/** The median of `values` (the upper one of an even count). */
function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[sorted.length >> 1]!;
}

async function main(): Promise<void> {
  const quick = process.argv.includes('--quick');
  const pressure = process.argv.includes('--pressure');
  // Before any package touches the driver: the driver library is loaded at its first use.
  process.env.CUDA_TASKS_LIBCUDA = pressure ? buildPressureStandIn() : buildStandIn();
  const libraries = buildLibraryStandIns();
  for (const name of ['CUDA_TASKS_LIBCUBLAS', 'CUDA_TASKS_LIBCUBLASLT', 'CUDA_TASKS_LIBCURAND']) {
    process.env[name] = libraries;
  }
  const { DeviceArray, driver, launch, Module, Stream } = await import('@cuda-tasks/cudadrv');
  const { kernelsPtxPath } = await import('@cuda-tasks/examples/kernels');
  const {
    stream: currentStream,
    synchronize,
    task,
    withStream,
  } = await import('@cuda-tasks/task-runtime');
  const koffi = (await import('koffi')).default;

  // Under --pressure a launch takes microseconds (the stand-in's footprint), and the rows'
  // spread is wider: fewer calls, more rounds.
  const rounds = quick ? 3 : pressure ? 21 : 9;
  const calls = quick ? 2_000 : pressure ? 20_000 : 200_000;
  const iterations = quick ? 200 : pressure ? 2_000 : 20_000;
  const n = 65_536;
  const geometry = { grid: n / 256, block: 256 };
  const module = Module.fromPtx(readFileSync(kernelsPtxPath, 'utf8'));
  const axpb = module.kernel('axpb_f32', [...AXPB_PARAMETERS]);
  const empty = module.kernel('axpb_f32', []);
  const api = driver();
  const bareWait = bareStreamWaiter((stream) => api.cuStreamQuery(stream));

  /** A job slot: its arrays, and the bare launch's stream, config and argument arrays. */
  const slot = () => {
    const x = DeviceArray.empty('float32', [n]);
    const y = DeviceArray.empty('float32', [n]);
    const stream = Stream.create({ name: 'bench:host' });
    const config = bareLaunchConfig(stream.handle, geometry.grid, 256);
    return {
      x,
      y,
      stream,
      ffiStream: Number(stream.handle),
      config: Number(config),
      args: [
        Number(bareAxpbArguments(y.pointer, x.pointer, 0.5, 1, n)),
        Number(bareAxpbArguments(x.pointer, y.pointer, 0.5, 1, n)),
      ] as const,
    };
  };
  const slots = Array.from({ length: 16 }, slot);
  const first = slots[0]!;
  const noArguments = Number(koffi.alloc('uint8_t', 8) as bigint);

  /** Ours and bare in turns, `rounds` times; per operation in `unit` (medians of the rounds). */
  const pairSync = (ours: () => unknown, bare: () => unknown, unit: 'ns' | 'us') => {
    const oursTimes: number[] = [];
    const bareTimes: number[] = [];
    const scale = unit === 'ns' ? 1e6 : 1e3;
    for (let round = 0; round < rounds; round++) {
      for (const [run, times] of [
        [ours, oursTimes],
        [bare, bareTimes],
      ] as const) {
        for (let i = 0; i < calls / 10; i++) run();
        const start = performance.now();
        for (let i = 0; i < calls; i++) run();
        times.push(((performance.now() - start) * scale) / calls);
      }
    }
    return { ours: median(oursTimes), bare: median(bareTimes) };
  };
  const pairAsync = async (
    ours: () => Promise<unknown>,
    bare: () => Promise<unknown>,
    count: number,
  ) => {
    const oursTimes: number[] = [];
    const bareTimes: number[] = [];
    for (let round = 0; round < rounds; round++) {
      for (const [run, times] of [
        [ours, oursTimes],
        [bare, bareTimes],
      ] as const) {
        for (let i = 0; i < count / 10; i++) await run();
        const start = performance.now();
        for (let i = 0; i < count; i++) await run();
        times.push(((performance.now() - start) * 1e3) / count);
      }
    }
    return { ours: median(oursTimes), bare: median(bareTimes) };
  };

  const rows: HostRow[] = [];
  await task(async () => {
    // Inside a task: the bare calls go to the task's own stream, as ours do.
    const stream = currentStream();
    const config = Number(bareLaunchConfig(stream.handle, geometry.grid, 256));
    const ffiStream = Number(stream.handle);
    const { x, y } = first;
    rows.push({
      name: 'launch',
      what: 'launch() of a kernel with 2 arrays and 3 scalars',
      unit: 'ns',
      ...pairSync(
        () => launch(axpb, geometry, y, x, 0.5, 1, n),
        () => api.cuLaunchKernelEx(config, axpb.ffiHandle, first.args[0], 0),
        'ns',
      ),
    });
    rows.push({
      name: 'launch_no_arguments',
      what: 'launch() of a kernel without parameters',
      unit: 'ns',
      ...pairSync(
        () => launch(empty, geometry),
        () => api.cuLaunchKernelEx(config, empty.ffiHandle, noArguments, 0),
        'ns',
      ),
    });
    // Two streams of the task's own, taken in turns: what `withStream` adds to a launch.
    const second = slots[1]!;
    const configs = [
      Number(bareLaunchConfig(first.stream.handle, geometry.grid, 256)),
      Number(bareLaunchConfig(second.stream.handle, geometry.grid, 256)),
    ] as const;
    const launchEmpty = () => launch(empty, geometry);
    let turn = 0;
    rows.push({
      name: 'withstream_launch',
      what: 'withStream(s, () => launch()) alternating two streams, no parameters',
      unit: 'ns',
      ...pairSync(
        () => withStream(++turn & 1 ? second.stream : first.stream, launchEmpty),
        () => api.cuLaunchKernelEx(configs[++turn & 1], empty.ffiHandle, noArguments, 0),
        'ns',
      ),
    });
    rows.push({
      name: 'launch_synchronize',
      what: 'one launch, then await synchronize()',
      unit: 'us',
      ...(await pairAsync(
        async () => {
          launch(axpb, geometry, y, x, 0.5, 1, n);
          await synchronize();
        },
        async () => {
          api.cuLaunchKernelEx(config, axpb.ffiHandle, first.args[0], 0);
          await bareWait(ffiStream);
        },
        iterations,
      )),
    });
  });
  const body = async () => {
    launch(axpb, geometry, first.y, first.x, 0.5, 1, n);
    await synchronize();
  };
  rows.push({
    name: 'task',
    what: 'a task that launches once and awaits, against its body alone',
    unit: 'us',
    ...(await pairAsync(() => task(body), body, iterations)),
  });

  // The scaling benchmark's latency-bound job, ours (K tasks) against the Node floor.
  const oursJob = async (s: (typeof slots)[number]) => {
    for (let step = 0; step < 20; step++) {
      if (step % 2 === 0) launch(axpb, geometry, s.y, s.x, 0.5, 1, n);
      else launch(axpb, geometry, s.x, s.y, 0.5, 1, n);
      if ((step + 1) % 5 === 0) await synchronize();
    }
  };
  const floorJob = async (s: (typeof slots)[number]) => {
    for (let step = 0; step < 20; step++) {
      api.cuLaunchKernelEx(s.config, axpb.ffiHandle, s.args[step & 1]!, 0);
      if ((step + 1) % 5 === 0) await bareWait(s.ffiStream);
    }
  };
  for (const k of [1, 4, 16]) {
    const batches = Math.max(10, Math.ceil(iterations / 10 / k));
    const { ours, bare } = await pairAsync(
      () => Promise.all(Array.from({ length: k }, (_, i) => task(() => oursJob(slots[i]!)))),
      () => Promise.all(Array.from({ length: k }, (_, i) => floorJob(slots[i]!))),
      batches,
    );
    rows.push({
      name: `latency_job_k${k}`,
      what: `${k} latency-bound job${k > 1 ? 's' : ''} at once (20 launches, a wait every 5), per job`,
      unit: 'us',
      ours: ours / k,
      bare: bare / k,
    });
  }

  const report = () => {
    console.log(
      pressure
        ? `host cost against a stand-in libcuda whose launches have a driver call's cache footprint (--pressure: 32 KiB of code and 32 KiB of data a launch; no GPU): ours against the bare koffi calls, median of ${rounds} rounds taking turns\n`
        : `host cost against a stand-in libcuda (no GPU, no driver work): ours against the bare koffi calls, median of ${rounds} rounds taking turns\n`,
    );
    console.log(formatHostTable(rows));
    console.log(
      '\nbare: the same driver functions called through koffi with prepared arguments, waits on a bare cuStreamQuery round-robin (benchmarks/src/bare.ts); the floor rows of `pnpm bench`',
    );
    for (const s of slots) s.stream.dispose();
  };
  // Under --pressure only the launches carry the footprint: the library rows would show what
  // the plain stand-in shows.
  if (pressure) {
    report();
    return;
  }

  // The library rows: gemm and a uniform fill against the bare call each makes, then the
  // scaling benchmark's mixed job against the Node floor's.
  const { gemm } = await import('@cuda-tasks/cublas');
  const { cublasLt } = await import('@cuda-tasks/cublas/ffi');
  const { curand } = await import('@cuda-tasks/curand/ffi');
  const { parseScalingArguments } = await import('./scaling-config.js');
  const { loadScalingWork, makeJobSlot, mixedJob } = await import('./scaling-work.js');
  const { disposeFloorSlot, floorMixedJob, makeFloorSlot } = await import('./scaling-floor.js');
  const scaling = parseScalingArguments([]);
  const work = loadScalingWork(scaling);
  const jobSlots = Array.from({ length: 16 }, (_, i) =>
    makeJobSlot(scaling, i, { control: false }),
  );
  const floorSlots = jobSlots.map((jobSlot, i) => makeFloorSlot(work, jobSlot, i));
  await task(async () => {
    const stream = Number(currentStream().handle);
    const { mixedA: a, mixedB: b, mixedC: c, generator } = jobSlots[0]!;
    const floor = floorSlots[0]!;
    const lt = cublasLt();
    const [A, B, C] = [a, b, c].map((array) => Number(array.pointer)) as [number, number, number];
    // Prepared arguments as gemm passes them (the stand-in reads none of them).
    const scalarsMemory = koffi.alloc('float', 2) as bigint;
    const algorithmMemory = koffi.alloc('uint8_t', 64) as bigint;
    const scalars = Number(scalarsMemory);
    const algorithm = Number(algorithmMemory);
    try {
      rows.push({
        name: 'gemm',
        what: `gemm() of ${scaling.mixedN} x ${scaling.mixedN} float32 matrices`,
        unit: 'ns',
        ...pairSync(
          () => gemm(a, b, c),
          () =>
            lt.cublasLtMatmul(
              1,
              2,
              scalars,
              A,
              3,
              B,
              4,
              scalars + 4,
              C,
              5,
              C,
              5,
              algorithm,
              0,
              0,
              stream,
            ),
          'ns',
        ),
      });
      const rand = curand();
      const count = scaling.mixedN * scaling.mixedN;
      rows.push({
        name: 'uniform',
        what: `a generator's uniform() fill of ${count} floats`,
        unit: 'ns',
        ...pairSync(
          () => generator.uniform(a),
          () => rand.curandGenerateUniform(floor.curand, floor.mixed.aPointer, count),
          'ns',
        ),
      });
    } finally {
      koffi.free(scalarsMemory);
      koffi.free(algorithmMemory);
    }
  });
  for (const k of [1, 16]) {
    const batches = Math.max(10, Math.ceil(iterations / 100 / k));
    const { ours, bare } = await pairAsync(
      () =>
        Promise.all(Array.from({ length: k }, (_, i) => task(() => mixedJob(work, jobSlots[i]!)))),
      () =>
        Promise.all(
          Array.from({ length: k }, (_, i) => floorMixedJob(work, floorSlots[i]!, bareWait)),
        ),
      batches,
    );
    rows.push({
      name: `mixed_job_k${k}`,
      what: `${k} mixed job${k > 1 ? 's' : ''} at once (10 x (uniform fill, SGEMM, launch), one wait), per job`,
      unit: 'us',
      ours: ours / k,
      bare: bare / k,
    });
  }
  for (const slot of floorSlots) disposeFloorSlot(slot);
  report();
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    },
  );
}
