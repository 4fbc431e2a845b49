/**
 * The worker thread's side of a `WorkerPool` (worker-pool.ts is the caller's): it imports the
 * job module, then runs each job it is sent as a `task()` of its own, so that every job gets
 * its own stream, handles and cancellation signal as tasks on the main thread do. The runtime
 * in this thread is a whole one (its own stream pools, handle caches, kernels); device memory,
 * events and streams are the process's, so the arrays a job is lent are views of the caller's
 * memory, with no copy.
 *
 * Per job: the lent arrays are borrowed on the job's stream (ordered after the caller's work
 * on them), the job runs, arrays it returns are transferred to the caller (ordered after its
 * work), and the borrowed ones are given back (ordered after its work), before the reply.
 */
import type { MessagePort } from 'node:worker_threads';
import {
  borrowArray,
  CudaArgumentError,
  DeviceArray,
  Event,
  receiveArray,
  setDefaultDevice,
  transferArray,
} from '@cuda-tasks/cudadrv';
import { type TaskOptions, task } from './task.js';
import {
  type Encoded,
  type FromWorker,
  isPlainObject,
  MAX_DEPTH,
  serializeError,
  setOwn,
  type ToWorker,
  type WorkerPoolData,
} from './worker-protocol.js';
import {
  isRingResult,
  pushReply,
  type RingJob,
  RingView,
  ringBell,
  SLEEPING,
  sleepWhileFlagged,
  takeJob,
  type WorkerRings,
  WRITE,
} from './worker-ring.js';

type Job = (...args: unknown[]) => unknown;

/** No borrowed arrays (a job of plain arguments). */
const NONE: readonly DeviceArray[] = [];

/** How long an idle worker looks for its next ring job before it sleeps (decision 0042). */
const IDLE_SPIN_MS = 0.1;

/** A ring job's task options, by priority (shared: one options object per job costs). */
const RING_OPTIONS: readonly (TaskOptions | undefined)[] = [
  undefined,
  { priority: 'high' },
  { priority: 'normal' },
  { priority: 'low' },
];

/** The job module's exported functions: the jobs a pool can run. */
function jobsOf(module: Record<string, unknown>): Map<string, Job> {
  const jobs = new Map<string, Job>();
  for (const [name, value] of Object.entries(module)) {
    if (typeof value === 'function' && name !== 'default') jobs.set(name, value as Job);
  }
  const fallback = module.default;
  if (isPlainObject(fallback)) {
    for (const [name, value] of Object.entries(fallback)) {
      if (typeof value === 'function' && !jobs.has(name)) jobs.set(name, value as Job);
    }
  }
  return jobs;
}

/** Decodes a job's arguments in its task: lent arrays are borrowed on the task's stream. */
function decode(value: Encoded, borrowed: DeviceArray[], depth: number): unknown {
  if ('$value' in value) return value.$value;
  if ('$lent' in value) {
    const array = borrowArray(value.$lent);
    borrowed.push(array);
    return array;
  }
  if ('$transferred' in value) return receiveArray(value.$transferred);
  if ('$event' in value) return Event.fromThreadDescriptor(value.$event);
  if (depth >= MAX_DEPTH) {
    throw new CudaArgumentError(`job arguments nest deeper than ${MAX_DEPTH}`);
  }
  if ('$list' in value) return value.$list.map((item) => decode(item, borrowed, depth + 1));
  if ('$object' in value) {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value.$object)) {
      setOwn(out, key, decode(item, borrowed, depth + 1));
    }
    return out;
  }
  throw new CudaArgumentError('a job argument was not encoded by a WorkerPool');
}

/**
 * Encodes a job's result in its task: an array it was lent comes back as the caller's own
 * array; any other device array is transferred (the caller's array owns it from then on).
 */
function encodeResult(value: unknown, borrowed: readonly DeviceArray[], depth: number): Encoded {
  if (DeviceArray.isInstance(value)) {
    const index = borrowed.indexOf(value);
    if (index >= 0) return { $argument: index };
    return { $transferred: transferArray(value) };
  }
  if (value instanceof Event) return { $event: value.toThreadDescriptor() };
  if (depth >= MAX_DEPTH) return { $value: value };
  if (Array.isArray(value)) {
    return { $list: value.map((item) => encodeResult(item, borrowed, depth + 1)) };
  }
  if (isPlainObject(value)) {
    const out: Record<string, Encoded> = {};
    for (const [key, item] of Object.entries(value)) {
      setOwn(out, key, encodeResult(item, borrowed, depth + 1));
    }
    return { $object: out };
  }
  return { $value: value };
}

/** Runs a ring job's function in its task; a result that is not plain is encoded there. */
async function runPlain(job: Job, args: unknown[]): Promise<unknown> {
  const value = await job(...args);
  return isRingResult(value) ? value : encodeResult(value, NONE, 0);
}

/**
 * Serves the worker's inbox ring (worker-ring.ts): waits for jobs with `Atomics.waitAsync` (the
 * event loop goes on: the jobs' tasks await GPU work), takes every queued job per wake and runs
 * each as a task, as a posted job runs. Plain results go back through the reply ring; others,
 * and errors, by `post`, once each.
 */
function serveRing(rings: WorkerRings, list: readonly Job[], post: (message: FromWorker) => void) {
  const inbox = new RingView(rings.inbox);
  const replies = new RingView(rings.replies);
  const bell = new Int32Array(rings.bell);
  const header = inbox.header;
  const next: RingJob = { id: 0, job: 0, priority: 0, args: [] };
  // Ring jobs running here, and whether replies were written that the bell has not told. The
  // bell rings when the last running job answers, else once per turn of the event loop, so
  // that replies finished together cost the pool one wake.
  let running = 0;
  let untold = false;
  const tell = () => {
    if (!untold) return;
    untold = false;
    ringBell(bell);
  };
  const answered = () => {
    running--;
    if (running > 0) return;
    tell();
    // Idle now: the pool's next job often comes within a wake's time, so look for it a moment
    // before sleeping (flag clear meanwhile: the pool need not notify).
    const until = performance.now() + IDLE_SPIN_MS;
    Atomics.store(header, SLEEPING, 0);
    while (Atomics.load(header, WRITE) === inbox.at && performance.now() < until) {}
    sleep();
  };
  const reply = (id: number, value: unknown) => {
    // A primitive is a plain result (others were encoded into an object in the task).
    if (typeof value !== 'object' || value === null) {
      const plain = value as number | boolean | undefined | null;
      if (pushReply(replies, id, plain)) {
        if (!untold) {
          untold = true;
          if (running > 1) setImmediate(tell);
        }
        answered();
        return;
      }
      post({ type: 'done', id, value: { $value: plain } });
    } else post({ type: 'done', id, value: value as Encoded });
    answered();
  };
  const run = (
    id: number,
    job: Job | undefined,
    options: TaskOptions | undefined,
    args: unknown[],
  ) => {
    if (job === undefined) {
      post({
        type: 'error',
        id,
        error: serializeError(new CudaArgumentError('the job module has no such job')),
      });
      return;
    }
    running++;
    task(() => runPlain(job, args), options).then(
      (value) => reply(id, value),
      (error: unknown) => {
        post({ type: 'error', id, error: serializeError(error) });
        answered();
      },
    );
  };
  // Whether a wait is armed (one at a time: it ends when the pool clears the flag).
  let parked = false;
  /** Takes the queued jobs, then sleeps (flag set, a wait armed) once the inbox is empty. */
  const sleep = (): void => {
    for (;;) {
      Atomics.store(header, SLEEPING, 0);
      while (takeJob(inbox, next)) {
        run(next.id, list[next.job], RING_OPTIONS[next.priority], next.args);
      }
      Atomics.store(header, SLEEPING, 1);
      if (Atomics.load(header, WRITE) !== inbox.at) continue;
      if (parked) return;
      const wait = sleepWhileFlagged(header, SLEEPING);
      if (wait !== undefined) {
        parked = true;
        void wait.then(wake);
        return;
      }
    }
  };
  const wake = (): void => {
    parked = false;
    sleep();
  };
  sleep();
}

/** Runs the worker's side of a pool on `port` (the entry calls it with `parentPort`). */
export async function serveWorkerJobs(port: MessagePort, data: WorkerPoolData): Promise<void> {
  const post = (message: FromWorker) => port.postMessage(message);
  let jobs: Map<string, Job>;
  try {
    if (data.device !== undefined) setDefaultDevice(data.device);
    jobs = jobsOf((await import(data.module)) as Record<string, unknown>);
  } catch (error) {
    post({ type: 'failed', error: serializeError(error) });
    return;
  }
  const running = new Map<number, AbortController>();
  port.on('message', (message: ToWorker) => {
    if (message.type === 'cancel') {
      const error = Object.assign(new Error(message.reason.message), {
        name: message.reason.name,
      });
      running.get(message.id)?.abort(error);
      return;
    }
    if (message.type === 'close') {
      port.close();
      return;
    }
    const { id } = message;
    const job = jobs.get(message.job);
    if (job === undefined) {
      post({
        type: 'error',
        id,
        error: serializeError(
          new CudaArgumentError(
            `the job module has no job ${JSON.stringify(message.job)} (it exports ${[...jobs.keys()].join(', ') || 'no functions'})`,
          ),
        ),
      });
      return;
    }
    // A signal only where the caller can abort the job (one AbortController per job costs).
    const controller = message.cancellable ? new AbortController() : undefined;
    if (controller !== undefined) running.set(id, controller);
    const options: TaskOptions = {};
    if (controller !== undefined) options.signal = controller.signal;
    if (message.name !== undefined) options.name = message.name;
    if (message.priority !== undefined) options.priority = message.priority;
    task(async () => {
      if (message.plain) return encodeResult(await job(...message.args), NONE, 0);
      const borrowed: DeviceArray[] = [];
      try {
        const args = (message.args as readonly Encoded[]).map((arg) => decode(arg, borrowed, 0));
        return encodeResult(await job(...args), borrowed, 0);
      } finally {
        // Given back, ordered after the job's work on them (even if it keeps a reference).
        for (const array of borrowed) array.dispose();
      }
    }, options).then(
      (value) => {
        running.delete(id);
        post({ type: 'done', id, value });
      },
      (error: unknown) => {
        running.delete(id);
        post({ type: 'error', id, error: serializeError(error) });
      },
    );
  });
  post({ type: 'ready', jobs: [...jobs.keys()] });
  if (data.rings !== undefined) serveRing(data.rings, [...jobs.values()], post);
}
