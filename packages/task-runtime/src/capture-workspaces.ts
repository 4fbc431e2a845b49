import type { DeviceBuffer, StreamCapture } from '@cuda-tasks/cudadrv';

/**
 * The graph-owned workspaces of one handle, one per graph capture it is used in now. A
 * capturing stream must not allocate, so each is allocated outside the capture
 * (`StreamCapture.allocateOwned`: freed with the graph, declared used at each replay) and
 * forgotten when the capture ends.
 */
export class CaptureWorkspaces {
  #byCapture: Map<StreamCapture, DeviceBuffer> | undefined;

  /**
   * The workspace of `bytes` for `capture` (undefined for 0 bytes): the one it has, or a new
   * one the graph owns when it has none or one of another size. `ended` runs once, when the
   * capture ends, with each workspace made here, after it is forgotten.
   */
  get(
    capture: StreamCapture,
    bytes: number,
    ended: (workspace: DeviceBuffer) => void,
  ): DeviceBuffer | undefined {
    if (bytes === 0) return undefined;
    const byCapture = (this.#byCapture ??= new Map());
    let workspace = byCapture.get(capture);
    if (workspace === undefined || workspace.byteLength !== bytes) {
      workspace = capture.allocateOwned(bytes);
      byCapture.set(capture, workspace);
      const owned = workspace;
      capture.afterEnd(() => {
        if (byCapture.get(capture) === owned) byCapture.delete(capture);
        ended(owned);
      });
    }
    return workspace;
  }

  /** How many captures have a workspace here now. */
  get size(): number {
    return this.#byCapture?.size ?? 0;
  }
}
