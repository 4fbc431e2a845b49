/**
 * Worker tasks: jobs that run on worker threads, each with the task runtime inside, so that one
 * process issues GPU work from several cores: one thread issuing every driver call caps a
 * process whose jobs are many small kernels (docs/decisions/0042). The pool's workers make their own driver calls, in parallel, on their own streams of the same context
 * (device pointers, events and streams are valid in every thread of a process).
 *
 * The caller's side: `WorkerPool.start(moduleUrl)` starts the workers, each of which imports
 * the job module (its exported functions are the jobs); `pool.run('job', ...args)` runs one on
 * the least busy worker as a task of its own there and resolves with its result. Device arrays
 * in the arguments are lent to the job (no copy): the job's work on them is ordered after the
 * work issued so far on the caller's stream, and the caller's stream after the job's, on the
 * GPU, when the call resolves; meanwhile the caller cannot use them (`readOnly(array)` lends
 * one for reading only: the caller may go on reading it). Device arrays a job returns become
 * the caller's (transferred, no copy), ordered on the caller's stream the same way. A call's
 * promise resolves when the job has issued its work, as a launch returns when issued: `await
 * synchronize()` waits for it on the GPU.
 */
import { availableParallelism } from 'node:os';
import { isAbsolute, resolve as resolvePath } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import {
  type ArrayLoan,
  assertOptions,
  CudaArgumentError,
  DeviceArray,
  DeviceBuffer,
  Event,
  lendArray,
  receiveArray,
  type Stream,
  type StreamPriority,
} from '@cuda-tasks/cudadrv';
import { NO_OPTIONS, threadEntry } from '@cuda-tasks/cudadrv/internal';
import { reportCleanupError } from './cleanup.js';
import { currentFrame, type Frame, streamOf } from './state.js';
import {
  type Encoded,
  type FromWorker,
  isPlainObject,
  MAX_DEPTH,
  type SerializedError,
  serializeError,
  setOwn,
  type ToWorker,
  type WorkerPoolData,
} from './worker-protocol.js';
import {
  BELL_SLEEPING,
  createBell,
  createRings,
  fitsRing,
  hasReply,
  priorityCode,
  pushJob,
  RingView,
  replyId,
  sleepWhileFlagged,
  takeReply,
} from './worker-ring.js';

/** The options `WorkerPool.start` takes. */
const WORKER_POOL_OPTIONS: readonly string[] = Object.freeze([
  'workers',
  'device',
  'startTimeoutMs',
  'argv',
]);

/** Options of `WorkerPool.start`. */
export interface WorkerPoolOptions {
  /** Worker threads (default: the machine's cores less one, at least 1 and at most 8). */
  workers?: number;
  /** The device the jobs run on (default: each worker's process default device, device 0). */
  device?: number;
  /** How long `start` waits for a worker to import the job module (default 30 s). */
  startTimeoutMs?: number;
  /** Strings appended to `process.argv` in every worker (settings for the job module). */
  argv?: readonly string[];
}

/** Options of one job (`pool.runWith`). */
export interface WorkerJobOptions {
  /** Cancels the job: a job not started yet never starts; a running one's task is aborted. */
  signal?: AbortSignal;
  /** The job task's priority in its worker (default 'normal'). */
  priority?: StreamPriority;
  /** The job task's name (traces, errors). */
  name?: string;
  /** The stream the job is ordered against (default: the current stream). */
  stream?: Stream;
}

/** How a pool stands (`pool.statistics()`). */
export interface WorkerPoolStatistics {
  /** The number of workers. */
  readonly workers: number;
  /** Jobs sent and not answered yet, per worker. */
  readonly inFlight: readonly number[];
  /** Jobs answered (resolved or rejected), per worker. */
  readonly completed: readonly number[];
  /** Workers that exited unexpectedly and were started again. */
  readonly restarts: number;
}

/** A job that failed in its worker: the worker's error, rebuilt on the caller's side. */
export class WorkerJobError extends Error {
  /** The job's name. */
  readonly job: string;
  /** The index of the worker that ran it. */
  readonly worker: number;
  /** The error's class name in the worker (`CudaError`, `TypeError`...). */
  readonly remoteName: string;
  /** The error's own message in the worker. */
  readonly remoteMessage: string;
  /** `CudaError.call` of the worker's error, where it had one. */
  readonly call: string | undefined;
  /** The worker's error's `code` (a CUresult, a library status), where it had one. */
  readonly code: number | string | undefined;

  constructor(job: string, worker: number, error: SerializedError) {
    super(`job ${job} (worker ${worker}): ${error.name}: ${error.message}`);
    this.name = 'WorkerJobError';
    this.job = job;
    this.worker = worker;
    this.remoteName = error.name;
    this.remoteMessage = error.message;
    this.call = error.call;
    this.code = error.code;
    if (error.stack !== undefined)
      this.stack = `${this.stack}\n    --- in the worker ---\n${error.stack}`;
  }
}

/** Marks an array argument to be lent for reading only (see `WorkerPool`). */
export function readOnly<D extends DeviceArray>(array: D): ReadOnlyArgument<D> {
  if (!DeviceArray.isInstance(array)) {
    throw new CudaArgumentError(`readOnly: expected a DeviceArray, got ${typeof array}`);
  }
  return new ReadOnlyArgument(array);
}

/** A `readOnly(array)` argument. */
export class ReadOnlyArgument<D extends DeviceArray = DeviceArray> {
  /** The array to lend for reading only. */
  readonly array: D;
  constructor(array: D) {
    this.array = array;
  }
}

/** No loans (a job of plain arguments). */
const NO_LOANS: readonly ArrayLoan[] = Object.freeze([]);
const NO_ARRAYS: readonly DeviceArray[] = Object.freeze([]);
function settleNothing(): void {}

/** The job whose promise `capture` is making (a Promise's executor runs at once). */
let capturing: Pending | undefined;
/** Every job's Promise executor: one function, so that a call makes no closure for it. */
function capture(resolve: (value: unknown) => void, reject: (error: unknown) => void): void {
  capturing!.resolve = resolve;
  capturing!.reject = reject;
}

/** A job sent and not answered yet. */
class Pending {
  readonly id: number;
  readonly job: string;
  readonly worker: Slot;
  readonly loans: readonly ArrayLoan[];
  /** The caller's arrays, by their index in `loans` (a result may be one of them). */
  readonly lent: readonly DeviceArray[];
  resolve: (value: unknown) => void = settleNothing;
  reject: (error: unknown) => void = settleNothing;
  /** The signal aborted: the job was told, and a failure rejects with the signal's reason. */
  aborted = false;
  readonly signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined = undefined;
  /** Sent through the worker's inbox ring (counted in the pool's ring jobs in flight). */
  ring = false;
  #stream: Stream | undefined;
  readonly #frame: Frame | undefined;

  constructor(
    id: number,
    job: string,
    worker: Slot,
    stream: Stream | undefined,
    frame: Frame | undefined,
    signal: AbortSignal | undefined,
    loans: readonly ArrayLoan[],
    lent: readonly DeviceArray[],
  ) {
    this.id = id;
    this.job = job;
    this.worker = worker;
    this.#stream = stream;
    this.#frame = frame;
    this.signal = signal;
    this.loans = loans;
    this.lent = lent;
  }

  /** The caller's stream (resolved in the caller's task, when first needed). */
  stream(): Stream {
    this.#stream ??= streamOf(this.#frame!);
    return this.#stream;
  }
}

interface Slot {
  readonly index: number;
  worker: Worker;
  inFlight: number;
  completed: number;
  ready: boolean;
  /** The worker's inbox and reply rings (new ones for each start), or none. */
  inbox: RingView | undefined;
  replies: RingView | undefined;
  /** Whether jobs may go through the inbox (the worker is ready and lists the pool's jobs). */
  ringReady: boolean;
}

function moduleUrl(module: string | URL): string {
  if (module instanceof URL) return module.href;
  if (typeof module !== 'string' || module.length === 0) {
    throw new CudaArgumentError(
      `WorkerPool: the job module must be a URL or a path, got ${String(module)}`,
    );
  }
  if (/^[a-z][a-z0-9+.-]*:/i.test(module) && !/^[a-z]:[\\/]/i.test(module)) return module;
  return pathToFileURL(isAbsolute(module) ? module : resolvePath(module)).href;
}

function checkCount(value: unknown, what: string, min: number, max: number): number {
  if (!Number.isInteger(value) || (value as number) < min || (value as number) > max) {
    throw new CudaArgumentError(
      `WorkerPool: ${what} must be an integer in [${min}, ${max}], got ${String(value)}`,
    );
  }
  return value as number;
}

/**
 * Ends every loan of a job, each whatever the others do: undefined when all ended, else the one
 * error, or an AggregateError of them all when several failed.
 */
function endLoans(loans: readonly ArrayLoan[]): unknown {
  let errors: unknown[] | undefined;
  for (const loan of loans) {
    try {
      loan.end();
    } catch (error) {
      (errors ??= []).push(error);
    }
  }
  if (errors === undefined) return undefined;
  if (errors.length === 1) return errors[0];
  return new AggregateError(
    errors,
    `WorkerPool: ending ${errors.length} of the job’s ${loans.length} loans failed: ${errors
      .map((error) => (error instanceof Error ? error.message : String(error)))
      .join('; ')}`,
  );
}

/**
 * A loan abandoned after its worker went away could not be ended (its context's wait failed):
 * the job has rejected already, so this goes where the runtime's other clean-up errors go
 * (`onCleanupError` listeners, else a process warning), never to an unhandled rejection.
 */
function reportAbandonError(error: unknown): void {
  reportCleanupError(error, undefined);
}

/** A pool of worker threads that run jobs of one module, each job as a task (see above). */
export class WorkerPool {
  readonly #data: Omit<WorkerPoolData, 'index'>;
  readonly #slots: Slot[] = [];
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #restarts = 0;
  #closed = false;
  #closing: Promise<void> | undefined;
  /** Called when the last job in flight answers (`close` waits for it). */
  #drained: (() => void) | undefined;
  /** The jobs the module exports (from the first worker ready). */
  #jobs: readonly string[] = [];
  /** Each job's index in `#jobs` (what an inbox record names). */
  readonly #jobIndex = new Map<string, number>();
  /** The pool's bell (worker-ring.ts): ring replies clear its sleep flag and wake the pool. */
  readonly #bell = createBell();
  readonly #bellWords = new Int32Array(this.#bell);
  /** Jobs in flight that went through an inbox. */
  #ringInFlight = 0;
  /** Whether the pool's one `Atomics.waitAsync` on the bell is armed. */
  #armed = false;
  /** The bell's wake (one function for the pool's life). */
  readonly #onBell = (): void => {
    this.#armed = false;
    this.#arm();
  };

  readonly #argv: string[];

  private constructor(data: Omit<WorkerPoolData, 'index'>, argv: string[]) {
    this.#data = data;
    this.#argv = argv;
  }

  /**
   * Starts the workers and resolves once each has imported the job module (rejects, with
   * every worker stopped, if one fails to).
   * @example
   * await using pool = await WorkerPool.start(new URL('./jobs.js', import.meta.url), { workers: 8 });
   * const y = await pool.run('scale', x, 2); // jobs.js: export function scale(x, a) { ... }
   */
  static async start(module: string | URL, options: WorkerPoolOptions = {}): Promise<WorkerPool> {
    assertOptions('WorkerPool.start', options, WORKER_POOL_OPTIONS);
    const workers = checkCount(
      options.workers ?? Math.max(1, Math.min(8, availableParallelism() - 1)),
      'workers',
      1,
      1024,
    );
    if (options.device !== undefined) checkCount(options.device, 'device', 0, 1 << 16);
    const timeout = checkCount(options.startTimeoutMs ?? 30_000, 'startTimeoutMs', 1, 2 ** 31 - 1);
    const argv = options.argv ?? [];
    if (!Array.isArray(argv) || !argv.every((item) => typeof item === 'string')) {
      throw new CudaArgumentError('WorkerPool: argv must be a list of strings');
    }
    const pool = new WorkerPool({ module: moduleUrl(module), device: options.device }, [...argv]);
    try {
      await Promise.all(
        Array.from({ length: workers }, (_, index) => pool.#startWorker(index, timeout)),
      );
    } catch (error) {
      await pool.close();
      throw error;
    }
    return pool;
  }

  /** The jobs the module exports. */
  get jobs(): readonly string[] {
    return this.#jobs;
  }

  /** The number of workers. */
  get size(): number {
    return this.#slots.length;
  }

  /** Starts (or restarts) worker `index`; resolves when it is ready. */
  #startWorker(index: number, timeoutMs: number): Promise<void> {
    const entry = threadEntry(import.meta.url, 'worker-entry.js', 'worker-entry-source.mjs');
    const rings = createRings(this.#bell);
    const worker = new Worker(entry.url, {
      workerData: { ...this.#data, index, rings } satisfies WorkerPoolData,
      argv: this.#argv,
      ...(entry.execArgv === undefined ? {} : { execArgv: entry.execArgv }),
    });
    const slot: Slot = this.#slots[index] ?? {
      index,
      worker,
      inFlight: 0,
      completed: 0,
      ready: false,
      inbox: undefined,
      replies: undefined,
      ringReady: false,
    };
    slot.worker = worker;
    slot.ready = false;
    slot.ringReady = false;
    slot.inbox = new RingView(rings.inbox);
    slot.replies = new RingView(rings.replies);
    this.#slots[index] = slot;
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(
          new CudaArgumentError(
            `WorkerPool: worker ${index} did not load ${this.#data.module} within ${timeoutMs} ms`,
          ),
        );
        void worker.terminate();
      }, timeoutMs);
      worker.on('message', (message: FromWorker) => {
        if (message.type === 'ready') {
          clearTimeout(timer);
          slot.ready = true;
          if (this.#jobs.length === 0) {
            this.#jobs = message.jobs;
            for (let i = 0; i < message.jobs.length; i++) this.#jobIndex.set(message.jobs[i]!, i);
          }
          // Inbox records name jobs by their index in the pool's list: the worker's must match.
          slot.ringReady = message.jobs.join('\n') === this.#jobs.join('\n');
          if (slot.inFlight === 0) worker.unref();
          resolve();
        } else if (message.type === 'failed') {
          clearTimeout(timer);
          reject(new WorkerJobError('(loading the job module)', index, message.error));
        } else this.#reply(slot, message);
      });
      worker.on('error', (error) => {
        clearTimeout(timer);
        reject(error);
        this.#lost(slot, worker, `failed: ${error.message}`);
      });
      worker.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`WorkerPool: worker ${index} exited with code ${code} while starting`));
        this.#lost(slot, worker, `exited with code ${code}`);
      });
    });
  }

  /** A worker went away: its jobs reject, their loans are abandoned, and it starts again. */
  #lost(slot: Slot, worker: Worker, why: string): void {
    if (slot.worker !== worker) return;
    slot.ready = false;
    slot.ringReady = false;
    // Results the worker wrote into its reply ring before it went are its jobs' answers.
    if (this.#ringInFlight > 0) this.#takeReplies();
    for (const pending of [...this.#pending.values()]) {
      if (pending.worker !== slot) continue;
      this.#forget(pending);
      for (const loan of pending.loans) loan.abandon().catch(reportAbandonError);
      pending.reject(
        new WorkerJobError(pending.job, slot.index, {
          name: 'WorkerExit',
          message: `the worker ${why} while the job ran`,
          stack: undefined,
          call: undefined,
          code: undefined,
        }),
      );
    }
    if (!this.#closed) {
      this.#restarts++;
      this.#startWorker(slot.index, 30_000).catch(() => {});
    }
  }

  #forget(pending: Pending): void {
    this.#pending.delete(pending.id);
    pending.worker.inFlight--;
    pending.worker.completed++;
    if (pending.ring) this.#ringInFlight--;
    if (pending.worker.inFlight === 0) pending.worker.worker.unref();
    if (pending.onAbort !== undefined)
      pending.signal!.removeEventListener('abort', pending.onAbort);
    if (this.#pending.size === 0) this.#drained?.();
  }

  #reply(slot: Slot, message: FromWorker): void {
    if (message.type !== 'done' && message.type !== 'error') return;
    const pending = this.#pending.get(message.id);
    if (pending === undefined || pending.worker !== slot) return;
    this.#forget(pending);
    let value: unknown;
    let failure: unknown;
    let failed = false;
    try {
      // The caller's stream waits for the job's work on the lent arrays; they are the caller's
      // again. Each loan ends on its own: one that fails leaves the others ended.
      const ended = endLoans(pending.loans);
      if (ended !== undefined) throw ended;
      if (message.type === 'done') value = this.#decode(message.value, pending, 0);
      else {
        failed = true;
        failure = pending.aborted
          ? pending.signal!.reason
          : new WorkerJobError(pending.job, slot.index, message.error);
      }
    } catch (error) {
      failed = true;
      failure = error;
    }
    if (failed) pending.reject(failure);
    else pending.resolve(value);
  }

  #decode(value: Encoded, pending: Pending, depth: number): unknown {
    if ('$value' in value) return value.$value;
    if ('$argument' in value) return pending.lent[value.$argument];
    if ('$event' in value) return Event.fromThreadDescriptor(value.$event);
    if ('$transferred' in value) {
      // The caller's stream (its task may have been aborted since: then the current one).
      let caller: Stream | undefined;
      try {
        caller = pending.stream();
      } catch {
        caller = undefined;
      }
      const stream = caller === undefined || caller.disposed ? undefined : caller;
      return receiveArray(value.$transferred, stream === undefined ? {} : { stream });
    }
    if (depth >= MAX_DEPTH) return undefined;
    if ('$list' in value) return value.$list.map((item) => this.#decode(item, pending, depth + 1));
    if ('$object' in value) {
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(value.$object)) {
        setOwn(out, key, this.#decode(item, pending, depth + 1));
      }
      return out;
    }
    return undefined;
  }

  /** Encodes arguments: device arrays are lent on `stream` (the loans are kept in order). */
  #encode(
    value: unknown,
    stream: () => Stream,
    loans: ArrayLoan[],
    lent: DeviceArray[],
    depth: number,
  ): Encoded {
    if (value instanceof ReadOnlyArgument || DeviceArray.isInstance(value)) {
      const array = value instanceof ReadOnlyArgument ? value.array : value;
      if (lent.includes(array)) {
        throw new CudaArgumentError(
          'WorkerPool.run: the same DeviceArray is passed twice to one job',
        );
      }
      const loan = lendArray(array, {
        stream: stream(),
        readOnly: value instanceof ReadOnlyArgument,
      });
      loans.push(loan);
      lent.push(array);
      return { $lent: loan.descriptor };
    }
    if (value instanceof Event) return { $event: value.toThreadDescriptor() };
    if (depth >= MAX_DEPTH) {
      throw new CudaArgumentError(`WorkerPool.run: arguments nest deeper than ${MAX_DEPTH}`);
    }
    if (Array.isArray(value)) {
      return { $list: value.map((item) => this.#encode(item, stream, loans, lent, depth + 1)) };
    }
    if (isPlainObject(value)) {
      const out: Record<string, Encoded> = {};
      for (const [key, item] of Object.entries(value)) {
        setOwn(out, key, this.#encode(item, stream, loans, lent, depth + 1));
      }
      return { $object: out };
    }
    if (DeviceBuffer.isInstance(value)) {
      throw new CudaArgumentError('WorkerPool.run: pass DeviceArrays to jobs, not DeviceBuffers');
    }
    return { $value: value };
  }

  /** Runs `job` with `args` on the least busy worker (see `runWith`). */
  run<R = unknown>(job: string, ...args: unknown[]): Promise<R> {
    return this.runWith<R>(job, args);
  }

  /**
   * Runs the module's `job` with `args` on the least busy worker, as a task of its own there.
   * Device arrays among the arguments (also inside lists and plain objects) are lent to the
   * job until it answers; device arrays in its result become the caller's. Everything is
   * ordered on `options.stream` (default: the current stream). Rejects with a
   * `WorkerJobError` when the job throws or its worker exits. When `options.signal` aborts, the
   * job's task in the worker is aborted (its later GPU calls throw before any native call) and
   * the call rejects with the signal's reason once the worker has answered, so that its arrays
   * are the caller's again when it does; a job that completed anyway resolves.
   */
  runWith<R = unknown>(
    job: string,
    args: readonly unknown[],
    options: WorkerJobOptions = NO_OPTIONS,
  ): Promise<R> {
    if (this.#closed) {
      return Promise.reject(new CudaArgumentError('WorkerPool.run: the pool is closed'));
    }
    if (typeof job !== 'string' || (this.#jobs.length > 0 && !this.#jobIndex.has(job))) {
      return Promise.reject(
        new CudaArgumentError(
          `WorkerPool.run: the job module has no job ${JSON.stringify(job)} (it exports ${this.#jobs.join(', ') || 'no functions'})`,
        ),
      );
    }
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    let slot: Slot | undefined;
    for (const candidate of this.#slots) {
      if (candidate.ready && (slot === undefined || candidate.inFlight < slot.inFlight))
        slot = candidate;
    }
    if (slot === undefined) {
      return Promise.reject(
        new CudaArgumentError('WorkerPool.run: no worker is ready (they are restarting)'),
      );
    }
    return this.#runOn<R>(slot, job, args, options);
  }

  /** Runs `job` on worker `slot`, its name and signal checked (see `runWith`). */
  #runOn<R>(
    slot: Slot,
    job: string,
    args: readonly unknown[],
    options: WorkerJobOptions,
  ): Promise<R> {
    const signal = options.signal;
    // The caller's stream, resolved in the caller's task only when an array needs it (a job
    // of plain values touches no GPU here); kept for the reply, which runs outside that task.
    const given = options.stream;
    const frame = given === undefined ? currentFrame() : undefined;
    // Plain values (the common case) go as they are; lists and objects are searched for
    // device arrays and events.
    let plain = true;
    for (let i = 0; i < args.length; i++) {
      const arg = args[i];
      if (typeof arg === 'object' && arg !== null) {
        plain = false;
        break;
      }
    }
    const id = this.#nextId++;
    const pending = plain
      ? new Pending(id, job, slot, given, frame, signal, NO_LOANS, NO_ARRAYS)
      : new Pending(id, job, slot, given, frame, signal, [], []);
    let encoded: readonly Encoded[] | readonly unknown[] = args;
    if (!plain) {
      const loans = pending.loans as ArrayLoan[];
      const lent = pending.lent as DeviceArray[];
      const stream = () => pending.stream();
      try {
        encoded = args.map((arg) => this.#encode(arg, stream, loans, lent, 0));
      } catch (error) {
        // The call's own error is what it rejects with; a loan that fails to end is reported.
        const ended = endLoans(loans);
        if (ended !== undefined) reportCleanupError(ended, undefined);
        return Promise.reject(error);
      }
    }
    capturing = pending;
    const promise = new Promise<unknown>(capture) as Promise<R>;
    capturing = undefined;
    this.#pending.set(id, pending);
    slot.inFlight++;
    if (slot.inFlight === 1) slot.worker.ref();
    // Plain jobs without a signal or a name go through the worker's inbox ring when they fit.
    if (plain && signal === undefined && options.name === undefined && slot.ringReady) {
      const index = this.#jobIndex.get(job);
      const priority = priorityCode(options.priority);
      if (
        index !== undefined &&
        priority >= 0 &&
        fitsRing(args) &&
        pushJob(slot.inbox!, id, index, priority, args)
      ) {
        pending.ring = true;
        this.#ringInFlight++;
        if (!this.#armed) this.#arm();
        return promise;
      }
    }
    if (signal !== undefined) {
      const target = slot;
      pending.onAbort = () => {
        if (this.#pending.get(id) !== pending || pending.aborted) return;
        pending.aborted = true;
        target.worker.postMessage({
          type: 'cancel',
          id,
          reason: serializeError(signal.reason),
        } satisfies ToWorker);
      };
      signal.addEventListener('abort', pending.onAbort, { once: true });
    }
    try {
      slot.worker.postMessage({
        type: 'run',
        id,
        job,
        args: encoded,
        plain,
        cancellable: signal !== undefined,
        name: options.name,
        priority: options.priority,
      } satisfies ToWorker);
    } catch (error) {
      this.#forget(pending);
      // The call's own error is what it rejects with; a loan that fails to end is reported.
      const ended = endLoans(pending.loans);
      if (ended !== undefined) reportCleanupError(ended, undefined);
      pending.reject(error);
    }
    return promise;
  }

  /**
   * Waits for ring replies while ring jobs are in flight: one `Atomics.waitAsync` on the bell
   * for the whole pool (it does not keep the process alive; the workers with jobs are kept
   * referenced). Takes every reply there is per wake (worker-ring.ts has the flag protocol).
   */
  #arm(): void {
    const bell = this.#bellWords;
    for (;;) {
      Atomics.store(bell, BELL_SLEEPING, 1);
      this.#takeReplies();
      if (this.#ringInFlight === 0) {
        Atomics.store(bell, BELL_SLEEPING, 0);
        return;
      }
      const wait = sleepWhileFlagged(bell, BELL_SLEEPING);
      if (wait !== undefined) {
        this.#armed = true;
        void wait.then(this.#onBell);
        return;
      }
    }
  }

  /** Settles the jobs whose results are in the workers' reply rings. */
  #takeReplies(): void {
    for (const slot of this.#slots) {
      const replies = slot.replies;
      if (replies === undefined) continue;
      while (hasReply(replies)) {
        const pending = this.#pending.get(replyId(replies));
        const value = takeReply(replies);
        if (pending === undefined || pending.worker !== slot) continue;
        this.#forget(pending);
        pending.resolve(value);
      }
    }
  }

  /**
   * Runs `job` with `args` once on every worker (each as a task there) and resolves with their
   * results in worker order: a per-worker setup, say. A worker started again later (after an
   * exit) has not run it.
   */
  broadcast<R = unknown>(job: string, ...args: unknown[]): Promise<R[]> {
    if (this.#closed) {
      return Promise.reject(new CudaArgumentError('WorkerPool.broadcast: the pool is closed'));
    }
    if (typeof job !== 'string' || (this.#jobs.length > 0 && !this.#jobIndex.has(job))) {
      return Promise.reject(
        new CudaArgumentError(
          `WorkerPool.broadcast: the job module has no job ${JSON.stringify(job)}`,
        ),
      );
    }
    if (this.#slots.some((slot) => !slot.ready)) {
      return Promise.reject(new CudaArgumentError('WorkerPool.broadcast: a worker is restarting'));
    }
    return Promise.all(this.#slots.map((slot) => this.#runOn<R>(slot, job, args, {})));
  }

  /** How the pool stands. */
  statistics(): WorkerPoolStatistics {
    return {
      workers: this.#slots.length,
      inFlight: this.#slots.map((slot) => slot.inFlight),
      completed: this.#slots.map((slot) => slot.completed),
      restarts: this.#restarts,
    };
  }

  /**
   * Stops taking jobs, waits for the jobs in flight to answer (at most `timeoutMs`, default
   * 60 s: past it the workers are stopped and those jobs reject as a worker's exit makes them),
   * then stops the workers. Safe to call twice.
   */
  close(options: { timeoutMs?: number } = {}): Promise<void> {
    this.#closing ??= this.#close(
      checkCount(options.timeoutMs ?? 60_000, 'timeoutMs', 0, 2 ** 31 - 1),
    );
    return this.#closing;
  }

  async #close(timeoutMs: number): Promise<void> {
    this.#closed = true;
    if (this.#pending.size > 0) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        this.#drained = resolve;
        timer = setTimeout(resolve, timeoutMs);
      });
      clearTimeout(timer);
    }
    await Promise.all(this.#slots.map((slot) => slot.worker.terminate()));
    // Lets the bell's wait (if armed) go.
    Atomics.store(this.#bellWords, BELL_SLEEPING, 0);
    Atomics.notify(this.#bellWords, BELL_SLEEPING);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
