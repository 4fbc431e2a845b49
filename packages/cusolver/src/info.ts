/** devInfo handling shared by the solvers (internal). */
import type { DeviceArray, Stream } from '@cuda-tasks/cudadrv';

/**
 * Copies the devInfo words to the host once the stream has run the routines that write them
 * (`toHost` waits without blocking the event loop), then frees them.
 */
export async function readInfo(info: DeviceArray<'int32'>, stream: Stream): Promise<Int32Array> {
  try {
    return await info.toHost({ stream });
  } finally {
    info.dispose();
  }
}

/** Frees each array that exists (on its last stream: ordered after the work that used it). */
export function disposeAll(...arrays: ({ dispose(): void } | undefined)[]): void {
  for (const array of arrays) array?.dispose();
}
