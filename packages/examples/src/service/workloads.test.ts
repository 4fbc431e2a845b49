import { describe, expect, it } from 'vitest';
import type { ModeResult } from './client.js';
import type { KindResult } from './client-process.js';
import { progressLine } from './load.js';
import {
  HEAD_OF_LINE_MODES,
  type HeadOfLineRow,
  headOfLineReport,
  headOfLineSchedule,
  roundsLine,
  searchReport,
} from './workloads.js';

describe('headOfLineSchedule', () => {
  const plan = { seconds: 100, smallRate: 200, largeEveryMs: 250, seed: 3 };
  const arrivals = headOfLineSchedule(plan);
  const smalls = arrivals.filter((arrival) => arrival.kind === 'small');
  const larges = arrivals.filter((arrival) => arrival.kind === 'large');

  it('is in time order, within the duration, and the same for the same seed', () => {
    for (let i = 1; i < arrivals.length; i++) {
      expect(arrivals[i]!.at).toBeGreaterThanOrEqual(arrivals[i - 1]!.at);
    }
    expect(arrivals[0]!.at).toBeGreaterThanOrEqual(0);
    expect(arrivals.at(-1)!.at).toBeLessThan(100_000);
    expect(headOfLineSchedule(plan)).toEqual(arrivals);
    expect(headOfLineSchedule({ ...plan, seed: 4 })).not.toEqual(arrivals);
  });

  it('sends a large request every largeEveryMs, the first at half of it', () => {
    expect(larges).toHaveLength(400); // 125, 375, ..., 99875
    expect(larges[0]!.at).toBe(125);
    expect(larges[1]!.at).toBe(375);
    expect(larges.at(-1)!.at).toBe(99_875);
  });

  it('sends small requests as a Poisson process of smallRate per second', () => {
    // 20,000 expected; a Poisson count's standard deviation is about 141: 5 sigma.
    expect(Math.abs(smalls.length - 20_000)).toBeLessThan(710);
    // Exponential gaps: mean 5 ms, and as many above the mean as e^-1 of them (36.8%).
    const gaps = smalls.slice(1).map((arrival, i) => arrival.at - smalls[i]!.at);
    const mean = gaps.reduce((sum, gap) => sum + gap, 0) / gaps.length;
    expect(mean).toBeGreaterThan(4.8);
    expect(mean).toBeLessThan(5.2);
    const above = gaps.filter((gap) => gap > 5).length / gaps.length;
    expect(above).toBeGreaterThan(0.35);
    expect(above).toBeLessThan(0.385);
  });

  it('leaves a kind out at rate 0', () => {
    expect(headOfLineSchedule({ ...plan, smallRate: 0 }).every((a) => a.kind === 'large')).toBe(
      true,
    );
    expect(headOfLineSchedule({ ...plan, largeEveryMs: 0 }).every((a) => a.kind === 'small')).toBe(
      true,
    );
  });
});

const kind = (count: number, p50: number, p99: number, errors = 0): KindResult => ({
  issued: count + errors,
  completed: count + errors,
  errors,
  messages: [],
  count,
  p50,
  p99,
  max: p99 + 1,
});

describe('headOfLineReport', () => {
  const row = (index: number, smallP99: number): HeadOfLineRow => ({
    mode: HEAD_OF_LINE_MODES[index]!,
    result: {
      mode: HEAD_OF_LINE_MODES[index]!.label,
      seconds: 10,
      byKind: { small: kind(2000, 0.9, smallP99), large: kind(40, 22, 30, 1) },
    },
    loopDelayMaxMs: 1.25,
  });

  it('prints a row per mode, the p99 verdict, and the priority row against the other two', () => {
    const text = headOfLineReport([row(0, 24), row(1, 3), row(2, 1.5)]);
    const lines = text.split('\n');
    expect(lines[0]).toMatch(
      /^mode\s+small\s+p50 ms\s+p99 ms\s+max ms\s+large\s+large p50 ms\s+errors/,
    );
    expect(lines.find((l) => l.startsWith('one shared stream'))).toMatch(
      /2000\s+0\.90\s+24\.00\s+25\.00\s+40\s+22\.00\s+1\s+1\.25$/,
    );
    expect(lines.find((l) => l.startsWith('stream per request '))).toMatch(/\s3\.00\s/);
    expect(lines.find((l) => l.startsWith('stream per request, small at high priority'))).toMatch(
      /\s1\.50\s/,
    );
    expect(text).toContain(
      "small requests' p99, stream per request / one shared stream: x0.13 (target <= 0.25: PASS)",
    );
    expect(text).toContain(
      "small requests' p99, small at high priority / stream per request: x0.50; / one shared stream: x0.06",
    );
  });

  it('lists a mode that could not run with its reason, and no priority line without its row', () => {
    const text = headOfLineReport([
      row(0, 24),
      row(1, 3),
      { mode: { ...HEAD_OF_LINE_MODES[2]!, unavailable: 'a remote server (--url)' } },
    ]);
    expect(text).toContain('stream per request, small at high priority  (a remote server (--url))');
    expect(text).not.toContain('small at high priority / stream per request');
  });

  it('says FAIL above the target, and leaves the verdict out without both rows', () => {
    expect(headOfLineReport([row(0, 10), row(1, 5)])).toContain('x0.50 (target <= 0.25: FAIL)');
    expect(headOfLineReport([row(1, 5)])).not.toContain('target');
  });
});

describe('searchReport', () => {
  const result = (mode: string, requestsPerSecond: number, p99: number): ModeResult => ({
    mode,
    completed: 500,
    errors: 0,
    messages: [],
    seconds: 5,
    requestsPerSecond,
    p50: 1,
    p99,
    max: p99 + 2,
    latencies: [],
    loopDelayMax: 0.5,
  });

  it('compares a stream per request with the shared stream on throughput and p99', () => {
    const pass = searchReport([
      { label: 'stream per request', result: result('task', 1200, 8) },
      { label: 'one shared stream', result: result('shared', 1000, 10) },
    ]);
    expect(pass).toMatch(
      /^stream per request\s+500\s+0\s+1200\.0\s+1\.00\s+8\.00\s+10\.00\s+0\.50$/m,
    );
    expect(pass).toContain(
      'throughput x1.20, p99 x0.80 (target: throughput >= x1 and p99 < x1: PASS)',
    );
    const fail = searchReport([
      { label: 'stream per request', result: result('task', 900, 8) },
      { label: 'one shared stream', result: result('shared', 1000, 10) },
    ]);
    expect(fail).toContain(
      'throughput x0.90, p99 x0.80 (target: throughput >= x1 and p99 < x1: FAIL)',
    );
    expect(fail).not.toContain('per round');
  });

  it('adds the ratios round by round, in whatever order the round ran its modes', () => {
    const text = searchReport(
      [
        { label: 'stream per request', result: result('task', 1200, 8) },
        { label: 'one shared stream', result: result('shared', 1000, 10) },
      ],
      [
        [result('task', 1100, 9), result('shared', 1000, 10)],
        [result('shared', 1000, 10), result('task', 1300, 7)],
      ],
    );
    expect(text.split('\n').at(-1)).toBe(
      'per round (stream per request / one shared stream): throughput x1.10, x1.30; p99 x0.90, x0.70',
    );
  });
});

describe('roundsLine', () => {
  const result = (mode: string, requestsPerSecond: number, p99: number): ModeResult => ({
    mode,
    completed: 1,
    errors: 0,
    messages: [],
    seconds: 1,
    requestsPerSecond,
    p50: 1,
    p99,
    max: p99,
    latencies: [],
    loopDelayMax: 0,
  });

  it('is undefined without rounds, or when a round lacks a mode', () => {
    expect(roundsLine([])).toBeUndefined();
    expect(roundsLine([[result('task', 1, 1)]])).toBeUndefined();
    expect(roundsLine([[result('remote', 1, 1)]])).toBeUndefined();
  });
});

describe('progressLine', () => {
  it('shows the phase, the seconds and per kind the counts and the p99 so far', () => {
    expect(
      progressLine({
        type: 'progress',
        label: 'one shared stream',
        phase: 'measured',
        elapsedSeconds: 3.4,
        byKind: {
          small: { issued: 600, completed: 598, errors: 0, p99: 12.345 },
          large: { issued: 12, completed: 11, errors: 1, p99: Number.NaN },
        },
      }),
    ).toBe(
      '  one shared stream, measured 3 s: small 598/600 answered, p99 12.35 ms; large 11/12 answered, 1 errors',
    );
    expect(
      progressLine({
        type: 'progress',
        label: 'x',
        phase: 'warm-up',
        elapsedSeconds: 0,
        byKind: { requests: { issued: 2, completed: 1, errors: 0, p99: 3 } },
      }),
    ).toBe('  x, warm-up 0 s: 1/2 answered, p99 3.00 ms');
  });
});
