import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { type Context, Device, Event, type Kernel, launch, Module } from '@cuda-tasks/cudadrv';
import { describeGpu } from '@cuda-tasks/testing';
import { beforeAll, expect, it } from 'vitest';
import { prewarmStreams, stream, synchronize, type TaskPriority, task } from './index.js';

const ptxPath = fileURLToPath(new URL('../../cudadrv/test/fixtures/kernels.ptx', import.meta.url));
/** CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR (cuda.h). */
const MAX_THREADS_PER_MULTIPROCESSOR = 39;
const BLOCK = 1024;
/** How long each block of the background load spins, in nanoseconds. */
const BLOCK_NS = 100_000;
/** Waves of blocks per background kernel: 1,000 x 100 us, about 100 ms per kernel. */
const WAVES = 1000;

describeGpu('task priorities on the GPU', () => {
  let context: Context;
  let spin: Kernel;
  let resident: number;

  beforeAll(async () => {
    const device = Device.get(0);
    context = device.primaryContext();
    spin = Module.fromPtx(readFileSync(ptxPath, 'utf8')).kernel('spin_ns', ['uint64']);
    // Blocks of 1,024 threads that fill every multiprocessor (2 per SM on Hopper).
    resident =
      device.multiprocessorCount() *
      Math.max(1, Math.floor(device.attribute(MAX_THREADS_PER_MULTIPROCESSOR) / BLOCK));
    // Every pool the test uses is made while the GPU is idle (creating streams behind a
    // running kernel would stall).
    prewarmStreams(0, ['high', 'normal', 'low']);
    await task(async () => {
      launch(spin, { grid: 1, block: 32 }, 1000); // load the module
      await synchronize();
    });
  });

  /**
   * The GPU time of five short kernels (one block of 32 threads, 20 us each) issued by a task
   * of `priority` while two low-priority tasks keep every multiprocessor busy with kernels of
   * many waves of blocks: measured with events on the task's stream.
   */
  async function shortKernelsBehindLoad(priority: TaskPriority): Promise<number> {
    const background = Array.from({ length: 2 }, () =>
      task(
        async () => {
          launch(spin, { grid: resident * WAVES, block: BLOCK }, BLOCK_NS);
          await synchronize();
        },
        { priority: 'low', name: 'background' },
      ),
    );
    await sleep(10); // the background kernels occupy every multiprocessor
    const measured = await task(
      async () => {
        const own = stream();
        const start = Event.create({ timing: true, context });
        const end = Event.create({ timing: true, context });
        start.record(own);
        for (let i = 0; i < 5; i++) launch(spin, { grid: 1, block: 32 }, 20_000);
        end.record(own);
        await synchronize();
        const ms = Event.elapsedTime(start, end);
        start.dispose();
        end.dispose();
        return { ms, streamPriority: own.priority() };
      },
      { priority, name: `${priority} short kernels` },
    );
    await Promise.all(background);
    const { least, greatest } = context.streamPriorityRange();
    expect(measured.streamPriority).toBe(
      priority === 'high' ? greatest : Math.min(least, Math.max(greatest, 0)),
    );
    return measured.ms;
  }

  it("a high-priority task's short kernels finish in a fraction of their time at normal priority while low-priority work saturates the GPU", async () => {
    const { least, greatest } = context.streamPriorityRange();
    if (least === greatest) {
      console.log('this device has a single stream priority level: priorities change nothing');
      return;
    }
    const normal = await shortKernelsBehindLoad('normal');
    const high = await shortKernelsBehindLoad('high');
    console.log(
      `5 short kernels behind a saturating low-priority load: normal priority ${normal.toFixed(2)} ms, ` +
        `high priority ${high.toFixed(3)} ms (ratio ${(high / normal).toFixed(4)}; ` +
        `stream priorities ${greatest}..${least})`,
    );
    expect(high / normal).toBeLessThan(0.5);
  });
});
