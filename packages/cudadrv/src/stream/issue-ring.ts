/**
 * The issue engine's rings (see issue-engine.ts): what the calling thread writes and an issuer
 * thread reads, both sides of it. One ring per issuer thread, in a `SharedArrayBuffer`, with one
 * writer (the thread that runs the engine) and one reader (its issuer).
 *
 * Layout: a control block of Int32 words (`HEAD`, `TAIL`, `SLEEPING`, `STOP`, `CANCELLED`,
 * `FAILED` and the failure's message) and a data block of
 * `capacity` Int32 words (a power of two). `HEAD` and `TAIL` count words written and read, as
 * int32 that wrap; a word's place is `position & (capacity - 1)`. A command is a run of words
 * that never crosses the data block's end (a `PAD` command fills the rest first), starting on an
 * even word, so that its 8-byte argument values are 8-byte aligned:
 *
 *   [op, length, slot, kernel, fnLo, fnHi, streamLo, streamHi, contextLo, contextHi,
 *    gx, gy, gz, bx, by, bz, sharedMemory, count, sequence, 0,
 *    (valueLo, valueHi) x count]                                                 op = LAUNCH
 *   [op, length]                                                                 op = PAD
 *   [op, length, slot, ticket, generation, 0, streamLo, streamHi, contextLo, contextHi]
 *                                                                                op = QUERY
 *
 * `slot` is the stream's index in the engine's per-stream words: `issued[slot << SLOT_SHIFT]` counts the
 * commands of that stream issued so far (the writer compares it with what it pushed), and
 * `errors[2 slot]`, `errors[2 slot + 1]` hold the first failed command's CUresult and kernel.
 * `sequence` numbers a stream's launches from 1; a launch whose sequence is at or below
 * `cancelled[slot]` (its task was cancelled before it was issued) is skipped, counted in
 * `CANCELLED`, and still counts as issued.
 * Writes to the data block happen before the `HEAD` store that publishes them, and the reader
 * loads `HEAD` before it reads them (Atomics are sequentially consistent).
 *
 * A QUERY asks the issuer whether the stream's work is done, after the launches before it (a
 * wait of the writer's thread: `synchronize()`), so that the writer's thread waits without a
 * driver call of its own. `ticket` numbers the stream's queries from 1 (int32, wraps). The issuer
 * calls cuStreamQuery: done (or failed: the CUresult goes to the error words, kernel
 * `QUERY_KERNEL`) stores `ticket` into the stream's `ANSWERED` word; not ready puts the stream on
 * the issuer's watch (`WATCHING` set), queried again between its drains until done or until
 * `watchMicroseconds` have passed, when it stores the ticket into `DROPPED` instead and the
 * writer's thread queries by itself. A newer ticket of a watched stream replaces the older one
 * (its answer answers both). `generation` is the stream's `GENERATION` word when the query was
 * pushed: a slot given up (its stream detached) gets a new generation, and the issuer neither
 * queries nor answers for an older one. A QUERY counts as issued like a launch.
 */

import { CudaArgumentError } from '../errors.js';
import { CUresult } from '../ffi/cuda.js';

const NOT_READY = CUresult.CUDA_ERROR_NOT_READY;

// Control words, each on a cache line of its own (16 words apart): the writer's and the
// issuer's stores to their own words do not bounce one line between two cores.
export const HEAD = 0;
export const TAIL = 16;
/** 1 while the issuer sleeps (or is about to) in `Atomics.wait` on `HEAD`. */
export const SLEEPING = 32;
/** 1 once the engine stops: the issuer drains what is there and exits. */
export const STOP = 48;
/** Launches skipped because their stream's work was cancelled (written by the issuer). */
export const CANCELLED = 64;
/**
 * Non-zero once the issuer thread failed (threw, or exited before the engine stopped it): set
 * (and notified) by the dying thread, after it wrote why at `MESSAGE`, so that a writer
 * waiting for it (a fence, a full ring) sees it without its event loop.
 */
export const FAILED = 80;
/** Where the failed issuer writes why: UTF-8, `MESSAGE_BYTES` at most, ending at a 0 byte. */
export const MESSAGE = 96;
export const MESSAGE_BYTES = 256;
export const CONTROL_WORDS = MESSAGE + MESSAGE_BYTES / 4;
/** `issued[slot << SLOT_SHIFT]`: each stream's counter on a cache line of its own. */
export const SLOT_SHIFT = 4;

export const OP_LAUNCH = 1;
export const OP_PAD = 2;
/** Words of a launch command before its argument values. */
export const LAUNCH_HEADER_WORDS = 20;

export const OP_QUERY = 3;
/** Words of a QUERY command. */
export const QUERY_WORDS = 10;
/** The kernel id of an error a QUERY found (the stream's work failed: a fault, a sticky error). */
export const QUERY_KERNEL = -1;

/**
 * The per-stream words in `issued` after the count of commands issued (word 0), at
 * `(slot << SLOT_SHIFT) + word`: the latest query ticket answered, the latest dropped from the
 * watch, whether the issuer watches the stream, and the slot's generation (see QUERY above).
 * Written by the issuer, except `GENERATION` (the writer's thread).
 */
export const ANSWERED = 1;
export const DROPPED = 2;
export const WATCHING = 3;
export const GENERATION = 4;

/** Streams the engine can drain at once (the per-stream words). */
export const MAX_SLOTS = 4096;

/** The shared memory of one ring. */
export interface RingMemory {
  readonly control: SharedArrayBuffer;
  readonly data: SharedArrayBuffer;
}

/** The shared per-stream words of an engine. */
export interface SlotMemory {
  /** Int32 per slot, 16 words apart (`SLOT_SHIFT`): commands issued. */
  readonly issued: SharedArrayBuffer;
  /** Int32 x 2 per slot: the first failure's CUresult and kernel id. */
  readonly errors: SharedArrayBuffer;
  /** Int32 per slot: launches up to this sequence number are not to be issued. */
  readonly cancelled: SharedArrayBuffer;
}

export function createRing(capacity: number): RingMemory {
  if (!Number.isInteger(Math.log2(capacity)) || capacity < 64) {
    throw new CudaArgumentError(
      `issue ring capacity must be a power of two >= 64, got ${capacity}`,
    );
  }
  return {
    control: new SharedArrayBuffer(4 * CONTROL_WORDS),
    data: new SharedArrayBuffer(4 * capacity),
  };
}

/**
 * The issuer's side: marks its ring's issuer as failed, with why (the first mark stays), and
 * wakes a writer waiting on `FAILED`.
 */
export function markFailed(control: Int32Array, why: string): void {
  if (Atomics.load(control, FAILED) !== 0) return;
  const bytes = new Uint8Array(control.buffer, 4 * MESSAGE, MESSAGE_BYTES);
  const { written } = new TextEncoder().encodeInto(why, bytes.subarray(0, MESSAGE_BYTES - 1));
  bytes[written] = 0;
  // The message's bytes are written before FAILED is set (a sequentially consistent store).
  if (Atomics.compareExchange(control, FAILED, 0, 1) === 0) Atomics.notify(control, FAILED);
}

/** The writer's side: why the ring's issuer failed, or undefined while it has not. */
export function failureOf(control: Int32Array): string | undefined {
  if (Atomics.load(control, FAILED) === 0) return undefined;
  const bytes = new Uint8Array(control.buffer, 4 * MESSAGE, MESSAGE_BYTES);
  const end = bytes.indexOf(0);
  // TextDecoder does not take views of shared memory: copy the bytes out first.
  return new TextDecoder().decode(bytes.slice(0, end < 0 ? MESSAGE_BYTES : end));
}

export function createSlots(): SlotMemory {
  return {
    issued: new SharedArrayBuffer(4 * (MAX_SLOTS << SLOT_SHIFT)),
    errors: new SharedArrayBuffer(8 * MAX_SLOTS),
    cancelled: new SharedArrayBuffer(4 * MAX_SLOTS),
  };
}

/** What the issuer calls: libcuda's functions as koffi binds them (or a test's double). */
export interface IssuerCalls {
  cuCtxSetCurrent(context: number | bigint): number;
  cuLaunchKernel(
    f: number,
    gx: number,
    gy: number,
    gz: number,
    bx: number,
    by: number,
    bz: number,
    sharedMemory: number,
    stream: number,
    kernelParams: number,
    extra: number,
  ): number;
  cuStreamQuery(stream: number): number;
  /**
   * Test doubles only (never in libcuda's calls): called when the issuer has found its ring
   * empty and the engine not stopping, just before it sleeps.
   */
  beforeSleep?(): void;
}

/** The reader's side of one ring: its views, and where the argument values' pointers go. */
export interface Reader {
  readonly control: Int32Array;
  readonly data: Int32Array;
  readonly issued: Int32Array;
  readonly errors: Int32Array;
  readonly cancelled: Int32Array;
  /** The data block's native address (the same in every thread of the process). */
  readonly dataAddress: number;
  /** Int32 view of a native array of `void*` (lo, hi words) handed to cuLaunchKernel. */
  readonly pointers: Int32Array;
  /** That array's native address. */
  readonly pointersAddress: number;
  /** The context last made current on this thread. */
  current: number;
  tail: number;
  /** The streams this issuer watches for a query (see QUERY above). */
  readonly watch: Watch;
}

/** An issuer's watched streams: a list of slots, and what it holds for each. */
export interface Watch {
  /** How long a stream is watched before its query is dropped, ms. */
  readonly limitMs: number;
  /** The clock, ms (`performance.now`; a test's own). */
  readonly now: () => number;
  /** The watched slots, `count` of them. */
  readonly slots: Int32Array;
  count: number;
  /** Per slot: the ticket, generation, CUstream, context and when it was first not ready. */
  readonly ticket: Int32Array;
  readonly generation: Int32Array;
  readonly stream: Float64Array;
  readonly context: Float64Array;
  readonly since: Float64Array;
}

/** An empty watch that drops a query after `microseconds` of `now` (ms). */
export function createWatch(microseconds: number, now = () => performance.now()): Watch {
  return {
    limitMs: microseconds / 1000,
    now,
    slots: new Int32Array(MAX_SLOTS),
    count: 0,
    ticket: new Int32Array(MAX_SLOTS),
    generation: new Int32Array(MAX_SLOTS),
    stream: new Float64Array(MAX_SLOTS),
    context: new Float64Array(MAX_SLOTS),
    since: new Float64Array(MAX_SLOTS),
  };
}

const TWO_32 = 4294967296;

/**
 * Issues every command published so far (from `tail` to `HEAD`), in order, publishing the
 * new `TAIL` after each. Returns how many commands it issued. Never throws for a failed call: the
 * CUresult goes to the stream's error words (the first one stays) and later commands go on.
 */
export function drain(reader: Reader, calls: IssuerCalls): number {
  const { control, data, issued, errors, cancelled } = reader;
  const mask = data.length - 1;
  const head = Atomics.load(control, HEAD);
  let tail = reader.tail;
  let count = 0;
  while (tail !== head) {
    const at = tail & mask;
    const op = data[at]!;
    const length = data[at + 1]!;
    if (op === OP_LAUNCH) {
      const slot = data[at + 2]!;
      const fn = (data[at + 4]! >>> 0) + (data[at + 5]! >>> 0) * TWO_32;
      const stream = (data[at + 6]! >>> 0) + (data[at + 7]! >>> 0) * TWO_32;
      const context = (data[at + 8]! >>> 0) + (data[at + 9]! >>> 0) * TWO_32;
      if (((data[at + 18]! - Atomics.load(cancelled, slot)) | 0) <= 0) {
        // Cancelled before it was issued: nothing reaches the driver.
        Atomics.add(control, CANCELLED, 1);
        Atomics.add(issued, slot << SLOT_SHIFT, 1);
        tail = (tail + length) | 0;
        Atomics.store(control, TAIL, tail);
        count++;
        continue;
      }
      let result = enter(reader, calls, context);
      if (result === 0) {
        const values = data[at + 17]!;
        const pointers = reader.pointers;
        let address = reader.dataAddress + 4 * (at + LAUNCH_HEADER_WORDS);
        for (let i = 0; i < values; i++) {
          pointers[2 * i] = address % TWO_32;
          pointers[2 * i + 1] = Math.floor(address / TWO_32);
          address += 8;
        }
        result = calls.cuLaunchKernel(
          fn,
          data[at + 10]! >>> 0,
          data[at + 11]! >>> 0,
          data[at + 12]! >>> 0,
          data[at + 13]! >>> 0,
          data[at + 14]! >>> 0,
          data[at + 15]! >>> 0,
          data[at + 16]! >>> 0,
          stream,
          reader.pointersAddress,
          0,
        );
      }
      if (result !== 0 && Atomics.compareExchange(errors, 2 * slot, 0, result) === 0) {
        Atomics.store(errors, 2 * slot + 1, data[at + 3]!);
      }
      Atomics.add(issued, slot << SLOT_SHIFT, 1);
      count++;
    } else if (op === OP_QUERY) {
      const slot = data[at + 2]!;
      const generation = data[at + 4]!;
      if (Atomics.load(issued, (slot << SLOT_SHIFT) + GENERATION) === generation) {
        const stream = (data[at + 6]! >>> 0) + (data[at + 7]! >>> 0) * TWO_32;
        const context = (data[at + 8]! >>> 0) + (data[at + 9]! >>> 0) * TWO_32;
        ask(reader, calls, slot, data[at + 3]!, generation, stream, context);
      }
      Atomics.add(issued, slot << SLOT_SHIFT, 1);
      count++;
    }
    tail = (tail + length) | 0;
    // Each command's words are free once it is issued (the driver copied a launch's values):
    // a writer waiting for room waits for one command, not for the whole drain.
    Atomics.store(control, TAIL, tail);
  }
  reader.tail = tail;
  return count;
}

/** Makes `context` current on the issuer's thread where it is not: 0, or the driver's error. */
function enter(reader: Reader, calls: IssuerCalls, context: number): number {
  if (reader.current === context) return 0;
  const result = calls.cuCtxSetCurrent(context);
  if (result === 0) reader.current = context;
  return result;
}

/** `cuStreamQuery(stream)` with `context` current: its result, or the context switch's error. */
function query(reader: Reader, calls: IssuerCalls, stream: number, context: number): number {
  const result = enter(reader, calls, context);
  return result === 0 ? calls.cuStreamQuery(stream) : result;
}

/** A QUERY's cuStreamQuery: answers it, or watches the stream while it is not ready. */
function ask(
  reader: Reader,
  calls: IssuerCalls,
  slot: number,
  ticket: number,
  generation: number,
  stream: number,
  context: number,
): void {
  const result = query(reader, calls, stream, context);
  const watch = reader.watch;
  const base = slot << SLOT_SHIFT;
  const watched = Atomics.load(reader.issued, base + WATCHING) !== 0;
  if (result === NOT_READY) {
    if (!watched) {
      watch.slots[watch.count++] = slot;
      watch.since[slot] = watch.now();
      Atomics.store(reader.issued, base + WATCHING, 1);
    }
    watch.ticket[slot] = ticket;
    watch.generation[slot] = generation;
    watch.stream[slot] = stream;
    watch.context[slot] = context;
    return;
  }
  answer(reader, slot, ticket, result);
  if (watched) unwatch(reader, slot);
}

/** Stores a query's answer: its ticket, after the error words when the query failed. */
function answer(reader: Reader, slot: number, ticket: number, result: number): void {
  if (result !== 0 && Atomics.compareExchange(reader.errors, 2 * slot, 0, result) === 0) {
    Atomics.store(reader.errors, 2 * slot + 1, QUERY_KERNEL);
  }
  Atomics.store(reader.issued, (slot << SLOT_SHIFT) + ANSWERED, ticket);
}

/** Takes `slot` off the watch (its answer, if any, stored first). */
function unwatch(reader: Reader, slot: number): void {
  const watch = reader.watch;
  for (let i = 0; i < watch.count; i++) {
    if (watch.slots[i] === slot) {
      watch.slots[i] = watch.slots[--watch.count]!;
      break;
    }
  }
  Atomics.store(reader.issued, (slot << SLOT_SHIFT) + WATCHING, 0);
}

/**
 * Queries each watched stream once: a done (or failed) one is answered, one watched for longer
 * than the watch's limit is dropped (the waiting thread queries by itself), one whose slot has
 * a new generation (its stream was detached) is forgotten. Returns how many are still watched.
 */
export function watchRound(reader: Reader, calls: IssuerCalls): number {
  const watch = reader.watch;
  const now = watch.now();
  const { issued } = reader;
  for (let i = watch.count - 1; i >= 0; i--) {
    const slot = watch.slots[i]!;
    const base = slot << SLOT_SHIFT;
    if (Atomics.load(issued, base + GENERATION) !== watch.generation[slot]) {
      unwatch(reader, slot);
      continue;
    }
    const result = query(reader, calls, watch.stream[slot]!, watch.context[slot]!);
    if (result !== NOT_READY) {
      answer(reader, slot, watch.ticket[slot]!, result);
      unwatch(reader, slot);
    } else if (now - watch.since[slot]! > watch.limitMs) {
      Atomics.store(issued, base + DROPPED, watch.ticket[slot]!);
      unwatch(reader, slot);
    }
  }
  return watch.count;
}
