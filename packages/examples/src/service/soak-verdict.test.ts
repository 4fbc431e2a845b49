import { describe, expect, it } from 'vitest';
import {
  formatVerdict,
  gpuMemoryOf,
  judge,
  onlyProcessMemory,
  type SoakSample,
  slope,
  trendOf,
} from './soak-verdict.js';

/** Samples every 15 s for `minutes`, each figure from its function of the minute and index. */
function run(
  minutes: number,
  figures: { [K in keyof Omit<SoakSample, 'minutes'>]?: (t: number, i: number) => number },
): SoakSample[] {
  const samples: SoakSample[] = [];
  for (let i = 0; i * 0.25 <= minutes + 1e-9; i++) {
    const t = i * 0.25;
    const sample: SoakSample = { minutes: t };
    for (const [name, f] of Object.entries(figures)) {
      (sample as unknown as Record<string, number>)[name] = f!(t, i);
    }
    samples.push(sample);
  }
  return samples;
}

/** A repeatable jitter in [-1, 1]. */
const jitter = (i: number) => Math.sin(i * 12.9898) * 0.999;

describe('the soak verdict', () => {
  it('FLAT: a warm-up jump, then noise around a plateau', () => {
    const samples = run(10, {
      gpuMiB: (t, i) => (t < 1 ? 3120 + 1600 * t : 4784 + 20 * jitter(i)),
      rssMiB: (_t, i) => 670 + 8 * jitter(i + 1),
      poolReservedMiB: (t) => (t < 1 ? 1500 * t : 1500),
      poolUsedMiB: (_t, i) => (i % 3 === 0 ? 800 : 1200),
    });
    const verdict = judge(samples, 1);
    expect(verdict.status).toBe('FLAT');
    expect(verdict.growing).toEqual([]);
    expect(verdict.trends.gpuMiB!.samples).toBe(37);
    expect(Math.abs(verdict.trends.gpuMiB!.slopePerMinute)).toBeLessThan(5);
    const line = formatVerdict(verdict);
    expect(line).toMatch(/^soak: 10\.0 min \(warm-up 1\.0 min;/);
    expect(line).toContain('GPU memory');
    expect(line).toMatch(/: FLAT$/);
  });

  it('GROWING: the issue’s +100 MiB a round (a round of each workload every 30 s)', () => {
    const samples = run(10, {
      gpuMiB: (t) => 4784 + 100 * Math.floor(t / 0.5),
      rssMiB: () => 670,
      poolReservedMiB: (t) => 1600 + 100 * Math.floor(t / 0.5),
    });
    const verdict = judge(samples, 1);
    expect(verdict.status).toBe('GROWING');
    expect(verdict.growing).toEqual(['gpuMiB', 'poolReservedMiB']);
    expect(verdict.trends.gpuMiB!.slopePerMinute).toBeGreaterThan(150);
    expect(verdict.trends.gpuMiB!.slopePerMinute).toBeLessThan(250);
    expect(formatVerdict(verdict)).toMatch(/: GROWING \(gpuMiB, poolReservedMiB\)$/);
  });

  it('the tolerance: 64 MiB (or 2%) for GPU memory over the late half, against a slow leak', () => {
    // 37 samples from minute 1 to 10: the early half peaks at 5.25 min, the late one at 10.
    const slow = judge(run(10, { gpuMiB: (t) => 3000 + 5 * t }), 1);
    expect(slow.trends.gpuMiB!.growth).toBeCloseTo(5 * (10 - 5.25), 9);
    expect(slow.status).toBe('FLAT');
    const leak = judge(run(10, { gpuMiB: (t) => 3000 + 25 * t }), 1);
    expect(leak.trends.gpuMiB!.growth).toBeGreaterThan(64);
    expect(leak.status).toBe('GROWING');
    // 2% of a large footprint is more than 64 MiB: 2% of 10,000 MiB = 200 MiB allowed.
    const large = judge(run(10, { gpuMiB: (t) => 10_000 + 25 * t }), 1);
    expect(large.trends.gpuMiB!.allowed).toBeCloseTo(0.02 * (10_000 + 25 * 5.25), 9);
    expect(large.status).toBe('FLAT');
  });

  it('RSS growing alone is GROWING; the pool’s used bytes are reported, never judged', () => {
    const verdict = judge(
      run(6, {
        rssMiB: (t) => 600 + 40 * t,
        poolUsedMiB: (t) => 100 + 500 * t,
      }),
      1,
    );
    expect(verdict.growing).toEqual(['rssMiB']);
    expect(verdict.trends.poolUsedMiB!.growth).toBeGreaterThan(1000);
  });

  it('INCONCLUSIVE with fewer than 4 samples after warm-up; figures never measured are left out', () => {
    const verdict = judge(run(1.5, { rssMiB: () => 600 }), 1);
    expect(verdict.status).toBe('INCONCLUSIVE');
    expect(verdict.trends.gpuMiB).toBeUndefined();
    expect(formatVerdict(verdict)).toContain('GPU memory not measured');
    expect(formatVerdict(verdict)).toMatch(/INCONCLUSIVE/);
  });

  it('trendOf compares peaks of the halves; slope is least squares', () => {
    const samples = [1, 5, 2, 6, 3, 7].map((v, i) => ({ minutes: i, gpuMiB: v }));
    const trend = trendOf(samples, 'gpuMiB', { fraction: 0, mib: 1 })!;
    expect([trend.earlyPeak, trend.latePeak, trend.growth]).toEqual([5, 7, 2]);
    expect(trend.flat).toBe(false);
    expect(slope([0, 1, 2, 3], [1, 3, 5, 7])).toBeCloseTo(2, 12);
    expect(slope([1], [1])).toBe(0);
  });
});

describe('gpuMemoryOf (nvidia-smi --query-compute-apps=pid,used_memory)', () => {
  it('finds the pid, sums its lines, ignores others and garbage', () => {
    const csv = '4242, 3120\n77, 500\n4242, 10\nNo running processes found\n\n';
    expect(gpuMemoryOf(csv, 4242)).toBe(3130);
    expect(gpuMemoryOf(csv, 77)).toBe(500);
    expect(gpuMemoryOf(csv, 1)).toBeUndefined();
    expect(gpuMemoryOf('4242, [N/A]\n', 4242)).toBeUndefined();
  });
});

describe('onlyProcessMemory (a container whose nvidia-smi lists host pids)', () => {
  it('answers the one compute process, nothing for none or several', () => {
    expect(onlyProcessMemory('1026, 3120\n')).toBe(3120);
    expect(onlyProcessMemory('No running processes found\n')).toBeUndefined();
    expect(onlyProcessMemory('1026, 3120\n77, 500\n')).toBeUndefined();
    expect(onlyProcessMemory('1026, [N/A]\n')).toBeUndefined();
  });
});

describe('the soak command line', () => {
  it('every flag has a default; warm-up covers a round of each workload and at most half the run', async () => {
    const { parseSoakArguments } = await import('./soak.js');
    expect(parseSoakArguments([])).toEqual({
      minutes: 10,
      sampleSeconds: 15,
      roundSeconds: 20,
      warmupMinutes: 1,
      concurrency: 32,
      n: 512,
    });
    expect(parseSoakArguments(['--', '--round-seconds', '40']).warmupMinutes).toBe(2);
    expect(parseSoakArguments(['--minutes', '1']).warmupMinutes).toBe(0.5);
    expect(() => parseSoakArguments(['--minutes', '0'])).toThrow(
      /--minutes must be a number >= 0.1/,
    );
    expect(() => parseSoakArguments(['--n', '4096'])).toThrow(/at most 2048/);
    expect(() => parseSoakArguments(['--url', 'http://example.com'])).toThrow();
  });
});
