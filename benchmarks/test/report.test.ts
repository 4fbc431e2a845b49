import { describe, expect, it } from 'vitest';
import { medianInterval } from '../src/harness.js';
import {
  addLines,
  type BenchLine,
  buildTable,
  buildTargets,
  emptyCollected,
  formatPaired,
  formatTable,
  mergeRounds,
  pairedRatio,
  pairedVerdict,
  parseLines,
  splitRounds,
} from '../src/report.js';

// The benchmark report's arithmetic (src/report.ts): how rounds merge and how ours/C is
// computed. Pure functions; no GPU.

const line = (name: string, median_us: number, extra?: Record<string, number>): BenchLine => ({
  name,
  median_us,
  ...(extra ? { extra } : {}),
});

describe('rounds', () => {
  it('splitRounds cuts where a name comes again; mergeRounds takes the median of the rounds', () => {
    const text = [
      '{"name":"launch_empty","median_us":3.0}',
      '{"name":"alloc_free","median_us":0.5}',
      'not json',
      '{"name":"launch_empty","median_us":3.6}',
      '{"name":"alloc_free","median_us":0.7}',
      '{"name":"launch_empty","median_us":3.2}',
      '{"name":"alloc_free","median_us":0.6}',
      '{"name":"_meta","device":"H200"}',
    ].join('\n');
    const rounds = splitRounds(parseLines(text));
    expect(rounds.map((round) => round.map((l) => l.name))).toEqual([
      ['launch_empty', 'alloc_free'],
      ['launch_empty', 'alloc_free'],
      ['launch_empty', 'alloc_free', '_meta'],
    ]);
    const merged = mergeRounds(rounds);
    const launch = merged.find((l) => l.name === 'launch_empty')!;
    expect(launch.median_us).toBe(3.2);
    expect(launch.rounds_us).toEqual([3.0, 3.6, 3.2]);
    expect(merged.find((l) => l.name === 'alloc_free')!.median_us).toBeCloseTo(0.6, 12);
    expect(merged.find((l) => l.name === '_meta')).toEqual({ name: '_meta', device: 'H200' });
  });

  it('mergeRounds: the median of an even count is the mean of the middle two; max_ extras take the largest', () => {
    const merged = mergeRounds([
      [line('tasks100', 500, { max_event_loop_delay_us: 10, other: 1 })],
      [line('tasks100', 700, { max_event_loop_delay_us: 30, other: 5 })],
    ]);
    expect(merged[0]!.median_us).toBe(600);
    expect(merged[0]!.extra).toEqual({ max_event_loop_delay_us: 30, other: 3 });
  });

  it('one round passes through unchanged', () => {
    const only = [line('launch_empty', 3.3)];
    expect(mergeRounds([only])).toEqual(only);
  });
});

describe('pairedRatio', () => {
  it('with rounds on both sides: the median of the per-round ratios, not the ratio of medians', () => {
    // Round 3 drifted on both sides: the paired ratios are 1.0, 1.1, 1.0.
    const ours = { ...line('x', 0), median_us: 4.4, rounds_us: [3.0, 4.4, 6.0] };
    const c = { ...line('x', 0), median_us: 4.0, rounds_us: [3.0, 4.0, 6.0] };
    expect(pairedRatio(ours, c)).toBe(1.0);
    expect(4.4 / 4.0).toBeCloseTo(1.1, 12); // what the ratio of medians would have said
  });

  it('without matching rounds: the ratio of the medians; undefined when a side is missing', () => {
    expect(pairedRatio(line('x', 6), line('x', 4))).toBe(1.5);
    const two = { ...line('x', 5), rounds_us: [4, 6] };
    const three = { ...line('x', 4), rounds_us: [4, 4, 4] };
    expect(pairedRatio(two, three)).toBe(1.25);
    expect(pairedRatio(undefined, line('x', 4))).toBeUndefined();
    expect(pairedRatio(line('x', 4), { name: 'x' })).toBeUndefined();
  });
});

describe('the table and the seed targets', () => {
  it('uses paired ratios for ours/C, the notes and the seed targets', () => {
    const collected = emptyCollected();
    const rounds = (values: number[]) => ({ rounds_us: values });
    addLines(collected, 'ours', [
      { ...line('launch_empty', 3.5), ...rounds([3.0, 3.5, 5.0]) },
      { ...line('withstream_launch', 3.6), ...rounds([3.1, 3.6, 5.2]) },
      { ...line('seed_serial', 140), ...rounds([140, 150, 130]) },
      { ...line('seed_concurrent', 126), ...rounds([126, 120, 117]) },
    ]);
    addLines(collected, 'c', [
      { ...line('launch_empty', 3.2), ...rounds([3.0, 3.2, 5.0]) },
      { ...line('launch_switch', 3.1), ...rounds([3.1, 3.0, 5.0]) },
      { ...line('seed_serial', 135), ...rounds([135, 136, 134]) },
      { ...line('seed_concurrent', 118), ...rounds([118, 119, 117]) },
    ]);
    const rows = buildTable(collected);
    const launch = rows.find((row) => row.operation === 'launch_empty')!;
    // Per round 1.0, 1.09375, 1.0: median 1.0 (the ratio of medians would be 1.09).
    expect(launch.oursOverC).toBe(1);
    const switched = rows.find((row) => row.operation === 'withstream_launch')!;
    expect(switched.cId).toBe('launch_switch');
    expect(switched.oursOverC).toBeCloseTo(1.04, 12); // 1.0, 1.2, 1.04
    expect(switched.notes).toContain('vs C launch_empty 1.04x'); // 1.0333, 1.125, 1.04
    const [overlap, versusC] = buildTargets(collected);
    // ours concurrent/serial per round: 0.9, 0.8, 0.9 -> 0.9
    expect(overlap!.value).toBeCloseTo(0.9, 12);
    expect(overlap!.met).toBe(false);
    // ours/C concurrent per round: 1.0678, 1.0084, 1.0 -> 1.0084
    expect(versusC!.value).toBeCloseTo(120 / 119, 12);
    expect(versusC!.met).toBe(true);
    const text = formatTable(rows, buildTargets(collected), collected);
    expect(text).toContain('3 rounds, C and ours alternating');
    expect(text).toMatch(/seed vs C: {4}ours seed_concurrent \/ C seed_concurrent = 1\.01x/);
  });
});

describe('same-process table', () => {
  it('formatPaired shows each pair line against its target and the seed overlap of both sides', () => {
    const lines = parseLines(
      [
        '{"name":"launch_empty","paired":true,"ours_us":4.2,"c_us":4.1,"ratio":1.03,"pairs":15,"c_call":"cuLaunchKernel"}',
        '{"name":"sgemm_8","paired":true,"ours_us":9.5,"c_us":8.5,"ratio":1.11,"pairs":15,"c_call":"cublasSgemm 8x8x8"}',
        '{"name":"seed_serial","paired":true,"ours_us":150,"c_us":140,"ratio":1.07,"pairs":201,"c_call":"x"}',
        '{"name":"seed_concurrent","paired":true,"ours_us":120,"c_us":119,"ratio":1.01,"pairs":201,"c_call":"y"}',
        '{"name":"launch_empty","median_us":4.0}',
      ].join('\n'),
    );
    const text = formatPaired(lines);
    const row = (name: string) => text.split('\n').find((l) => l.startsWith(`${name} `))!;
    expect(row('launch_empty')).toMatch(/4\.200\s+4\.100\s+1\.03x\s+1\.05x PASS\s+cuLaunchKernel/);
    expect(row('sgemm_8')).toMatch(/1\.11x\s+1\.08x FAIL/);
    expect(row('seed_concurrent')).toMatch(/1\.01x\s+1\.05x PASS/);
    // seed_serial has no target of its own.
    expect(row('seed_serial')).not.toMatch(/PASS|FAIL/);
    // 120 / 150 = 0.800 for ours, 119 / 140 = 0.850 for C.
    expect(text).toContain('ours concurrent/serial = 0.800 (target <= 0.85) PASS   [C 0.850]');
    // Only the paired lines count: the plain launch_empty line makes no second row.
    expect(text.split('\n').filter((l) => l.startsWith('launch_empty ')).length).toBe(1);
  });

  it('formatPaired shows the 95% interval and says "clear" only when it is wholly on one side', () => {
    const lines = parseLines(
      [
        '{"name":"launch_empty","paired":true,"ours_us":4.2,"c_us":4.0,"ratio":1.07,"ratio_lo":1.06,"ratio_hi":1.09,"pairs":25,"c_call":"cuLaunchKernel"}',
        '{"name":"withstream_launch","paired":true,"ours_us":4.2,"c_us":4.0,"ratio":1.07,"ratio_lo":1.04,"ratio_hi":1.1,"pairs":25,"c_call":"x"}',
        '{"name":"sgemm_8","paired":true,"ours_us":6,"c_us":6.2,"ratio":0.97,"ratio_lo":0.95,"ratio_hi":0.99,"pairs":25,"c_call":"y"}',
      ].join('\n'),
    );
    const text = formatPaired(lines);
    const row = (name: string) => text.split('\n').find((l) => l.startsWith(`${name} `))!;
    expect(row('launch_empty')).toMatch(/1\.07x\s+1\.06-1\.09\s+1\.05x FAIL clear/);
    expect(row('withstream_launch')).toMatch(/1\.07x\s+1\.04-1\.10\s+1\.08x PASS\s/);
    expect(row('sgemm_8')).toMatch(/0\.97x\s+0\.95-0\.99\s+1\.08x PASS clear/);
  });

  it('formatPaired holds tasks100 to 1.15x C; its floor rows have no target', () => {
    const lines = parseLines(
      [
        '{"name":"tasks100","paired":true,"ours_us":700,"c_us":530,"ratio":1.32,"ratio_lo":1.3,"ratio_hi":1.35,"pairs":25,"c_call":"c"}',
        '{"name":"tasks100_bare_koffi","paired":true,"ours_us":600,"c_us":530,"ratio":1.13,"pairs":25,"c_call":"c"}',
        '{"name":"tasks100_over_floor","paired":true,"ours_us":700,"c_us":600,"ratio":1.17,"pairs":25,"c_call":"f"}',
      ].join('\n'),
    );
    const text = formatPaired(lines);
    const row = (name: string) => text.split('\n').find((l) => l.startsWith(`${name} `))!;
    expect(row('tasks100')).toMatch(/1\.32x\s+1\.30-1\.35\s+1\.15x FAIL clear/);
    expect(row('tasks100_bare_koffi')).not.toMatch(/PASS|FAIL/);
    expect(row('tasks100_over_floor')).not.toMatch(/PASS|FAIL/);
  });

  it('formatPaired holds the latency-bound job to 1.11x C (0.9x its jobs/s); its other rows have no target', () => {
    const lines = parseLines(
      [
        '{"name":"latency_job","paired":true,"ours_us":110,"c_us":100,"ratio":1.1,"ratio_lo":1.08,"ratio_hi":1.13,"pairs":25,"c_call":"c"}',
        '{"name":"latency_job_c_sync","paired":true,"ours_us":110,"c_us":120,"ratio":0.92,"ratio_lo":0.9,"ratio_hi":0.94,"pairs":25,"c_call":"c"}',
        '{"name":"latency_job_bare_koffi","paired":true,"ours_us":100,"c_us":100,"ratio":1.0,"pairs":25,"c_call":"c"}',
        '{"name":"latency_job_over_floor","paired":true,"ours_us":110,"c_us":100,"ratio":1.1,"pairs":25,"c_call":"f"}',
      ].join('\n'),
    );
    const text = formatPaired(lines);
    const row = (name: string) => text.split('\n').find((l) => l.startsWith(`${name} `))!;
    expect(row('latency_job')).toMatch(/1\.10x\s+1\.08-1\.13\s+1\.11x PASS\s/);
    for (const name of ['latency_job_c_sync', 'latency_job_bare_koffi', 'latency_job_over_floor']) {
      expect(row(name)).not.toMatch(/PASS|FAIL/);
    }
  });

  it('pairedVerdict: by the median; clear when the interval does not reach across the target', () => {
    expect(pairedVerdict(1.04, 1.02, 1.05, 1.05)).toBe('PASS clear');
    expect(pairedVerdict(1.04, 1.02, 1.06, 1.05)).toBe('PASS');
    expect(pairedVerdict(1.06, 1.05, 1.08, 1.05)).toBe('FAIL');
    expect(pairedVerdict(1.06, 1.051, 1.08, 1.05)).toBe('FAIL clear');
    expect(pairedVerdict(1.04, undefined, undefined, 1.05)).toBe('PASS');
    expect(pairedVerdict(undefined, undefined, undefined, 1.05)).toBe('FAIL');
  });

  it('formatPaired is empty without paired lines', () => {
    expect(formatPaired([line('launch_empty', 4)])).toBe('');
  });
});

describe('medianInterval', () => {
  const ranks = (n: number) => Array.from({ length: n }, (_, i) => n - i); // unsorted input
  it('gives the order statistics of the binomial table for the median (95%)', () => {
    // Tabulated ranks: n = 15 -> 4th and 12th, n = 25 -> 8th and 18th, n = 6 -> 1st and 6th.
    expect(medianInterval(ranks(15))).toEqual([4, 12]);
    expect(medianInterval(ranks(25))).toEqual([8, 18]);
    expect(medianInterval(ranks(6))).toEqual([1, 6]);
  });
  it('matches the normal approximation for large n, and covers at least 95%', () => {
    // n = 201: 101 +- 1.96 * sqrt(201) / 2 = 101 +- 13.9.
    expect(medianInterval(ranks(201))).toEqual([87, 115]);
    // Coverage of [x(j), x(n+1-j)] computed independently with exact binomial sums.
    for (const n of [6, 10, 15, 25, 40]) {
      const [low] = medianInterval(ranks(n));
      let below = 0;
      for (let i = 0; i < low; i++) below += binomial(n, i) / 2 ** n;
      expect(1 - 2 * below).toBeGreaterThanOrEqual(0.95);
      // One rank narrower would fall short.
      below += binomial(n, low) / 2 ** n;
      expect(1 - 2 * below).toBeLessThan(0.95);
    }
  });
  it('returns the whole range for tiny samples and NaN for none', () => {
    expect(medianInterval([3, 1, 2])).toEqual([1, 3]);
    expect(medianInterval([]).every(Number.isNaN)).toBe(true);
  });
});

function binomial(n: number, k: number): number {
  let value = 1;
  for (let i = 1; i <= k; i++) value = (value * (n - k + i)) / i;
  return value;
}

describe('the expression-kernel rows and targets', () => {
  const kernelsCollected = () => {
    const collected = emptyCollected();
    addLines(collected, 'ours', [
      line('sin_1m', 4.4),
      line('sin_1m_handwritten', 4.0),
      line('sin_1m_issue', 3.15),
      line('sin_1m_issue_handwritten', 3.0),
      line('sum_64m', 72, { bandwidth_gbs: 3728, bandwidth_fraction: 3728 / 4800 }),
    ]);
    addLines(collected, 'cupy', [
      { name: 'sin_1m', peer: 'cupy', median_us: 5 },
      { name: 'sum_64m', peer: 'cupy', median_us: 70, extra: { bandwidth_gbs: 3835 } },
    ]);
    addLines(collected, 'cupy', [{ name: 'sum_64m', peer: 'torch', median_us: 64 }]);
    return collected;
  };

  it('compares ours with the hand-written kernel in the notes, and shows the bandwidths', () => {
    const rows = buildTable(kernelsCollected());
    const sin = rows.find((row) => row.operation === 'sin_1m')!;
    expect(sin.notes).toContain('vs hand-written 1.10x');
    expect(sin.cupy).toBe(5);
    expect(sin.oursOverBestPeer).toBeCloseTo(0.88, 12);
    expect(rows.find((row) => row.operation === 'sin_1m_issue')!.notes).toContain(
      'vs hand-written launch 1.05x',
    );
    const total = rows.find((row) => row.operation === 'sum_64m')!;
    expect(total.bestPeer).toBe('torch');
    expect(total.notes).toContain('GB/s of 4800: ours 3728 (78%), cupy 3835 (80%)');
  });

  it('leaves out a bandwidth that is not a finite number (a zero time read back from JSON)', () => {
    const collected = emptyCollected();
    addLines(collected, 'ours', [
      { ...line('sum_64m', 0), extra: { bandwidth_gbs: null as unknown as number } },
    ]);
    addLines(collected, 'cupy', [
      { name: 'sum_64m', peer: 'cupy', median_us: 70, extra: { bandwidth_gbs: 3835 } },
    ]);
    const total = buildTable(collected).find((row) => row.operation === 'sum_64m')!;
    expect(total.notes).toContain('GB/s of 4800: cupy 3835 (80%)');
  });

  it('targets: issue cost <= 1.05x the hand-written launch; sum <= 1.1x the faster peer', () => {
    const targets = buildTargets(kernelsCollected());
    const issue = targets.find((target) => target.name === 'kernels_sin_issue')!;
    expect(issue.value).toBeCloseTo(1.05, 12);
    expect(issue.met).toBe(true);
    const sum = targets.find((target) => target.name === 'kernels_sum_vs_peers')!;
    expect(sum.value).toBeCloseTo(72 / 64, 12);
    expect(sum.met).toBe(false);
    const text = formatTable(buildTable(kernelsCollected()), targets, kernelsCollected());
    expect(text).toContain('(target <= 1.1x) FAIL');
    // Without those lines there are no such targets.
    expect(buildTargets(emptyCollected()).map((target) => target.name)).toEqual([
      'seed_overlap',
      'seed_vs_c',
    ]);
  });
});
