import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DeviceArray, launch, Module, type Stream } from '@cuda-tasks/cudadrv';
import { stream, synchronize, task } from '@cuda-tasks/task-runtime';
import { describeGpu, randomFloat32 } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';
import { kernelsPtxPath } from '../kernels/paths.js';
import { manyTasks } from './scene.js';
import {
  compare,
  concurrentIteration,
  disposeJobs,
  main,
  makeJobs,
  run,
  serialIteration,
} from './seed.js';

/** sin(a b) in float64, column-major n x n. */
function referenceSinProduct(a: Float32Array, b: Float32Array, n: number): Float64Array {
  const out = new Float64Array(n * n);
  for (let j = 0; j < n; j++) {
    for (let i = 0; i < n; i++) {
      let sum = 0;
      for (let k = 0; k < n; k++) sum += a[i + k * n]! * b[k + j * n]!;
      out[i + j * n] = Math.sin(sum);
    }
  }
  return out;
}

describeGpu('seed example', () => {
  it('main(256): withStream and two concurrent tasks reproduce the root result exactly', async () => {
    const summary = await main(256, { iterations: 3 });
    expect(summary.withStream).toEqual({ equal: true, mismatches: 0, maxAbsDifference: 0 });
    expect(summary.tasks).toHaveLength(2);
    for (const comparison of summary.tasks) expect(comparison.equal).toBe(true);
    expect(summary.resultsMatch).toBe(true);
    expect(summary.serialUs).toBeGreaterThan(0);
    expect(summary.concurrentUs).toBeGreaterThan(0);
    expect(summary.ratio).toBeCloseTo(summary.concurrentUs / summary.serialUs, 12);
  });

  it('two tasks give the same outputs as the serial iteration', async () => {
    const n = 256;
    const a = DeviceArray.fromHost(randomFloat32(n * n, 1), [n, n]);
    const b = DeviceArray.fromHost(randomFloat32(n * n, 2), [n, n]);
    const jobs = makeJobs(a, b, 2, { copyInputs: true });
    try {
      // Different inputs per job, so that swapped outputs would be caught.
      jobs[1]!.a.copyFromHost(randomFloat32(n * n, 3));
      await serialIteration(jobs);
      const serial = await Promise.all(jobs.map((job) => job.c.toHost()));
      for (const job of jobs) job.c.fill(0);
      await concurrentIteration(jobs);
      const concurrent = await Promise.all(jobs.map((job) => job.c.toHost()));
      expect(compare(serial[0]!, serial[1]!).equal).toBe(false);
      for (let i = 0; i < jobs.length; i++) {
        expect(compare(serial[i]!, concurrent[i]!)).toEqual({
          equal: true,
          mismatches: 0,
          maxAbsDifference: 0,
        });
      }
    } finally {
      disposeJobs(jobs);
      a.dispose();
      b.dispose();
    }
  });

  it('two tasks reading the same a and b do not wait for each other (the literal seed)', async () => {
    const n = 256;
    const a = DeviceArray.fromHost(randomFloat32(n * n, 5), [n, n]);
    const b = DeviceArray.fromHost(randomFloat32(n * n, 6), [n, n]);
    const jobs = makeJobs(a, b, 2); // shared a and b
    const module = Module.fromPtx(readFileSync(kernelsPtxPath, 'utf8'));
    const spin = module.kernel('spin_kernel', ['uint64']);
    try {
      // Two tasks at once first: the pool has their streams, the library handles exist (a
      // stream or handle created while a kernel runs may wait for it; not what is tested here).
      await concurrentIteration(jobs);
      await synchronize(); // a and b are written and known complete
      expect(jobs[0]!.a).toBe(jobs[1]!.a);
      let slowStream: Stream | undefined;
      let slowStarted!: () => void;
      const started = new Promise<void>((resolve) => {
        slowStarted = resolve;
      });
      // The first task reads a and b, then holds its stream for about half a second.
      const slow = task(async () => {
        slowStream = stream();
        run(jobs[0]!.a, jobs[0]!.b, jobs[0]!.c);
        launch(spin, { grid: 1, block: 1 }, 1_000_000_000); // 1e9 clock ticks
        slowStarted();
        await synchronize();
      });
      await started;
      // The second reads the same a and b: it must finish while the first still spins.
      await task(async () => {
        run(jobs[1]!.a, jobs[1]!.b, jobs[1]!.c);
        await synchronize();
      });
      expect(slowStream!.query()).toBe(false);
      expect(a.buffer.readers).toContain(slowStream);
      await slow;
      const [first, second] = await Promise.all(jobs.map((job) => job.c.toHost()));
      expect(compare(first as Float32Array, second as Float32Array).equal).toBe(true);
    } finally {
      disposeJobs(jobs);
      a.dispose();
      b.dispose();
      module.dispose();
    }
  });

  it('run(a, b, c) matches a float64 CPU reference of sin(a b) (N = 128)', async () => {
    const n = 128;
    const hostA = randomFloat32(n * n, 11);
    const hostB = randomFloat32(n * n, 12);
    const a = DeviceArray.fromHost(hostA, [n, n]);
    const b = DeviceArray.fromHost(hostB, [n, n]);
    const c = DeviceArray.full('float32', [n, n], 7);
    try {
      expect(run(a, b, c)).toBe(c);
      const got = (await c.toHost()) as Float32Array;
      const expected = referenceSinProduct(hostA, hostB, n);
      let largestError = 0;
      let largestValue = 0;
      for (let i = 0; i < n * n; i++) {
        largestError = Math.max(largestError, Math.abs(got[i]! - expected[i]!));
        largestValue = Math.max(largestValue, Math.abs(expected[i]!));
      }
      expect(largestValue).toBeGreaterThan(0.5);
      expect(largestError / largestValue).toBeLessThanOrEqual(1e-4);
    } finally {
      for (const array of [a, b, c]) array.dispose();
    }
  });
});

describeGpu('the demo scene: many tasks where the GPU has room', () => {
  it('16 tasks reproduce the serial result, each on a stream no other live task holds, and their GPU work overlaps', async () => {
    const scene = await manyTasks({ iterations: 3, warmups: 2 });
    expect(scene.resultsMatch).toBe(true);
    expect(scene.tasks).toBe(16);
    expect(scene.ratio).toBeCloseTo(scene.concurrentUs / scene.serialUs, 12);
    // The traced iteration: 16 task spans on the host, 16 x 4 GEMMs.
    const taskSpans = scene.trace.traceEvents.filter((e) => e.ph === 'X' && e.cat === 'task');
    expect(taskSpans).toHaveLength(16);
    // Each task's GPU work on a stream no other live task holds. A burst's later tasks may
    // start in a later turn of the event loop (a burst never holds it long), after earlier
    // ones ended: such a task may take a stream an ended task gave back, so two tasks on one
    // track are fine as long as their spans do not overlap.
    const spans = new Map<number, { start: number; end: number; name: string }>();
    for (const e of taskSpans) {
      spans.set(e.tid - 1, { start: e.ts!, end: e.ts! + (e.dur ?? 0), name: e.name });
    }
    const tasksByTrack = new Map<string, Set<number>>();
    for (const e of scene.trace.traceEvents) {
      if (e.ph !== 'X' || e.cat !== 'gpu') continue;
      const track = `${e.pid}:${e.tid}`;
      if (!tasksByTrack.has(track)) tasksByTrack.set(track, new Set());
      tasksByTrack.get(track)!.add(e.args?.taskId as number);
    }
    const onTracks = new Set<number>();
    for (const [track, ids] of tasksByTrack) {
      const held = [...ids].map((id) => spans.get(id)!).sort((x, y) => x.start - y.start);
      for (let i = 1; i < held.length; i++) {
        expect(
          held[i]!.start,
          `track ${track}: ${held[i]!.name} started while ${held[i - 1]!.name} held the stream`,
        ).toBeGreaterThanOrEqual(held[i - 1]!.end);
      }
      for (const id of ids) onTracks.add(id);
    }
    expect([...onTracks].sort((x, y) => x - y)).toEqual([...spans.keys()].sort((x, y) => x - y));
    expect(scene.overlap.streams).toBeGreaterThanOrEqual(2);
    const gemms = scene.trace.traceEvents.filter(
      (e) => e.ph === 'X' && e.cat === 'gpu' && /gemm/i.test(e.name),
    );
    expect(gemms).toHaveLength(16 * 4);
    // What the scene is for: the streams' GPU work runs at the same time.
    expect(scene.overlap.overlapUs).toBeGreaterThan(0);
    expect(scene.overlapFraction).toBeCloseTo(scene.overlap.overlapUs / scene.overlap.busyUs, 12);
  });
});

describeGpu('the demo (pnpm demo) in a child process', () => {
  it('exits with 0, prints "OK: all results match" and writes the trace with --trace', () => {
    const packageRoot = fileURLToPath(new URL('../..', import.meta.url));
    const out = mkdtempSync(join(tmpdir(), 'cuda-tasks-demo-'));
    try {
      const result = spawnSync(
        join(packageRoot, 'node_modules/.bin/tsx'),
        [
          '--conditions=@cuda-tasks/source',
          'src/seed/demo.ts',
          '--n',
          '256',
          '--warmups',
          '20',
          '--trace',
          '--out',
          out,
        ],
        { cwd: packageRoot, encoding: 'utf8', timeout: 110_000 },
      );
      expect(result.error).toBeUndefined();
      expect(result.stderr).not.toMatch(/^\s+at /m);
      expect(result.status).toBe(0);
      const lines = result.stdout.trimEnd().split('\n');
      expect(lines.at(-1)).toBe('OK: all results match');
      expect(result.stdout).toContain('inside withStream(new stream): yes');
      expect(result.stdout.match(/task \d of 2, concurrent: +yes/g)).toHaveLength(2);
      expect(result.stdout).toMatch(/concurrent \/ serial: +\d+\.\d{3}/);
      expect(result.stdout).toContain('trace of 3 concurrent iterations');
      expect(result.stdout).toContain("every task's output equals the serial run's: yes");
      expect(result.stdout).toMatch(
        /GPU work on 16 streams overlapped for [\d.]+ us of [\d.]+ us busy/,
      );
      expect(readFileSync(join(out, 'many-tasks-timeline.svg'), 'utf8')).toContain('<svg');
      // The trace files it names: a Perfetto JSON with events, and an SVG.
      const trace = JSON.parse(readFileSync(join(out, 'seed-trace.json'), 'utf8')) as {
        traceEvents: unknown[];
      };
      expect(trace.traceEvents.length).toBeGreaterThan(0);
      expect(existsSync(join(out, 'seed-timeline.svg'))).toBe(true);
      expect(readFileSync(join(out, 'seed-timeline.svg'), 'utf8')).toContain('<svg');
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
