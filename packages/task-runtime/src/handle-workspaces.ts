import { DeviceBuffer, type Stream, type StreamCapture } from '@cuda-tasks/cudadrv';
import { CaptureWorkspaces } from './capture-workspaces.js';
import type { StreamBinding } from './stream-binding.js';

/** A per-(handle, stream) workspace: how big, and how the library is told about it. */
export interface HandleWorkspace<H> {
  /**
   * Bytes of workspace `handle` needs on `stream` (0: none). Read at each bind, so a changed
   * size applies at the next bind (call `invalidate()` to force one). While `stream` captures
   * a graph, the workspace is one the graph owns, allocated outside the capture (a library
   * that needs one to be captured, like cuBLAS, returns its size here even where it otherwise
   * uses its own).
   */
  bytes(handle: H, stream: Stream): number;
  /**
   * Hands the workspace to the library (cublasSetWorkspace, cufftSetWorkArea), or with
   * `undefined` tells it to use none / its own. Called after `setStream`, and whenever the
   * workspace the library has differs from the one for the bound stream.
   */
  set(handle: H, workspace: DeviceBuffer | undefined, stream: Stream): void;
  /**
   * Whether `setStream` makes the library forget its workspace (cuBLAS's cublasSetStream
   * does); then `set` runs after every `setStream`.
   */
  resetBySetStream?: boolean;
  /**
   * The most workspaces one handle holds, bound or spare (default 2, at least 1). A handle
   * bound to more streams at once (shared past the handle bound, or used through `withStream`)
   * takes over the workspace it used least recently on another stream, ordered after that
   * stream's work on the GPU.
   */
  maxWorkspacesPerHandle?: number;
  /**
   * How long an idle handle keeps its spare workspaces, ms (default 500; `Infinity`: until
   * the handle is destroyed, `releaseWorkspaces()` or `MemoryPool.releaseCached()`).
   */
  keepIdleMs?: number;
}

/** Workspaces one handle holds at most, by default. */
export const DEFAULT_MAX_WORKSPACES_PER_HANDLE = 2;
/** How long an idle handle keeps its spare workspaces by default, ms. */
export const DEFAULT_KEEP_IDLE_WORKSPACES_MS = 500;

/**
 * Per stream, how many handles of one cache hold a workspace there: a stream going back to
 * the pool where none does (nearly always) costs one lookup, not a walk over every handle.
 */
export class WorkspaceHolders {
  readonly #counts = new Map<Stream, number>();

  /** Whether a handle holds a workspace on `stream`. */
  has(stream: Stream): boolean {
    return this.#counts.has(stream);
  }

  /** Counts a handle more (`change` 1) or less (-1) holding a workspace on `stream`. */
  change(stream: Stream, change: 1 | -1): void {
    const holders = (this.#counts.get(stream) ?? 0) + change;
    if (holders > 0) this.#counts.set(stream, holders);
    else this.#counts.delete(stream);
  }
}

/** Where `HandleWorkspaces.count` adds a handle's workspaces. */
export interface WorkspaceCount {
  /** Workspaces, bound or spare. */
  workspaces: number;
  /** Their bytes. */
  workspaceBytes: number;
}

/**
 * The workspaces of one handle: one per stream it is bound to (so two streams never use one
 * at once), spares kept for its next binds, a graph-owned one per capture, and what the
 * library was last handed. At most `max` per handle, bound or spare: past it a bind takes
 * over the workspace used least recently on another stream, behind a GPU-side wait for that
 * stream's work. Every free is ordered on the stream the workspace was used on last.
 */
export class HandleWorkspaces<H> {
  readonly #handle: H;
  readonly #options: HandleWorkspace<H>;
  readonly #binding: StreamBinding;
  readonly #holders: WorkspaceHolders;
  readonly #max: number;
  readonly #captures = new CaptureWorkspaces();
  /** Per stream bound to, least recently bound first. */
  #byStream: Map<Stream, DeviceBuffer> | undefined;
  /** Bound to no stream; each was last used on its `lastStream`, whose work a next one waits for. */
  readonly #spares: DeviceBuffer[] = [];
  /** The workspace on the bound stream. */
  #bound: DeviceBuffer | undefined;
  /** The workspace the library has: address and size (0: none or its own; -1: unknown). */
  #nativeAddress: number | bigint = 0;
  #nativeBytes = 0;

  /**
   * The workspaces of `handle`, whose stream is `binding`'s; `holders` is the count per stream
   * shared by the handles of one cache; `max` the most it holds (at least 1).
   */
  constructor(
    handle: H,
    options: HandleWorkspace<H>,
    binding: StreamBinding,
    holders: WorkspaceHolders,
    max: number,
  ) {
    this.#handle = handle;
    this.#options = options;
    this.#binding = binding;
    this.#holders = holders;
    this.#max = max;
  }

  /** The workspace on the bound stream (undefined: unbound, or 0 bytes there). */
  get bound(): DeviceBuffer | undefined {
    return this.#bound;
  }

  /** The workspace on `stream` outside a capture, or undefined. */
  on(stream: Stream): DeviceBuffer | undefined {
    return this.#byStream?.get(stream);
  }

  /** How many spares it keeps now. */
  get spareCount(): number {
    return this.#spares.length;
  }

  /** How many captures it has a graph-owned workspace in now. */
  get captureCount(): number {
    return this.#captures.size;
  }

  /**
   * Gives the handle, just bound to `stream`, its workspace there and hands it to the library
   * where the library has another (`setStreamCalled`: the library was just given `stream`,
   * which makes a `resetBySetStream` library forget its workspace).
   */
  bind(stream: Stream, setStreamCalled: boolean): void {
    const options = this.#options;
    if (setStreamCalled && options.resetBySetStream) {
      this.#nativeAddress = 0;
      this.#nativeBytes = 0;
    }
    const handle = this.#handle;
    const bytes = options.bytes(handle, stream);
    const capture = stream.capture;
    const workspace =
      capture === null ? this.#forStream(stream, bytes) : this.#forCapture(stream, capture, bytes);
    this.#bound = workspace;
    if (workspace !== undefined) {
      const address = workspace.address;
      if (address !== this.#nativeAddress || bytes !== this.#nativeBytes) {
        options.set(handle, workspace, stream);
        this.#nativeAddress = address;
        this.#nativeBytes = bytes;
      }
    } else if (this.#nativeAddress !== 0) {
      options.set(handle, undefined, stream);
      this.#nativeAddress = 0;
      this.#nativeBytes = 0;
    }
  }

  /** The (handle, stream) workspace of `bytes`, allocated on `stream` when missing or resized. */
  #forStream(stream: Stream, bytes: number): DeviceBuffer | undefined {
    let byStream = this.#byStream;
    let workspace = byStream?.get(stream);
    if (bytes > 0 && (workspace === undefined || workspace.byteLength !== bytes)) {
      if (workspace !== undefined) {
        this.#drop(stream);
        workspace.dispose();
      }
      // A spare or one taken over is handed to `stream` behind a GPU-side wait (useOn); a new
      // one is allocated on `stream` and used only there.
      workspace = this.#reuse(stream, bytes) ?? DeviceBuffer.allocate(bytes, { stream });
      if (byStream === undefined) this.#byStream = byStream = new Map();
      byStream.set(stream, workspace);
      this.#holders.change(stream, 1);
    } else if (bytes === 0 && workspace !== undefined) {
      this.#drop(stream);
      workspace.dispose();
      workspace = undefined;
    } else if (workspace !== undefined && byStream!.size > 1) {
      // Most recently bound last: a take-over picks the first.
      byStream!.delete(stream);
      byStream!.set(stream, workspace);
    }
    return workspace;
  }

  /**
   * A workspace of `bytes` for `stream` without allocating: a spare (one last used on
   * `stream` first), or at the bound the one bound least recently to another stream, which
   * `stream` then waits for on the GPU. Undefined: allocate one.
   */
  #reuse(stream: Stream, bytes: number): DeviceBuffer | undefined {
    const spares = this.#spares;
    let chosen = -1;
    for (let i = spares.length - 1; i >= 0; i--) {
      const spare = spares[i]!;
      if (spare.byteLength !== bytes) {
        // Of a size no longer asked for.
        spares.splice(i, 1);
        if (chosen > i) chosen--;
        spare.dispose();
        continue;
      }
      if (chosen < 0 || spare.lastStream === stream) chosen = i;
    }
    if (chosen >= 0) {
      const spare = spares.splice(chosen, 1)[0]!;
      spare.useOn(stream, 'write');
      return spare;
    }
    const byStream = this.#byStream;
    if (byStream === undefined || byStream.size + spares.length < this.#max) return undefined;
    for (const [other, victim] of byStream) {
      // A capturing stream's own workspace is left alone (its pre-capture use is not ended).
      if (other === stream || other.capture !== null) continue;
      this.#drop(other);
      if (victim.byteLength !== bytes) {
        victim.dispose();
        return undefined;
      }
      // Marks everything issued on `other` so far as its last use, then hands it over.
      victim.useOn(other, 'write');
      victim.useOn(stream, 'write');
      return victim;
    }
    return undefined;
  }

  /**
   * While `stream` captures a graph: a workspace the graph owns, never memory allocated on
   * the capturing stream. When the capture ends, the handle rebinds at its next use, so the
   * library gets a workspace of its own back.
   */
  #forCapture(stream: Stream, capture: StreamCapture, bytes: number): DeviceBuffer | undefined {
    return this.#captures.get(capture, bytes, (owned) => {
      if (this.#bound === owned) this.#bound = undefined;
      if (this.#nativeAddress === owned.address) this.#nativeAddress = -1;
      if (this.#binding.stream === stream) this.#binding.invalidate();
    });
  }

  /** Takes the workspace on `stream` out of the map (the caller frees or parks it). */
  #drop(stream: Stream): void {
    if (this.#byStream?.delete(stream)) this.#holders.change(stream, -1);
  }

  /**
   * Keeps a workspace that `stream` no longer has as a spare (its use there ends with the
   * work issued so far), or frees it, ordered on `stream`, where `keep` is false, the handle
   * has its fill of spares, or the stream cannot take the mark (disposed, capturing).
   */
  #park(stream: Stream, workspace: DeviceBuffer, keep: boolean): void {
    if (!keep || stream.disposed || stream.capture !== null || this.#spares.length >= this.#max) {
      workspace.dispose();
      return;
    }
    workspace.useOn(stream, 'write');
    this.#spares.push(workspace);
  }

  /**
   * The handle went idle: every bound workspace becomes a spare (freed instead where `keep`
   * is false, or see `#park`). Throws what failed after all are handled.
   */
  parkAll(keep: boolean, name: string): void {
    const byStream = this.#byStream;
    this.#bound = undefined;
    if (byStream === undefined || byStream.size === 0) return;
    const errors: unknown[] = [];
    for (const [stream, workspace] of byStream) {
      this.#holders.change(stream, -1);
      try {
        this.#park(stream, workspace, keep);
      } catch (error) {
        errors.push(error);
      }
    }
    byStream.clear();
    throwCollected(errors, `${name}: releasing workspaces failed`);
  }

  /** Frees the spares; returns their bytes. Throws what failed after all are freed. */
  freeSpares(name: string): number {
    let bytes = 0;
    const errors: unknown[] = [];
    for (const spare of this.#spares.splice(0)) {
      bytes += spare.byteLength;
      try {
        spare.dispose();
      } catch (error) {
        errors.push(error);
      }
    }
    throwCollected(errors, `${name}: freeing spare workspaces failed`);
    return bytes;
  }

  /** Frees every workspace, bound and spare (the handle is being destroyed). */
  freeAll(name: string): void {
    const byStream = this.#byStream;
    this.#bound = undefined;
    const errors: unknown[] = [];
    for (const spare of this.#spares.splice(0)) {
      try {
        spare.dispose();
      } catch (error) {
        errors.push(error);
      }
    }
    if (byStream !== undefined) {
      for (const [stream, workspace] of byStream) {
        this.#holders.change(stream, -1);
        try {
          workspace.dispose();
        } catch (error) {
          errors.push(error);
        }
      }
      byStream.clear();
    }
    throwCollected(errors, `${name}: freeing workspaces failed`);
  }

  /**
   * `stream` is being disposed (still alive while this runs): frees the spares last used
   * there and the workspace bound there, each ordered on it; the library may still point at
   * the latter, so the next bind sets a live one.
   */
  streamDisposed(stream: Stream): void {
    const spares = this.#spares;
    for (let i = spares.length - 1; i >= 0; i--) {
      const spare = spares[i]!;
      if (spare.lastStream !== stream) continue;
      spares.splice(i, 1);
      spare.dispose();
    }
    const workspace = this.#byStream?.get(stream);
    if (workspace === undefined) return;
    this.#drop(stream);
    if (this.#bound === workspace) this.#bound = undefined;
    this.#nativeAddress = -1;
    workspace.dispose();
  }

  /**
   * `stream` went back to the pool: its workspace here becomes a spare (or is freed where
   * `keep` is false; see `#park`), and the handle, if bound there, rebinds at its next use.
   */
  streamReleased(stream: Stream, keep: boolean): void {
    const workspace = this.#byStream?.get(stream);
    if (workspace === undefined) return;
    this.#drop(stream);
    if (this.#bound === workspace) this.#bound = undefined;
    if (this.#binding.stream === stream) this.#binding.invalidate();
    this.#park(stream, workspace, keep);
  }

  /** Adds its workspaces, bound and spare, and their bytes to `count`. */
  count(count: WorkspaceCount): void {
    for (const spare of this.#spares) {
      count.workspaces++;
      count.workspaceBytes += spare.byteLength;
    }
    if (this.#byStream === undefined) return;
    for (const workspace of this.#byStream.values()) {
      count.workspaces++;
      count.workspaceBytes += workspace.byteLength;
    }
  }
}

/** Throws the one error, or an AggregateError of several; nothing when there are none. */
export function throwCollected(errors: unknown[], message: string): void {
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) throw new AggregateError(errors, message);
}
