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
 *   5), K at once, per job, against the Node floor's job.
 *
 * Usage: tsx --conditions=@cuda-tasks/source src/host.ts [--quick]
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildNativeLibrary, STAND_IN_SOURCE } from '@cuda-tasks/testing/native';
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
  // Before any package touches the driver: the driver library is loaded at its first use.
  process.env.CUDA_TASKS_LIBCUDA = buildStandIn();
  const { DeviceArray, driver, launch, Module, Stream } = await import('@cuda-tasks/cudadrv');
  const { kernelsPtxPath } = await import('@cuda-tasks/examples/kernels');
  const {
    stream: currentStream,
    synchronize,
    task,
    withStream,
  } = await import('@cuda-tasks/task-runtime');
  const koffi = (await import('koffi')).default;

  const rounds = quick ? 3 : 9;
  const calls = quick ? 2_000 : 200_000;
  const iterations = quick ? 200 : 20_000;
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

  console.log(
    `host cost against a stand-in libcuda (no GPU, no driver work): ours against the bare koffi calls, median of ${rounds} rounds taking turns\n`,
  );
  console.log(formatHostTable(rows));
  console.log(
    '\nbare: the same driver functions called through koffi with prepared arguments, waits on a bare cuStreamQuery round-robin (benchmarks/src/bare.ts); the floor rows of `pnpm bench`',
  );
  for (const s of slots) s.stream.dispose();
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
