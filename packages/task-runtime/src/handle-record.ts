import type { Context, DeviceBuffer, Stream } from '@cuda-tasks/cudadrv';
import type { CacheSettings } from './handle-options.js';
import { HandleWorkspaces, type WorkspaceHolders } from './handle-workspaces.js';
import { StreamBinding } from './stream-binding.js';

/**
 * A handle bound to a stream, as `HandleCache.bind()` gives it: a read-only view, one per
 * handle, handed out again at each call (so a call allocates nothing). It reads the handle's
 * state now: after the handle is bound elsewhere (another call, a `withStream`) it shows that
 * stream and workspace. Use it within the call it came from.
 */
export interface HandleBinding<H> {
  /** The library handle. */
  readonly handle: H;
  /** The stream it is bound to. */
  readonly stream: Stream | undefined;
  /** Its workspace on that stream (undefined without a workspace option, or of 0 bytes). */
  readonly workspace: DeviceBuffer | undefined;
}

/** One handle of a cache and its bookkeeping (the cache's own; callers get `view`). */
export class HandleRecord<H> {
  /** The library handle. */
  readonly handle: H;
  /** The context it was created in. */
  readonly context: Context;
  /** Its stream binding: setStream, the rebind-skip rule, the GPU-side hand-off. */
  readonly binding: StreamBinding;
  /** Its workspaces (undefined: the cache has no workspace option). */
  readonly workspaces: HandleWorkspaces<H> | undefined;
  /** What `bind()` hands out: the handle, its stream and workspace, nothing else. */
  readonly view: HandleBinding<H>;
  /** Tasks holding a lease on it now (more than one: shared past the bound). */
  leases = 0;
  /** The stream it was last bound to, kept after release: leases prefer a match. */
  lastBound: Stream | undefined;
  /** When it last went idle (performance.now()), for the spares' idle trim. */
  idleSince = 0;

  /** A record of `handle`, created in `context`, bound through `binding`. */
  constructor(
    handle: H,
    context: Context,
    binding: StreamBinding,
    workspaces: HandleWorkspaces<H> | undefined,
  ) {
    this.handle = handle;
    this.context = context;
    this.binding = binding;
    this.workspaces = workspaces;
    this.view = new BoundHandle(this);
  }

  /**
   * The record of `handle`, just created in `context` by a cache of `settings`: its stream
   * binding (the library's setStream, ordered, hand-off) and, given a workspace option, its
   * workspaces (counted per stream in the cache's `holders`).
   */
  static of<H>(
    handle: H,
    context: Context,
    settings: CacheSettings<H>,
    holders: WorkspaceHolders,
  ): HandleRecord<H> {
    const { setStream, workspace } = settings.options;
    const binding = new StreamBinding({
      context,
      setStream: (stream) => setStream(handle, stream),
      ordered: settings.ordered,
      handOff: settings.handOff,
    });
    const workspaces =
      workspace === undefined
        ? undefined
        : new HandleWorkspaces(handle, workspace, binding, holders, settings.maxWorkspaces);
    return new HandleRecord(handle, context, binding, workspaces);
  }
}

/** The view of a record that `bind()` hands out: getters only, the record out of reach. */
class BoundHandle<H> implements HandleBinding<H> {
  readonly #record: HandleRecord<H>;

  constructor(record: HandleRecord<H>) {
    this.#record = record;
  }

  get handle(): H {
    return this.#record.handle;
  }

  get stream(): Stream | undefined {
    return this.#record.binding.stream;
  }

  get workspace(): DeviceBuffer | undefined {
    return this.#record.workspaces?.bound;
  }
}
