import type { TraceEvent } from '@cuda-tasks/task-runtime';
import { describe, expect, it } from 'vitest';
import { gpuOverlap } from './overlap.js';

const op = (tid: number, ts: number, dur: number): TraceEvent => ({
  name: 'op',
  cat: 'gpu',
  ph: 'X',
  ts,
  dur,
  pid: 1,
  tid,
});

describe('gpuOverlap', () => {
  it('counts the time two streams run at once, and the busy time of any', () => {
    // Stream 1 busy 0-100, stream 2 busy 60-160: overlap 40, busy 160.
    expect(gpuOverlap([op(1, 0, 100), op(2, 60, 100)])).toEqual({
      busyUs: 160,
      overlapUs: 40,
      streams: 2,
    });
  });

  it('finds no overlap for back-to-back or serial work, even on two streams', () => {
    expect(gpuOverlap([op(1, 0, 50), op(2, 50, 50), op(1, 100, 10)])).toEqual({
      busyUs: 110,
      overlapUs: 0,
      streams: 2,
    });
  });

  it('does not count two operations of one stream as overlap, and ignores host tracks', () => {
    const host: TraceEvent = {
      name: 'task',
      cat: 'task',
      ph: 'X',
      ts: 0,
      dur: 500,
      pid: 0,
      tid: 9,
    };
    const result = gpuOverlap([op(1, 0, 100), op(1, 50, 100), host, op(3, 120, 10)]);
    // Stream 1 busy 0-150 (its ops touch each other), stream 3 120-130: overlap 10.
    expect(result).toEqual({ busyUs: 150, overlapUs: 10, streams: 2 });
  });
});
