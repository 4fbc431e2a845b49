/**
 * The stream pool under bursts, on the GPU (issue 15, section 0): a burst of tasks larger than
 * any before must not stall the event loop. Creating streams while a kernel runs can block
 * until the kernel finishes (docs/decisions/0035-a-stream-per-task-up-to-128.md), so the pool
 * is created ahead, at its first use while the GPU is idle, and tasks past its bound share
 * streams instead of creating them mid-burst.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type Kernel, launch, Module } from '@cuda-tasks/cudadrv';
import { describeGpu, watchEventLoop } from '@cuda-tasks/testing';
import { beforeAll, expect, it } from 'vitest';
import { stream, streamPoolStatistics, synchronize, synchronizeSync, task } from './index.js';

const ptxPath = fileURLToPath(new URL('../../cudadrv/test/fixtures/kernels.ptx', import.meta.url));

/** Nanoseconds each task's single-block kernel spins. */
const KERNEL_NS = 50_000_000;

/**
 * Runs `count` tasks at once, each launching one long single-block kernel and awaiting it,
 * while a 1 ms interval timer measures the event loop: returns the largest gap between two
 * ticks beyond the interval itself, and the burst's wall time.
 */
async function burst(spin: Kernel, count: number): Promise<{ gapMs: number; wallMs: number }> {
  const watch = watchEventLoop();
  // Let the ticker start before the burst.
  await new Promise((resolve) => setTimeout(resolve, 5));
  const start = performance.now();
  const handles = await Promise.all(
    Array.from({ length: count }, () =>
      task(async () => {
        launch(spin, { grid: 1, block: 1 }, KERNEL_NS);
        await synchronize();
        return stream().handle;
      }),
    ),
  );
  const wallMs = performance.now() - start;
  const gapMs = watch.stop();
  expect(handles).toHaveLength(count);
  return { gapMs, wallMs };
}

describeGpu('the stream pool under bursts', () => {
  let spin: Kernel;
  beforeAll(() => {
    const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
    spin = module.kernel('spin_ns', ['uint64']);
    launch(spin, { grid: 1, block: 1 }, 1000); // load the module outside the measurement
    synchronizeSync();
  });

  it('a burst beyond the pool’s previous peak keeps the event loop responsive (50 then 100 tasks)', async () => {
    const createdBefore = streamPoolStatistics().created;
    const fifty = await burst(spin, 50);
    const createdAfterFifty = streamPoolStatistics().created;
    const hundred = await burst(spin, 100);
    console.log(
      `[pool burst] largest event-loop gap: 50 tasks ${fifty.gapMs.toFixed(1)} ms ` +
        `(burst ${fifty.wallMs.toFixed(0)} ms), then 100 tasks ${hundred.gapMs.toFixed(1)} ms ` +
        `(burst ${hundred.wallMs.toFixed(0)} ms); ${KERNEL_NS / 1e6} ms kernels; ` +
        `streams created ${createdAfterFifty - createdBefore}, then ` +
        `${streamPoolStatistics().created - createdAfterFifty}`,
    );
    // The pool was made at the first task, before any kernel ran, and never grew mid-burst.
    expect(createdAfterFifty - createdBefore).toBeLessThanOrEqual(128);
    expect(streamPoolStatistics().created).toBe(createdAfterFifty);
    // Each burst waited for its kernels; neither stalled the event loop (before the pool was
    // made ahead, the 50-task burst stalled it for 208-218 ms).
    expect(fifty.wallMs).toBeGreaterThanOrEqual(KERNEL_NS / 1e6 - 1);
    expect(fifty.gapMs).toBeLessThan(50);
    expect(hundred.gapMs).toBeLessThan(50);
  });
});
