import type { Context } from '@cuda-tasks/cudadrv';
import { throwCollected } from './handle-workspaces.js';

/** What a `SharedHandle` needs of a library: how to make and destroy its context's handle. */
export interface SharedHandleOptions<H> {
  /** Library name for diagnostics, e.g. 'cublasLt'. */
  name: string;
  /** Creates the handle of `context`; the caller of `get` has the context current. */
  create(context: Context): H;
  /** Destroys a handle and what hangs off it (cached plans). */
  destroy(handle: H, context: Context): void;
}

/**
 * The kit's second kind of handle: one per context, shared by every task and stream of that
 * context, for a library whose handle holds no stream (every call takes the stream as an
 * argument) and no per-call state, so tasks need no lease: cuBLASLt's handle with its cached
 * matmul plans, cuSPARSELt's. Made at the first `get` in a context, kept until `release()`.
 * A `HandleCache` is the other kind (a handle per task, bound to its stream); a library may
 * have both, one of each for its two handles (cuBLAS: its handles and cuBLASLt's).
 * @example
 * const lt = new SharedHandle<bigint>({
 *   name: 'cublasLt',
 *   create: () => createLtHandle(),
 *   destroy: (handle) => check(cublasLt().cublasLtDestroy(handle), 'cublasLtDestroy'),
 * });
 * stream.context.makeCurrent();
 * const handle = lt.get(stream.context); // made once per context
 */
export class SharedHandle<H> {
  /** The name given in the options. */
  readonly name: string;
  readonly #options: SharedHandleOptions<H>;
  readonly #handles = new Map<Context, H>();

  /** A shared handle per context, of the library that `options` describes. */
  constructor(options: SharedHandleOptions<H>) {
    this.name = options.name;
    this.#options = options;
  }

  /**
   * The handle of `context` (which the caller has made current), created at the first call.
   * Allocates nothing once it exists.
   */
  get(context: Context): H {
    let handle = this.#handles.get(context);
    if (handle === undefined) {
      handle = this.#options.create(context);
      this.#handles.set(context, handle);
    }
    return handle;
  }

  /** The handles made so far, with their contexts (for statistics). */
  entries(): IterableIterator<[Context, H]> {
    return this.#handles.entries();
  }

  /** How many contexts have a handle now. */
  get size(): number {
    return this.#handles.size;
  }

  /**
   * Destroys every handle (the next `get` makes one again); returns how many there were. Each
   * destroy in its own try: a handle is forgotten even when its destroy throws, and what
   * failed is thrown after all are gone.
   */
  release(): number {
    const count = this.#handles.size;
    const errors: unknown[] = [];
    for (const [context, handle] of this.#handles) {
      this.#handles.delete(context);
      try {
        this.#options.destroy(handle, context);
      } catch (error) {
        errors.push(error);
      }
    }
    throwCollected(errors, `${this.name}: destroying shared handles failed`);
    return count;
  }
}
