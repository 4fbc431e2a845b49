import type { Context } from '../context/device.js';
import { resolveStream } from '../context/provider.js';
import { check, driver } from '../driver.js';
import { CaptureError, CudaArgumentError, DisposedError } from '../errors.js';
import type { StreamCapture } from '../graph/capture.js';
import { assertOptions, NO_OPTIONS, STREAM_ONLY } from '../options-checks.js';
import { useClock } from '../progress.js';
import type { Stream } from '../stream/stream.js';
import { cacheSize, putCached, takeCached } from './block-cache.js';

const bufferBrand = Symbol.for('@cuda-tasks/DeviceBuffer');

/** Where an operation runs. Every operation defaults to the current stream. */
export interface StreamOption {
  /** The stream to order the operation on (default: `currentStream()`). */
  stream?: Stream;
}

/** What the FinalizationRegistry needs to free a forgotten buffer (no reference to the buffer). */
/**
 * @internal A buffer's allocation record: its address, the stream and clock ticks of its last
 * uses. Only this module reads or moves them (see `handOff`).
 */
export interface Allocation {
  /** The device address as `ffiValue` gives it (a Number below 2^53); 0 once freed. */
  address: number | bigint;
  /**
   * `address !== 0`, kept beside it for the hot paths (`handOff`, the launch's argument check):
   * an address above 2^31 is a heap number of its own, one more load than this field's.
   */
  live: boolean;
  /** The address as a BigInt, made on first request (the public `pointer`). */
  pointer: bigint | undefined;
  /** The stream of the last write (or of the allocation). */
  stream: Stream;
  /** The use-clock tick of the last use on `stream`, read or write (see progress.ts). */
  stamp: number;
  /**
   * The use-clock tick of the last write on `stream` (or of the allocation). A read on another
   * stream orders after the write only: the writer stream's later reads of the buffer need no
   * ordering against another read.
   */
  writeStamp: number;
  /** Other streams that read the buffer since that write (null: none yet). */
  readers: Stream[] | null;
  /** The tick of each reader's last read (parallel to `readers`). */
  readerStamps: number[] | null;
  context: Context;
  /** Whether the buffer is registered with the finalizer (see `trackYoung`). */
  registered: boolean;
  /** The block's size class when it may go to the per-stream cache (block-cache.ts), else 0. */
  cacheSize: number;
  /**
   * The capture in progress that allocated this (graph memory not yet in a graph); while the
   * memory is lent to another thread, the `LoanBlock` that refuses this thread's uses; else null.
   */
  capture: StreamCapture | LoanBlock | null;
  /** For memory allocated inside a capture that outlived it: the graph's side, else null. */
  graph: GraphMemory | null;
  /**
   * For memory that did not come from the pool (shared across processes): how it goes; null
   * or absent otherwise.
   */
  foreign?: ForeignMemory | null;
}

/**
 * @internal Device memory that did not come from the stream-ordered pool: memory allocated to
 * be shared with other processes, or another process's memory mapped into this one. Its
 * buffer frees it through `release`, once every use of it is complete (the host waits for the
 * streams that used it: these frees are rare and cannot be stream-ordered).
 *
 * A read-only buffer keeps at least one entry in its `readers` (see `adoptForeign`), so that
 * the common case of `handOff` never takes a write to it and every write reaches
 * `handOffInFull`, which refuses it with `writeError()`: no check in the common case.
 */
export interface ForeignMemory {
  /** Whether a use for writing is refused. */
  readonly readOnly: boolean;
  /** The error for a use for writing (read-only memory only). */
  writeError(): Error;
  /** Frees or unmaps the memory; called once, after every use of it has completed. */
  release(address: number | bigint): void;
  /**
   * With this, the release is stream-ordered instead of waited for: called once, in place of
   * `release`, with the stream that used the memory last (already ordered after every other
   * stream that used it); what it enqueues there runs after all those uses.
   */
  releaseOn?(address: number | bigint, stream: Stream): void;
  /** The error for a use after the memory went without `dispose()`, or null (then: disposed). */
  goneError(): Error | null;
}

/**
 * @internal Memory allocated inside a capture and alive when it ended: an output of the graph.
 * The graph allocates it at each launch (the same address each time; the previous launch's
 * is freed first), so it exists once the graph has been launched. While the graph lives it
 * owns the memory (disposing the buffer only gives it up); after, a live buffer owns it.
 */
export interface GraphMemory {
  /** The graph allocation's fixed address. */
  readonly address: number | bigint;
  /**
   * 'pending': the graph has not been launched, the buffer is not usable yet; 'live': the
   * buffer is usable; 'released': the buffer was disposed; 'abandoned': the capture failed or
   * the graph went before its first launch, and the memory never came to be.
   */
  state: 'pending' | 'live' | 'released' | 'abandoned';
  /** Whether the graph still exists (it frees the memory at each relaunch and at its end). */
  graphAlive: boolean;
}

/** The allocation's memory is gone (freed, cached, lent away or the graph's): no address. */
function clearAddress(allocation: Allocation): void {
  allocation.address = 0;
  allocation.live = false;
  allocation.pointer = undefined;
}

/**
 * Frees the allocation on the last stream that used it, after every read; with `reuse`, a
 * small block goes to that stream's cache instead (see block-cache.ts). When that stream is
 * disposed or of another context (a device-1 stream wrote this device-0 buffer, say), the free
 * goes to the default stream of the allocation's own context, ordered after that stream's
 * work, and the block is not cached: a stream's cache holds only blocks of its own context.
 */
function freeAllocation(allocation: Allocation, reuse: boolean): void {
  const memory = allocation.graph;
  if (allocation.address === 0) {
    if (memory !== null && memory.state === 'pending') memory.state = 'released';
    return;
  }
  if (allocation.foreign != null) {
    if (allocation.foreign.releaseOn !== undefined)
      releaseForeignOn(allocation, allocation.foreign);
    else releaseForeign(allocation, allocation.foreign);
    return;
  }
  if (memory?.graphAlive) {
    // The graph's memory: the graph frees it (at its next launch, or when it goes).
    memory.state = 'released';
    clearAddress(allocation);
    return;
  }
  const context = allocation.context;
  let stream = allocation.stream;
  // A disposed stream takes no work, and a stream of another context must not free (or keep)
  // this context's memory: the free goes to this context's default stream, after that one.
  const elsewhere = stream.disposed || stream.context !== context;
  if (elsewhere) stream = context.defaultStream;
  const capture = stream.capture;
  if (capture !== null && allocation.capture !== capture) {
    // A free captured into the graph would free memory the graph did not allocate (the driver
    // invalidates the capture): free it, in the stream's order, once the capture has ended.
    const later: Allocation = { ...allocation };
    capture.afterEnd(() => freeAllocation(later, false));
    clearAddress(allocation);
    return;
  }
  if (elsewhere) {
    const last = allocation.stream;
    // A disposed owned stream was drained by its dispose; a wrapped one left its tail event.
    if (!last.hasCompleted(allocation.stamp)) stream.waitFor(last);
    reuse = false;
  }
  // The free (or the reuse) must come after every read too.
  const readers = allocation.readers;
  if (readers !== null) waitForReaders(stream, readers, allocation.readerStamps!);
  if (
    reuse &&
    allocation.cacheSize > 0 &&
    capture === null &&
    putCached(stream, allocation.cacheSize, allocation.address)
  ) {
    clearAddress(allocation);
    return;
  }
  context.makeCurrent();
  check(driver().cuMemFreeAsync(allocation.address, stream.ffiHandle), 'cuMemFreeAsync');
  clearAddress(allocation);
}

/**
 * Orders `stream` after each reader's reads that are not known complete (see progress.ts). A
 * disposed reader is known complete when it was ours (its dispose drained it); a wrapped one
 * is waited for through the event recorded at its dispose (`Stream.waitFor`).
 */
function waitForReaders(
  stream: Stream,
  readers: readonly Stream[],
  stamps: readonly number[],
): void {
  for (let i = 0; i < readers.length; i++) {
    const reader = readers[i]!;
    if (reader !== stream && !reader.hasCompleted(stamps[i]!)) stream.waitFor(reader);
  }
}

/**
 * Frees memory that did not come from the pool (see `ForeignMemory`): blocks until every
 * stream that used it has finished that work, then releases it. A stream that captures is
 * not waited for (its captured work runs only when the graph is launched).
 */
function releaseForeign(allocation: Allocation, foreign: ForeignMemory): void {
  const address = allocation.address;
  clearAddress(allocation);
  try {
    waitForUseSync(allocation.stream, allocation.stamp);
    const readers = allocation.readers;
    if (readers !== null) {
      for (let i = 0; i < readers.length; i++) {
        waitForUseSync(readers[i]!, allocation.readerStamps![i]!);
      }
    }
  } finally {
    foreign.release(address);
  }
}

/**
 * Releases memory whose foreign side orders its release on a stream (`releaseOn`): the last
 * stream that used it (its context's default stream when that one is disposed or of another
 * context) waits for every reader, then takes the release. On a stream that captures a graph,
 * the release waits for the capture's end (a captured release would run only at a launch).
 */
function releaseForeignOn(allocation: Allocation, foreign: ForeignMemory): void {
  const address = allocation.address;
  const context = allocation.context;
  let stream = allocation.stream;
  if (stream.disposed || stream.context !== context) {
    const last = stream;
    stream = context.defaultStream;
    if (!last.hasCompleted(allocation.stamp)) stream.waitFor(last);
  }
  const capture = stream.capture;
  if (capture !== null) {
    const later: Allocation = { ...allocation, stream };
    clearAddress(allocation);
    capture.afterEnd(() => releaseForeignOn(later, foreign));
    return;
  }
  clearAddress(allocation);
  const readers = allocation.readers;
  if (readers !== null) waitForReaders(stream, readers, allocation.readerStamps!);
  foreign.releaseOn!(address, stream);
}

/** Blocks until `stream`'s work up to the use stamped `stamp` is done (see `releaseForeign`). */
function waitForUseSync(stream: Stream, stamp: number): void {
  if (!stream.disposed && stream.capture === null && !stream.hasCompleted(stamp)) {
    stream.synchronize();
  }
}

const finalizer = new FinalizationRegistry<Allocation>((allocation) => {
  try {
    freeAllocation(allocation, false);
  } catch {
    // A sticky error or teardown: the context's memory goes with it.
  }
});

/*
 * The FinalizationRegistry safety net costs about a microsecond per register/unregister in
 * V8, more than a stream-ordered alloc+free pair itself. So a new buffer is registered only if
 * it survives the turn of the event loop that allocated it (or 4,096 newer allocations): the
 * common allocate-use-dispose pattern never touches the registry.
 */
const young: DeviceBuffer[] = [];
let flushScheduled = false;
const YOUNG_LIMIT = 4096;

function trackYoung(buffer: DeviceBuffer): void {
  young.push(buffer);
  if (young.length >= YOUNG_LIMIT) flushYoung();
  else if (!flushScheduled) {
    flushScheduled = true;
    setImmediate(flushYoung);
  }
}

/** A buffer disposed in the turn that made it leaves the young list at once (LIFO, the common case). */
function forgetYoung(buffer: DeviceBuffer): void {
  const last = young.length - 1;
  if (last >= 0 && young[last] === buffer) young.length = last;
}

function flushYoung(): void {
  flushScheduled = false;
  for (const buffer of young) buffer.registerFinalizer();
  young.length = 0;
}

/** Reads a buffer's allocation record (set by DeviceBuffer's static block). */
let allocationOf: (buffer: DeviceBuffer) => Allocation;

/**
 * The record `recordOf` gives for a buffer without one of this copy of the package (another
 * loaded copy's, a test's stand-in): address 0, so that `handOff` never takes its common case
 * for it and asks the buffer itself.
 */
const untracked: Allocation = Object.freeze({
  address: 0,
  live: false,
  pointer: undefined,
  stream: undefined as unknown as Stream,
  stamp: 0,
  writeStamp: 0,
  readers: null,
  readerStamps: null,
  context: undefined as unknown as Context,
  registered: false,
  cacheSize: 0,
  capture: null,
  graph: null,
  foreign: null,
}) as Allocation;

/**
 * @internal The allocation record a `DeviceArray` keeps to hand to `handOff`: the buffer's
 * own, or one with address 0 for a buffer of another copy of the package, whose hand-off goes
 * to that copy's `ffiAddressOn` (set by DeviceBuffer's static block).
 */
export let recordOf: (buffer: DeviceBuffer) => Allocation;

/**
 * Device memory from the stream-ordered pool. Remembers the stream that last used it: use
 * on another stream is ordered on the GPU (an event recorded on the old stream, waited for
 * by the new one), and the free goes to the last stream that used it.
 */
export class DeviceBuffer {
  static {
    // The brand lives on the prototype: a per-instance symbol field slows construction.
    (DeviceBuffer.prototype as any)[bufferBrand] = true;
  }
  /** Size in bytes. */
  readonly byteLength: number;
  /** The context whose device holds the memory. */
  readonly context: Context;
  readonly #allocation: Allocation;

  private constructor(allocation: Allocation, byteLength: number) {
    this.#allocation = allocation;
    this.byteLength = byteLength;
    this.context = allocation.context;
    if (allocation.address !== 0) trackYoung(this);
  }

  /** @internal Registers a live buffer with the finalizer (once). */
  registerFinalizer(): void {
    const allocation = this.#allocation;
    if (allocation.address !== 0 && !allocation.registered) {
      allocation.registered = true;
      finalizer.register(this, allocation, this);
    }
  }

  /**
   * Allocates `byteLength` bytes ordered on the stream (the memory is usable by work that
   * the stream runs after this call).
   *
   * Synchronous: on out-of-memory it blocks the thread (and the event loop) while the device's
   * pending frees complete, then retries (see `MemoryPool.allocate`). Where you can await, use
   * `allocateAsync`, which waits for them on a worker thread.
   * @example using buffer = DeviceBuffer.allocate(1 << 20);
   */
  static allocate(byteLength: number, options: StreamOption = NO_OPTIONS): DeviceBuffer {
    assertOptions('DeviceBuffer.allocate', options, STREAM_ONLY);
    checkByteLength(byteLength);
    const stream = resolveStream(options.stream);
    stream.assertUsable();
    const context = stream.context;
    const stamp = ++useClock.value;
    const capture = stream.capture;
    let address: number | bigint = 0;
    let size = 0;
    if (capture !== null) {
      // Inside a capture: an allocation node of the graph, never a cached block (one freed
      // outside the capture would tie the graph to memory it does not own, and the reverse).
      if (byteLength > 0) address = context.memoryPool.allocate(byteLength, stream);
    } else {
      // Small blocks come from the stream's cache of freed ones when it has one of the size.
      size = cacheSize(byteLength);
      if (size > 0) address = takeCached(stream, size) ?? context.memoryPool.allocate(size, stream);
      else if (byteLength > 0) address = context.memoryPool.allocate(byteLength, stream);
    }
    const buffer = DeviceBuffer.#adopt(address, stream, stamp, byteLength, size, capture);
    if (capture !== null && address !== 0) capture.allocations.push(buffer);
    return buffer;
  }

  /**
   * `allocate`, awaitable: on out-of-memory the wait for the device's pending frees runs on a
   * worker thread (cuCtxSynchronize_v2), so the event loop goes on. Without memory pressure it
   * allocates as `allocate` does (a cached block or one cuMemAllocAsync). On a stream that
   * captures a graph, and on a driver without cuCtxSynchronize_v2, it is `allocate`.
   * @example using buffer = await DeviceBuffer.allocateAsync(1 << 30);
   */
  static async allocateAsync(
    byteLength: number,
    options: StreamOption = NO_OPTIONS,
  ): Promise<DeviceBuffer> {
    assertOptions('DeviceBuffer.allocateAsync', options, STREAM_ONLY);
    checkByteLength(byteLength);
    const stream = resolveStream(options.stream);
    stream.assertUsable();
    if (stream.capture !== null || byteLength === 0)
      return DeviceBuffer.allocate(byteLength, { stream });
    const size = cacheSize(byteLength);
    const address =
      (size > 0 ? takeCached(stream, size) : undefined) ??
      (await stream.context.memoryPool.allocateAsync(size > 0 ? size : byteLength, stream));
    return DeviceBuffer.#adopt(address, stream, ++useClock.value, byteLength, size, null);
  }

  /**
   * A buffer of memory just allocated (or taken from the cache) on `stream`, or, with
   * `foreign`, of memory that did not come from the pool. Every allocation record is made here,
   * so all have one shape.
   */
  static #adopt(
    address: number | bigint,
    stream: Stream,
    stamp: number,
    byteLength: number,
    size: number,
    capture: StreamCapture | null,
    foreign: ForeignMemory | null = null,
  ): DeviceBuffer {
    // Read-only foreign memory: one reader entry (the context's default stream, complete at
    // tick 0) keeps writes out of `handOff`'s common case (see `ForeignMemory`).
    const readOnly = foreign?.readOnly === true;
    return new DeviceBuffer(
      {
        address,
        live: address !== 0,
        pointer: undefined,
        stream,
        stamp,
        writeStamp: stamp,
        readers: readOnly ? [stream.context.defaultStream] : null,
        readerStamps: readOnly ? [0] : null,
        context: stream.context,
        registered: false,
        cacheSize: size,
        capture: address === 0 ? null : capture,
        graph: null,
        foreign,
      },
      byteLength,
    );
  }

  /**
   * @internal A buffer over memory that did not come from the pool (see `ForeignMemory`),
   * usable on `stream` from now on; its `dispose()` (or the finalizer) releases it.
   */
  static adoptForeign(
    address: number | bigint,
    byteLength: number,
    stream: Stream,
    foreign: ForeignMemory,
  ): DeviceBuffer {
    return DeviceBuffer.#adopt(address, stream, ++useClock.value, byteLength, 0, null, foreign);
  }

  /**
   * @internal A buffer over memory of the stream-ordered pool that another thread of this
   * process allocated and gave up (see `relinquishAllocation`), usable on `stream` from now on
   * (the caller has ordered `stream` after the giver's uses); it frees it as its own.
   */
  static adoptPool(address: number | bigint, byteLength: number, stream: Stream): DeviceBuffer {
    return DeviceBuffer.#adopt(address, stream, ++useClock.value, byteLength, 0, null);
  }

  /**
   * @internal Releases a foreign buffer's memory now (after its uses complete) without
   * `dispose()`: later uses throw the memory's `goneError()`.
   */
  static releaseForeign(buffer: DeviceBuffer): void {
    const allocation = allocationOf(buffer);
    if (allocation.address === 0 || allocation.foreign == null) return;
    if (allocation.registered) finalizer.unregister(buffer);
    else forgetYoung(buffer);
    freeAllocation(allocation, false);
  }

  /** @internal The foreign side of a buffer (see `ForeignMemory`), or null for pool memory. */
  static foreignOf(buffer: DeviceBuffer): ForeignMemory | null {
    return recordOf(buffer).foreign ?? null;
  }

  /** True for a DeviceBuffer of any loaded copy of this package. */
  static isInstance(value: unknown): value is DeviceBuffer {
    return typeof value === 'object' && value !== null && bufferBrand in value;
  }

  /** The device address (throws DisposedError after dispose). */
  get pointer(): bigint {
    const allocation = this.#allocation;
    if (allocation.address === 0) {
      if (this.byteLength > 0) throw unusable(allocation);
      return 0n;
    }
    return (allocation.pointer ??= BigInt(allocation.address));
  }

  /** The device address as koffi converts it fastest (see `ffiValue`; throws after dispose). */
  get address(): number | bigint {
    const allocation = this.#allocation;
    if (allocation.address === 0 && this.byteLength > 0) throw unusable(allocation);
    return allocation.address;
  }

  /**
   * Whether `dispose()` has been called (or the buffer's memory will never exist: allocated
   * inside a capture that failed). An output of a graph not launched yet is not disposed.
   */
  get disposed(): boolean {
    const allocation = this.#allocation;
    return allocation.address === 0 && this.byteLength > 0 && allocation.graph?.state !== 'pending';
  }

  /** The stream that last wrote this buffer (or allocated it). */
  get lastStream(): Stream {
    return this.#allocation.stream;
  }

  /** Streams other than `lastStream` that have read the buffer since its last write. */
  get readers(): readonly Stream[] {
    return this.#allocation.readers ?? [];
  }

  /**
   * Declares that `stream` is about to use this buffer and returns the device address. The
   * hand-off is ordered on the GPU, never by blocking the host: a read waits for the last
   * write (once per stream); a write waits for the last write and for every read since, so
   * concurrent readers on different streams do not serialize. A hand-off from a stream whose
   * earlier use is known complete (a query or synchronize found that stream idle since) needs
   * no ordering and costs nothing. Every operation in cuda-tasks calls this; call it yourself
   * right before handing the pointer to foreign code, in the same synchronous step as the
   * work it issues.
   */
  useOn(stream: Stream, access: 'read' | 'write' = 'write'): bigint {
    this.ffiAddressOn(stream, access);
    return this.pointer;
  }

  /**
   * `useOn`, returning the address as koffi converts it fastest (a Number; see `ffiValue`):
   * for native functions declared with a `uint64_t` address, on hot paths.
   */
  ffiAddressOn(stream: Stream, access: 'read' | 'write' = 'write'): number | bigint {
    const allocation = this.#allocation;
    handOff(this, allocation, stream, access);
    return allocation.address;
  }
  /**
   * Frees the memory, ordered on the last stream that used it (a block of up to 64 KiB is kept
   * for the next allocation of its size on that stream; see `MemoryPool.releaseCached`). Safe
   * to call twice. Inside a capture, memory allocated inside it is freed by the graph; other
   * memory is freed once the capture has ended. An output of a graph goes to the graph.
   */
  dispose(): void {
    const allocation = this.#allocation;
    if (allocation.address === 0) {
      if (allocation.graph !== null) freeAllocation(allocation, false);
      return;
    }
    if (allocation.registered) finalizer.unregister(this);
    else forgetYoung(this);
    if (loans.size > 0) {
      const loan = loans.get(allocation);
      if (loan !== undefined) {
        // Lent to native code: the buffer goes now, its memory when the last loan ends.
        loan.disposed = { ...allocation };
        clearAddress(allocation);
        return;
      }
    }
    freeAllocation(allocation, true);
  }

  static {
    allocationOf = (buffer) => buffer.#allocation;
    recordOf = (buffer) => (#allocation in buffer ? buffer.#allocation : untracked);
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * @internal The buffer hand-off, written once: declares that `stream` is about to use the
 * memory of `buffer`, whose allocation record is `allocation` (a `DeviceArray` keeps it, see
 * `recordOf`). Every use goes through it: `DeviceBuffer.ffiAddressOn` and `useOn`, the arrays'
 * `ffiAddressOn` and `useOn`, and the launch code generated per kernel (`compileLaunch`), which
 * calls it once per typed pointer argument.
 *
 * The common case is these few lines, small enough for V8 to inline into the caller: the
 * stream that last wrote the memory uses it again, nothing captures, and no other stream reads
 * it (for a write). Then only the use-clock stamps move (progress.ts). Every other case is
 * `handOffInFull`.
 */
export function handOff(
  buffer: DeviceBuffer,
  allocation: Allocation,
  stream: Stream,
  access: 'read' | 'write',
): void {
  if (
    allocation.stream === stream &&
    allocation.live &&
    stream.capture === null &&
    allocation.capture === null &&
    !stream.disposed
  ) {
    if (access === 'read') {
      allocation.stamp = ++useClock.value;
      return;
    }
    const readers = allocation.readers;
    if (readers === null || readers.length === 0) {
      allocation.stamp = allocation.writeStamp = ++useClock.value;
      return;
    }
  }
  handOffInFull(buffer, allocation, stream, access);
}

/**
 * `handOff` in every case. The hand-off is ordered on the GPU, never by blocking the host: a
 * read waits for the last write (once per stream); a write waits for the last write and for
 * every read since. A use from a stream whose earlier work is known complete needs no ordering.
 * Memory of no bytes is never read or written: its uses need no ordering and change nothing.
 */
function handOffInFull(
  buffer: DeviceBuffer,
  allocation: Allocation,
  stream: Stream,
  access: 'read' | 'write',
): void {
  if (allocation === untracked) {
    // A buffer of another loaded copy of the package: its own copy's hand-off.
    buffer.ffiAddressOn(stream, access);
    return;
  }
  stream.assertUsable();
  if (allocation.address === 0) {
    if (buffer.byteLength > 0) throw unusable(allocation);
    return;
  }
  const foreign = allocation.foreign;
  if (foreign?.readOnly && access === 'write') throw foreign.writeError();
  const capture = stream.capture;
  const owner = allocation.capture;
  if (
    capture !== null ||
    (owner !== null && !(access === 'read' && owner instanceof LoanBlock && owner.readsAllowed))
  ) {
    handOffInCapture(buffer, allocation, stream, capture, access);
    return;
  }
  const stamp = ++useClock.value;
  const writer = allocation.stream;
  if (writer === stream) {
    // Reads on the writer's stream need no ordering; a write still waits for other readers.
    allocation.stamp = stamp;
    if (access === 'read') return;
    allocation.writeStamp = stamp;
    const readers = allocation.readers;
    if (readers !== null && readers.length > 0) {
      waitForReaders(stream, readers, allocation.readerStamps!);
      readers.length = 0;
      allocation.readerStamps!.length = 0;
    }
    return;
  }
  let readers = allocation.readers;
  if (access === 'read') {
    const index = readers === null ? -1 : readers.indexOf(stream);
    if (index >= 0) {
      // This stream already waited for the last write: only its stamp moves on.
      allocation.readerStamps![index] = stamp;
      return;
    }
    // A read orders after the last write, not after the writer stream's reads since: when
    // that write is known complete, the read needs no ordering even if the writer stream is
    // still reading the buffer.
    if (!writer.hasCompleted(allocation.writeStamp)) stream.waitFor(writer);
    if (readers === null) {
      allocation.readers = readers = [];
      allocation.readerStamps = [];
    }
    readers.push(stream);
    allocation.readerStamps!.push(stamp);
    return;
  }
  // A write orders after every use since the last write, the writer stream's reads included.
  if (!writer.hasCompleted(allocation.stamp)) stream.waitFor(writer);
  if (readers !== null && readers.length > 0) {
    waitForReaders(stream, readers, allocation.readerStamps!);
    readers.length = 0;
    allocation.readerStamps!.length = 0;
  }
  allocation.stream = stream;
  allocation.stamp = stamp;
  allocation.writeStamp = stamp;
}

/**
 * A use while a capture is involved: the stream captures, or the memory belongs to a capture
 * in progress. A captured use changes nothing now (the work runs at each launch, and the
 * graph re-declares the use on the launching stream then); it is recorded for that.
 */
function handOffInCapture(
  buffer: DeviceBuffer,
  allocation: Allocation,
  stream: Stream,
  capture: StreamCapture | null,
  access: 'read' | 'write',
): void {
  const owner = allocation.capture;
  if (owner instanceof LoanBlock) throw owner.refuse(stream);
  if (owner === capture) return;
  if (owner !== null) {
    throw new CaptureError(
      'DeviceBuffer',
      `this buffer was allocated inside the capture of ${owner.stream}, which is in progress: it is memory of the graph being captured and exists only when that graph runs, so ${stream} cannot use it${capture === null ? '' : ' (nor another capture)'}`,
    );
  }
  capture!.recordUse(buffer, access);
}

/**
 * Allocations lent to native code (DLPack exports) with their number of loans, and the record
 * to free once the last loan ends when the buffer was disposed meanwhile.
 */
const loans = new Map<
  Allocation,
  { count: number; disposed: Allocation | null; after: (() => void)[] | null }
>();

/**
 * @internal What a buffer's record holds (in its `capture` slot, so that `handOff`'s common
 * case stays as it is) while its memory is lent to another thread: every use of the buffer in
 * this thread leaves the common case, and all but reads of a read-only loan (`readsAllowed`)
 * throw `refuse(stream)` in `handOffInCapture`.
 */
export class LoanBlock {
  readonly readsAllowed: boolean;
  /** Loans that hold it: read-only loans of one buffer share one block. */
  holders = 0;
  readonly #error: (stream: Stream) => Error;
  constructor(readsAllowed: boolean, error: (stream: Stream) => Error) {
    this.readsAllowed = readsAllowed;
    this.#error = error;
  }
  refuse(stream: Stream): Error {
    return this.#error(stream);
  }
}

/**
 * @internal Lends the buffer's memory to native code or another thread until the returned
 * function is called (once; later calls do nothing): a `dispose()` meanwhile makes the buffer
 * unusable at once and frees the memory when the last loan ends, ordered after this process's
 * uses as usual. With `block`, uses of the buffer in this thread throw `block`'s error until
 * the loan ends (all of them, or all but reads). A buffer lent read-only can be lent read-only
 * again (the loans share the first block, which goes with the last of them); any other loan of
 * a blocked buffer is a CudaArgumentError.
 */
export function lendAllocation(buffer: DeviceBuffer, block: LoanBlock | null = null): () => void {
  // Another loaded copy's buffer has the untracked record (address 0): not lent here.
  const allocation = recordOf(buffer);
  if (allocation.address === 0) return () => {};
  let shared = block;
  const current = allocation.capture;
  if (current instanceof LoanBlock) {
    if (block === null || !block.readsAllowed || !current.readsAllowed) {
      throw new CudaArgumentError(
        'this buffer is lent to another thread: it cannot be lent again until that loan ends (only read-only loans can overlap)',
      );
    }
    shared = current;
  }
  let loan = loans.get(allocation);
  if (loan === undefined) {
    loans.set(allocation, (loan = { count: 0, disposed: null, after: null }));
  }
  loan.count++;
  if (shared !== null) {
    shared.holders++;
    allocation.capture = shared;
  }
  const held = loan;
  let ended = false;
  return () => {
    if (ended) return;
    ended = true;
    if (shared !== null && --shared.holders === 0) {
      if (allocation.capture === shared) allocation.capture = null;
      if (held.disposed !== null && held.disposed.capture === shared) held.disposed.capture = null;
    }
    if (--held.count > 0) return;
    loans.delete(allocation);
    try {
      if (held.disposed !== null) freeAllocation(held.disposed, false);
    } finally {
      if (held.after !== null) for (const callback of held.after) callback();
    }
  };
}

/** @internal Throws what `relinquishAllocation` would throw for this buffer; else nothing. */
export function assertRelinquishable(buffer: DeviceBuffer): void {
  const allocation = allocationOf(buffer);
  const why =
    allocation.address === 0
      ? 'it has no memory (disposed, or an output of a graph)'
      : allocation.foreign != null
        ? 'its memory is not from the pool (shared, mapped or imported memory)'
        : loans.has(allocation)
          ? 'its memory is lent (to another thread or native code)'
          : allocation.capture !== null || allocation.graph !== null
            ? 'its memory belongs to a graph capture'
            : undefined;
  if (why === undefined) return;
  if (allocation.address === 0 && buffer.byteLength > 0) throw unusable(allocation);
  throw new CudaArgumentError(`this buffer cannot be given to another thread: ${why}`);
}

/**
 * @internal Gives up the buffer's pool memory without freeing it (another thread of this
 * process adopts it with `DeviceBuffer.adoptPool`): the buffer is disposed from now on. Only
 * memory of the pool that no capture, graph, loan or foreign owner holds can be given up
 * (a CudaArgumentError otherwise).
 */
export function relinquishAllocation(buffer: DeviceBuffer): void {
  assertRelinquishable(buffer);
  const allocation = allocationOf(buffer);
  if (allocation.registered) finalizer.unregister(buffer);
  else forgetYoung(buffer);
  clearAddress(allocation);
}

/**
 * @internal Calls `callback` once the last loan of the buffer's memory has ended and returns
 * true, or returns false at once when the memory is not lent (see `lendAllocation`). The owner
 * of memory that `dispose()` does not free (a HostView's pinned pages behind its device alias)
 * keeps it until then.
 */
export function afterLoans(buffer: DeviceBuffer, callback: () => void): boolean {
  const loan = loans.get(recordOf(buffer));
  if (loan === undefined) return false;
  (loan.after ??= []).push(callback);
  return true;
}

/** The error for a use of a buffer without memory: disposed, or graph memory not there yet. */
function unusable(allocation: Allocation): Error {
  const gone = allocation.foreign?.goneError();
  if (gone) return gone;
  const state = allocation.graph?.state;
  if (state === 'pending') {
    return new CaptureError(
      'DeviceBuffer',
      'this buffer was allocated inside a capture and is an output of its graph: its memory exists once the graph has been launched; launch the graph first',
    );
  }
  if (state === 'abandoned') {
    return new DisposedError(
      'DeviceBuffer (allocated inside a capture that failed, or whose graph was disposed before its first launch)',
    );
  }
  return new DisposedError('DeviceBuffer');
}

/**
 * @internal At the end of a capture: a buffer allocated inside it and still alive becomes an
 * output of the graph (unusable until the graph's first launch). False for one disposed inside.
 */
export function holdAsGraphOutput(buffer: DeviceBuffer): boolean {
  const allocation = allocationOf(buffer);
  allocation.capture = null;
  if (allocation.address === 0) return false;
  allocation.graph = { address: allocation.address, state: 'pending', graphAlive: true };
  clearAddress(allocation);
  return true;
}

/** @internal A capture failed: memory allocated inside it never comes to be. */
export function abandonCapturedAllocation(buffer: DeviceBuffer): void {
  const allocation = allocationOf(buffer);
  allocation.capture = null;
  if (allocation.address === 0) return;
  allocation.graph = { address: allocation.address, state: 'abandoned', graphAlive: false };
  clearAddress(allocation);
}

/** @internal The graph side of an output buffer (see `holdAsGraphOutput`). */
export function graphMemoryOf(buffer: DeviceBuffer): GraphMemory {
  return allocationOf(buffer).graph!;
}

/**
 * @internal A launch of the graph on `stream` (re)writes the output: the first makes the
 * buffer usable, each declares it written by `stream` (a buffer its user disposed is skipped).
 */
export function launchGraphOutput(buffer: DeviceBuffer, stream: Stream): void {
  const allocation = allocationOf(buffer);
  const memory = allocation.graph!;
  if (memory.state === 'live') {
    buffer.ffiAddressOn(stream, 'write');
  } else if (memory.state === 'pending') {
    memory.state = 'live';
    allocation.address = memory.address;
    allocation.live = memory.address !== 0;
    allocation.pointer = undefined;
    allocation.stream = stream;
    allocation.stamp = allocation.writeStamp = ++useClock.value;
    buffer.registerFinalizer();
  }
}

/**
 * @internal The graph is gone: a live output buffer owns its memory from now on; memory whose
 * buffer was disposed is freed (ordered on `stream`, the last launch's) if a launch made it.
 */
export function releaseGraphMemory(memory: GraphMemory, launched: boolean, stream: Stream): void {
  memory.graphAlive = false;
  if (memory.state === 'pending') memory.state = 'abandoned';
  else if (memory.state === 'released' && launched) {
    stream.context.makeCurrent();
    check(driver().cuMemFreeAsync(memory.address, stream.ffiHandle), 'cuMemFreeAsync');
  }
}

function checkByteLength(byteLength: number): void {
  if (!Number.isSafeInteger(byteLength) || byteLength < 0) {
    throw new CudaArgumentError(`byteLength must be a non-negative integer, got ${byteLength}`);
  }
}
