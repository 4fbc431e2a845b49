/**
 * Expression kernels (@cuda-tasks/kernels) beside the hand-written kernel, in one process:
 * `map(x, 'sin', x)` against `sin_inplace` from kernels.ptx (the kernel the C baseline and CuPy
 * run) over 1 M and 64 M floats, device time from events; the issue cost of the 1 M case once
 * compiled and cached; `sum` over 64 M floats, device time and the bandwidth it reaches; and
 * `topk` along the columns of 1,000,000-row matrices of 8 and 64 columns (the search service's
 * batches of queries), device time.
 * Prints one JSON line per benchmark (CuPy's and PyTorch's lines come from python/peers.py
 * under the same ids).
 */
import { readFileSync } from 'node:fs';
import { DeviceArray, Event, launch, Module } from '@cuda-tasks/cudadrv';
import { kernelsPtxPath } from '@cuda-tasks/examples/kernels';
import { map, sum, topk } from '@cuda-tasks/kernels';
import { stream, synchronize, task } from '@cuda-tasks/task-runtime';
import { emit, nowUs, type Result, repeatMedian, warmJit } from './harness.js';
import { PEAK_BANDWIDTH_GBS } from './report.js';

/** Threads per block of `sin_inplace`, and its grid cap (as the C baseline launches it). */
const BLOCK = 256;
const MAX_GRID = 65_535;

/** Rows of the `topk_1m_x*` matrices (the search service's index). */
const TOPK_ROWS = 1_000_000;
/** Their columns (queries in a search batch). */
const TOPK_COLUMNS = [8, 64] as const;
/** The k of the search service's requests. */
const TOPK_K = 10;

/**
 * The `topk_1m_x*` rows' scores: element i (column-major) is murmur3's 32-bit finalizer of i
 * over 2^32, rounded to float32: spread over [0, 1) in no order, and the same values
 * python/peers.py builds for PyTorch.
 */
export function topkScores(length: number): Float32Array {
  const scores = new Float32Array(length);
  for (let i = 0; i < length; i++) {
    let h = i;
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
    scores[i] = (h >>> 0) / 2 ** 32;
  }
  return scores;
}

/** Runs the kernel benchmarks; returns the results (also printed as JSON lines). */
export async function runKernels(): Promise<Result[]> {
  const results: Result[] = [];
  const out = (name: string, median_us: number, note: string, extra?: Record<string, number>) =>
    results.push(emit({ name, median_us, unit: 'us/op', note, ...(extra ? { extra } : {}) }));

  await task(
    async () => {
      const s = stream();
      const module = Module.fromPtx(readFileSync(kernelsPtxPath, 'utf8'));
      const sinInplace = module.kernel('sin_inplace', ['float32*', 'uint64']);
      const handWritten = (x: DeviceArray) =>
        launch(
          sinInplace,
          { grid: Math.min(Math.ceil(x.length / BLOCK), MAX_GRID), block: BLOCK, stream: s },
          x,
          x.length,
        );
      const ours = (x: DeviceArray) => map(x, 'sin', x);
      const start = Event.create({ timing: true });
      const stop = Event.create({ timing: true });
      /** Device microseconds per call of `body`, from events around `calls` calls. */
      const deviceTime = (body: () => void, calls: number) =>
        repeatMedian(async () => {
          start.record(s);
          for (let i = 0; i < calls; i++) body();
          stop.record(s);
          await synchronize();
          return (1000 * Event.elapsedTime(start, stop)) / calls;
        });
      /** Host microseconds per call of `body`; the drain after the batch is not timed. */
      const issueTime = (body: () => void, calls: number) =>
        repeatMedian(async () => {
          const t0 = nowUs();
          for (let i = 0; i < calls; i++) body();
          const t1 = nowUs();
          await synchronize();
          return (t1 - t0) / calls;
        });

      for (const [label, n, calls] of [
        ['1m', 1 << 20, 200],
        ['64m', 64 << 20, 10],
      ] as const) {
        // Values in [-1, 1): sin keeps them there, so repeated calls stay on the fast path.
        const x = DeviceArray.fromHost(
          Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.001)),
        );
        ours(x); // compiles (or reads the kernel cache) once
        await warmJit(() => {
          ours(x);
          handWritten(x);
        }, 200);
        await synchronize();
        out(
          `sin_${label}`,
          await deviceTime(() => ours(x), calls),
          `map(x, 'sin', x), ${n} float32, device time per call from events, ${calls} per batch`,
        );
        out(
          `sin_${label}_handwritten`,
          await deviceTime(() => handWritten(x), calls),
          `sin_inplace from kernels.ptx (<<<min(n/256, 65535), 256>>>), same array and method`,
        );
        if (label === '1m') {
          // Few enough launches per batch that the queue never fills: host issue cost only.
          await warmJit(() => ours(x), 3000);
          out(
            'sin_1m_issue',
            await issueTime(() => ours(x), 500),
            "map(x, 'sin', x) once compiled and cached: host time per call, 500 per batch, sync excluded",
          );
          out(
            'sin_1m_issue_handwritten',
            await issueTime(() => handWritten(x), 500),
            'launch(sin_inplace) with its grid: host time per call, 500 per batch, sync excluded',
          );
        }
        x.dispose();
      }

      {
        const n = 64 << 20;
        const calls = 20;
        const x = DeviceArray.fromHost(
          Float32Array.from({ length: n }, (_, i) => (i % 1000) / 1000 - 0.5),
        );
        const total = DeviceArray.empty('float32', [1]);
        const once = () => {
          sum(x, { out: total });
        };
        once();
        await synchronize();
        const us = await deviceTime(once, calls);
        const gbs = (n * 4) / (us * 1000);
        out(
          'sum_64m',
          us,
          `sum(x) of ${n} float32 (accumulated in float64), device time per call from events, ${calls} per batch`,
          { bandwidth_gbs: gbs, bandwidth_fraction: gbs / PEAK_BANDWIDTH_GBS },
        );
        total.dispose();
        x.dispose();
      }
      for (const columns of TOPK_COLUMNS) {
        const calls = columns === 8 ? 40 : 10;
        const x = DeviceArray.fromHost(topkScores(TOPK_ROWS * columns), [TOPK_ROWS, columns]);
        const values = DeviceArray.empty('float32', [TOPK_K, columns]);
        const indices = DeviceArray.empty('int32', [TOPK_K, columns]);
        const once = () => {
          topk(x, TOPK_K, { axis: 0, values, indices });
        };
        once();
        await synchronize();
        const us = await deviceTime(once, calls);
        const gbs = (TOPK_ROWS * columns * 4) / (us * 1000);
        out(
          `topk_1m_x${columns}`,
          us,
          `topk(x, ${TOPK_K}, { axis: 0 }) of a ${TOPK_ROWS} x ${columns} float32 matrix (column-major: each column's scores contiguous), values and indices, device time per call from events, ${calls} per batch`,
          { bandwidth_gbs: gbs, bandwidth_fraction: gbs / PEAK_BANDWIDTH_GBS },
        );
        for (const array of [x, values, indices]) array.dispose();
      }
      start.dispose();
      stop.dispose();
      module.dispose();
    },
    { name: 'bench kernels' },
  );
  return results;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  // As a program of its own (`pnpm bench --only kernels` runs it each round): exit once done.
  await runKernels();
  process.exit(0);
}
