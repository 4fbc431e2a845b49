/**
 * A thread of the worker floor (`ours_floor_workers`, see scaling-floor.ts): makes its job slots
 * (j with j % workers equal to its index, below the largest K), says it is ready, then runs
 * each batch it is woken for: its share of the K jobs together (job j on slot j), as plain async
 * functions with bare koffi calls and a bare `cuStreamQuery` round-robin for the waits, or for a
 * serial batch (worker 0) the jobs one after another on slot 0 (with `floor_sync=1`, a thread
 * with one job waits in `cuStreamSynchronize`, as C's threads do). Between batches it sleeps in
 * `Atomics.wait` on its own word, as C's pool threads sleep on their semaphores.
 */
import { workerData } from 'node:worker_threads';
import { check, driver } from '@cuda-tasks/cudadrv';
import { synchronizeSync } from '@cuda-tasks/task-runtime';
import { bareStreamWaiter } from './bare.js';
import { parseScalingArguments } from './scaling-config.js';
import {
  disposeFloorSlot,
  FLOOR_CONTROL,
  type FloorSlot,
  type FloorWorkerData,
  floorLatencyJob,
  floorMixedJob,
  makeFloorSlot,
} from './scaling-floor.js';
import { loadScalingWork, makeJobSlot } from './scaling-work.js';

const { settings, control, index, workers } = workerData as FloorWorkerData;
const words = new Int32Array(control);
const config = parseScalingArguments(settings);
const work = loadScalingWork(config);
const maxK = Math.max(...config.ks);
const slots = new Map<number, FloorSlot>();
for (let j = index; j < maxK; j += workers) {
  slots.set(j, makeFloorSlot(work, makeJobSlot(config, j, { control: false }), j));
}
synchronizeSync();
const wait = bareStreamWaiter((stream) => driver().cuStreamQuery(stream));
const done = Promise.resolve();
/** With `floor_sync=1`, the wait of a thread that has one job: C's blocking synchronize. */
const synchronizeWait = (stream: number | bigint) => {
  check(driver().cuStreamSynchronize(stream), 'cuStreamSynchronize');
  return done;
};
const oneJobWait = config.floorSync === 1 ? synchronizeWait : wait;
// Warm the job code (V8's JIT, the libraries' first calls) on one slot before saying ready.
const first = slots.get(index);
if (first !== undefined) {
  for (let i = 0; i < 50; i++) {
    await floorLatencyJob(work, first, wait);
    await floorMixedJob(work, first, wait);
  }
}
Atomics.add(words, FLOOR_CONTROL.READY, 1);
Atomics.notify(words, FLOOR_CONTROL.READY);

let seen = Atomics.load(words, FLOOR_CONTROL.GO + index);
for (;;) {
  Atomics.wait(words, FLOOR_CONTROL.GO + index, seen);
  seen = Atomics.load(words, FLOOR_CONTROL.GO + index);
  if (Atomics.load(words, FLOOR_CONTROL.QUIT) !== 0) break;
  const k = words[FLOOR_CONTROL.K]!;
  const job = words[FLOOR_CONTROL.SHAPE] === 0 ? floorLatencyJob : floorMixedJob;
  try {
    if (words[FLOOR_CONTROL.SERIAL] === 1) {
      const slot = slots.get(0)!;
      for (let i = 0; i < k; i++) await job(work, slot, oneJobWait);
    } else {
      const mine = index + workers < k ? wait : oneJobWait;
      const jobs: Promise<void>[] = [];
      for (let j = index; j < k; j += workers) jobs.push(job(work, slots.get(j)!, mine));
      await Promise.all(jobs);
    }
  } catch (error) {
    console.error(`scaling: worker floor ${index}:`, error);
    Atomics.store(words, FLOOR_CONTROL.FAILED, 1);
  }
  Atomics.add(words, FLOOR_CONTROL.DONE, 1);
  Atomics.notify(words, FLOOR_CONTROL.DONE);
}
for (const slot of slots.values()) disposeFloorSlot(slot);
