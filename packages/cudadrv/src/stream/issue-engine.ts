/**
 * The issue engine: kernel launches made on issuer threads. A process whose tasks launch many
 * small kernels is capped by the one thread that makes every driver call (the figures:
 * docs/decisions/0042). With the engine started (`startIssueEngine`), a launch is checked and
 * its arguments marshalled on the calling thread, as without the engine (bad input throws at
 * the call), then written into a ring in a `SharedArrayBuffer` that an issuer thread drains with
 * cuLaunchKernel. Each stream is drained by one issuer, so its launches keep
 * their order; W issuers make the calls of W streams at once.
 *
 * Everything else stays on the calling thread, after the stream's launches: reading a
 * stream's handle (`stream.ffiHandle`, `stream.handle`, which every copy, memset, event
 * record, wait, free, capture and library binding passes to the driver) first waits until the
 * issuer has issued what was pushed for that stream (a fence, microseconds), so all of them
 * are in stream order with the launches without knowing of the engine. A library call whose
 * handle is bound to the stream already calls `stream.fence()` (the kit's `IssueEnvelope`
 * does). `synchronize()` waits, without blocking, until the launches are issued and then done.
 * A stream-ordered allocation does not wait (memory allocated earlier in a stream's order is
 * usable by its later work).
 *
 * A launch the driver refuses on an issuer (a bad configuration, a sticky error) is reported
 * at the stream's next `synchronize()`, `query()` or `fence()`, as a CudaError naming the
 * kernel. Launches inside a graph capture are made directly (captures are per stream and rare).
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { contextParts } from '../context/device.js';
import { launchGate, reopenLaunchGate } from '../context/launch-gate.js';
import { cudaError, driver } from '../driver.js';
import { CudaArgumentError, CudaError } from '../errors.js';
import { threadEntry } from '../thread-entry.js';
import {
  ANSWERED,
  CANCELLED,
  createRing,
  createSlots,
  DROPPED,
  FAILED,
  failureOf,
  GENERATION,
  HEAD,
  LAUNCH_HEADER_WORDS,
  MAX_SLOTS,
  OP_LAUNCH,
  OP_PAD,
  OP_QUERY,
  QUERY_KERNEL,
  QUERY_WORDS,
  type RingMemory,
  SLEEPING,
  SLOT_SHIFT,
  type SlotMemory,
  STOP,
  TAIL,
  WATCHING,
} from './issue-ring.js';
import type { Stream } from './stream.js';

/** Options of `startIssueEngine`. */
export interface IssueEngineOptions {
  /**
   * Issuer threads (default: half the machine's cores, 1 to 8). Each issuer spins for a while
   * when its ring runs empty: more issuers than idle cores leaves the operating system to
   * share cores between them and the event loop, and a launch can then wait a scheduler time
   * slice (milliseconds).
   */
  issuers?: number;
  /** Words of each issuer's ring (a power of two, default 2^18: 1 MiB). */
  ringWords?: number;
  /**
   * How long an issuer that found its ring empty checks it again before it sleeps, in
   * microseconds (default 200: a task's wait for a few short kernels, so that its next launches
   * find the issuer awake): a launch pushed meanwhile is issued without a wake-up.
   */
  spinMicroseconds?: number;
  /**
   * Whether a wait (`synchronize()`, `waitForStream`, `toHost`) on a stream the engine drains
   * asks the stream's issuer to query it (default true): the issuer calls cuStreamQuery after
   * the stream's launches, and the waiting thread reads the answer from shared memory, so that
   * the event loop's thread makes no driver call for it. False: the waiting thread queries, as
   * without the engine.
   */
  queriesOnIssuers?: boolean;
  /**
   * How long an issuer queries a stream that a wait asked about and that is not done yet, in
   * microseconds (default 2000), before it leaves the wait to the waiting thread (which then
   * queries, polls an event or sleeps, as without the engine): an issuer does not spin on long
   * work.
   */
  watchMicroseconds?: number;
}

/** How the engine stands (`issueEngineStatistics`). */
export interface IssueEngineStatistics {
  /** Whether the engine runs (`startIssueEngine` until `stopIssueEngine`). */
  readonly running: boolean;
  /** Its issuer threads. */
  readonly issuers: number;
  /** Launches pushed through the engine since it started. */
  readonly launches: number;
  /** Times a pushed launch had to wake a sleeping issuer. */
  readonly wakeUps: number;
  /** Fences that found launches not issued yet, and had to wait for them. */
  readonly fenceWaits: number;
  /** Pushes that found their ring full and waited for its issuer to make room. */
  readonly roomWaits: number;
  /**
   * Milliseconds the pushing thread spent in those waits and fences, in all: time it was held
   * (on the main thread, the event loop), not time it worked. A fence inside a blocking
   * `Stream.synchronize()` is not counted: that call holds the thread until the stream's work
   * is done, with or without the engine.
   */
  readonly waitMs: number;
  /** The longest one of those waits, ms: the most the engine held the pushing thread at once. */
  readonly longestWaitMs: number;
  /** Waits whose stream an issuer was asked to query (`queriesOnIssuers`). */
  readonly queries: number;
  /** Of those, the ones an issuer left to the waiting thread (not done within `watchMicroseconds`). */
  readonly queriesLeft: number;
  /** Launches skipped because their task was cancelled before they were issued. */
  readonly cancelled: number;
  /** Streams drained by the engine now. */
  readonly streams: number;
  /** Why an issuer thread stopped while the engine ran (then fences throw it), else undefined. */
  readonly failure: string | undefined;
}

/** The most argument values a launch through the engine carries (more: launched directly). */
export const MAX_ENGINE_ARGUMENTS = 256;

/** What an issuer thread is started with. */
export interface IssuerData {
  readonly ring: RingMemory;
  readonly slots: SlotMemory;
  readonly spinMicroseconds: number;
  readonly watchMicroseconds: number;
  /**
   * The unit tests' double of libcuda's functions: a module whose default export makes an
   * `IssuerCalls` (never set by the product, which binds libcuda).
   */
  readonly callsModule?: string;
  /** What the double's module is given (a shared log, say). */
  readonly callsData?: unknown;
}

const TWO_32 = 4294967296;

/** @internal The writer's side of one issuer's ring. */
export class Writer {
  readonly control: Int32Array;
  readonly data: Int32Array;
  readonly mask: number;
  head = 0;
  /** Words known free (refreshed from `TAIL` only when a command does not fit). */
  free: number;
  streams = 0;
  worker: Worker | undefined;
  /** Set when its issuer thread has exited. */
  exited = false;

  constructor(ring: RingMemory) {
    this.control = new Int32Array(ring.control);
    this.data = new Int32Array(ring.data);
    this.mask = this.data.length - 1;
    this.free = this.data.length;
  }

  /**
   * Where a command of `words` words (even) starts: room is made at the end of the data block
   * (a PAD command) and waited for when the issuer is behind.
   */
  reserve(words: number): number {
    const capacity = this.data.length;
    let at = this.head & this.mask;
    const toEnd = capacity - at;
    if (toEnd < words) {
      // The PAD first, on its own: the room for both at once can exceed the ring (a command
      // of more than half the ring), and the issuer frees the PAD's words once it is published.
      if (this.free < toEnd) this.waitForRoom(toEnd);
      this.data[at] = OP_PAD;
      this.data[at + 1] = toEnd;
      this.head = (this.head + toEnd) | 0;
      this.free -= toEnd;
      at = 0;
    }
    if (this.free < words) this.waitForRoom(words);
    this.free -= words;
    return at;
  }

  waitForRoom(needed: number): void {
    const capacity = this.data.length;
    const started = performance.now();
    engine.roomWaits++;
    let spins = 0;
    for (;;) {
      const used = (this.head - Atomics.load(this.control, TAIL)) | 0;
      this.free = capacity - used;
      if (this.free >= needed) {
        waited(started);
        return;
      }
      // The issuer is behind: publish what is there and make sure it is awake.
      Atomics.store(this.control, HEAD, this.head);
      Atomics.notify(this.control, HEAD, 1);
      if (++spins % 1024 === 0) this.recheck(started);
    }
  }

  /**
   * For a wait on the issuer, now and then: throws the engine's failure once an issuer failed
   * (its thread marks `FAILED`: this thread's event loop, blocked here, cannot hear of it);
   * after 10 ms of waiting, sleeps up to 0.2 ms on `FAILED` (a failure wakes it at once)
   * instead of spinning.
   */
  recheck(started: number): void {
    if (Atomics.load(this.control, FAILED) !== 0) throw issuerFailure(this);
    if (engine.failure !== undefined) throw engine.failure;
    if (performance.now() - started > 10) Atomics.wait(this.control, FAILED, 0, 0.2);
  }

  /** Writes and publishes a PAD of two words (a change of HEAD that issues nothing). */
  pad(): void {
    const at = this.reserve(2);
    this.data[at] = OP_PAD;
    this.data[at + 1] = 2;
    this.head = (this.head + 2) | 0;
    Atomics.store(this.control, HEAD, this.head);
  }

  /** Publishes the commands written so far; wakes the issuer if it sleeps. */
  publish(): boolean {
    Atomics.store(this.control, HEAD, this.head);
    if (Atomics.load(this.control, SLEEPING) !== 0) {
      Atomics.notify(this.control, HEAD, 1);
      return true;
    }
    return false;
  }
}

/**
 * @internal A stream drained by the engine: its issuer, its per-stream words, what was pushed.
 * `Stream.issue` holds it (null for a stream the engine does not drain).
 */
export class IssueAttachment {
  /** The stream it was made for, as errors name it. */
  readonly #name: string;
  /**
   * Every Stream that launches through it, held weakly (the engine keeps no stream alive: one
   * the GC takes gives its share back from its finalizer, `collected`): wrappers of one
   * CUstream (`Stream.wrap` twice) share one attachment, so that one issuer makes their
   * launches, in the order they came.
   */
  readonly #streams: WeakRef<Stream>[];
  /** Streams using it, disposed or collected neither. */
  #users = 1;
  /** Set once its slot is free again (the last user went, or the engine stopped). */
  #closed = false;
  /** Its entry in `engine.byHandle`: the CUstream and context handles. */
  key = '';
  readonly slot: number;
  readonly #writer: Writer;
  readonly #issued: Int32Array;
  readonly #errors: Int32Array;
  readonly #cancelled: Int32Array;
  /** This stream's word in `#issued`. */
  readonly #issuedAt: number;
  readonly #streamLo: number;
  readonly #streamHi: number;
  readonly #contextLo: number;
  readonly #contextHi: number;
  /** Commands (launches and queries) pushed for this stream (int32, wraps). */
  pushed = 0;
  /** The slot's generation while this attachment holds it (see issue-ring.ts, QUERY). */
  #generation: number;
  /** The last query ticket given out (int32, wraps; the first is 1). */
  #tickets = 0;
  /** Whether waits ask the issuer to query the stream (`queriesOnIssuers` at the attach). */
  readonly queriesOnIssuer = engine.queriesOnIssuers;
  /**
   * What this stream's `cancelled` word holds: launches at or below it (in int32 order, which
   * wraps) are skipped. Kept within 2^30 below the sequence numbers pushed, so that a launch
   * 2^31 later is not taken for one pushed before it.
   */
  #cancelledAt = 0;

  constructor(stream: Stream, slot: number, writer: Writer, memory: SlotMemory) {
    this.#name = String(stream);
    this.#streams = [new WeakRef(stream)];
    this.slot = slot;
    this.#writer = writer;
    this.#issued = new Int32Array(memory.issued);
    this.#errors = new Int32Array(memory.errors);
    this.#cancelled = new Int32Array(memory.cancelled);
    this.#issuedAt = slot << SLOT_SHIFT;
    this.#generation = Atomics.load(this.#issued, this.#issuedAt + GENERATION);
    const handle = stream.rawHandle;
    this.#streamLo = Number(handle & 0xffff_ffffn) | 0;
    this.#streamHi = Number(handle >> 32n) | 0;
    const context = stream.context.handle;
    this.#contextLo = Number(context & 0xffff_ffffn) | 0;
    this.#contextHi = Number(context >> 32n) | 0;
  }

  /**
   * Pushes one launch: the function, its kernel id (for errors), the geometry, and `count`
   * 8-byte argument values from `values` (an Int32 view of the kernel's arena) at word `first`.
   */
  launch(
    fn: number | bigint,
    kernel: number,
    gx: number,
    gy: number,
    gz: number,
    bx: number,
    by: number,
    bz: number,
    sharedMemory: number,
    values: Int32Array,
    first: number,
    count: number,
  ): void {
    const writer = this.#writer;
    const words = LAUNCH_HEADER_WORDS + 2 * count;
    const at = writer.reserve(words);
    const data = writer.data;
    data[at] = OP_LAUNCH;
    data[at + 1] = words;
    data[at + 2] = this.slot;
    data[at + 3] = kernel;
    if (typeof fn === 'number') {
      data[at + 4] = (fn % TWO_32) | 0;
      data[at + 5] = Math.floor(fn / TWO_32) | 0;
    } else {
      data[at + 4] = Number(fn & 0xffff_ffffn) | 0;
      data[at + 5] = Number(fn >> 32n) | 0;
    }
    data[at + 6] = this.#streamLo;
    data[at + 7] = this.#streamHi;
    data[at + 8] = this.#contextLo;
    data[at + 9] = this.#contextHi;
    data[at + 10] = gx;
    data[at + 11] = gy;
    data[at + 12] = gz;
    data[at + 13] = bx;
    data[at + 14] = by;
    data[at + 15] = bz;
    data[at + 16] = sharedMemory;
    data[at + 17] = count;
    const sequence = (this.pushed + 1) | 0;
    if (((sequence - this.#cancelledAt) | 0) > 0x4000_0000) {
      // Once in 2^29 launches: the mark moves up, still below every launch not issued yet
      // (a ring holds far fewer than 2^29), so that it skips nothing more.
      this.#cancelledAt = (sequence - 0x2000_0000) | 0;
      Atomics.store(this.#cancelled, this.slot, this.#cancelledAt);
    }
    data[at + 18] = sequence;
    data[at + 19] = 0;
    const end = 2 * count;
    for (let i = 0; i < end; i++) data[at + LAUNCH_HEADER_WORDS + i] = values[first + i]!;
    writer.head = (writer.head + words) | 0;
    this.pushed = sequence;
    engine.launches++;
    if (writer.publish()) engine.wakeUps++;
  }

  /**
   * Asks the stream's issuer to query the stream once the launches pushed so far are issued;
   * returns the query's ticket (for `answer`). Everything issued to the stream before this call
   * is covered by the answer.
   */
  requestQuery(): number {
    const writer = this.#writer;
    const at = writer.reserve(QUERY_WORDS);
    const data = writer.data;
    const ticket = (this.#tickets + 1) | 0;
    this.#tickets = ticket;
    data[at] = OP_QUERY;
    data[at + 1] = QUERY_WORDS;
    data[at + 2] = this.slot;
    data[at + 3] = ticket;
    data[at + 4] = this.#generation;
    data[at + 5] = 0;
    data[at + 6] = this.#streamLo;
    data[at + 7] = this.#streamHi;
    data[at + 8] = this.#contextLo;
    data[at + 9] = this.#contextHi;
    writer.head = (writer.head + QUERY_WORDS) | 0;
    this.pushed = (this.pushed + 1) | 0;
    engine.queries++;
    if (writer.publish()) engine.wakeUps++;
    return ticket;
  }

  /**
   * What the issuer answered to the query `ticket`: 1 once the stream was found done (or
   * failed: `takeError()` has it), -1 when the issuer left it to this thread (not done within
   * its watch), 0 while it has not answered yet.
   */
  answer(ticket: number): number {
    const issued = this.#issued;
    if (((Atomics.load(issued, this.#issuedAt + ANSWERED) - ticket) | 0) >= 0) return 1;
    if (((Atomics.load(issued, this.#issuedAt + DROPPED) - ticket) | 0) >= 0) {
      engine.queriesLeft++;
      return -1;
    }
    return 0;
  }

  /** Whether launches pushed for the stream are not issued yet. */
  pending(): boolean {
    return Atomics.load(this.#issued, this.#issuedAt) !== this.pushed;
  }

  /**
   * Waits (spinning: microseconds) until the issuer has issued every launch pushed so far.
   * `blocking`: the caller goes on to block until the stream's work is done (a blocking
   * `Stream.synchronize()`), which holds the thread longer than this wait in any case, with or
   * without the engine; the wait is then not counted in `waitMs` and `longestWaitMs`.
   */
  fence(blocking = false): void {
    if (Atomics.load(this.#issued, this.#issuedAt) === this.pushed) return;
    engine.fenceWaits++;
    const writer = this.#writer;
    const started = performance.now();
    try {
      this.#spinUntilIssued(writer, started);
    } finally {
      if (!blocking) waited(started);
    }
  }

  /** `fence()`'s spin: checks now and then for a failed issuer, and gives up after 30 s. */
  #spinUntilIssued(writer: Writer, started: number): void {
    let spins = 0;
    while (Atomics.load(this.#issued, this.#issuedAt) !== this.pushed) {
      if (++spins % 4096 === 0) {
        writer.recheck(started);
        // Never expected: an issuer asleep with work. Wake it; give up after 30 s.
        if (Atomics.load(writer.control, SLEEPING) !== 0) Atomics.notify(writer.control, HEAD, 1);
        if (performance.now() - started > 30_000) {
          throw new CudaError(
            0,
            'CUDA_ERROR_UNKNOWN',
            'issue engine',
            `the issuer of ${this.#name} has not issued its launches within 30 s`,
          );
        }
      }
    }
  }

  /** Why the engine cannot issue any more (an issuer thread failed), or null. */
  failure(): Error | null {
    return engine.failure ?? null;
  }

  /** The first launch of this stream the driver refused since the last call, or null. */
  takeError(): Error | null {
    const errors = this.#errors;
    const result = Atomics.load(errors, 2 * this.slot);
    if (result === 0) return null;
    const kernel = Atomics.load(errors, 2 * this.slot + 1);
    Atomics.store(errors, 2 * this.slot, 0);
    if (kernel === QUERY_KERNEL) {
      return cudaError(result, `cuStreamQuery on ${this.#name}, made by the issue engine`);
    }
    return cudaError(
      result,
      `cuLaunchKernel(${engine.kernelNames[kernel] ?? 'a kernel'}) on ${this.#name}, issued by the issue engine`,
    );
  }

  /**
   * Launches pushed so far and not issued yet are not issued (their task was cancelled): the
   * issuer skips them. Launches pushed later are issued as usual.
   */
  cancelPending(): void {
    this.#cancelledAt = this.pushed;
    Atomics.store(this.#cancelled, this.slot, this.pushed);
  }

  /**
   * `stream` goes (after a fence): once no other wrapper of its CUstream uses the attachment,
   * its slot is free again.
   */
  detach(stream: Stream): void {
    if (this.#closed) return;
    this.quiesce();
    const at = this.#streams.findIndex((ref) => ref.deref() === stream);
    if (at >= 0) this.#streams.splice(at, 1);
    this.#release();
  }

  /** One of its streams was collected without `dispose()` (its finalizer, after a fence). */
  collected(): void {
    if (this.#closed) return;
    this.quiesce();
    const at = this.#streams.findIndex((ref) => ref.deref() === undefined);
    if (at >= 0) this.#streams.splice(at, 1);
    this.#release();
  }

  /**
   * Fences, then makes sure the issuer no longer queries the stream (it may be destroyed or
   * captured next). The slot gets a new generation, so the issuer forgets the stream's watch,
   * and this waits (microseconds: one query) until it has. Queries asked before are left to the
   * waiting thread (`answer` gives -1).
   */
  quiesce(): void {
    this.fence();
    const issued = this.#issued;
    const at = this.#issuedAt;
    if (this.#tickets === 0) return;
    this.#generation = (this.#generation + 1) | 0;
    Atomics.store(issued, at + GENERATION, this.#generation);
    if (Atomics.load(issued, at + WATCHING) !== 0) {
      const started = performance.now();
      let spins = 0;
      while (Atomics.load(issued, at + WATCHING) !== 0) {
        if (++spins % 4096 === 0) this.#writer.recheck(started);
      }
      waited(started);
    }
    // Every ticket so far is answered or left to the waiting thread.
    if (((Atomics.load(issued, at + ANSWERED) - this.#tickets) | 0) < 0) {
      Atomics.store(issued, at + DROPPED, this.#tickets);
    }
  }

  /** A stream going together with another attachment: takes this one (`engine.attach`). */
  share(stream: Stream): void {
    this.#streams.push(new WeakRef(stream));
    this.#users++;
  }

  /** The engine stops: its streams launch directly again; nothing more frees its slot. */
  close(): void {
    this.#closed = true;
    for (const ref of this.#streams) {
      const stream = ref.deref();
      if (stream !== undefined) {
        stream.issue = null;
        stream.resources.issue = null;
      }
    }
  }

  #release(): void {
    if (--this.#users > 0) return;
    this.#closed = true;
    if (engine.byHandle.get(this.key) === this) engine.byHandle.delete(this.key);
    Atomics.store(this.#issued, this.#issuedAt, 0);
    Atomics.store(this.#issued, this.#issuedAt + ANSWERED, 0);
    Atomics.store(this.#issued, this.#issuedAt + DROPPED, 0);
    this.#tickets = 0;
    Atomics.store(this.#errors, 2 * this.slot, 0);
    Atomics.store(this.#cancelled, this.slot, 0);
    this.pushed = 0;
    this.#cancelledAt = 0;
    this.#writer.streams--;
    engine.freeSlots.push(this.slot);
    engine.attached.delete(this);
  }
}

/** Counts a wait of the pushing thread on an issuer that began at `started` (performance.now()). */
function waited(started: number): void {
  const ms = performance.now() - started;
  engine.waitMs += ms;
  if (ms > engine.longestWaitMs) engine.longestWaitMs = ms;
}

/** The engine's state (one per loaded copy of this package; `engine.running` gates launches). */
export const engine = {
  running: false,
  writers: [] as Writer[],
  slots: undefined as SlotMemory | undefined,
  freeSlots: [] as number[],
  attached: new Set<IssueAttachment>(),
  /** The attachments by CUstream and context handle (`IssueAttachment.key`). */
  byHandle: new Map<string, IssueAttachment>(),
  kernelNames: [] as string[],
  launches: 0,
  wakeUps: 0,
  fenceWaits: 0,
  roomWaits: 0,
  waitMs: 0,
  longestWaitMs: 0,
  queries: 0,
  queriesLeft: 0,
  /** Whether waits ask the issuers to query (`IssueEngineOptions.queriesOnIssuers`). */
  queriesOnIssuers: true,
  /** Set when an issuer thread failed: fences throw it. */
  failure: undefined as Error | undefined,
  /** What the running engine was started with (its issuers, ring, spin and calls). */
  key: '',
  /** Issuer threads kept asleep by `stopIssueEngine({ keepThreads: true })`, for the next start. */
  parked: undefined as { key: string; writers: Writer[]; slots: SlotMemory } | undefined,
  /**
   * Attaches `stream` to the least loaded issuer, or to the attachment of another wrapper of
   * the same CUstream; null when every slot is taken (then the stream's launches are made
   * directly). Once per stream: its later launches find `stream.issue`.
   */
  attach(stream: Stream): IssueAttachment | null {
    const key = `${stream.rawHandle}/${stream.context.handle}`;
    const shared = engine.byHandle.get(key);
    if (shared !== undefined) {
      shared.share(stream);
      stream.issue = shared;
      stream.resources.issue = shared;
      return shared;
    }
    const slot = engine.freeSlots.pop();
    if (slot === undefined) return null;
    let writer = engine.writers[0]!;
    for (const candidate of engine.writers)
      if (candidate.streams < writer.streams) writer = candidate;
    writer.streams++;
    const attachment = new IssueAttachment(stream, slot, writer, engine.slots!);
    attachment.key = key;
    engine.byHandle.set(key, attachment);
    engine.attached.add(attachment);
    stream.issue = attachment;
    stream.resources.issue = attachment;
    return attachment;
  },
};

/**
 * The engine's failure once `writer`'s issuer thread marked itself failed (set once: later
 * fences and pushes throw the same).
 */
function issuerFailure(writer: Writer): Error {
  engine.failure ??= new CudaError(
    0,
    'CUDA_ERROR_UNKNOWN',
    'issue engine',
    `an issuer thread ${failureOf(writer.control) ?? 'failed'}; launches pushed to it are not issued: stop the engine (stopIssueEngine) and start it again`,
  );
  return engine.failure;
}

/** Waits until every stream's launches are issued (a context synchronize, a module unload). */
function issueAll(): void {
  if (engine.attached.size === 0) return;
  for (const attachment of engine.attached) attachment.fence();
}
contextParts.issueAll = issueAll;

/** @internal A kernel's id in error messages of launches made by the engine. */
export function issueKernelId(name: string): number {
  engine.kernelNames.push(name);
  return engine.kernelNames.length - 1;
}

/**
 * Starts the issue engine (see the module's comment): from now on, launches on streams that do
 * not capture are made by `issuers` issuer threads. Launches pushed before an issuer is up wait
 * in its ring. Throws a CudaArgumentError when it runs already or for a bad option, and
 * CudaUnavailableError without a driver or GPU.
 * @example startIssueEngine({ issuers: 8 });
 */
export function startIssueEngine(options: IssueEngineOptions = {}): void {
  // A missing driver or GPU is the one clear error here, not an issuer thread's exit later.
  driver();
  startIssueEngineWith(options, undefined);
}

/** `startIssueEngine` with the issuers' calls from a test double's module (unit tests). */
export function startIssueEngineWith(
  options: IssueEngineOptions,
  callsModule: string | undefined,
  callsData?: unknown,
): void {
  if (engine.running) throw new CudaArgumentError('startIssueEngine: the engine runs already');
  const issuers =
    options.issuers ?? Math.min(8, Math.max(1, Math.floor(availableParallelism() / 2)));
  const ringWords = options.ringWords ?? 1 << 18;
  const spinMicroseconds = options.spinMicroseconds ?? 200;
  const watchMicroseconds = options.watchMicroseconds ?? 2000;
  const queriesOnIssuers = options.queriesOnIssuers ?? true;
  if (!Number.isInteger(issuers) || issuers < 1 || issuers > 64) {
    throw new CudaArgumentError(
      `startIssueEngine: issuers must be an integer in [1, 64], got ${String(issuers)}`,
    );
  }
  if (!Number.isInteger(ringWords) || ringWords < 1024 || !Number.isInteger(Math.log2(ringWords))) {
    throw new CudaArgumentError(
      `startIssueEngine: ringWords must be a power of two >= 1024, got ${String(ringWords)}`,
    );
  }
  if (typeof spinMicroseconds !== 'number' || !(spinMicroseconds >= 0)) {
    throw new CudaArgumentError(
      `startIssueEngine: spinMicroseconds must be a number >= 0, got ${String(spinMicroseconds)}`,
    );
  }
  if (
    typeof watchMicroseconds !== 'number' ||
    !(watchMicroseconds >= 0) ||
    watchMicroseconds === Infinity
  ) {
    throw new CudaArgumentError(
      `startIssueEngine: watchMicroseconds must be a finite number >= 0, got ${String(watchMicroseconds)}`,
    );
  }
  if (typeof queriesOnIssuers !== 'boolean') {
    throw new CudaArgumentError(
      `startIssueEngine: queriesOnIssuers must be a boolean, got ${String(queriesOnIssuers)}`,
    );
  }
  engine.freeSlots = Array.from({ length: MAX_SLOTS }, (_, i) => MAX_SLOTS - 1 - i);
  engine.failure = undefined;
  engine.launches = engine.wakeUps = engine.fenceWaits = engine.roomWaits = 0;
  engine.waitMs = engine.longestWaitMs = 0;
  engine.queries = engine.queriesLeft = 0;
  engine.queriesOnIssuers = queriesOnIssuers;
  const key = `${issuers}/${ringWords}/${spinMicroseconds}/${watchMicroseconds}/${callsModule ?? ''}`;
  engine.key = key;
  const parked = engine.parked;
  engine.parked = undefined;
  if (parked !== undefined) {
    if (
      parked.key === key &&
      parked.writers.every((writer) => !writer.exited && failureOf(writer.control) === undefined)
    ) {
      // The same engine again: its sleeping threads take up where they stopped (their rings'
      // positions go on); every stream was detached at the stop, so the slots start afresh.
      for (const memory of [parked.slots.issued, parked.slots.errors, parked.slots.cancelled]) {
        new Int32Array(memory).fill(0);
      }
      for (const writer of parked.writers) writer.streams = 0;
      engine.slots = parked.slots;
      engine.writers = parked.writers;
      setRunning(true);
      return;
    }
    for (const writer of parked.writers) stopWriter(writer);
  }
  const slots = createSlots();
  engine.slots = slots;
  const entry = threadEntry(import.meta.url, 'issuer-thread.js', 'issuer-thread-source.mjs');
  engine.writers = Array.from({ length: issuers }, () => {
    const ring = createRing(ringWords);
    const writer = new Writer(ring);
    const worker = new Worker(entry.url, {
      workerData: {
        ring,
        slots,
        spinMicroseconds,
        watchMicroseconds,
        ...(callsModule === undefined ? {} : { callsModule, callsData }),
      } satisfies IssuerData,
      ...(entry.execArgv === undefined ? {} : { execArgv: entry.execArgv }),
      resourceLimits: { maxOldGenerationSizeMb: 64 },
    });
    worker.unref();
    const failed = (why: string) => {
      if (engine.writers.includes(writer) && engine.running && engine.failure === undefined) {
        engine.failure = new CudaError(
          0,
          'CUDA_ERROR_UNKNOWN',
          'issue engine',
          `an issuer thread ${why}`,
        );
      }
    };
    worker.on('error', (error) => failed(`failed: ${error.message}`));
    worker.on('exit', (code) => {
      writer.exited = true;
      failed(`exited with code ${code}`);
    });
    writer.worker = worker;
    return writer;
  });
  setRunning(true);
}

/**
 * Sets `engine.running`, and this copy's count in the launch gate (while any copy's engine
 * runs, every launch takes the full path, which hands it to the engine).
 */
function setRunning(running: boolean): void {
  if (engine.running === running) return;
  engine.running = running;
  launchGate.engines += running ? 1 : -1;
  reopenLaunchGate();
}

/** Tells a writer's issuer to exit (once its ring is drained); resolves when it has. */
function stopWriter(writer: Writer): Promise<void> {
  Atomics.store(writer.control, STOP, 1);
  const worker = writer.worker!;
  if (writer.exited) return Promise.resolve();
  // The issuer sleeps in Atomics.wait on HEAD, after it saw STOP unset: a notify alone is lost
  // when it comes between that check and the wait. A PAD published after STOP changes HEAD, so
  // that the wait returns (or is never entered) and the issuer sees STOP. A failed issuer is
  // exiting already (and may never free room for the PAD).
  if (failureOf(writer.control) === undefined) {
    try {
      writer.pad();
    } catch {
      // It failed meanwhile: it exits by itself (else the terminate below ends it).
    }
  }
  Atomics.notify(writer.control, HEAD, 1);
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => void worker.terminate().then(() => resolve()), 5_000);
    worker.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Options of `stopIssueEngine`. */
export interface StopIssueEngineOptions {
  /**
   * Keep the issuer threads, asleep (no CPU, and they do not keep the process alive), so that
   * the next `startIssueEngine` with the same options takes them up at once instead of starting
   * new threads. Default false: the threads exit.
   */
  keepThreads?: boolean;
}

/**
 * Stops the engine: every stream's launches are issued first, then the issuer threads exit (or
 * sleep, with `keepThreads`) and launches are made directly again. Safe to call when it does
 * not run; a call without `keepThreads` also ends threads kept by an earlier one. When an
 * issuer thread had failed, the engine is still stopped (every stream detached, the threads
 * ended), and then this rejects with the failure: launches pushed to that issuer were lost.
 */
export async function stopIssueEngine(options: StopIssueEngineOptions = {}): Promise<void> {
  if (!engine.running) {
    const parked = engine.parked;
    if (parked !== undefined && options.keepThreads !== true) {
      engine.parked = undefined;
      await Promise.all(parked.writers.map(stopWriter));
    }
    return;
  }
  setRunning(false);
  let failure: unknown;
  for (const attachment of [...engine.attached]) {
    try {
      attachment.quiesce();
    } catch (error) {
      failure ??= error;
    }
    attachment.close();
  }
  engine.attached.clear();
  engine.byHandle.clear();
  const writers = engine.writers;
  engine.writers = [];
  if (options.keepThreads === true && engine.failure === undefined && failure === undefined) {
    engine.parked = { key: engine.key, writers, slots: engine.slots! };
    return;
  }
  await Promise.all(writers.map(stopWriter));
  if (failure !== undefined) throw failure;
}

/** How the engine stands. */
export function issueEngineStatistics(): IssueEngineStatistics {
  return {
    running: engine.running,
    issuers: engine.writers.length,
    launches: engine.launches,
    wakeUps: engine.wakeUps,
    fenceWaits: engine.fenceWaits,
    roomWaits: engine.roomWaits,
    waitMs: engine.waitMs,
    longestWaitMs: engine.longestWaitMs,
    queries: engine.queries,
    queriesLeft: engine.queriesLeft,
    cancelled: engine.writers.reduce(
      (sum, writer) => sum + Atomics.load(writer.control, CANCELLED),
      0,
    ),
    streams: engine.attached.size,
    failure: engine.failure?.message,
  };
}
