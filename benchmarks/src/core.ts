/**
 * Driver and runtime benchmarks in TypeScript, the same work as c/bench.cu: prints one
 * JSON line per benchmark. Run by src/run.ts beside the C baseline.
 */

import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { DeviceBuffer, Event, launch, Module, Stream, waitForStream } from '@cuda-tasks/cudadrv';
import { kernelsPtxPath } from '@cuda-tasks/examples/kernels';
import { stream, synchronize, synchronizeSync, task } from '@cuda-tasks/task-runtime';
import { launchBatch, tasksRound, timedOnce, withStreamBatch } from './batches.js';
import { emit, nowUs, type Result, repeatMedian, warmJit } from './harness.js';

const ptxPath = kernelsPtxPath;

/** Runs the driver and runtime benchmarks; `libraries` adds handles of all three libraries first. */
export async function runCore(options: { prefix?: string } = {}): Promise<Result[]> {
  const prefix = options.prefix ?? '';
  const results: Result[] = [];
  const out = (name: string, median_us: number, note: string, extra?: Record<string, number>) =>
    results.push(
      emit({ name: prefix + name, median_us, unit: 'us/op', note, ...(extra ? { extra } : {}) }),
    );

  const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
  const empty = module.kernel('empty_kernel', []);
  const axpb = module.kernel('axpb_f32', ['float32*', 'float32*', 'float32', 'float32', 'uint64']);
  const config = { grid: 1, block: 1 };
  const launches = 10_000;
  const roundTrips = 2_000;

  await task(async () => {
    const s = stream();
    // Empty launch on the current task's stream (the runtime's provider answers "which stream").
    out(
      'launch_empty',
      await repeatMedian(launchBatch(empty, config, s, launches)),
      'empty kernel on the current task stream, issue rate',
    );

    const { DeviceArray } = await import('@cuda-tasks/cudadrv');
    const y = DeviceArray.empty('float32', 16);
    const x = DeviceArray.empty('float32', 16);
    out(
      'launch_args2',
      await repeatMedian(() => {
        const t0 = nowUs();
        for (let i = 0; i < launches; i++) launch(axpb, config, y, x, 2, 1, 0);
        const t1 = nowUs();
        s.synchronize();
        return (t1 - t0) / launches;
      }),
      'axpb_f32 with n = 0: 5 arguments marshalled through the reused arena',
    );

    const s1 = Stream.create({ name: 'bench-1' });
    const s2 = Stream.create({ name: 'bench-2' });
    const launchEmpty = () => launch(empty, config);
    out(
      'withstream_launch',
      await repeatMedian(withStreamBatch(s1, s2, launchEmpty, launches)),
      'withStream(s, () => launch(empty)) alternating two streams',
    );

    out(
      'launch_sync',
      await repeatMedian(async () => {
        const t0 = nowUs();
        for (let i = 0; i < roundTrips; i++) {
          launch(empty, config);
          await synchronize();
        }
        return (nowUs() - t0) / roundTrips;
      }),
      'launch + await synchronize() round trip',
    );

    out(
      'launch_sync_blocking',
      await repeatMedian(() => {
        const t0 = nowUs();
        for (let i = 0; i < roundTrips; i++) {
          launch(empty, config);
          synchronizeSync();
        }
        return (nowUs() - t0) / roundTrips;
      }),
      'launch + synchronizeSync() (cuStreamSynchronize) round trip',
    );

    // Microseconds per allocate + dispose pair of `bytes`; the drain is not timed.
    const pairs = (bytes: number) =>
      repeatMedian(() => {
        const t0 = nowUs();
        for (let i = 0; i < launches; i++) DeviceBuffer.allocate(bytes, { stream: s }).dispose();
        const t1 = nowUs();
        s.synchronize();
        return (t1 - t0) / launches;
      });
    out(
      'alloc_free',
      await pairs(256),
      'DeviceBuffer.allocate(256) + dispose(): after the first pair the block comes from the stream cache of small freed blocks, no driver call',
    );
    out(
      'alloc_free_driver',
      await pairs(128 * 1024),
      'DeviceBuffer.allocate(128 KiB) + dispose(): past the cache bound, so cuMemAllocAsync + cuMemFreeAsync every time (our overhead over the C pair)',
    );

    const event = Event.create();
    out(
      'event_record',
      await repeatMedian(() => {
        const t0 = nowUs();
        for (let i = 0; i < launches; i++) event.record(s);
        const t1 = nowUs();
        s.synchronize();
        return (t1 - t0) / launches;
      }),
      'Event.record on a timing-free event',
    );

    out(
      'stream_query',
      await repeatMedian(() => {
        const t0 = nowUs();
        for (let i = 0; i < launches; i++) s.query();
        return (nowUs() - t0) / launches;
      }),
      'Stream.query on an idle stream',
    );
    event.dispose();
    x.dispose();
    y.dispose();
    await waitForStream(s);
    s1.dispose();
    s2.dispose();
  });

  module.dispose();
  return results;
}

/**
 * 100 concurrent tasks, each launching and awaiting its own stream (V8 warmed up first: a
 * batch is one round of 100 tasks). Last, as in C: it leaves 100 streams in the task
 * runtime's pool, which the other benchmarks should not run beside.
 */
export async function runTasks100(): Promise<Result[]> {
  const results: Result[] = [];
  const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
  const empty = module.kernel('empty_kernel', []);
  const config = { grid: 1, block: 1 };
  const round = tasksRound(empty, config);
  await warmJit(round, 30);
  const delays: number[] = [];
  const total = await repeatMedian(async () => {
    const histogram = monitorEventLoopDelay({ resolution: 1 });
    histogram.enable();
    const elapsed = await timedOnce(round)();
    histogram.disable();
    delays.push(histogram.max / 1e3);
    return elapsed;
  });
  results.push(
    emit({
      name: 'tasks100',
      median_us: total,
      unit: 'us/op',
      note: '100 concurrent tasks x (launch + await synchronize()), whole batch',
      extra: { max_event_loop_delay_us: Math.max(...delays) },
    }),
  );
  return results;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await runCore();
}
