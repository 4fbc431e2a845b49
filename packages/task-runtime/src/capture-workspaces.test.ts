import type { DeviceBuffer, StreamCapture } from '@cuda-tasks/cudadrv';
import { describe, expect, it } from 'vitest';
import { CaptureWorkspaces } from './capture-workspaces.js';

/** A capture double: owned allocations are numbered; `end()` runs the afterEnd callbacks. */
function stubCapture() {
  const owned: { id: number; byteLength: number; address: number }[] = [];
  const callbacks: (() => void)[] = [];
  const capture = {
    allocateOwned(byteLength: number) {
      const buffer = { id: owned.length, byteLength, address: 0x1000 * (owned.length + 1) };
      owned.push(buffer);
      return buffer;
    },
    afterEnd(callback: () => void) {
      callbacks.push(callback);
    },
  };
  return {
    capture: capture as unknown as StreamCapture,
    owned,
    end: () => {
      for (const callback of callbacks.splice(0)) callback();
    },
  };
}

describe('CaptureWorkspaces: a graph-owned workspace per capture', () => {
  it('0 bytes: none, nothing allocated', () => {
    const workspaces = new CaptureWorkspaces();
    const { capture, owned } = stubCapture();
    expect(workspaces.get(capture, 0, () => {})).toBeUndefined();
    expect(owned).toEqual([]);
    expect(workspaces.size).toBe(0);
  });

  it('one per capture, allocated by the graph once; a new size gets a new one; each ending reported after it is forgotten', () => {
    const workspaces = new CaptureWorkspaces();
    const a = stubCapture();
    const b = stubCapture();
    const ended: unknown[] = [];
    const onEnd = (workspace: DeviceBuffer) => {
      ended.push(workspace);
    };
    const first = workspaces.get(a.capture, 256, onEnd);
    expect(workspaces.get(a.capture, 256, onEnd)).toBe(first);
    const other = workspaces.get(b.capture, 256, onEnd);
    expect(other).not.toBe(first);
    expect(workspaces.size).toBe(2);
    // A changed size within the capture: another owned workspace (the graph frees both).
    const resized = workspaces.get(a.capture, 512, onEnd);
    expect(resized?.byteLength).toBe(512);
    expect(a.owned.map((w) => w.byteLength)).toEqual([256, 512]);
    a.end();
    expect(ended).toEqual([first, resized]);
    expect(workspaces.size).toBe(1);
    b.end();
    expect(ended).toEqual([first, resized, other]);
    expect(workspaces.size).toBe(0);
  });
});
