/**
 * The job module of the scaling benchmark's worker-tasks variant (`ours_workers`, see
 * scaling.ts): each of a `WorkerPool`'s workers imports it, and every exported function is a job
 * the pool runs there as a task of its own. The jobs are scaling-work.ts's, the same code the
 * main thread's tasks run.
 *
 * A worker thread's `process.argv` holds none of the program's settings (Node passes a worker
 * only the `argv` its creator gives, and WorkerPool gives none), so `init(settings)` brings them:
 * scaling.ts runs it once on every worker before any other job. Each worker then makes its own
 * job slots, lazily, the first time a job names a slot index: its buffers and its cuRAND
 * generator seeded `seed + index`, as the main thread's slots are.
 */
import { threadId } from 'node:worker_threads';
import { parseScalingArguments } from './scaling-config.js';
import {
  type JobSlot,
  latencyJob,
  loadScalingWork,
  makeJobSlot,
  mixedJob,
  type ScalingWork,
} from './scaling-work.js';

let work: ScalingWork | undefined;
let settings: string | undefined;
const slots: JobSlot[] = [];

/**
 * Parses the settings (`key=value` strings, as scaling.ts got them) and loads the kernel in this
 * worker; returns the worker's thread id, so that the caller can tell that every worker ran it.
 * Running it again with the same settings does nothing more; with other settings it throws.
 */
export function init(argv: unknown): number {
  if (!Array.isArray(argv) || !argv.every((item) => typeof item === 'string')) {
    throw new TypeError(
      'scaling-jobs init: expected the settings as an array of key=value strings',
    );
  }
  const text = argv.join('\n');
  if (work === undefined) {
    const config = parseScalingArguments(argv);
    work = loadScalingWork(config);
    settings = text;
  } else if (settings !== text) {
    throw new Error('scaling-jobs init: this worker already runs with other settings');
  }
  return threadId;
}

/** This worker's slot `index`, made on first use (after `init`). */
function slotOf(index: unknown): JobSlot {
  if (work === undefined) {
    throw new Error(`scaling-jobs: init did not run in this worker (thread ${threadId})`);
  }
  if (!Number.isSafeInteger(index) || (index as number) < 0 || (index as number) >= 1 << 16) {
    throw new RangeError(`scaling-jobs: a slot index is an integer in [0, 65536), got ${index}`);
  }
  const at = index as number;
  let slot = slots[at];
  if (slot === undefined) {
    slot = makeJobSlot(work.config, at, { control: false });
    slots[at] = slot;
  }
  return slot;
}

/** The latency-bound job on this worker's slot `slotIndex`. */
export function latency(slotIndex: number): Promise<void> {
  const slot = slotOf(slotIndex);
  return latencyJob(work!, slot);
}

/** The mixed job on this worker's slot `slotIndex`. */
export function mixed(slotIndex: number): Promise<void> {
  const slot = slotOf(slotIndex);
  return mixedJob(work!, slot);
}
