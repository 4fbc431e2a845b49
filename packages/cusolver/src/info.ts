/** devInfo handling shared by the solvers (internal). */
import {
  CaptureError,
  CudaArgumentError,
  DeviceArray,
  DeviceBuffer,
  type DType,
  type Stream,
} from '@cuda-tasks/cudadrv';
import { type InfoCondition, infoError } from './errors.js';
import type { SolverRoutine } from './routines.js';

/**
 * Copies the devInfo words to the host once the stream has run the routines that write them
 * (`toHost` waits without blocking the event loop), then frees them.
 */
async function readInfo(info: DeviceArray<'int32'>, stream: Stream): Promise<Int32Array> {
  try {
    return await info.toHost({ stream });
  } finally {
    info.dispose();
  }
}

/**
 * Reads the devInfo words (`readInfo`), word i written by `routines[i]`, and rejects with
 * `infoError` for the first that is not 0, naming its routine's entry point.
 */
export async function checkInfo(
  info: DeviceArray<'int32'>,
  stream: Stream,
  condition: InfoCondition,
  ...routines: SolverRoutine[]
): Promise<void> {
  const words = await readInfo(info, stream);
  routines.forEach((routine, i) => {
    if (words[i] !== 0) throw infoError(routine.symbol, words[i]!, condition);
  });
}

/** The `info` option of the solvers that report a status (LAPACK's info) on the device. */
export interface StatusOption {
  /**
   * An int32 array that receives the status words (LAPACK's info: 0 for success) on the
   * device, instead of the host reading them: the promise then resolves at once, without
   * waiting for the GPU, and checking the status is the caller's. Needed inside a graph
   * capture, where nothing can be read back (each replay rewrites the words).
   */
  info?: DeviceArray<'int32'>;
}

/**
 * Where `routines` write their status words: the caller's `options.info` (checked: a
 * contiguous int32 array of at least one word per routine), or undefined when the host reads
 * them (`checkInfo`). On a capturing stream without `info`, a CaptureError naming `call` and
 * the routines, before anything is issued.
 */
export function statusTarget(
  options: StatusOption,
  stream: Stream,
  call: string,
  ...routines: SolverRoutine[]
): DeviceArray<'int32'> | undefined {
  const info = options.info;
  if (info !== undefined) {
    if (
      !DeviceArray.isInstance(info) ||
      info.dtype !== 'int32' ||
      !info.contiguous ||
      info.length < routines.length
    ) {
      throw new CudaArgumentError(
        `${call}: options.info must be a contiguous int32 DeviceArray of at least ${routines.length} element${routines.length === 1 ? '' : 's'}`,
      );
    }
    return info as DeviceArray<'int32'>;
  }
  if (stream.capturing) throw statusInCapture(call, stream, routines);
  return undefined;
}

/** The CaptureError of a routine whose status would have to be read back inside a capture. */
export function statusInCapture(
  call: string,
  stream: Stream,
  routines: readonly SolverRoutine[],
  alternative = 'pass { info } (an int32 DeviceArray) to keep the status on the device',
): CaptureError {
  const symbols = routines.map((routine) => routine.symbol).join(' and ');
  return new CaptureError(
    symbols,
    `${call} (${symbols}) reads its status (devInfo) back to the host, which cannot happen while ${stream} captures a graph (the work runs only at each launch): ${alternative}`,
  );
}

/**
 * Solves into a new copy of `b` (the right-hand sides, overwritten by the solution) on
 * `stream`: `solve` issues the routine (getrs, potrs) with that copy and a devInfo word, which
 * is freed after it, ordered on the stream, and never read: those routines report only
 * illegal arguments there, which the checks before rule out. Returns the copy.
 */
export function solveIntoCopy<D extends DType>(
  b: DeviceArray<D>,
  stream: Stream,
  solve: (x: DeviceArray<D>, info: DeviceBuffer) => void,
): DeviceArray<D> {
  let x: DeviceArray<D> | undefined;
  let info: DeviceBuffer | undefined;
  try {
    x = b.copy({ stream });
    info = DeviceBuffer.allocate(4, { stream });
    solve(x, info);
    return x;
  } catch (error) {
    x?.dispose();
    throw error;
  } finally {
    info?.dispose();
  }
}

/** Frees each array that exists (on its last stream: ordered after the work that used it). */
export function disposeAll(...arrays: ({ dispose(): void } | undefined)[]): void {
  for (const array of arrays) array?.dispose();
}
