/**
 * What each request's task is given besides its work: a priority (small requests go first)
 * and an AbortSignal (a client that went away, or a request past its route's deadline, stops
 * its GPU work). Both go to `task(fn, { priority, signal })`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { StreamPriority } from '@cuda-tasks/cudadrv';
import { RequestError } from './validation.js';

/**
 * How long a request of each route may take, request body included, in milliseconds: past
 * it, its task is cancelled and it is answered 503. Generous for the sizes the service accepts;
 * `createServer({ deadlinesMs })` changes them (`Infinity`: no deadline).
 */
export const DEFAULT_DEADLINES_MS: Readonly<Record<string, number>> = {
  '/solve': 30_000,
  '/solve-random': 30_000,
  '/matmul': 30_000,
  '/search': 10_000,
};

/** The largest matrix dimension of a request that counts as small (high priority). */
export const SMALL_REQUEST_MAX_N = 512;

/** A validated body's field, as a number (0 when absent). */
function dimension(body: unknown, field: string): number {
  const value = (body as Record<string, unknown> | null)?.[field];
  return typeof value === 'number' ? value : 0;
}

/**
 * The priority of a request's task, from its route and its (validated) body: 'high' for small
 * work, whose latency a long request in front of it would multiply (a solve or product whose
 * dimensions are all at most `SMALL_REQUEST_MAX_N`, and every search: one GEMV and a top-k
 * over the resident embeddings), 'normal' for the rest.
 * @example requestPriority('/solve-random', { n: 256, seed: 1 }); // 'high'
 */
export function requestPriority(path: string, body: unknown): StreamPriority {
  switch (path) {
    case '/search':
      return 'high';
    case '/solve':
    case '/solve-random':
      return dimension(body, 'n') <= SMALL_REQUEST_MAX_N ? 'high' : 'normal';
    case '/matmul':
      return Math.max(dimension(body, 'm'), dimension(body, 'k'), dimension(body, 'n')) <=
        SMALL_REQUEST_MAX_N
        ? 'high'
        : 'normal';
    default:
      return 'normal';
  }
}

/** Device memory each GPU request is counted for beyond its arrays: workspaces, pool rounding. */
export const GPU_BYTES_PER_REQUEST = 2 * 1024 * 1024;

/**
 * The device memory a request's GPU work is estimated to hold at its peak, from its route and
 * its (validated) body, for the service's bound on GPU bytes in flight: `/solve` A, its LU
 * copy, B and X; `/solve-random` A, its LU copy, b, x and the residual; `/matmul` A, B and C
 * (all float64); `/search` the scores of every row and the top-k's scratch (float32, about
 * three values a row; `index.rows` of the shared index, default 1,000,000). Each adds
 * `GPU_BYTES_PER_REQUEST`.
 * @example estimatedGpuBytes('/solve-random', { n: 2048, seed: 1 }); // 69,263,360 (about 66 MiB)
 */
export function estimatedGpuBytes(
  path: string,
  body: unknown,
  index: { rows?: number } = {},
): number {
  const n = dimension(body, 'n');
  let bytes: number;
  switch (path) {
    case '/solve': {
      const k = dimension(body, 'k') || 1;
      bytes = 8 * (2 * n * n + 2 * n * k) + 4 * n;
      break;
    }
    case '/solve-random':
      bytes = 8 * (2 * n * n + 3 * n) + 4 * n;
      break;
    case '/matmul': {
      const m = dimension(body, 'm');
      const k = dimension(body, 'k');
      bytes = 8 * (m * k + k * n + m * n);
      break;
    }
    case '/search':
      bytes = 12 * (index.rows ?? 1_000_000);
      break;
    default:
      bytes = 0;
  }
  return bytes + GPU_BYTES_PER_REQUEST;
}

/** A request's cancellation: the signal its task gets, and `done()` once it is answered. */
export interface RequestCancellation {
  /**
   * Aborts when the client goes away (a 499 RequestError), the deadline passes (503), or
   * `cancel` is called.
   */
  readonly signal: AbortSignal;
  /** Aborts the signal with `reason` (the service's shutdown), unless it already aborted. */
  cancel(reason: RequestError): void;
  /** The answer is out (or given up on): clears the deadline's timer and the listener. */
  done(): void;
}

/**
 * The AbortSignal of a request (named `what` in messages): aborted with a RequestError of
 * status 499 (nginx's "client closed request") when the connection closes before the answer
 * was sent, or of status 503 once `deadlineMs` have passed. Call `done()` when the answer is
 * out; a request answered in time never aborts.
 * @example
 * const cancellation = requestSignal(request, response, 30_000, 'POST /solve');
 * try { await task(run, { signal: cancellation.signal }); } finally { cancellation.done(); }
 */
export function requestSignal(
  request: IncomingMessage,
  response: ServerResponse,
  deadlineMs: number,
  what: string,
): RequestCancellation {
  const controller = new AbortController();
  const onClose = () => {
    if (response.writableFinished) return;
    controller.abort(
      new RequestError(499, `${what}: the client closed the connection before the answer`),
    );
  };
  response.once('close', onClose);
  // A connection already gone when the request is looked at never gets an answer either.
  if (request.destroyed || response.destroyed) onClose();
  let timer: ReturnType<typeof setTimeout> | undefined;
  if (Number.isFinite(deadlineMs)) {
    timer = setTimeout(() => {
      controller.abort(
        new RequestError(
          503,
          `${what} ran past its deadline of ${deadlineMs} ms and was cancelled`,
        ),
      );
    }, deadlineMs);
    timer.unref?.();
  }
  return {
    signal: controller.signal,
    cancel(reason) {
      if (!controller.signal.aborted) controller.abort(reason);
    },
    done() {
      if (timer !== undefined) clearTimeout(timer);
      response.off('close', onClose);
    },
  };
}
