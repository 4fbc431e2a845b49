/**
 * Request bodies decoded, parsed and validated off the event loop. A large JSON body (a `/solve`
 * matrix) takes milliseconds to decode and parse, and many bodies can finish in one socket read
 * and be parsed back to back, so parsing them inline would stall the loop for every request
 * (docs/decisions/0037-request-bodies-parsed-off-the-loop.md has the figures). A small pool of worker
 * threads takes the body's bytes (the ArrayBuffer is transferred, not copied), runs the same
 * `parseRequestBody` as the inline path, and transfers the Float64Arrays back: the loop only
 * posts a message and receives the result. Small bodies stay inline, where a hand-off would
 * cost more than the parse.
 *
 * Bounds: a parse past `timeoutMs`, or one that exhausts the worker's heap, is a 413 and the
 * worker is replaced; a worker that crashes fails only its request (500). Idle workers are
 * unref'd, so they never keep the process alive; `close()` terminates them.
 */
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import {
  type BodyContext,
  type BodyRoute,
  type ParsedBody,
  parseRequestBody,
  RequestError,
} from './validation.js';

/** Options of `ParsePool`. */
export interface ParsePoolOptions {
  /**
   * Worker threads (default `defaultParseWorkers()`: 6 on a 16-core machine). 0: every body is
   * parsed inline, on the event loop.
   */
  workers?: number;
  /** Bodies smaller than this many bytes are parsed inline (default 16 KiB). */
  inlineBelowBytes?: number;
  /** The most time one body may take in a worker, ms (default 5000): past it, 413. */
  timeoutMs?: number;
  /**
   * Each worker's heap (V8 old generation), MiB (default 2048): a body that fills it is a 413.
   * Keep it well above what one body can need at once: V8 ends the whole process, not the
   * worker, when a single allocation (an array of a few hundred MB from a flat 64 MiB body)
   * does not fit under the limit; a heap filled gradually ends only the worker.
   */
  maxHeapMb?: number;
  /** Start the workers now instead of on the first large body (default false). */
  prestart?: boolean;
  /** Called with a worker's failure to start or crash (default: nothing). */
  onError?: (error: Error) => void;
}

/** `ParsePoolOptions.inlineBelowBytes`'s default: 16 KiB (small enough to parse inline; see decision 0037). */
export const DEFAULT_INLINE_BELOW_BYTES = 16 * 1024;

/** `ParsePoolOptions.timeoutMs`'s default. */
export const DEFAULT_PARSE_TIMEOUT_MS = 5000;

/** `ParsePoolOptions.maxHeapMb`'s default. */
export const DEFAULT_PARSE_HEAP_MB = 2048;

/**
 * The default number of parse workers: three eighths of the cores the process may use, at
 * least 4 and at most 8, and always fewer than the cores (the event loop keeps one; at least
 * 1). More workers raise the throughput of a service of large bodies and also its event loop's
 * largest delay (docs/decisions/0037 measures both): `serve --parse-workers N` chooses.
 * @example defaultParseWorkers(); // 6 on a 16-core machine, 4 on an 8-core one, 1 on a 2-core one
 */
export function defaultParseWorkers(cores: number = availableParallelism()): number {
  return Math.max(1, Math.min(cores - 1, 8, Math.max(4, Math.floor((cores * 3) / 8))));
}

/** What a `ParsePool` has done so far. */
export interface ParsePoolStatistics {
  /** Worker threads alive now (starting or ready). */
  workers: number;
  /** Bodies being parsed in a worker now. */
  busy: number;
  /** Bodies waiting for a worker. */
  queued: number;
  /** Bodies parsed inline. */
  inline: number;
  /** Bodies handed to a worker. */
  offloaded: number;
  /** Parses stopped past `timeoutMs` (their workers replaced). */
  timeouts: number;
  /** Workers that crashed or ran out of heap while parsing (replaced). */
  crashes: number;
  /** Why the workers could not start (bodies are then parsed inline), if they could not. */
  failure?: string;
}

interface Job {
  readonly id: number;
  readonly path: BodyRoute;
  /** The body's bytes, in order (transferred to the worker). */
  readonly buffers: ArrayBuffer[];
  readonly length: number;
  readonly context: BodyContext;
  readonly signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  settled: boolean;
  resolve(value: ParsedBody): void;
  reject(error: unknown): void;
}

interface Slot {
  readonly worker: Worker;
  ready: boolean;
  job: Job | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/** A worker's answer to a job (or its start). */
type Reply =
  | { ready: true }
  | { failed: string; id?: undefined }
  | { id: number; request: ParsedBody }
  | { id: number; refused: { status: number; message: string } }
  | { id: number; failed: string };

/**
 * The worker's program (CommonJS, run with `eval`): it loads validation (through tsx's
 * require hook where the service runs from TypeScript source), says it is ready, then answers
 * each `{ id, path, buffers, length, context }` (the body in one or more ArrayBuffers) with the validated request, its Float64Array /
 * Float32Array buffers transferred, or the RequestError's status and message.
 */
const WORKER_SOURCE = `
'use strict';
const { parentPort, workerData } = require('node:worker_threads');
async function load() {
  if (workerData.register !== undefined) {
    require(workerData.register).register();
    return require(workerData.module);
  }
  return import(workerData.moduleUrl);
}
load().then(
  (validation) => {
    parentPort.on('message', (job) => {
      let reply;
      const transfer = [];
      try {
        const parts = job.buffers.map((buffer) => Buffer.from(buffer));
        const body = parts.length === 1 ? parts[0] : Buffer.concat(parts, job.length);
        const request = validation.parseRequestBody(job.path, body, job.context);
        for (const value of Object.values(request)) {
          if (ArrayBuffer.isView(value)) transfer.push(value.buffer);
        }
        reply = { id: job.id, request };
      } catch (error) {
        reply =
          error instanceof validation.RequestError
            ? { id: job.id, refused: { status: error.status, message: error.message } }
            : { id: job.id, failed: String((error && error.message) || error) };
      }
      parentPort.postMessage(reply, transfer);
    });
    parentPort.postMessage({ ready: true });
  },
  (error) => parentPort.postMessage({ failed: String((error && error.message) || error) }),
);
`;

/** Where the worker loads validation from, and the require hook a TypeScript source needs. */
function workerData(): { module: string; moduleUrl: string; register?: string } {
  const extension = extname(fileURLToPath(import.meta.url));
  const moduleUrl = new URL(`./validation${extension}`, import.meta.url);
  const module = fileURLToPath(moduleUrl);
  if (extension !== '.ts') return { module, moduleUrl: moduleUrl.href };
  const register = createRequire(import.meta.url).resolve('tsx/cjs/api');
  return { module, moduleUrl: moduleUrl.href, register };
}

/** The bytes as one Buffer, without a copy where they are one segment. */
function asBuffer(body: Uint8Array | readonly Uint8Array[]): Buffer {
  const segments = ArrayBuffer.isView(body) ? [body] : body;
  if (segments.length === 1) {
    const only = segments[0]!;
    return Buffer.from(only.buffer, only.byteOffset, only.length);
  }
  return Buffer.concat(segments);
}

/** The ArrayBuffers to transfer: a segment's own, or a copy of a segment that shares one. */
function ownBuffers(body: Uint8Array | readonly Uint8Array[]): ArrayBuffer[] {
  const segments = ArrayBuffer.isView(body) ? [body] : body;
  return segments.map((segment) =>
    segment.byteOffset === 0 && segment.buffer.byteLength === segment.length
      ? (segment.buffer as ArrayBuffer)
      : (segment.buffer.slice(
          segment.byteOffset,
          segment.byteOffset + segment.length,
        ) as ArrayBuffer),
  );
}

function shuttingDown(): RequestError {
  return new RequestError(503, 'the service is shutting down', { retryAfterSeconds: 1 });
}

/**
 * Parses request bodies: inline below `inlineBelowBytes`, else in a pool of worker threads,
 * with the same results and the same RequestErrors as `parseRequestBody` inline.
 * @example
 * const pool = new ParsePool();
 * const request = await pool.parse('/solve', body, context, signal); // { n, k, a, b }
 * await pool.close();
 */
export class ParsePool {
  /** Worker threads at most. */
  readonly size: number;
  /** Bodies smaller than this many bytes are parsed inline. */
  readonly inlineBelowBytes: number;
  /** The most time one body may take in a worker, ms. */
  readonly timeoutMs: number;
  /** Each worker's heap limit, MiB. */
  readonly maxHeapMb: number;
  readonly #onError: (error: Error) => void;
  readonly #slots = new Set<Slot>();
  readonly #queue: Job[] = [];
  #nextId = 1;
  #closed = false;
  #failure: string | undefined;
  #data: ReturnType<typeof workerData> | undefined;
  #counts = { inline: 0, offloaded: 0, timeouts: 0, crashes: 0 };

  constructor(options: ParsePoolOptions = {}) {
    const size = options.workers ?? defaultParseWorkers();
    if (!Number.isInteger(size) || size < 0) {
      throw new RangeError(`ParsePool: workers must be an integer >= 0, got ${String(size)}`);
    }
    const inlineBelow = options.inlineBelowBytes ?? DEFAULT_INLINE_BELOW_BYTES;
    if (typeof inlineBelow !== 'number' || !(inlineBelow >= 0)) {
      throw new RangeError(
        `ParsePool: inlineBelowBytes must be a number >= 0, got ${String(inlineBelow)}`,
      );
    }
    const timeoutMs = options.timeoutMs ?? DEFAULT_PARSE_TIMEOUT_MS;
    if (typeof timeoutMs !== 'number' || !(timeoutMs > 0)) {
      throw new RangeError(`ParsePool: timeoutMs must be a number > 0, got ${String(timeoutMs)}`);
    }
    const maxHeapMb = options.maxHeapMb ?? DEFAULT_PARSE_HEAP_MB;
    if (!Number.isInteger(maxHeapMb) || maxHeapMb < 16) {
      throw new RangeError(`ParsePool: maxHeapMb must be an integer >= 16, got ${maxHeapMb}`);
    }
    this.size = size;
    this.inlineBelowBytes = inlineBelow;
    this.timeoutMs = timeoutMs;
    this.maxHeapMb = maxHeapMb;
    this.#onError = options.onError ?? (() => undefined);
    if (options.prestart === true) this.start();
  }

  /** Starts the workers that are not running yet (they stay unref'd until given a body). */
  start(): void {
    while (!this.#closed && this.#failure === undefined && this.#slots.size < this.size) {
      this.#spawn();
    }
  }

  /**
   * Decodes, parses and validates `body` (its bytes, or its segments in order: see `BodyBytes`)
   * for `path` (see `parseRequestBody`): inline when it is small (or the pool has no workers),
   * else in a worker, to which the bytes are transferred (the arrays are empty afterwards;
   * a view of a shared ArrayBuffer, such as a slice of Node's Buffer pool, is copied). Rejects with the RequestError of the inline path
   * for a bad body; with a 413 past `timeoutMs` or the worker's heap; with a 500 for a crashed
   * worker; with the signal's reason once it aborts; with a 503 once the pool is closed.
   */
  parse(
    path: BodyRoute,
    body: Uint8Array | readonly Uint8Array[],
    context: BodyContext,
    signal?: AbortSignal,
  ): Promise<ParsedBody> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#closed) return Promise.reject(shuttingDown());
    let length = 0;
    if (ArrayBuffer.isView(body)) length = body.length;
    else for (const segment of body) length += segment.length;
    if (length < this.inlineBelowBytes || this.size === 0 || this.#failure !== undefined) {
      this.#counts.inline++;
      try {
        return Promise.resolve(parseRequestBody(path, asBuffer(body), context));
      } catch (error) {
        return Promise.reject(error);
      }
    }
    const buffers = ownBuffers(body);
    return new Promise<ParsedBody>((resolve, reject) => {
      const job: Job = {
        id: this.#nextId++,
        path,
        buffers,
        length,
        context,
        signal,
        onAbort: undefined,
        settled: false,
        resolve,
        reject,
      };
      if (signal !== undefined) {
        job.onAbort = () => {
          const queued = this.#queue.indexOf(job);
          if (queued >= 0) this.#queue.splice(queued, 1);
          // A job already in a worker runs to its end (or its timeout); its answer is dropped.
          this.#settle(job, signal.reason, undefined);
        };
        signal.addEventListener('abort', job.onAbort, { once: true });
      }
      this.#counts.offloaded++;
      this.#queue.push(job);
      this.#pump();
    });
  }

  /** What the pool holds now and has done so far. */
  statistics(): ParsePoolStatistics {
    let busy = 0;
    for (const slot of this.#slots) if (slot.job !== undefined) busy++;
    return {
      workers: this.#slots.size,
      busy,
      queued: this.#queue.length,
      ...this.#counts,
      ...(this.#failure !== undefined ? { failure: this.#failure } : {}),
    };
  }

  /**
   * Stops: bodies waiting or being parsed are refused (503), the workers are terminated, and
   * later calls to `parse` are refused. Resolves once every worker has exited. Safe twice.
   */
  async close(): Promise<void> {
    this.#closed = true;
    for (const job of this.#queue.splice(0)) this.#settle(job, shuttingDown(), undefined);
    const exits: Promise<unknown>[] = [];
    for (const slot of this.#slots) {
      if (slot.job !== undefined) this.#settle(slot.job, shuttingDown(), undefined);
      exits.push(this.#retire(slot));
    }
    await Promise.all(exits);
  }

  #settle(job: Job, error: unknown, value: ParsedBody | undefined): void {
    if (job.settled) return;
    job.settled = true;
    if (job.onAbort !== undefined) job.signal?.removeEventListener('abort', job.onAbort);
    if (value !== undefined) job.resolve(value);
    else job.reject(error);
  }

  /** Gives queued jobs to ready idle workers, starting workers up to `size` while jobs wait. */
  #pump(): void {
    if (this.#failure !== undefined) {
      // The workers cannot start here: what waits is parsed inline.
      for (const job of this.#queue.splice(0)) {
        try {
          const body = asBuffer(job.buffers.map((buffer) => new Uint8Array(buffer)));
          this.#settle(job, undefined, parseRequestBody(job.path, body, job.context));
        } catch (error) {
          this.#settle(job, error, undefined);
        }
      }
      return;
    }
    for (const slot of this.#slots) {
      if (this.#queue.length === 0) return;
      if (!slot.ready || slot.job !== undefined) continue;
      this.#dispatch(slot, this.#queue.shift()!);
    }
    let starting = 0;
    for (const slot of this.#slots) {
      if (slot.ready) continue;
      // A body waits for it: it keeps the process alive until it has parsed the body.
      slot.worker.ref();
      starting++;
    }
    while (this.#queue.length > starting && this.#slots.size < this.size) {
      this.#spawn();
      starting++;
    }
  }

  #dispatch(slot: Slot, job: Job): void {
    slot.job = job;
    slot.worker.ref();
    slot.timer = setTimeout(() => this.#timedOut(slot), this.timeoutMs);
    slot.timer.unref();
    const { id, path, buffers, length, context } = job;
    slot.worker.postMessage({ id, path, buffers, length, context }, buffers);
  }

  #timedOut(slot: Slot): void {
    const job = slot.job;
    this.#counts.timeouts++;
    if (job !== undefined) {
      this.#settle(
        job,
        new RequestError(
          413,
          `the request body took longer than ${this.timeoutMs} ms to parse, the most this service allows`,
        ),
        undefined,
      );
    }
    void this.#retire(slot);
    this.#replace();
  }

  /** Frees a worker's place (its job already settled) and terminates it. */
  #retire(slot: Slot): Promise<unknown> {
    this.#slots.delete(slot);
    if (slot.timer !== undefined) clearTimeout(slot.timer);
    slot.timer = undefined;
    slot.job = undefined;
    return slot.worker.terminate();
  }

  /** Starts a worker in the place of one that was retired, so that the pool stays warm. */
  #replace(): void {
    if (this.#closed || this.#failure !== undefined) return;
    if (this.#slots.size < this.size) this.#spawn();
    this.#pump();
  }

  #spawn(): void {
    this.#data ??= workerData();
    let worker: Worker;
    try {
      worker = new Worker(WORKER_SOURCE, {
        eval: true,
        workerData: this.#data,
        resourceLimits: { maxOldGenerationSizeMb: this.maxHeapMb },
      });
    } catch (error) {
      this.#fail(error as Error);
      return;
    }
    const slot: Slot = { worker, ready: false, job: undefined, timer: undefined };
    this.#slots.add(slot);
    worker.on('message', (reply: Reply) => this.#onReply(slot, reply));
    worker.on('error', (error: Error) => this.#onCrash(slot, error));
    worker.on('exit', (code) => {
      if (!this.#slots.has(slot)) return;
      this.#onCrash(slot, new Error(`the parse worker exited with code ${code}`));
    });
    // Referenced only while it starts for a waiting body or parses one (after the listeners:
    // adding a 'message' listener references the worker's port again).
    if (this.#queue.length === 0) worker.unref();
  }

  #onReply(slot: Slot, reply: Reply): void {
    if (!this.#slots.has(slot)) return;
    if ('ready' in reply) {
      slot.ready = true;
      if (this.#queue.length === 0) slot.worker.unref();
      this.#pump();
      return;
    }
    if (reply.id === undefined) {
      // The worker could not load validation: neither will the next one.
      void this.#retire(slot);
      this.#fail(new Error(`the parse worker could not start: ${reply.failed}`));
      return;
    }
    const job = slot.job;
    if (slot.timer !== undefined) clearTimeout(slot.timer);
    slot.timer = undefined;
    slot.job = undefined;
    if (job !== undefined && job.id === reply.id) {
      if ('request' in reply) this.#settle(job, undefined, reply.request);
      else if ('refused' in reply) {
        this.#settle(job, new RequestError(reply.refused.status, reply.refused.message), undefined);
      } else this.#settle(job, new Error(`parsing the body failed: ${reply.failed}`), undefined);
    }
    if (this.#queue.length > 0) this.#pump();
    else slot.worker.unref();
  }

  #onCrash(slot: Slot, error: Error & { code?: string }): void {
    if (!this.#slots.has(slot)) return;
    const job = slot.job;
    if (!slot.ready && job === undefined) {
      // It died before it could take a body: a worker cannot start in this process.
      void this.#retire(slot);
      this.#fail(error);
      return;
    }
    this.#counts.crashes++;
    if (job !== undefined) {
      this.#settle(
        job,
        error.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? new RequestError(
              413,
              `the request body needs more than ${this.maxHeapMb} MiB of memory to parse, the most this service allows`,
            )
          : new Error(`the parse worker failed: ${error.message}`),
        undefined,
      );
    }
    this.#onError(error);
    void this.#retire(slot);
    this.#replace();
  }

  #fail(error: Error): void {
    if (this.#failure !== undefined) return;
    this.#failure = error.message;
    this.#onError(error);
    for (const slot of [...this.#slots]) if (slot.job === undefined) void this.#retire(slot);
    this.#pump();
  }
}
