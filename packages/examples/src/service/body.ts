/**
 * Reading request bodies with bounds: on the size of one body, on the bytes buffered across
 * all the bodies being read at once, and on the time to read one (its own timeout, and the
 * request's signal, which carries the route's deadline), and on its rate: after a first second
 * of grace, each second must bring at least a minimum of bytes (64 KiB by default, or the rest of
 * the body). A client that sends half a body and stalls, or trickles it, is answered when the
 * first of these runs out, instead of holding its connection and its buffer for Node's default
 * of five minutes. Only bytes received count against the shared budget: a declared
 * Content-Length holds none of it.
 */
import type { IncomingMessage } from 'node:http';
import { RequestError } from './validation.js';

/** The bytes of request bodies buffered at once, across requests: reserved as they arrive, then released. */
export class BodyBudget {
  /** The most bytes buffered at once. */
  readonly limit: number;
  #used = 0;

  constructor(limit: number) {
    if (!(limit >= 1)) {
      throw new RangeError(`BodyBudget: limit must be a number >= 1, got ${String(limit)}`);
    }
    this.limit = limit;
  }

  /** Bytes reserved now. */
  get used(): number {
    return this.#used;
  }

  /** Reserves `bytes` if they fit under the limit; says whether they did. */
  reserve(bytes: number): boolean {
    if (this.#used + bytes > this.limit) return false;
    this.#used += bytes;
    return true;
  }

  /** Gives back `bytes` reserved earlier. */
  release(bytes: number): void {
    this.#used = Math.max(0, this.#used - bytes);
  }
}

/** Options of `readBody`. */
export interface ReadBodyOptions {
  /** The largest body accepted: a larger one is a 413. */
  maxBytes: number;
  /** Where the body's bytes are counted while it is read; past its limit, a 503. */
  budget?: BodyBudget;
  /** The most time to read the body, ms: past it, a 408. */
  timeoutMs?: number;
  /** Aborts the read with the signal's reason (the route's deadline, the client leaving). */
  signal?: AbortSignal;
  /**
   * The least bytes a second the body must arrive at after `rateGraceMs` (default 65,536; 0:
   * no minimum): each second after the grace must bring this many bytes, or the rest of the body
   * where less is left, else a 408.
   */
  minBytesPerSecond?: number;
  /** How long the body may take before its rate is checked, ms (default 1000). */
  rateGraceMs?: number;
  /**
   * Keep a body that was read whole counted in `budget` (default false): the caller gives its
   * `length` back with `budget.release` once done with it (after parsing it, say).
   */
  keepReserved?: boolean;
}

/** The least bytes of a `BodyBytes` segment (but for a body known to be shorter). */
const MIN_SEGMENT_BYTES = 64 * 1024;

/** The least bytes of a chunk that `BodyBytes` keeps as a segment of its own instead of copying it. */
export const MIN_ADOPTED_BYTES = 16 * 1024;

/** Whether `chunk` spans its whole ArrayBuffer (nothing else of it to share with). */
function ownsBuffer(chunk: Uint8Array): boolean {
  return chunk.byteOffset === 0 && chunk.buffer.byteLength === chunk.length;
}

/**
 * A request body's bytes as they arrive, as segments that each own their ArrayBuffer (so that
 * they can be transferred to a worker thread). A chunk of at least `MIN_ADOPTED_BYTES` that
 * spans its whole ArrayBuffer (Node's request chunks do: each is a copy of its own) becomes a
 * segment as it is, when no segment has room left: `append` takes it over, and the caller must
 * not use it after. Other chunks are copied into segments that are each as large as the bytes
 * so far (at least 64 KiB, at most what the Content-Length leaves), so such a body takes a few
 * segments, never more than twice its bytes, and the copying is spread over its reads instead
 * of one concatenation at its end.
 */
export class BodyBytes {
  /** Bytes received. */
  length = 0;
  readonly #expected: number | undefined;
  readonly #segments: Uint8Array[] = [];
  /** Bytes filled in the last segment. */
  #filled = 0;

  /** `expected`: the body's declared length, if known. */
  constructor(expected?: number) {
    this.#expected = expected;
  }

  /** Adds `chunk` after the bytes so far: taken over as a segment, or copied (see the class). */
  append(chunk: Uint8Array): void {
    const last = this.#segments.at(-1);
    if (
      (last === undefined || this.#filled === last.length) &&
      chunk.length >= MIN_ADOPTED_BYTES &&
      ownsBuffer(chunk)
    ) {
      this.#segments.push(chunk);
      this.#filled = chunk.length;
      this.length += chunk.length;
      return;
    }
    let offset = 0;
    while (offset < chunk.length) {
      let segment = this.#segments.at(-1);
      if (segment === undefined || this.#filled === segment.length) {
        const left = chunk.length - offset;
        const grow = Math.max(MIN_SEGMENT_BYTES, this.length);
        const size =
          this.#expected === undefined || this.#expected <= this.length
            ? Math.max(left, grow)
            : Math.max(left, Math.min(this.#expected - this.length, grow));
        segment = new Uint8Array(size);
        this.#segments.push(segment);
        this.#filled = 0;
      }
      const count = Math.min(segment.length - this.#filled, chunk.length - offset);
      segment.set(chunk.subarray(offset, offset + count), this.#filled);
      this.#filled += count;
      this.length += count;
      offset += count;
    }
  }

  /** The bytes, in order: the segments (the last one cut to what it holds). */
  segments(): Uint8Array[] {
    const segments = this.#segments.slice();
    const last = segments.length - 1;
    if (last >= 0 && this.#filled < segments[last]!.length) {
      segments[last] = segments[last]!.subarray(0, this.#filled);
    }
    return segments;
  }

  /** The bytes as one Buffer: over the segment itself where there is one, else a copy. */
  toBuffer(): Buffer {
    const segments = this.segments();
    if (segments.length === 1) {
      const only = segments[0]!;
      return Buffer.from(only.buffer, only.byteOffset, only.length);
    }
    return Buffer.concat(segments, this.length);
  }
}

/** `ReadBodyOptions.minBytesPerSecond`'s default: 64 KiB/s. */
export const DEFAULT_MIN_BODY_BYTES_PER_SECOND = 64 * 1024;

/** The window the body's rate is measured over, ms. */
const RATE_WINDOW_MS = 1000;

function busy(budget: BodyBudget): RequestError {
  return new RequestError(
    503,
    `the service is busy: ${budget.used} bytes of request bodies being read already, at most ${budget.limit} at once; retry later`,
    { retryAfterSeconds: 1 },
  );
}

/**
 * Reads a request body into `BodyBytes` (owned segments, ready to transfer). Refuses with a RequestError: 413 for a body over `maxBytes` (by its
 * Content-Length, or as it streams in), 503 (Retry-After: 1) when the budget of bytes being read
 * has no room for the bytes that arrived, 408 past `timeoutMs` or when, after `rateGraceMs`, a
 * second brings fewer than `minBytesPerSecond` (or the rest of the body), the signal's reason
 * when it aborts, 400 when the stream fails. Only bytes received are counted against the
 * budget; they go back to it once the read settles, unless `keepReserved` keeps a body read
 * whole counted until its caller releases it. A refused body is left unread: answer with
 * `connection: close`.
 */
export function readBody(request: IncomingMessage, options: ReadBodyOptions): Promise<BodyBytes> {
  const { maxBytes, budget, timeoutMs, signal } = options;
  const minRate = options.minBytesPerSecond ?? DEFAULT_MIN_BODY_BYTES_PER_SECOND;
  const rateGraceMs = options.rateGraceMs ?? 1000;
  const declared = Number(request.headers['content-length']);
  const known = request.headers['content-length'] !== undefined && Number.isFinite(declared);
  if (known && declared > maxBytes) {
    return Promise.reject(
      new RequestError(
        413,
        `the request body is ${declared} bytes; this service accepts at most ${maxBytes}`,
      ),
    );
  }
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolveBody, reject) => {
    let bytes: BodyBytes | undefined = new BodyBytes(known ? declared : undefined);
    let received = 0;
    let reserved = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let rateTimer: ReturnType<typeof setTimeout> | undefined;
    let windowStart = 0;
    const settle = (error: unknown, body?: BodyBytes) => {
      request.off('data', onData);
      request.off('end', onEnd);
      request.off('error', onError);
      signal?.removeEventListener('abort', onAbort);
      if (timer !== undefined) clearTimeout(timer);
      if (rateTimer !== undefined) clearTimeout(rateTimer);
      if (body === undefined || options.keepReserved !== true) budget?.release(reserved);
      reserved = 0;
      bytes = undefined;
      if (body === undefined) reject(error);
      else resolveBody(body);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > maxBytes) {
        settle(
          new RequestError(
            413,
            `the request body is larger than ${maxBytes} bytes, the most this service accepts`,
          ),
        );
        return;
      }
      if (budget !== undefined) {
        if (!budget.reserve(chunk.length)) {
          settle(busy(budget));
          return;
        }
        reserved += chunk.length;
      }
      bytes!.append(chunk);
    };
    const onEnd = () => settle(undefined, bytes);
    // A client that disconnects mid-body: reject instead of leaving an unhandled 'error'.
    const onError = (error: Error) =>
      settle(new RequestError(400, `reading the body failed: ${error.message}`));
    const onAbort = () => settle(signal!.reason);
    /** Each window after the grace must bring `minRate` bytes a second, or the rest of the body. */
    const checkRate = () => {
      const arrived = received - windowStart;
      const needed = (minRate * RATE_WINDOW_MS) / 1000;
      const left = known ? declared - windowStart : Number.POSITIVE_INFINITY;
      if (arrived < Math.min(needed, left)) {
        settle(
          new RequestError(
            408,
            `the request body arrived at ${Math.round((arrived * 1000) / RATE_WINDOW_MS)} bytes/s, below the minimum of ${minRate} bytes/s`,
          ),
        );
        return;
      }
      windowStart = received;
      rateTimer = setTimeout(checkRate, RATE_WINDOW_MS);
      rateTimer.unref?.();
    };
    request.on('data', onData);
    request.on('end', onEnd);
    request.on('error', onError);
    signal?.addEventListener('abort', onAbort, { once: true });
    if (timeoutMs !== undefined && Number.isFinite(timeoutMs)) {
      timer = setTimeout(
        () =>
          settle(new RequestError(408, `the request body did not arrive within ${timeoutMs} ms`)),
        timeoutMs,
      );
      timer.unref?.();
    }
    if (minRate > 0) {
      rateTimer = setTimeout(() => {
        windowStart = received;
        rateTimer = setTimeout(checkRate, RATE_WINDOW_MS);
        rateTimer.unref?.();
      }, rateGraceMs);
      rateTimer.unref?.();
    }
  });
}
