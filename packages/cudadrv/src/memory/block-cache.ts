import type { Context } from '../context/device.js';
import { check, driver } from '../driver.js';
import { cudadrvState } from '../process-state.js';
import type { Stream, StreamResources } from '../stream/stream.js';

/**
 * Small freed blocks, kept per stream for the next allocation of the same size class on the
 * same stream (what PyTorch's and CuPy's caching allocators do; the stream-ordered pool still
 * supplies every block and gets it back once evicted).
 *
 * A block disposed on stream S is reused only on S: work on S after the reuse is ordered after
 * the block's earlier uses by the stream itself (the readers on other streams were made S's
 * dependencies when the block was disposed), exactly as the pool's own stream-ordered reuse
 * would order it. So allocating and disposing a small buffer in a loop makes no driver call.
 *
 * Bounds: blocks up to `CACHE_MAX_BLOCK` bytes, at most `CACHE_BYTES_PER_STREAM` bytes per
 * stream; only streams this process owns (a wrapped stream may be destroyed behind our back),
 * and only blocks of the stream's own context. The blocks go back to the pool (cuMemFreeAsync
 * on their stream) when the stream is disposed or collected, on out-of-memory, on
 * `MemoryPool.releaseCached()`, and on `releaseStreamCache(stream)` (the task runtime's trim
 * of idle pool streams).
 */

/** Blocks up to this many bytes are cached. */
export const CACHE_MAX_BLOCK = 64 * 1024;
/** Bytes of blocks cached per stream at most. */
export const CACHE_BYTES_PER_STREAM = 4 * 1024 * 1024;
/** Size classes: cached blocks are allocated rounded up to a multiple of this. */
const GRANULE = 512;

/**
 * One stream's cached blocks. It hangs on the stream's resources (`Stream.resources`), which
 * the stream's finalizer holds: a stream the GC takes without dispose() gives them back there,
 * and nothing here keeps a stream alive.
 */
class StreamBlocks {
  bytes = 0;
  /** Addresses (as `ffiValue` gives them) by size class. */
  readonly bySize = new Map<number, (number | bigint)[]>();
  readonly resources: StreamResources;
  /** The stream, weakly (whether it captures a graph, for `releaseCached`). */
  readonly stream: WeakRef<Stream>;

  constructor(stream: Stream) {
    this.resources = stream.resources;
    this.stream = new WeakRef(stream);
  }

  /** Frees every block, ordered on the stream (it runs before the stream is destroyed). */
  release(): void {
    if (this.bytes === 0) return;
    holding.delete(this);
    this.bytes = 0;
    // A block's last user may be a launch the issue engine has not issued yet: it goes first.
    this.stream.deref()?.waitForIssue();
    const resources = this.resources;
    resources.context.makeCurrent();
    const api = driver();
    for (const list of this.bySize.values()) {
      for (const address of list) {
        check(api.cuMemFreeAsync(address, resources.ffiHandle), 'cuMemFreeAsync');
      }
      list.length = 0;
    }
  }
}

// Process-wide (one per compatible loaded copy; they share the streams): the streams' blocks
// that hold some, for `releaseCached` and the statistics. No reference to a Stream: a block
// set refers to its stream's resources, and to the stream only weakly.
const { holding } = cudadrvState('block-cache', () => ({ holding: new Set<StreamBlocks>() }));

/** The size class of a cacheable allocation of `byteLength` bytes; 0 when it is not cacheable. */
export function cacheSize(byteLength: number): number {
  return byteLength > 0 && byteLength <= CACHE_MAX_BLOCK
    ? Math.ceil(byteLength / GRANULE) * GRANULE
    : 0;
}

/** A cached block of `size` bytes freed on `stream`, or undefined. */
export function takeCached(stream: Stream, size: number): number | bigint | undefined {
  const blocks = stream.resources.cachedBlocks as StreamBlocks | null;
  if (blocks === null || blocks.bytes === 0) return undefined;
  const address = blocks.bySize.get(size)?.pop();
  if (address === undefined) return undefined;
  blocks.bytes -= size;
  if (blocks.bytes === 0) holding.delete(blocks);
  return address;
}

/**
 * Keeps the block for the next allocation of `size` on `stream`; false (the caller frees it)
 * when the stream is not ours or is disposed, or its cache is full. The caller makes sure the
 * block is of the stream's context (memory.ts frees other blocks in their own context).
 */
export function putCached(stream: Stream, size: number, address: number | bigint): boolean {
  if (!stream.owned || stream.disposed) return false;
  const resources = stream.resources;
  let blocks = resources.cachedBlocks as StreamBlocks | null;
  if (blocks === null) resources.cachedBlocks = blocks = new StreamBlocks(stream);
  if (blocks.bytes + size > CACHE_BYTES_PER_STREAM) return false;
  let list = blocks.bySize.get(size);
  if (list === undefined) blocks.bySize.set(size, (list = []));
  list.push(address);
  if (blocks.bytes === 0) holding.add(blocks);
  blocks.bytes += size;
  return true;
}

/**
 * Frees every cached block of `context` (every context when none is given), but those of
 * capturing streams: a free on a capturing stream would be captured (and invalidate the
 * capture), so those blocks stay until the next release.
 */
export function releaseCached(context?: Context): void {
  for (const blocks of [...holding]) {
    if (context !== undefined && blocks.resources.context !== context) continue;
    const stream = blocks.stream.deref();
    if (stream !== undefined && stream.capture !== null) continue;
    blocks.release();
  }
}

/**
 * Frees `stream`'s cached blocks (ordered on it; nothing waits). The task runtime calls it for
 * pool streams that have been idle a while, so an idle stream holds no memory. Returns the
 * bytes given back.
 */
export function releaseStreamCache(stream: Stream): number {
  const blocks = stream.resources.cachedBlocks as StreamBlocks | null;
  if (blocks === null || stream.capture !== null) return 0;
  const bytes = blocks.bytes;
  blocks.release();
  return bytes;
}

/** Bytes of blocks cached for `context`'s streams. */
export function cachedBytes(context: Context): number {
  let bytes = 0;
  for (const blocks of holding) if (blocks.resources.context === context) bytes += blocks.bytes;
  return bytes;
}
