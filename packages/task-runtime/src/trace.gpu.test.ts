import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DeviceArray, type Kernel, launch, Module, type Stream } from '@cuda-tasks/cudadrv';
import { describeGpu, randomFloat32 } from '@cuda-tasks/testing';
import { beforeAll, expect, it } from 'vitest';
import { renderTimelineSvg } from '../../examples/src/trace/timeline.js';
import {
  currentTask,
  nvtxAvailable,
  range,
  startTrace,
  stream,
  synchronize,
  type Trace,
  type TraceEvent,
  task,
} from './index.js';

const ptxPath = fileURLToPath(new URL('../../cudadrv/test/fixtures/kernels.ptx', import.meta.url));

/** Length of each task's spin kernel: long enough for the two tasks' kernels to overlap. */
const SPIN_MS = 50;
/** Elements per array: 8 MiB of float32, so every copy and memset takes measurable GPU time. */
const N = 1 << 21;
/**
 * The operations each task issues, in issue order: fromHost (copyHostToDevice), zeros (memset),
 * two kernels, copy() (device to device) and toHost() (the copy into pinned staging memory).
 */
const EXPECTED_OPERATIONS = [
  'memcpyHtoD',
  'memset',
  'spin_ns',
  'axpb_f32',
  'memcpyDtoD',
  'memcpyDtoH',
] as const;

interface TaskRecord {
  name: string;
  id: number;
  stream: Stream;
  /** Host clock (performance.now()) when the task's function started and ended. */
  fnStart: number;
  fnEnd: number;
  y: Float32Array;
  slope: number;
}

describeGpu('tracing on the GPU', () => {
  let axpb: Kernel;
  let spin: Kernel;
  beforeAll(async () => {
    const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
    axpb = module.kernel('axpb_f32', ['float32*', 'float32*', 'float32', 'float32', 'uint64']);
    spin = module.kernel('spin_ns', ['uint64']);
    launch(spin, { grid: 1, block: 1 }, 1000); // warm up the module
    // Two pinned staging buffers of the traced size, so that toHost() in the traced tasks
    // does not pay cuMemHostAlloc while the other task waits to issue its work.
    await Promise.all(
      [0, 1].map(() =>
        task(async () => {
          const warm = DeviceArray.zeros('float32', N);
          await warm.toHost();
          warm.dispose();
        }),
      ),
    );
    stream().synchronize();
  });

  it('records two named tasks: operations per stream, task spans, metadata, write()', async () => {
    const x = randomFloat32(N, 5);
    const work = (name: string, slope: number) =>
      task(
        async (): Promise<TaskRecord> => {
          const fnStart = performance.now();
          // The pageable host-to-device copy comes first, while the stream is idle, so it
          // does not hold the host behind this task's spin kernel.
          const dx = DeviceArray.fromHost(x);
          const dy = DeviceArray.zeros('float32', N);
          launch(spin, { grid: 1, block: 1 }, SPIN_MS * 1_000_000);
          launch(axpb, { grid: 256, block: 256 }, dy, dx, slope, 1, N);
          const dz = dy.copy();
          const y = await dz.toHost();
          dx.dispose();
          dy.dispose();
          dz.dispose();
          const { id } = currentTask();
          return { name, id, stream: stream(), fnStart, fnEnd: performance.now(), y, slope };
        },
        { name },
      );

    const beforeStart = performance.now();
    const recorder = startTrace();
    const afterStart = performance.now();
    let trace: Trace;
    let records: TaskRecord[];
    try {
      records = await Promise.all([work('alpha', 2), work('beta', 3)]);
    } finally {
      trace = await recorder.stop();
    }

    // The traced work computed the right thing (tracing changes nothing).
    for (const { y, slope } of records) {
      for (let i = 0; i < N; i += 4099) {
        expect(Math.abs(y[i]! - (slope * x[i]! + 1))).toBeLessThan(
          1e-5 * (1 + Math.abs(slope * x[i]!)),
        );
      }
    }
    const [alpha, beta] = records;
    expect(alpha!.stream).not.toBe(beta!.stream);
    expect(alpha!.id).not.toBe(beta!.id);

    const events = trace.traceEvents;
    const gpuOps = events.filter((e) => e.ph === 'X' && e.cat === 'gpu');
    // Nothing but the two tasks' operations was recorded.
    expect(gpuOps).toHaveLength(2 * EXPECTED_OPERATIONS.length);
    expect(new Set(gpuOps.map((e) => e.args?.task))).toEqual(new Set(['alpha', 'beta']));

    const metadata = (name: string, pid: number, tid: number) =>
      events.filter((e) => e.ph === 'M' && e.name === name && e.pid === pid && e.tid === tid);

    const tidOf = new Map<string, number>();
    for (const record of records) {
      const ops = gpuOps.filter((e) => e.args?.task === record.name);
      // The recorder keeps issue order: names exactly as issued.
      expect(ops.map((e) => e.name)).toEqual([...EXPECTED_OPERATIONS]);
      const pid = 1 + record.stream.context.device.ordinal;
      for (const op of ops) {
        expect(op.args?.taskId).toBe(record.id);
        expect(op.pid).toBe(pid);
        expect(Number.isFinite(op.ts)).toBe(true);
        expect(op.dur).toBeGreaterThan(0);
      }
      // One stream per task, so one tid per task.
      const tids = new Set(ops.map((e) => e.tid));
      expect(tids.size).toBe(1);
      const tid = ops[0]!.tid;
      tidOf.set(record.name, tid);
      // On one stream, each operation starts after the previous one ended (1 us of rounding).
      for (let i = 1; i < ops.length; i++) {
        expect(ops[i]!.ts!).toBeGreaterThanOrEqual(ops[i - 1]!.ts! + ops[i - 1]!.dur! - 1);
      }
      // The spin kernel's bar has the kernel's own length (it spins on the GPU's global timer).
      const spinOp = ops[EXPECTED_OPERATIONS.indexOf('spin_ns')]!;
      expect(spinOp.dur!).toBeGreaterThanOrEqual(0.98 * SPIN_MS * 1000);
      expect(spinOp.dur!).toBeLessThan(3 * SPIN_MS * 1000);
      // The stream's track is named after the stream that ran the task.
      const track = metadata('thread_name', pid, tid);
      expect(track).toHaveLength(1);
      expect(track[0]!.args?.name).toBe(`stream ${record.stream.name ?? tid}`);
      const gpuProcess = metadata('process_name', pid, 0);
      expect(gpuProcess).toHaveLength(1);
      expect(gpuProcess[0]!.args?.name).toBe(`GPU ${record.stream.context.device.ordinal}`);

      // The task's span on the host track: pid 0, tid = id + 1, named after the task.
      const spans = events.filter(
        (e) => e.ph === 'X' && e.cat === 'task' && e.name === record.name,
      );
      expect(spans).toHaveLength(1);
      const span = spans[0]!;
      expect(span.pid).toBe(0);
      expect(span.tid).toBe(record.id + 1);
      const taskTrack = metadata('thread_name', 0, record.id + 1);
      expect(taskTrack).toHaveLength(1);
      expect(taskTrack[0]!.args?.name).toBe(record.name);
      // The recorder's clock starts between beforeStart and afterStart; the span must cover
      // the task's function as the test's own clock saw it (0.05 ms of rounding).
      const spanStartMs = span.ts! / 1000;
      const spanEndMs = (span.ts! + span.dur!) / 1000;
      expect(spanStartMs + beforeStart).toBeLessThanOrEqual(record.fnStart + 0.05);
      expect(spanEndMs + afterStart).toBeGreaterThanOrEqual(record.fnEnd - 0.05);
      expect(span.dur! / 1000).toBeGreaterThanOrEqual(record.fnEnd - record.fnStart - 0.05);
      // GPU times are mapped onto the same host clock: the task's operations fall inside its
      // span (2 ms for the mapping's skew), and the span lasts at least the spin kernel.
      expect(span.dur!).toBeGreaterThanOrEqual(0.98 * SPIN_MS * 1000);
      for (const op of ops) {
        expect(op.ts!).toBeGreaterThanOrEqual(span.ts! - 2000);
        expect(op.ts! + op.dur!).toBeLessThanOrEqual(span.ts! + span.dur! + 2000);
      }
    }
    // Two tasks, two streams, two tracks.
    expect(tidOf.get('alpha')).not.toBe(tidOf.get('beta'));
    // The two tasks' spin kernels overlap on the GPU, as the trace shows.
    const spinOf = (name: string) =>
      gpuOps.find((e) => e.args?.task === name && e.name === 'spin_ns')!;
    const a = spinOf('alpha');
    const b = spinOf('beta');
    expect(a.ts!).toBeLessThan(b.ts! + b.dur!);
    expect(b.ts!).toBeLessThan(a.ts! + a.dur!);
    const hostProcess = metadata('process_name', 0, 0);
    expect(hostProcess).toHaveLength(1);
    expect(hostProcess[0]!.args?.name).toBe('tasks (host)');

    // write(): JSON that parses back to the same events.
    const directory = mkdtempSync(join(tmpdir(), 'cuda-tasks-trace-'));
    try {
      const path = join(directory, 'trace.json');
      trace.write(path);
      const parsed = JSON.parse(readFileSync(path, 'utf8')) as {
        traceEvents: TraceEvent[];
        displayTimeUnit: string;
      };
      expect(parsed.displayTimeUnit).toBe('ms');
      expect(parsed.traceEvents).toHaveLength(events.length);
      expect(parsed.traceEvents).toEqual(events);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }

    // The examples' SVG renderer accepts the recorder's real output.
    const svg = renderTimelineSvg(trace);
    expect(svg.match(/<svg\b/g)).toHaveLength(1);
    expect(svg.match(/<rect class="op"/g)).toHaveLength(gpuOps.length);
    expect(svg.match(/<rect class="task-bar"/g)).toHaveLength(2);
    expect(svg.match(/class="legend-item"/g)).toHaveLength(2);
    const streamLabels = [...svg.matchAll(/<text class="row-label stream"[^>]*>([^<]*)</g)].map(
      (m) => m[1],
    );
    const expectedStreamLabels = records
      .map((r) => ({ tid: tidOf.get(r.name)!, stream: r.stream }))
      .sort((p, q) => p.tid - q.tid)
      .map(({ tid, stream: s }) => `stream ${s.name ?? tid}`);
    expect(streamLabels).toEqual(expectedStreamLabels);
    const taskLabels = [...svg.matchAll(/<text class="row-label task"[^>]*>([^<]*)</g)].map(
      (m) => m[1],
    );
    expect(taskLabels).toEqual(
      [...records].sort((p, q) => p.id - q.id).map((record) => record.name),
    );
    expect(svg).toContain(`${gpuOps.length} GPU operations on 2 streams, 2 tasks`);
  });

  it('records nothing once stopped, and a new recorder starts empty', async () => {
    const recorder = startTrace();
    await task(
      async () => {
        launch(spin, { grid: 1, block: 1 }, 1000);
        await synchronize();
      },
      { name: 'inside' },
    );
    const trace = await recorder.stop();
    // Issued after stop(): must not appear anywhere.
    await task(
      async () => {
        launch(spin, { grid: 1, block: 1 }, 1000);
        await synchronize();
      },
      { name: 'after' },
    );
    const ops = trace.traceEvents.filter((e) => e.ph === 'X' && e.cat === 'gpu');
    expect(ops.map((e) => [e.name, e.args?.task])).toEqual([['spin_ns', 'inside']]);
    expect(trace.traceEvents.some((e) => e.name === 'after')).toBe(false);

    const second = startTrace();
    const empty = await second.stop();
    expect(empty.traceEvents.filter((e) => e.ph === 'X')).toEqual([]);
  });

  it('range() keeps result and exception semantics with the NVTX library present or absent', async () => {
    // Whether libnvtx3interop is found here decides which path runs; both must behave alike.
    const available = nvtxAvailable();
    expect(typeof available).toBe('boolean');
    // A synchronous function's own return value comes back (not a copy, not a promise).
    const array = await task(() =>
      range('sync range', () => DeviceArray.fromHost(new Float32Array([1, 2, 3]))),
    );
    expect(DeviceArray.isInstance(array)).toBe(true);
    expect(Array.from(await array.toHost())).toEqual([1, 2, 3]);
    array.dispose();
    const token = { unique: true };
    expect(range('identity', () => token)).toBe(token);

    const value = await range('async range', async () => {
      await new Promise((resolve) => setTimeout(resolve, 1));
      return 42;
    });
    expect(value).toBe(42);

    const error = new Error('sync failure');
    expect(() =>
      range('throws', () => {
        throw error;
      }),
    ).toThrow(error);

    const rejection = new Error('async failure');
    await expect(
      range('rejects', async () => {
        await new Promise((resolve) => setTimeout(resolve, 1));
        throw rejection;
      }),
    ).rejects.toBe(rejection);

    // Nested and interleaved ranges still return each function's own result.
    const [first, second] = await Promise.all([
      range('outer 1', () => range('inner 1', async () => 'one')),
      range('outer 2', async () => {
        await new Promise((resolve) => setTimeout(resolve, 2));
        return 'two';
      }),
    ]);
    expect([first, second]).toEqual(['one', 'two']);
  });
});
