import type { Context } from '../context/device.js';
import { check, driver } from '../driver.js';
import { cudadrvState } from '../process-state.js';
import { onStreamDisposed, type Stream } from '../stream/stream.js';

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
 * stream; only streams this process owns (a wrapped stream may be destroyed behind our back).
 * The blocks go back to the pool (cuMemFreeAsync on their stream) when the stream is disposed,
 * on out-of-memory, on `MemoryPool.releaseCached()`, and on `releaseStreamCache(stream)` (the
 * task runtime's trim of idle pool streams).
 */

/** Blocks up to this many bytes are cached. */
export const CACHE_MAX_BLOCK = 64 * 1024;
/** Bytes of blocks cached per stream at most. */
export const CACHE_BYTES_PER_STREAM = 4 * 1024 * 1024;
/** Size classes: cached blocks are allocated rounded up to a multiple of this. */
const GRANULE = 512;

interface StreamBlocks {
  bytes: number;
  /** Addresses (as `ffiValue` gives them) by size class. */
  readonly bySize: Map<number, (number | bigint)[]>;
}

// Process-wide (one per compatible loaded copy): `cached` holds strong references, an entry
// lives while it holds blocks and goes when it is emptied; `closing` holds the streams whose
// dispose() has begun: the disposed listeners run before the stream is marked disposed, and a
// block one of them frees must not be cached on a stream about to go.
const { cached, closing } = cudadrvState('block-cache', () => ({
  cached: new Map<Stream, StreamBlocks>(),
  closing: new WeakSet<Stream>(),
}));

/** The size class of a cacheable allocation of `byteLength` bytes; 0 when it is not cacheable. */
export function cacheSize(byteLength: number): number {
  return byteLength > 0 && byteLength <= CACHE_MAX_BLOCK
    ? Math.ceil(byteLength / GRANULE) * GRANULE
    : 0;
}

/** A cached block of `size` bytes freed on `stream`, or undefined. */
export function takeCached(stream: Stream, size: number): number | bigint | undefined {
  const blocks = cached.get(stream);
  if (blocks === undefined) return undefined;
  const list = blocks.bySize.get(size);
  const address = list?.pop();
  if (address === undefined) return undefined;
  blocks.bytes -= size;
  if (blocks.bytes === 0) cached.delete(stream);
  return address;
}

/**
 * Keeps the block for the next allocation of `size` on `stream`; false (the caller frees it)
 * when the stream is not ours, is disposed or being disposed, or its cache is full.
 */
export function putCached(stream: Stream, size: number, address: number | bigint): boolean {
  if (!stream.owned || stream.disposed || closing.has(stream)) return false;
  let blocks = cached.get(stream);
  if (blocks === undefined) {
    blocks = { bytes: 0, bySize: new Map() };
    cached.set(stream, blocks);
  }
  if (blocks.bytes + size > CACHE_BYTES_PER_STREAM) return false;
  let list = blocks.bySize.get(size);
  if (list === undefined) blocks.bySize.set(size, (list = []));
  list.push(address);
  blocks.bytes += size;
  return true;
}

/** Frees `stream`'s cached blocks (ordered on it). */
function release(stream: Stream, blocks: StreamBlocks): void {
  cached.delete(stream);
  stream.context.makeCurrent();
  const api = driver();
  for (const list of blocks.bySize.values()) {
    for (const address of list)
      check(api.cuMemFreeAsync(address, stream.ffiHandle), 'cuMemFreeAsync');
  }
}

/** Frees every cached block of `context` (every context when none is given), but those of capturing streams. */
export function releaseCached(context?: Context): void {
  for (const [stream, blocks] of [...cached]) {
    // A free on a capturing stream would be captured (and invalidate the capture): those
    // blocks stay until the next release.
    if (stream.capture !== null) continue;
    if (context === undefined || stream.context === context) release(stream, blocks);
  }
}

/**
 * Frees `stream`'s cached blocks (ordered on it; nothing waits). The task runtime calls it for
 * pool streams that have been idle a while, so an idle stream holds no memory. Returns the
 * bytes given back.
 */
export function releaseStreamCache(stream: Stream): number {
  const blocks = cached.get(stream);
  if (blocks === undefined) return 0;
  const bytes = blocks.bytes;
  release(stream, blocks);
  return bytes;
}

/** Bytes of blocks cached for `context`'s streams. */
export function cachedBytes(context: Context): number {
  let bytes = 0;
  for (const [stream, blocks] of cached) if (stream.context === context) bytes += blocks.bytes;
  return bytes;
}

// A stream being disposed gives its blocks back (it is still alive when listeners run), and
// takes no more: a block that another listener frees after this one is freed at once.
onStreamDisposed((stream) => {
  closing.add(stream);
  const blocks = cached.get(stream);
  if (blocks !== undefined) release(stream, blocks);
});
