/** devInfo handling shared by the solvers (internal). */
import { type DeviceArray, DeviceBuffer, type DType, type Stream } from '@cuda-tasks/cudadrv';
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
