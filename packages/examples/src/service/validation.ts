/**
 * Request parsing and validation for the GPU HTTP service, as pure functions: nothing here
 * touches the GPU, so every rule is unit tested on plain values, and the server runs them
 * before any GPU call (a bad request never reaches CUDA).
 */

/** A request the service refuses: an HTTP status and a message for the `{ "error" }` body. */
export class RequestError extends Error {
  /** The HTTP status to answer with (400, 404, 405, 408, 413, 422, 503, ...). */
  readonly status: number;
  /** Seconds after which a retry may succeed (the `Retry-After` header), for a busy 503. */
  readonly retryAfterSeconds: number | undefined;

  constructor(status: number, message: string, options: { retryAfterSeconds?: number } = {}) {
    super(message);
    this.name = 'RequestError';
    this.status = status;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/** The largest finite float32, 3.4028234663852886e38. */
export const FLOAT32_MAX = 3.4028234663852886e38;

/** What the service accepts. */
export interface RequestLimits {
  /** Largest matrix dimension (n for /solve; m, k, n for /matmul; also k for /solve). */
  maxDimension: number;
  /** Largest request body in bytes. */
  maxBodyBytes: number;
}

/** 2048 x 2048 matrices, 64 MiB bodies. */
export const DEFAULT_LIMITS: Readonly<RequestLimits> = Object.freeze({
  maxDimension: 2048,
  maxBodyBytes: 64 * 1024 * 1024,
});

/** A validated `POST /solve` body: A (n x n) X = B (n x k), column-major. */
export interface SolveRequest {
  /** Rows and columns of A. */
  n: number;
  /** Right-hand sides: the columns of B (default 1). */
  k: number;
  /** A, n x n, column-major. */
  a: Float64Array;
  /** B, n x k, column-major. */
  b: Float64Array;
}

/** A validated `POST /solve-random` body: solve a random n x n system drawn from `seed`. */
export interface SolveRandomRequest {
  /** Size of the system. */
  n: number;
  /** Seed of the generator that draws A and b. */
  seed: number;
}

/** A validated `POST /matmul` body: C (m x n) = A (m x k) B (k x n), column-major. */
export interface MatmulRequest {
  /** Rows of A and C. */
  m: number;
  /** Columns of A, rows of B. */
  k: number;
  /** Columns of B and C. */
  n: number;
  /** A, m x k, column-major. */
  a: Float64Array;
  /** B, k x n, column-major. */
  b: Float64Array;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'string') {
    const text = value.length > 20 ? `${value.slice(0, 20)}...` : value;
    return `the string ${JSON.stringify(text)}`;
  }
  if (typeof value === 'object') return 'an object';
  return String(value);
}

/**
 * Parses a request body as JSON. An empty body or invalid JSON is a 400 that says so.
 * @example parseJson(Buffer.from('{"n": 2}')); // { n: 2 }
 */
export function parseJson(body: Buffer | string): unknown {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  if (text.trim().length === 0) {
    throw new RequestError(400, 'the request body is empty: send a JSON object');
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new RequestError(400, `the request body is not valid JSON: ${(error as Error).message}`);
  }
}

function requireObject(
  body: unknown,
  route: string,
  fields: readonly string[],
): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new RequestError(
      400,
      `${route}: the body must be a JSON object with fields ${fields.join(', ')}; got ${describe(body)}`,
    );
  }
  const record = body as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (!fields.includes(key)) {
      throw new RequestError(
        400,
        `${route}: unknown field "${key}" (the fields are ${fields.join(', ')})`,
      );
    }
  }
  return record;
}

function dimension(
  record: Record<string, unknown>,
  route: string,
  name: string,
  limits: RequestLimits,
  fallback?: number,
): number {
  const value = record[name];
  if (value === undefined && fallback !== undefined) return fallback;
  if (value === undefined) throw new RequestError(400, `${route}: missing field "${name}"`);
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new RequestError(
      400,
      `${route}: "${name}" must be a positive integer, got ${describe(value)}`,
    );
  }
  if (value > limits.maxDimension) {
    throw new RequestError(
      400,
      `${route}: "${name}" = ${value} is too large: this service accepts dimensions up to ${limits.maxDimension}`,
    );
  }
  return value;
}

function numbers(
  record: Record<string, unknown>,
  route: string,
  name: string,
  length: number,
  shape: string,
): Float64Array {
  const value = record[name];
  if (value === undefined) throw new RequestError(400, `${route}: missing field "${name}"`);
  if (!Array.isArray(value)) {
    throw new RequestError(
      400,
      `${route}: "${name}" must be an array of ${shape} = ${length} numbers (column-major), got ${describe(value)}`,
    );
  }
  if (value.length !== length) {
    throw new RequestError(
      400,
      `${route}: "${name}" must hold ${shape} = ${length} numbers (column-major), got ${value.length}`,
    );
  }
  const out = new Float64Array(length);
  for (let i = 0; i < length; i++) {
    const element = value[i];
    if (typeof element !== 'number' || !Number.isFinite(element)) {
      throw new RequestError(
        400,
        `${route}: "${name}"[${i}] must be a finite number, got ${describe(element)}`,
      );
    }
    out[i] = element;
  }
  return out;
}

/**
 * Validates a `POST /solve` body `{ n, a, b, k? }`: A is n x n, B is n x k (k defaults to
 * 1), both column-major arrays of finite numbers. Throws a 400 RequestError naming the field.
 * @example
 * parseSolveRequest({ n: 2, a: [4, 1, 2, 3], b: [1, 2] }); // { n: 2, k: 1, a, b }
 */
export function parseSolveRequest(
  body: unknown,
  limits: RequestLimits = DEFAULT_LIMITS,
): SolveRequest {
  const route = 'POST /solve';
  const record = requireObject(body, route, ['n', 'a', 'b', 'k']);
  const n = dimension(record, route, 'n', limits);
  const k = dimension(record, route, 'k', limits, 1);
  const a = numbers(record, route, 'a', n * n, 'n*n');
  const b = numbers(
    record,
    route,
    'b',
    n * k,
    record.k === undefined ? 'n*k (k defaults to 1)' : 'n*k',
  );
  return { n, k, a, b };
}

/**
 * Validates a `POST /matmul` body `{ m, k, n, a, b }`: A is m x k, B is k x n, column-major
 * arrays of finite numbers. Throws a 400 RequestError naming the field.
 * @example
 * parseMatmulRequest({ m: 1, k: 2, n: 1, a: [1, 2], b: [3, 4] }); // C = [11]
 */
export function parseMatmulRequest(
  body: unknown,
  limits: RequestLimits = DEFAULT_LIMITS,
): MatmulRequest {
  const route = 'POST /matmul';
  const record = requireObject(body, route, ['m', 'k', 'n', 'a', 'b']);
  const m = dimension(record, route, 'm', limits);
  const k = dimension(record, route, 'k', limits);
  const n = dimension(record, route, 'n', limits);
  const a = numbers(record, route, 'a', m * k, 'm*k');
  const b = numbers(record, route, 'b', k * n, 'k*n');
  return { m, k, n, a, b };
}

/**
 * Validates a `POST /solve-random` body `{ n, seed }`: the server draws A (n x n) and b (n)
 * uniform in [0, 1) with cuRAND from `seed` (an integer in 0..2^53-1), so the body stays a few
 * bytes while the GPU does an n x n LU solve. Throws a 400 RequestError naming the field.
 * @example parseSolveRandomRequest({ n: 1024, seed: 7 }); // { n: 1024, seed: 7 }
 */
export function parseSolveRandomRequest(
  body: unknown,
  limits: RequestLimits = DEFAULT_LIMITS,
): SolveRandomRequest {
  const route = 'POST /solve-random';
  const record = requireObject(body, route, ['n', 'seed']);
  const n = dimension(record, route, 'n', limits);
  const seed = record.seed;
  if (seed === undefined) throw new RequestError(400, `${route}: missing field "seed"`);
  if (typeof seed !== 'number' || !Number.isSafeInteger(seed) || seed < 0) {
    throw new RequestError(
      400,
      `${route}: "seed" must be an integer in 0..2^53-1, got ${describe(seed)}`,
    );
  }
  return { n, seed };
}

/** The most neighbours `POST /search` returns. */
export const MAX_SEARCH_K = 100;

/** A validated `POST /search` body: the `k` embeddings most similar to `query`. */
export interface SearchRequest {
  /** The query vector (the embeddings' dimension), as float32. */
  query: Float32Array;
  /** How many neighbours, 1..100 (default 10). */
  k: number;
}

/**
 * Validates a `POST /search` body `{ query, k? }`: `query` an array of `dim` numbers finite in
 * float32 (a value that rounds to Infinity, such as 1e39, is refused), `k` an integer in 1..min(100, rows) (default 10). Anything else is a 400.
 * @example parseSearchRequest({ query: [1, 0], k: 1 }, 2, 10).k; // 1
 */
export function parseSearchRequest(body: unknown, dim: number, rows: number): SearchRequest {
  const route = 'POST /search';
  const record = requireObject(body, route, ['query', 'k']);
  const query = record.query;
  if (query === undefined) throw new RequestError(400, `${route}: missing field "query"`);
  if (!Array.isArray(query) || query.length !== dim) {
    throw new RequestError(
      400,
      `${route}: "query" must be an array of ${dim} numbers, got ${describe(query)}`,
    );
  }
  const values = new Float32Array(dim);
  for (let i = 0; i < dim; i++) {
    const value = query[i];
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      throw new RequestError(
        400,
        `${route}: "query"[${i}] must be a finite number, got ${describe(value)}`,
      );
    }
    values[i] = value;
    // Rounded to float32, a value past FLOAT32_MAX (and a little) becomes Infinity.
    if (!Number.isFinite(values[i]!)) {
      throw new RequestError(
        400,
        `${route}: "query"[${i}] = ${value} is outside the float32 range (magnitude at most ${FLOAT32_MAX})`,
      );
    }
  }
  const largest = Math.min(MAX_SEARCH_K, rows);
  const k = record.k ?? 10;
  if (typeof k !== 'number' || !Number.isInteger(k) || k < 1 || k > largest) {
    throw new RequestError(
      400,
      `${route}: "k" must be an integer in 1..${largest}, got ${describe(k)}`,
    );
  }
  return { query: values, k };
}

/** The routes whose JSON bodies `parseRequestBody` validates. */
export type BodyRoute = '/solve' | '/solve-random' | '/matmul' | '/search';

/** What validating a body needs besides the body: the limits and the search index's shape. */
export interface BodyContext {
  /** The dimensions and body size the service accepts. */
  limits: RequestLimits;
  /** The dimension of the search index's embeddings (`/search`'s query length). */
  searchDim: number;
  /** The rows of the search index (`/search`'s largest k is min(100, rows)). */
  searchRows: number;
}

/** A validated body of one of the `BodyRoute`s. */
export type ParsedBody = SolveRequest | SolveRandomRequest | MatmulRequest | SearchRequest;

/**
 * Decodes a request body (UTF-8), parses it as JSON and validates it for `path`: the route's
 * `parse*Request`, with its RequestError (400) for a bad body. The one function the service
 * runs on a body, inline or in a parse worker (parse-pool.ts), so both refuse alike.
 * @example parseRequestBody('/solve-random', Buffer.from('{"n":8,"seed":1}'), context); // { n: 8, seed: 1 }
 */
export function parseRequestBody(
  path: BodyRoute,
  body: Buffer | string,
  context: BodyContext,
): ParsedBody {
  const json = parseJson(body);
  switch (path) {
    case '/solve':
      return parseSolveRequest(json, context.limits);
    case '/solve-random':
      return parseSolveRandomRequest(json, context.limits);
    case '/matmul':
      return parseMatmulRequest(json, context.limits);
    case '/search':
      return parseSearchRequest(json, context.searchDim, context.searchRows);
    default:
      throw new RequestError(404, `no body route ${String(path)}`);
  }
}
