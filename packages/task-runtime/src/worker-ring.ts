/**
 * The shared rings of a `WorkerPool` (docs/decisions/0042, "Jobs through a shared ring"):
 * plain jobs go to a worker, and plain results come back, through `SharedArrayBuffer` rings
 * instead of a `postMessage` each. Each ring has one writer and one reader.
 *
 * - A worker's inbox (the pool writes, the worker reads): records of a job's id, its index in
 *   the module's job list, its priority and its arguments (numbers, booleans, undefined, null,
 *   short strings).
 * - A worker's replies (the worker writes, the pool reads): records of a job's id and its
 *   result (a number, boolean, undefined or null).
 * - The pool's bell (one per pool): the pool's sleep flag, which every worker's replies clear,
 *   so that replies from every worker cost the pool one wake.
 *
 * Sleeping readers: a reader that found its ring empty sets its `SLEEPING` word to 1, reads the
 * write index again, and only if it did not move waits (`Atomics.waitAsync`, its event loop goes
 * on) while that word is 1; a writer stores the write index, then, only if it swaps a set
 * `SLEEPING` to 0, notifies waiters on that word. All of it sequentially consistent (`Atomics`):
 * either the writer sees the flag, or the reader's second look sees the new index. The wait is
 * on the flag itself, not on the index: a writer's swap that comes late (its record was taken
 * already, and the reader has set its flag again) clears the flag before the reader waits, so
 * that wait ends at once and the reader looks again. Waiting on the index instead, the late
 * swap would leave the reader asleep with its flag clear, and the next writer would not wake
 * it. A busy reader costs no notify.
 */

/** Header words (Int32) of a ring: the write index, the read index, the reader's sleep flag. */
export const WRITE = 0;
export const READ = 1;
export const SLEEPING = 2;
/** The bell's word: the pool's sleep flag. */
export const BELL_SLEEPING = 0;

type WaitAsync = (
  array: Int32Array,
  index: number,
  value: number,
) => { async: false; value: string } | { async: true; value: Promise<string> };
/** `Atomics.waitAsync` (ES2024; the package's TypeScript library predates it). */
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

/** Bytes of a ring's header (the records start after it). */
const HEADER_BYTES = 64;

/** Jobs an inbox holds (a power of 2); a job that finds it full goes by `postMessage`. */
export const INBOX_RECORDS = 256;
/** Float64 words of one inbox record. */
const INBOX_STRIDE = 32;
/** Arguments a ring job may have. */
export const MAX_RING_ARGS = 8;
/** Where a record's arguments start (words): id, job, argument count, priority before. */
const ARGS_AT = 4;
/** Where a record's string characters start (UTF-16 units from the record's start). */
const CHARS_AT = (ARGS_AT + 2 * MAX_RING_ARGS) * 4;
/** UTF-16 units of all of a ring job's strings together. */
export const MAX_RING_CHARS = INBOX_STRIDE * 4 - CHARS_AT;

/** Results a reply ring holds (a power of 2); a reply that finds it full goes by `postMessage`. */
export const REPLY_RECORDS = 1024;
/** Float64 words of one reply record: id, tag, value (and one spare for alignment). */
const REPLY_STRIDE = 4;

/** Value tags. */
const UNDEFINED = 0;
const NULL = 1;
const FALSE = 2;
const TRUE = 3;
const NUMBER = 4;
const STRING = 5;

/** The shared memory of one worker's rings (passed in its `workerData`). */
export interface WorkerRings {
  readonly inbox: SharedArrayBuffer;
  readonly replies: SharedArrayBuffer;
  readonly bell: SharedArrayBuffer;
}

/** A new worker's rings, on the pool's `bell`. */
export function createRings(bell: SharedArrayBuffer): WorkerRings {
  return {
    inbox: new SharedArrayBuffer(HEADER_BYTES + INBOX_RECORDS * INBOX_STRIDE * 8),
    replies: new SharedArrayBuffer(HEADER_BYTES + REPLY_RECORDS * REPLY_STRIDE * 8),
    bell,
  };
}

/** A pool's bell. */
export function createBell(): SharedArrayBuffer {
  return new SharedArrayBuffer(4);
}

/** One side's view of a ring: its header, records as float64 words and as UTF-16 units. */
export class RingView {
  readonly header: Int32Array;
  readonly words: Float64Array;
  readonly chars: Uint16Array;
  /** This side's own index (the writer's write index or the reader's read index). */
  at = 0;
  constructor(buffer: SharedArrayBuffer) {
    this.header = new Int32Array(buffer, 0, HEADER_BYTES / 4);
    this.words = new Float64Array(buffer, HEADER_BYTES);
    this.chars = new Uint16Array(buffer, HEADER_BYTES);
  }
}

/** Wakes a reader sleeping on `words[flag]` (what it will look at is stored already). */
function wake(words: Int32Array, flag: number): void {
  if (Atomics.load(words, flag) !== 0 && Atomics.compareExchange(words, flag, 1, 0) === 1) {
    Atomics.notify(words, flag, 1);
  }
}

/** Wakes the reader of a ring if it sleeps (the write index is stored already). */
export function wakeReader(header: Int32Array): void {
  wake(header, SLEEPING);
}

/**
 * A reader's wait, after it set `words[flag]` to 1 and found its ring empty once more: the
 * promise of an `Atomics.waitAsync` while the flag is 1, or undefined when a writer has cleared
 * it already (the reader looks again).
 */
export function sleepWhileFlagged(words: Int32Array, flag: number): Promise<string> | undefined {
  const wait = waitAsync(words, flag, 1);
  return wait.async ? wait.value : undefined;
}

/**
 * The ring code of a priority (0 for none), or -1 for one the ring does not carry (the job then
 * goes by `postMessage`, whose task checks it).
 */
export function priorityCode(priority: unknown): number {
  if (priority === undefined) return 0;
  if (priority === 'high') return 1;
  if (priority === 'normal') return 2;
  if (priority === 'low') return 3;
  return -1;
}

/**
 * Whether `args` fit an inbox record: at most `MAX_RING_ARGS`, each a number, boolean,
 * undefined, null or string, the strings `MAX_RING_CHARS` units together at most.
 */
export function fitsRing(args: readonly unknown[]): boolean {
  if (args.length > MAX_RING_ARGS) return false;
  let chars = 0;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const type = typeof arg;
    if (type === 'string') chars += (arg as string).length;
    else if (type !== 'number' && type !== 'boolean' && arg !== undefined && arg !== null) {
      return false;
    }
  }
  return chars <= MAX_RING_CHARS;
}

/**
 * Writes a job (its arguments passed `fitsRing`) into `inbox` and wakes the worker if it sleeps;
 * false when the inbox is full.
 */
export function pushJob(
  inbox: RingView,
  id: number,
  job: number,
  priority: number,
  args: readonly unknown[],
): boolean {
  const header = inbox.header;
  const head = inbox.at;
  if (((head - Atomics.load(header, READ)) | 0) >= INBOX_RECORDS) return false;
  const record = (head & (INBOX_RECORDS - 1)) * INBOX_STRIDE;
  const words = inbox.words;
  const chars = inbox.chars;
  words[record] = id;
  words[record + 1] = job;
  words[record + 2] = args.length;
  words[record + 3] = priority;
  let char = record * 4 + CHARS_AT;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const at = record + ARGS_AT + 2 * i;
    if (typeof arg === 'string') {
      words[at] = STRING;
      words[at + 1] = arg.length;
      for (let c = 0; c < arg.length; c++) chars[char++] = arg.charCodeAt(c);
    } else writePlain(words, at, arg as number | boolean | undefined | null);
  }
  inbox.at = (head + 1) | 0;
  Atomics.store(header, WRITE, inbox.at);
  wakeReader(header);
  return true;
}

/** A job read from an inbox. */
export interface RingJob {
  id: number;
  job: number;
  /** `priorityCode`'s code. */
  priority: number;
  args: unknown[];
}

/** Reads the next job of `inbox` into `out`; false when it is empty. */
export function takeJob(inbox: RingView, out: RingJob): boolean {
  const tail = inbox.at;
  if (Atomics.load(inbox.header, WRITE) === tail) return false;
  const record = (tail & (INBOX_RECORDS - 1)) * INBOX_STRIDE;
  const words = inbox.words;
  const chars = inbox.chars;
  out.id = words[record]!;
  out.job = words[record + 1]!;
  const count = words[record + 2]!;
  out.priority = words[record + 3]!;
  const args = new Array<unknown>(count);
  let char = record * 4 + CHARS_AT;
  for (let i = 0; i < count; i++) {
    const at = record + ARGS_AT + 2 * i;
    if (words[at] === STRING) {
      const length = words[at + 1]!;
      let text = '';
      for (let c = 0; c < length; c++) text += String.fromCharCode(chars[char++]!);
      args[i] = text;
    } else args[i] = readPlain(words, at);
  }
  out.args = args;
  inbox.at = (tail + 1) | 0;
  Atomics.store(inbox.header, READ, inbox.at);
  return true;
}

/** Writes a number, boolean, null or undefined as a tag at `at` (and a number after it). */
function writePlain(words: Float64Array, at: number, value: number | boolean | undefined | null) {
  if (typeof value === 'number') {
    words[at] = NUMBER;
    words[at + 1] = value;
  } else
    words[at] = value === true ? TRUE : value === false ? FALSE : value === null ? NULL : UNDEFINED;
}

/** What `writePlain` wrote at `at`. */
function readPlain(words: Float64Array, at: number): number | boolean | undefined | null {
  const tag = words[at];
  if (tag === NUMBER) return words[at + 1]!;
  if (tag === TRUE) return true;
  if (tag === FALSE) return false;
  return tag === NULL ? null : undefined;
}

/** Whether a result goes back through the reply ring: a number, boolean, undefined or null. */
export function isRingResult(value: unknown): value is number | boolean | undefined | null {
  const type = typeof value;
  return type === 'number' || type === 'boolean' || value === undefined || value === null;
}

/** Writes a job's result into `replies` (`ringBell` tells the pool); false when it is full. */
export function pushReply(
  replies: RingView,
  id: number,
  value: number | boolean | undefined | null,
): boolean {
  const header = replies.header;
  const head = replies.at;
  if (((head - Atomics.load(header, READ)) | 0) >= REPLY_RECORDS) return false;
  const record = (head & (REPLY_RECORDS - 1)) * REPLY_STRIDE;
  const words = replies.words;
  words[record] = id;
  writePlain(words, record + 1, value);
  replies.at = (head + 1) | 0;
  Atomics.store(header, WRITE, replies.at);
  return true;
}

/** Tells the pool that replies were written: wakes it if it sleeps on the `bell`. */
export function ringBell(bell: Int32Array): void {
  wake(bell, BELL_SLEEPING);
}

/** Whether the pool has a reply to take from `replies` (`replyId`, then `takeReply`). */
export function hasReply(replies: RingView): boolean {
  return Atomics.load(replies.header, WRITE) !== replies.at;
}

/** The next reply's job id; call only while `hasReply`. */
export function replyId(replies: RingView): number {
  return replies.words[(replies.at & (REPLY_RECORDS - 1)) * REPLY_STRIDE]!;
}

/** The next reply's value; moves past it. */
export function takeReply(replies: RingView): number | boolean | undefined | null {
  const record = (replies.at & (REPLY_RECORDS - 1)) * REPLY_STRIDE;
  const value = readPlain(replies.words, record + 1);
  replies.at = (replies.at + 1) | 0;
  Atomics.store(replies.header, READ, replies.at);
  return value;
}
