import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  LOOP_DELAY_VARIABLE,
  LoopDelayMonitor,
  type LoopDelayReport,
  loopDelayLine,
  loopDelayWithin,
  MAX_LOOP_DELAY_BUCKETS,
  parseLoopDelayLines,
} from './loop-monitor.js';
import { serviceExecArgv } from './spawn-service.js';

/** Holds this thread for `ms`. */
function hold(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {}
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('LoopDelayMonitor', () => {
  it('keeps the largest delay of each bucket: a held loop shows in one, idle ones stay small', async () => {
    const monitor = new LoopDelayMonitor(20);
    monitor.start();
    await sleep(100);
    hold(120);
    await sleep(100);
    monitor.stop();
    const report = monitor.report();
    expect(report.pid).toBe(process.pid);
    expect(report.at.length).toBe(report.maxMs.length);
    expect(report.at.length).toBeGreaterThanOrEqual(5);
    const largest = Math.max(...report.maxMs);
    expect(largest).toBeGreaterThanOrEqual(100);
    expect(largest).toBeLessThan(1000);
    // Idle buckets saw far less than the hold.
    expect(Math.min(...report.maxMs)).toBeLessThan(50);
    for (let i = 1; i < report.at.length; i++) {
      expect(report.at[i]!).toBeGreaterThanOrEqual(report.at[i - 1]!);
    }
  });

  it('refuses a bucket under 10 ms', () => {
    expect(() => new LoopDelayMonitor(5)).toThrow(RangeError);
    expect(() => new LoopDelayMonitor(Number.NaN)).toThrow(RangeError);
  });
});

describe('the report read back', () => {
  const good: LoopDelayReport = {
    pid: 42,
    bucketMs: 100,
    at: [1000, 1100, 1200],
    maxMs: [1, 30, 2],
  };

  it('reads its lines among others, and leaves out what is not a well-formed report', () => {
    const lines = [
      'GPU service listening on http://127.0.0.1:1234',
      loopDelayLine(good),
      'loop-delay {not json',
      loopDelayLine({ ...good, pid: 0 }),
      loopDelayLine({ ...good, pid: 1.5 }),
      loopDelayLine({ ...good, bucketMs: 1 }),
      loopDelayLine({ ...good, at: [1000, 900, 1200] }),
      loopDelayLine({ ...good, maxMs: [1, -2, 3] }),
      loopDelayLine({ ...good, maxMs: [1, 2] }),
      `loop-delay ${JSON.stringify({ ...good, maxMs: [1, 'x', 3] })}`,
      `loop-delay ${JSON.stringify({ ...good, at: null })}`,
      'loop-delay 7',
      loopDelayLine({
        pid: 7,
        bucketMs: 100,
        at: Array.from({ length: MAX_LOOP_DELAY_BUCKETS + 1 }, (_, i) => i),
        maxMs: Array.from({ length: MAX_LOOP_DELAY_BUCKETS + 1 }, () => 0),
      }),
      loopDelayLine({ ...good, pid: 43 }),
    ];
    const reports = parseLoopDelayLines(lines.join('\n'));
    expect(reports.map((report) => report.pid)).toEqual([42, 43]);
    expect(reports[0]).toEqual(good);
  });

  it("takes the largest delay of the buckets that overlap the span, from every process's report", () => {
    const other: LoopDelayReport = { pid: 43, bucketMs: 100, at: [1050, 1150], maxMs: [5, 50] };
    // Buckets cover (at - 100, at]: [1000, 1100, 1200] cover (900,1000], (1000,1100], (1100,1200].
    expect(loopDelayWithin([good], 1000, 1100)).toBe(30);
    expect(loopDelayWithin([good], 1100.5, 1150)).toBe(2);
    expect(loopDelayWithin([good], 900, 1000)).toBe(1);
    expect(loopDelayWithin([good, other], 1000, 1100)).toBe(50);
    expect(loopDelayWithin([good, other], 1160, 1200)).toBe(2);
    // Nothing measured in the span (or no report at all): NaN, printed as '-'.
    expect(loopDelayWithin([good], 1300, 1400)).toBeNaN();
    expect(loopDelayWithin([], 0, 1e15)).toBeNaN();
  });
});

describe('a process asked to report', () => {
  const script = fileURLToPath(new URL('./loop-monitor.ts', import.meta.url));
  const program = (env: Record<string, string>) =>
    spawnSync(
      process.execPath,
      [
        ...serviceExecArgv(),
        '--input-type=module',
        '-e',
        `import { reportLoopDelayOnExit } from ${JSON.stringify(script)};
         reportLoopDelayOnExit();
         setTimeout(() => { const end = performance.now() + 150; while (performance.now() < end) {} }, 250);
         setTimeout(() => {}, 600);`,
      ],
      { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 30_000 },
    );

  it('writes one report at exit with the held loop in it; not asked, none', () => {
    const asked = program({ [LOOP_DELAY_VARIABLE]: '1' });
    expect(asked.status).toBe(0);
    const reports = parseLoopDelayLines(asked.stderr);
    expect(reports).toHaveLength(1);
    expect(reports[0]!.pid).toBe(asked.pid);
    expect(Math.max(...reports[0]!.maxMs)).toBeGreaterThanOrEqual(120);
    for (const value of ['0', 'yes', '']) {
      const other = program({ [LOOP_DELAY_VARIABLE]: value });
      expect(other.status).toBe(0);
      expect(parseLoopDelayLines(other.stderr)).toEqual([]);
    }
  }, 60_000);
});
