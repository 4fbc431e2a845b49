/**
 * cuBLAS handles that follow the current task's stream, through the task runtime's library kit
 * (HandleCache): a lease per task and context, at most 16 handles per context (tasks beyond
 * share them, rebound per call), lazy binding, the hand-off when a handle goes idle. What is
 * specific to cuBLAS is here: how a handle is made (host pointer mode, the math mode), that
 * cublasSetStream resets the workspace, and the workspace itself: one per (handle, stream),
 * because cuBLAS kernels on two streams must never share one (so calls on two streams share
 * nothing, and the handle needs no ordering across streams). Inside a graph capture the kit
 * gives the handle a workspace the graph owns.
 */
import {
  type Context,
  CudaArgumentError,
  type DeviceBuffer,
  packageOf,
  processState,
  resolveStream,
  type Stream,
} from '@cuda-tasks/cudadrv';
import { ffiValue } from '@cuda-tasks/cudadrv/internal';
import { HandleCache, IssueEnvelope } from '@cuda-tasks/task-runtime';
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

/** A cuBLAS handle as this package keeps it. */
export interface CublasHandle {
  /** The cublasHandle_t. */
  readonly handle: bigint;
  /** The handle as koffi converts it fastest (see `ffiValue`). */
  readonly ffiHandle: number | bigint;
  /** The settings generation last applied to the handle. */
  generation: number;
}

interface CublasState {
  cache: HandleCache<CublasHandle> | undefined;
  /** The handles by their cublasHandle_t (for `workspaceFor` and `boundStreamOf`). */
  readonly handles: Map<bigint, CublasHandle>;
  workspaceBytes: number;
  mathMode: MathMode;
  /** Bumped by every settings change; handles catch up lazily on their next use. */
  generation: number;
}

// Process-wide: a second loaded copy of this package shares the handles and settings.
const state: CublasState = processState(
  packageOf(import.meta.url, '@cuda-tasks/cublas'),
  'handles',
  (): CublasState => ({
    cache: undefined,
    handles: new Map(),
    workspaceBytes: DEFAULT_WORKSPACE_BYTES,
    mathMode: 'default',
    generation: 0,
  }),
);

function mathModeValue(mode: MathMode): number {
  return mode === 'tf32' ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
}

function createHandle(_context: Context): CublasHandle {
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
  const record: CublasHandle = {
    handle,
    ffiHandle: ffiValue(handle),
    generation: state.generation,
  };
  state.handles.set(handle, record);
  return record;
}

function destroyHandle(record: CublasHandle): void {
  state.handles.delete(record.handle);
  const api = cublas();
  // The stream cuBLAS has may have been disposed by now (a user stream): move the handle to
  // the NULL stream first so that destroy never touches a dead one. Errors do not matter.
  api.cublasSetStream_v2(record.handle, 0n);
  check(api.cublasDestroy_v2(record.handle), 'cublasDestroy_v2');
}

/**
 * The process's cuBLAS handle cache (the task runtime's HandleCache). Its `statistics()` tell
 * how many handles exist; `destroyIdle()` frees idle ones (it also runs on out-of-memory);
 * `warm()` makes them ahead of a burst (`prewarm()` of the runtime does it for every library).
 */
export function handleCache(): HandleCache<CublasHandle> {
  return (state.cache ??= new HandleCache<CublasHandle>({
    name: 'cublas',
    create: createHandle,
    destroy: destroyHandle,
    setStream(record, stream) {
      check(cublas().cublasSetStream_v2(record.ffiHandle, stream.ffiHandle), 'cublasSetStream_v2');
    },
    workspace: {
      // Inside a capture cuBLAS needs a workspace set explicitly, even where it otherwise
      // uses its own (setWorkspaceSize(0)).
      bytes: (_record, stream) =>
        state.workspaceBytes > 0 || stream.capture === null
          ? state.workspaceBytes
          : DEFAULT_WORKSPACE_BYTES,
      set(record, workspace, stream) {
        const api = cublas();
        if (workspace !== undefined) {
          check(
            api.cublasSetWorkspace_v2(record.ffiHandle, workspace.address, workspace.byteLength),
            'cublasSetWorkspace_v2',
          );
        } else {
          // Back to cuBLAS's own workspace (setWorkspaceSize(0)): cublasSetStream restores it.
          check(api.cublasSetStream_v2(record.ffiHandle, stream.ffiHandle), 'cublasSetStream_v2');
        }
      },
      resetBySetStream: true,
    },
    onBind(record) {
      if (record.generation === state.generation) return;
      check(
        cublas().cublasSetMathMode(record.ffiHandle, mathModeValue(state.mathMode)),
        'cublasSetMathMode',
      );
      record.generation = state.generation;
    },
    ordered: false,
  }));
}

// Created at import (nothing native happens until a task uses it), so that the runtime's
// prewarm() finds it: the envelope below takes it.
/**
 * @internal The issue envelope of every cuBLAS and cuBLASLt call (the task runtime's kit): the
 * current task's handle bound to the stream with its workspace there, settings applied and the
 * stream's context current (`blas.handle(stream).ffiHandle`, `blas.binding(stream)`), then the
 * trace around the native call and the status checked as a CublasError (`blas.begin`,
 * `blas.end`). The routines take those steps through one function, `issue()` in issue.ts.
 */
export const blas: IssueEnvelope<CublasHandle> = new IssueEnvelope<CublasHandle>({
  name: 'cublas',
  check,
  handles: handleCache(),
});

/**
 * The current task's cuBLAS handle (a `cublasHandle_t` as a BigInt), bound to `stream`
 * (default: the current stream) with its own workspace, in host pointer mode. For calling
 * routines this package does not wrap through `@cuda-tasks/cublas/ffi`. The handle belongs to
 * the task: do not keep it past the task, and do not change its stream yourself.
 * @example
 * import { cublas } from '@cuda-tasks/cublas/ffi';
 * check(cublas().cublasSswap_v2(handle(), n, x.useOn(stream()), 1, y.useOn(stream()), 1), 'cublasSswap_v2');
 */
export function handle(stream?: Stream): bigint {
  return blas.binding(resolveStream(stream)).handle.handle;
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
  handleCache().invalidate();
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
  handleCache().invalidate();
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
  const record = state.handles.get(handle);
  return record === undefined ? undefined : handleCache().workspaceOf(record, stream);
}

/** @internal For tests: the stream the handle is bound to, or undefined. */
export function boundStreamOf(handle: bigint): Stream | undefined {
  const record = state.handles.get(handle);
  return record === undefined ? undefined : handleCache().boundStream(record);
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
