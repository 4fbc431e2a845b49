import type { TraceEvent } from '@cuda-tasks/task-runtime';

/** How much of the GPU work in a trace ran on two or more streams at once. */
export interface GpuOverlap {
  /** Microseconds during which at least one stream had an operation running. */
  busyUs: number;
  /** Microseconds during which two or more streams had operations running at once. */
  overlapUs: number;
  /** Streams (GPU tracks) that had operations. */
  streams: number;
}

/**
 * Measures the overlap of GPU operations across streams in a trace (the 'X' events of the
 * 'gpu' category, one track per stream): the sweep over start and end points counts how many
 * streams are busy at each instant.
 * @example const { overlapUs, busyUs } = gpuOverlap(trace.traceEvents);
 */
export function gpuOverlap(events: readonly TraceEvent[]): GpuOverlap {
  const points: { at: number; tid: number; delta: 1 | -1 }[] = [];
  const tracks = new Set<string>();
  for (const event of events) {
    if (event.ph !== 'X' || event.cat !== 'gpu' || event.ts === undefined) continue;
    const duration = event.dur ?? 0;
    if (duration <= 0) continue;
    tracks.add(`${event.pid}:${event.tid}`);
    points.push({ at: event.ts, tid: event.tid, delta: 1 });
    points.push({ at: event.ts + duration, tid: event.tid, delta: -1 });
  }
  // Ends before starts at the same instant: touching operations do not overlap.
  points.sort((x, y) => x.at - y.at || x.delta - y.delta);
  const running = new Map<number, number>();
  let busyStreams = 0;
  let busyUs = 0;
  let overlapUs = 0;
  let last = 0;
  for (const point of points) {
    const span = point.at - last;
    if (busyStreams >= 1) busyUs += span;
    if (busyStreams >= 2) overlapUs += span;
    last = point.at;
    const before = running.get(point.tid) ?? 0;
    const after = before + point.delta;
    running.set(point.tid, after);
    if (before === 0 && after > 0) busyStreams++;
    else if (before > 0 && after === 0) busyStreams--;
  }
  return { busyUs, overlapUs, streams: tracks.size };
}
