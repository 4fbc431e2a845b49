/**
 * cuBLAS handles that follow the current task's stream. One HandleCache (process-wide) leases
 * each task one handle per context; binding to a stream is lazy. Each (handle, stream) pair
 * gets its own workspace from the stream-ordered pool, because cublasSetStream resets the
 * handle's workspace and cuBLAS kernels on two streams must never share one. Inside a graph
 * capture a handle works in a workspace the graph owns (see `useCaptureWorkspace`).
 */
import {
  type Context,
  CudaArgumentError,
  currentStream,
  DeviceBuffer,
  type Stream,
  type StreamCapture,
} from '@cuda-tasks/cudadrv';
import { ffiValue } from '@cuda-tasks/cudadrv/internal';
import { HandleCache, onStreamReleased } from '@cuda-tasks/task-runtime';
import { check } from './errors.js';
import {
  CUBLAS_DEFAULT_MATH,
  CUBLAS_POINTER_MODE_HOST,
  CUBLAS_TF32_TENSOR_OP_MATH,
  cublas,
} from './ffi/cublas.js';

/** Whether float32 routines may use TF32 tensor cores ('tf32') or not ('default'). */
export type MathMode = 'default' | 'tf32';

/** cuBLAS's recommended workspace on Hopper: 32 MiB. */
const DEFAULT_WORKSPACE_BYTES = 32 * 1024 * 1024;

/** What this package keeps per cuBLAS handle. */
interface HandleRecord {
  /** The cublasHandle_t. */
  readonly handle: bigint;
  /** The handle as koffi converts it fastest (see `ffiValue`). */
  readonly ffiHandle: number | bigint;
  /** The workspace of each stream the handle has been bound to (freed on unbind). */
  readonly workspaces: Map<Stream, DeviceBuffer>;
  /** The settings generation last applied to the handle. */
  generation: number;
  /** The stream cuBLAS has for the handle (the last cublasSetStream), kept across unbinds. */
  nativeStream: Stream | undefined;
  /** The workspace address cuBLAS has (0: its default, as cublasSetStream leaves it). */
  nativeWorkspace: number | bigint;
  /** The workspace size cuBLAS has. */
  nativeWorkspaceBytes: number;
  /** The graph-owned workspace of each capture the handle is used in now. */
  captures: Map<StreamCapture, DeviceBuffer> | undefined;
}

interface CublasState {
  cache: HandleCache<bigint> | undefined;
  readonly handles: Map<bigint, HandleRecord>;
  readonly workspaceOwners: Map<Stream, Set<bigint>>;
  workspaceBytes: number;
  mathMode: MathMode;
  /** Bumped by every settings change; handles catch up lazily on their next use. */
  generation: number;
}

const STATE_KEY = Symbol.for('@cuda-tasks/cublas/state');
// Process-wide: a second loaded copy of this package shares the handles and settings.
const state: CublasState = ((globalThis as any)[STATE_KEY] ??= {
  cache: undefined,
  handles: new Map(),
  workspaceOwners: new Map(),
  workspaceBytes: DEFAULT_WORKSPACE_BYTES,
  mathMode: 'default',
  generation: 0,
} satisfies CublasState);

/** The handles holding a workspace for each stream (so a released stream touches only those). */
const workspaceOwners = state.workspaceOwners;

/** Records `workspace` as the (handle, stream) pair's, or forgets the pair's (undefined). */
function setWorkspace(
  handle: bigint,
  record: HandleRecord,
  stream: Stream,
  workspace: DeviceBuffer | undefined,
): void {
  if (workspace !== undefined) {
    record.workspaces.set(stream, workspace);
    let owners = workspaceOwners.get(stream);
    if (owners === undefined) workspaceOwners.set(stream, (owners = new Set()));
    owners.add(handle);
  } else if (record.workspaces.delete(stream)) {
    const owners = workspaceOwners.get(stream);
    owners?.delete(handle);
    if (owners?.size === 0) workspaceOwners.delete(stream);
  }
}

function mathModeValue(mode: MathMode): number {
  return mode === 'tf32' ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
}

function recordOf(handle: bigint): HandleRecord {
  const record = state.handles.get(handle);
  if (record === undefined) {
    throw new CudaArgumentError(`cublas: ${handle} is not a handle of this package's cache`);
  }
  return record;
}

function createHandle(_context: Context): bigint {
  const api = cublas();
  const out: (bigint | null)[] = [null];
  check(api.cublasCreate_v2(out), 'cublasCreate_v2');
  const handle = out[0] as bigint;
  try {
    check(api.cublasSetPointerMode_v2(handle, CUBLAS_POINTER_MODE_HOST), 'cublasSetPointerMode_v2');
    check(api.cublasSetMathMode(handle, mathModeValue(state.mathMode)), 'cublasSetMathMode');
  } catch (error) {
    api.cublasDestroy_v2(handle);
    throw error;
  }
  state.handles.set(handle, {
    handle,
    ffiHandle: ffiValue(handle),
    workspaces: new Map(),
    generation: state.generation,
    nativeStream: undefined,
    nativeWorkspace: 0,
    nativeWorkspaceBytes: 0,
    captures: undefined,
  });
  return handle;
}

function destroyHandle(handle: bigint, _context: Context): void {
  const record = state.handles.get(handle);
  state.handles.delete(handle);
  try {
    const api = cublas();
    // The bound stream may have been disposed by now (a user stream): move the handle to
    // the NULL stream first so that destroy never touches a dead one. Errors do not matter.
    api.cublasSetStream_v2(handle, 0n);
    check(api.cublasDestroy_v2(handle), 'cublasDestroy_v2');
  } finally {
    // Each free is ordered on the stream the workspace was used on.
    if (record !== undefined) {
      for (const [stream, workspace] of record.workspaces) {
        setWorkspace(handle, record, stream, undefined);
        workspace.dispose();
      }
    }
  }
}

/**
 * cublasSetStream_v2, then the (handle, stream) workspace with cublasSetWorkspace_v2 (the
 * stream switch has just reset the handle to cuBLAS's default workspace). Each native call is
 * made only when it changes something: a handle that goes back to the stream cuBLAS still
 * has for it (a pooled stream that returned to the next task) keeps its stream, and a
 * workspace that the stream-ordered pool gave back at the same address keeps its setting, so
 * the common rebind costs one stream-ordered allocation.
 */
function bindHandle(handle: bigint, stream: Stream): void {
  const api = cublas();
  stream.context.makeCurrent();
  const record = recordOf(handle);
  if (record.nativeStream !== stream) {
    check(api.cublasSetStream_v2(record.ffiHandle, stream.ffiHandle), 'cublasSetStream_v2');
    record.nativeStream = stream;
    record.nativeWorkspace = 0;
    record.nativeWorkspaceBytes = 0;
  }
  // Inside a capture the workspace is the graph's (acquireRecord sets it), never one allocated
  // on the capturing stream (that would be graph memory).
  if (stream.capture !== null) return;
  // Workspaces of streams disposed since (user streams) are no use any more.
  for (const [other, workspace] of record.workspaces) {
    if (other.disposed) {
      setWorkspace(handle, record, other, undefined);
      workspace.dispose();
    }
  }
  const bytes = state.workspaceBytes;
  const existing = record.workspaces.get(stream);
  let workspace = existing;
  if (existing === undefined || existing.byteLength !== bytes) {
    // Allocated on `stream` and used only there by this handle: no cross-stream ordering needed.
    workspace = bytes > 0 ? DeviceBuffer.allocate(bytes, { stream }) : undefined;
    setWorkspace(handle, record, stream, workspace);
    existing?.dispose();
  }
  if (workspace !== undefined) {
    const address = workspace.address;
    if (
      address !== record.nativeWorkspace ||
      workspace.byteLength !== record.nativeWorkspaceBytes
    ) {
      check(
        api.cublasSetWorkspace_v2(record.ffiHandle, address, workspace.byteLength),
        'cublasSetWorkspace_v2',
      );
      record.nativeWorkspace = address;
      record.nativeWorkspaceBytes = workspace.byteLength;
    }
  } else if (record.nativeWorkspace !== 0) {
    // Back to cuBLAS's own workspace (setWorkspaceSize(0)): cublasSetStream restores it.
    check(api.cublasSetStream_v2(record.ffiHandle, stream.ffiHandle), 'cublasSetStream_v2');
    record.nativeWorkspace = 0;
    record.nativeWorkspaceBytes = 0;
  }
}

/** Frees the (handle, stream) workspace: the stream went back to its pool, or the handle goes. */
function unbindHandle(handle: bigint, stream: Stream): void {
  const record = state.handles.get(handle);
  const workspace = record?.workspaces.get(stream);
  if (workspace !== undefined) {
    setWorkspace(handle, record!, stream, undefined);
    workspace.dispose();
  }
}

/**
 * The process's cuBLAS handle cache (created on first use). Its `statistics()` tell how many
 * handles exist; `destroyIdle()` frees idle ones (it also runs on out-of-memory).
 */
export function handleCache(): HandleCache<bigint> {
  if (state.cache === undefined) {
    state.cache = new HandleCache<bigint>({
      name: 'cublas',
      create: createHandle,
      destroy: destroyHandle,
      bindStream: bindHandle,
      unbindStream: unbindHandle,
    });
    const cache = state.cache;
    // The cache unbinds the handles bound to a released stream; a handle that was bound to
    // it earlier (withStream inside a task) may still hold a workspace for it: free that too.
    onStreamReleased((stream) => {
      const owners = workspaceOwners.get(stream);
      if (owners === undefined) return;
      for (const handle of owners) {
        if (cache.boundStream(handle) !== stream) unbindHandle(handle, stream);
      }
    });
  }
  return state.cache;
}

/** Brings a handle up to date with `setMathMode` / `setWorkspaceSize` made since its last use. */
function applySettings(handle: bigint, record: HandleRecord, stream: Stream): void {
  const api = cublas();
  stream.context.makeCurrent();
  check(api.cublasSetMathMode(handle, mathModeValue(state.mathMode)), 'cublasSetMathMode');
  const workspace = record.workspaces.get(stream);
  if ((workspace?.byteLength ?? 0) !== state.workspaceBytes) bindHandle(handle, stream);
  record.generation = state.generation;
}

/**
 * The current task's handle record, the handle bound to `stream` with its workspace, settings
 * applied and the stream's context current.
 */
function acquireRecord(stream: Stream): HandleRecord {
  const handle = handleCache().get(stream);
  const record = recordOf(handle);
  if (record.generation !== state.generation) applySettings(handle, record, stream);
  stream.context.makeCurrent();
  const capture = stream.capture;
  if (capture !== null) useCaptureWorkspace(handle, record, stream, capture);
  return record;
}

/**
 * While `stream` captures a graph, the handle works in a workspace the graph owns (cuBLAS
 * needs one set explicitly for capture): the (handle, stream) workspace goes back to the pool
 * with the stream, while the graph's kernels use theirs at every replay. The graph frees it;
 * each replay declares it written. When the capture ends, the stream's own workspace comes
 * back (for cuBLASLt calls too, which read `workspaces`).
 */
function useCaptureWorkspace(
  handle: bigint,
  record: HandleRecord,
  stream: Stream,
  capture: StreamCapture,
): void {
  const captures = (record.captures ??= new Map());
  let workspace = captures.get(capture);
  if (workspace === undefined) {
    workspace = capture.allocateOwned(
      state.workspaceBytes > 0 ? state.workspaceBytes : DEFAULT_WORKSPACE_BYTES,
    );
    captures.set(capture, workspace);
    const previous = record.workspaces.get(stream);
    record.workspaces.set(stream, workspace);
    const graphs = workspace;
    capture.afterEnd(() => {
      captures.delete(capture);
      if (record.workspaces.get(stream) === graphs) {
        if (previous !== undefined) record.workspaces.set(stream, previous);
        else record.workspaces.delete(stream);
      }
      // cuBLAS still works in the graph's workspace on this stream: give it its own back.
      if (state.handles.get(handle) === record && record.nativeStream === stream) {
        if (!stream.disposed) bindHandle(handle, stream);
      }
    });
  }
  const address = workspace.address;
  if (address !== record.nativeWorkspace || workspace.byteLength !== record.nativeWorkspaceBytes) {
    check(
      cublas().cublasSetWorkspace_v2(record.ffiHandle, address, workspace.byteLength),
      'cublasSetWorkspace_v2',
    );
    record.nativeWorkspace = address;
    record.nativeWorkspaceBytes = workspace.byteLength;
  }
}

/**
 * @internal The current task's handle record, bound to `stream` (see `acquireRecord`), for
 * callers that also need the (handle, stream) pair's workspace: `gemm` passes it to
 * cublasLtMatmul.
 */
export function acquireBinding(stream: Stream): {
  readonly ffiHandle: number | bigint;
  readonly workspaces: ReadonlyMap<Stream, DeviceBuffer>;
} {
  return acquireRecord(stream);
}

/**
 * @internal The current task's handle as koffi takes it without BigInt work (see
 * `ffiValue`), ready for `stream`. Every wrapper calls this before its native call.
 */
export function acquireFfi(stream: Stream): number | bigint {
  return acquireRecord(stream).ffiHandle;
}

/**
 * The current task's cuBLAS handle (a `cublasHandle_t` as a BigInt), bound to `stream`
 * (default: the current stream) with its own workspace, in host pointer mode. For calling
 * routines this package does not wrap through `@cuda-tasks/cublas/ffi`. The handle belongs to
 * the task: do not keep it past the task, and do not change its stream yourself.
 * @example
 * import { cublas } from '@cuda-tasks/cublas/ffi';
 * check(cublas().cublasSswap_v2(handle(), n, x.useOn(stream()), 1, y.useOn(stream()), 1), 'cublasSswap_v2');
 */
export function handle(stream: Stream = currentStream()): bigint {
  return acquireRecord(stream).handle;
}

/**
 * Sets the workspace each (handle, stream) pair gets, in bytes (default 32 MiB, cuBLAS's
 * recommendation for Hopper). Handles pick the new size up on their next use. 0 leaves the
 * workspace to cuBLAS (its default per-handle pool).
 * @example setWorkspaceSize(4 * 1024 * 1024);
 */
export function setWorkspaceSize(bytes: number): void {
  if (!Number.isSafeInteger(bytes) || bytes < 0) {
    throw new CudaArgumentError(
      `setWorkspaceSize: bytes must be a non-negative integer, got ${bytes}`,
    );
  }
  if (bytes === state.workspaceBytes) return;
  state.workspaceBytes = bytes;
  state.generation++;
}

/** The workspace size each (handle, stream) pair gets, in bytes. */
export function workspaceSize(): number {
  return state.workspaceBytes;
}

/**
 * Chooses whether float32 routines may use TF32 tensor cores: 'default' (CUBLAS_DEFAULT_MATH,
 * full float32 precision; the default) or 'tf32' (CUBLAS_TF32_TENSOR_OP_MATH: faster,
 * about 10 bits of mantissa in the products). Applies to new handles and, lazily, to
 * existing ones on their next use.
 * @example setMathMode('tf32');
 */
export function setMathMode(mode: MathMode): void {
  if (mode !== 'default' && mode !== 'tf32') {
    throw new CudaArgumentError(
      `setMathMode: mode must be 'default' or 'tf32', got ${JSON.stringify(mode)}`,
    );
  }
  if (mode === state.mathMode) return;
  state.mathMode = mode;
  state.generation++;
}

/** The math mode set by `setMathMode`. */
export function mathMode(): MathMode {
  return state.mathMode;
}

/**
 * @internal For tests: the workspace of the (handle, stream) pair, or undefined when the
 * pair has none (never bound, or unbound since).
 */
export function workspaceFor(handle: bigint, stream: Stream): DeviceBuffer | undefined {
  return state.handles.get(handle)?.workspaces.get(stream);
}

/**
 * The cuBLAS version (e.g. 130100 for 13.1.0), from the current task's handle.
 * @example if (version() < 120000) throw new Error('cuBLAS 12 or newer needed');
 */
export function version(): number {
  const api = cublas();
  const result = [0];
  check(api.cublasGetVersion_v2(handle(), result), 'cublasGetVersion_v2');
  return result[0]!;
}
