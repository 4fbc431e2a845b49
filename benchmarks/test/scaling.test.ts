import { type SpawnSyncReturns, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderScalingSvg, speedupRange } from '../src/scaling-chart.js';
import {
  interleave,
  parseScalingArguments,
  SCALING_DEFAULTS,
  samplesFor,
  scalingArguments,
} from '../src/scaling-config.js';
import {
  buildScaling,
  formatRate,
  formatScaling,
  parseScalingLines,
  type ScalingSystem,
  scalingJson,
  scalingTargets,
  turnRatio,
} from '../src/scaling-report.js';

// The concurrency scaling report on fixture lines: parsing, jobs/s and speedups from the
// batch medians, the targets, the table, the JSON and the chart; and `run.ts --only scaling
// --from DIR` end to end (no GPU: --from runs nothing).

const packageRoot = fileURLToPath(new URL('..', import.meta.url));
const jsonl = (lines: readonly object[]) => `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;

/**
 * A result line whose median batch lasts k / rate seconds (so jobs/s = rate): the median of
 * three samples, with the other two off by 50% either way.
 */
const line = (system: string, shape: string, k: number, rate: number, mode = 'concurrent') => {
  const jobs = mode === 'serial' ? 8 : k;
  const middle = jobs / rate;
  return {
    name: 'scaling',
    system,
    shape,
    k,
    mode,
    jobs,
    seconds: [middle * 1.5, middle, middle * 0.5],
  };
};

/** Jobs/s per K for each system: ours scales best on latency, C threads on mixed. */
const RATES: Record<string, Record<string, number[]>> = {
  latency: {
    ours: [1050, 1900, 3600, 6000],
    c_threads: [1100, 2000, 3800, 6400],
    c_polling: [1100, 2000, 3700, 6500],
    cupy: [500, 900, 1500, 2000],
    torch: [600, 1000, 1800, 2600],
  },
  mixed: {
    ours: [400, 760, 1400, 2000],
    c_threads: [500, 950, 1800, 3000], // ours/C at K = 8: 0.667, below 0.9
    c_polling: [450, 800, 1500, 2500],
    cupy: [300, 500, 1500, 2100], // CuPy ahead of ours at K = 4 and 8
    torch: [200, 300, 400, 500],
  },
};
const KS = [1, 2, 4, 8];

function fixtureLines(): object[] {
  const lines: object[] = [];
  for (const [shape, bySystem] of Object.entries(RATES)) {
    for (const [system, rates] of Object.entries(bySystem)) {
      lines.push(line(system, shape, 1, rates[0]! * 0.9, 'serial'));
      for (const [index, k] of KS.entries()) lines.push(line(system, shape, k, rates[index]!));
    }
  }
  return lines;
}

describe('scaling settings', () => {
  it('round-trips through key=value arguments, the form C and Python read', () => {
    const config = parseScalingArguments(scalingArguments(SCALING_DEFAULTS));
    expect(config).toEqual(SCALING_DEFAULTS);
    const custom = parseScalingArguments(['ks=1,4', 'shapes=mixed', 'mixed_n=128', 'warmups=0']);
    expect(custom.ks).toEqual([1, 4]);
    expect(custom.shapes).toEqual(['mixed']);
    expect(custom.mixedN).toBe(128);
    expect(custom.warmups).toBe(0);
    expect(scalingArguments(custom)).toContain('mixed_n=128');
  });

  it('rejects unknown settings, shapes and non-integers', () => {
    expect(() => parseScalingArguments(['fast=1'])).toThrow(/unknown setting 'fast'/);
    expect(() => parseScalingArguments(['shapes=latency,huge'])).toThrow(/unknown shape 'huge'/);
    expect(() => parseScalingArguments(['ks=1,0'])).toThrow(/ks must be an integer >= 1/);
    expect(() => parseScalingArguments(['mixed_n=2.5'])).toThrow(/mixed_n/);
    expect(() => parseScalingArguments(['ks'])).toThrow(/expected key=value/);
  });

  it('interleaves the variants of one process in rounds, each getting all its batches', () => {
    const turns = interleave(3, 3, 10);
    // Rounds of 4, 3 and 3 batches; the middle round in reverse order.
    expect(turns.map((t) => `${t.variant}:${t.samples}`)).toEqual([
      '0:4',
      '1:4',
      '2:4',
      '2:3',
      '1:3',
      '0:3',
      '0:3',
      '1:3',
      '2:3',
    ]);
    for (const [variants, rounds, samples] of [
      [2, 3, 7],
      [1, 3, 9],
      [3, 3, 2],
      [2, 1, 5],
    ] as const) {
      const total = new Map<number, number>();
      for (const turn of interleave(variants, rounds, samples)) {
        expect(turn.samples).toBeGreaterThan(0);
        total.set(turn.variant, (total.get(turn.variant) ?? 0) + turn.samples);
      }
      expect([...total.keys()].sort()).toEqual(Array.from({ length: variants }, (_, i) => i));
      for (const value of total.values()) expect(value).toBe(samples);
    }
    // Fewer batches than rounds: one round per batch, never an empty turn.
    expect(interleave(2, 3, 2)).toHaveLength(4);
  });

  it('gives small K more batches, so that every K times about sampleJobs jobs', () => {
    expect(samplesFor({ minSamples: 5, sampleJobs: 64 }, 1)).toBe(64);
    expect(samplesFor({ minSamples: 5, sampleJobs: 64 }, 8)).toBe(8);
    expect(samplesFor({ minSamples: 5, sampleJobs: 64 }, 16)).toBe(5);
    expect(samplesFor({ minSamples: 5, sampleJobs: 64 }, 3)).toBe(22);
  });
});

describe('parseScalingLines', () => {
  it('keeps valid result lines, _skip and _meta lines, and ignores the rest', () => {
    const text = `text from a program\n${jsonl([
      line('ours', 'latency', 1, 100),
      { name: 'launch_empty', median_us: 3 }, // another benchmark's line
      { ...line('ours', 'latency', 2, 100), system: 'julia' }, // unknown system
      { ...line('ours', 'latency', 2, 100), shape: 'huge' }, // unknown shape
      { ...line('ours', 'latency', 2, 100), seconds: [] }, // no samples
      { ...line('ours', 'latency', 2, 100), seconds: [0.1, -1] }, // a negative time
      { ...line('ours', 'latency', 2, 100), k: 0 },
      { name: '_skip', system: 'torch', reason: 'import torch failed' },
      { name: '_meta', system: 'cupy', version: '13.4' },
      line('ours', 'latency', 1, 200), // the same cell again: replaces the first
    ])}{"name": "scaling", broken json\n`;
    const collected = parseScalingLines(text);
    expect(collected.lines).toHaveLength(1);
    expect(collected.lines[0]!.seconds[1]).toBeCloseTo(1 / 200, 12);
    expect(collected.skipped).toEqual([{ system: 'torch', reason: 'import torch failed' }]);
    expect(collected.meta).toEqual({ cupy: { version: '13.4' } });
  });
});

describe('buildScaling', () => {
  const results = buildScaling(parseScalingLines(jsonl(fixtureLines())).lines);

  it('gives jobs/s from the median batch and the speedup over K = 1 of the same system', () => {
    expect(results.map((result) => result.shape)).toEqual(['latency', 'mixed']);
    const latency = results[0]!;
    expect(latency.rows.map((row) => row.k)).toEqual(KS);
    for (const [index, row] of latency.rows.entries()) {
      for (const [system, rates] of Object.entries(RATES.latency!)) {
        const cell = row.cells[system as ScalingSystem]!;
        expect(cell.jobsPerSecond).toBeCloseTo(rates[index]!, 6);
        expect(cell.medianSeconds).toBeCloseTo(row.k / rates[index]!, 12);
        expect(cell.samples).toBe(3);
        expect(cell.speedup).toBeCloseTo(rates[index]! / rates[0]!, 9);
      }
    }
    expect(latency.serial.ours!.jobsPerSecond).toBeCloseTo(1050 * 0.9, 6);
    expect(latency.serial.ours!.speedup).toBeUndefined();
  });

  it('sorts K and leaves the speedup out where K = 1 did not run', () => {
    const [result] = buildScaling(
      parseScalingLines(jsonl([line('ours', 'control', 4, 40), line('ours', 'control', 2, 30)]))
        .lines,
    );
    expect(result!.rows.map((row) => row.k)).toEqual([2, 4]);
    expect(result!.rows[0]!.cells.ours!.speedup).toBeUndefined();
  });

  it('takes the median of an even number of batches as the mean of the middle two', () => {
    const [result] = buildScaling([
      {
        name: 'scaling',
        system: 'ours',
        shape: 'latency',
        k: 2,
        mode: 'concurrent',
        jobs: 2,
        seconds: [4, 1, 3, 2],
      },
    ]);
    expect(result!.rows[0]!.cells.ours!.medianSeconds).toBe(2.5);
    expect(result!.rows[0]!.cells.ours!.jobsPerSecond).toBeCloseTo(0.8, 12);
  });
});

describe('scalingTargets', () => {
  const results = buildScaling(parseScalingLines(jsonl(fixtureLines())).lines);
  const targets = scalingTargets(results);
  const find = (shape: string, name: string) =>
    targets.find((target) => target.shape === shape && target.name === name)!;

  it('checks ours against the better C variant at every K (>= 0.9x)', () => {
    // latency: ours/best-C is 1050/1100, 1900/2000, 3600/3800, 6000/6500: worst 0.923 at K = 8.
    expect(find('latency', 'vs_c').met).toBe(true);
    expect(find('latency', 'vs_c').worst!.k).toBe(8);
    expect(find('latency', 'vs_c').worst!.ratio).toBeCloseTo(6000 / 6500, 9);
    expect(find('latency', 'vs_c').checked).toEqual(KS);
    // mixed: 2000 / 3000 at K = 8.
    expect(find('mixed', 'vs_c').met).toBe(false);
    expect(find('mixed', 'vs_c').worst).toEqual({ k: 8, ratio: 2000 / 3000 });
  });

  it('checks ours ahead of both Python peers from K = 4 only', () => {
    expect(find('latency', 'vs_peers').met).toBe(true);
    expect(find('latency', 'vs_peers').checked).toEqual([4, 8]);
    expect(find('mixed', 'vs_peers').met).toBe(false); // CuPy 1500 > ours 1400 at K = 4
    expect(find('mixed', 'vs_peers').worst!.k).toBe(4);
  });

  it('has no target on the control shape, and "not measured" without the other side', () => {
    const control = buildScaling(
      parseScalingLines(jsonl([line('ours', 'control', 1, 10), line('ours', 'latency', 4, 10)]))
        .lines,
    );
    const only = scalingTargets(control);
    expect(only.map((target) => target.shape)).toEqual([
      'latency',
      'latency',
      'latency',
      'latency',
      'latency',
      'latency',
    ]);
    expect(only.map((target) => target.name)).toEqual([
      'vs_c',
      'vs_peers',
      'workers_vs_c',
      'workers_vs_peers',
      'engine_vs_c',
      'engine_vs_peers',
    ]);
    for (const target of only) {
      expect(target.met).toBeUndefined();
      expect(target.checked).toEqual([]);
    }
  });
});

describe('formatScaling', () => {
  const results = buildScaling(parseScalingLines(jsonl(fixtureLines())).lines);
  const text = formatScaling(results, scalingTargets(results), SCALING_DEFAULTS);
  const lines = text.split('\n');

  it('prints per shape a row per K with jobs/s, speedups and ours over C and the peers', () => {
    expect(text).toContain('latency-bound: 20 x elementwise axpb over 65,536 floats');
    const k8 = lines.filter((l) => l.startsWith('8 '));
    expect(k8).toHaveLength(2);
    // latency at K = 8: ours 6,000 (6000/1050), C threads 6,400 (/1100), C polling 6,500 (/1100).
    expect(k8[0]).toMatch(/^8\s+6,000 \(5\.71x\)\s+6,400 \(5\.82x\)\s+6,500 \(5\.91x\)/);
    expect(k8[0]).toContain(`${(6000 / 6500).toFixed(2)}x`);
    expect(k8[0]).toContain(`${(6000 / 2600).toFixed(2)}x`);
    expect(lines.filter((l) => l.startsWith('serial ')).length).toBe(2);
  });

  it('prints the targets with their verdicts and the worst K', () => {
    expect(text).toContain(
      'latency-bound: ours >= 0.9x the better C variant at every K: PASS (lowest 0.92x at K = 8)',
    );
    expect(text).toContain(
      'mixed: ours >= 0.9x the better C variant at every K: FAIL (lowest 0.67x at K = 8)',
    );
    expect(text).toContain('mixed: ours ahead of CuPy and PyTorch at every K >= 4: FAIL');
  });

  it('shows the graph replays beside the eager rows of the latency shape, out of the targets', () => {
    const graphRates = [3000, 5600, 10_000, 15_000];
    const withGraph = [
      ...fixtureLines(),
      line('ours_graph', 'latency', 1, graphRates[0]! * 0.9, 'serial'),
      ...KS.map((k, index) => line('ours_graph', 'latency', k, graphRates[index]!)),
    ];
    const built = buildScaling(parseScalingLines(jsonl(withGraph)).lines);
    const table = formatScaling(built, scalingTargets(built), SCALING_DEFAULTS).split('\n');
    const k8 = table.filter((l) => l.startsWith('8 '));
    // latency at K = 8: ours 6,000, then the replays 15,000 (15000/3000 = 5x), then C.
    expect(k8[0]).toMatch(/^8\s+6,000 \(5\.71x\)\s+15,000 \(5\.00x\)\s+6,400/);
    expect(k8[1]).toMatch(/^8\s+2,000 \(5\.00x\)\s+-\s+3,000/); // mixed: no graph variant
    // The targets still compare the eager rows: unchanged.
    expect(scalingTargets(built)).toEqual(scalingTargets(results));
  });

  it('shows the Node floor beside ours, ours over it, and the floor at the worst K of a missed target', () => {
    // The floor of the latency shape below C threads at K = 8; ours 0.8x C threads there.
    const floorRates = [1080, 1950, 3700, 6100];
    const oursRates = [1050, 1900, 3600, 5120];
    const withFloor = [
      ...fixtureLines().filter(
        (l) =>
          !(
            (l as { system: string }).system === 'ours' &&
            (l as { shape: string }).shape === 'latency'
          ),
      ),
      line('ours', 'latency', 1, 1000, 'serial'),
      ...KS.map((k, index) => line('ours', 'latency', k, oursRates[index]!)),
      line('ours_floor', 'latency', 1, 1000, 'serial'),
      ...KS.map((k, index) => line('ours_floor', 'latency', k, floorRates[index]!)),
    ];
    const built = buildScaling(parseScalingLines(jsonl(withFloor)).lines);
    const targets = scalingTargets(built);
    const latency = targets.find((t) => t.shape === 'latency' && t.name === 'vs_c')!;
    expect(latency.met).toBe(false);
    expect(latency.worst).toEqual({ k: 8, ratio: 5120 / 6500 });
    expect(latency.floor!.ratio).toBeCloseTo(6100 / 6500, 12);
    expect(latency.floor!.oursOverFloor).toBeCloseTo(5120 / 6100, 12);
    // Only the target against C names the floor; no floor ran on the mixed shape.
    expect(
      targets.find((t) => t.shape === 'latency' && t.name === 'vs_peers')!.floor,
    ).toBeUndefined();
    expect(targets.find((t) => t.shape === 'mixed' && t.name === 'vs_c')!.floor).toBeUndefined();
    const table = formatScaling(built, targets, SCALING_DEFAULTS);
    expect(table).toContain('ours/floor');
    const k8 = table.split('\n').filter((l) => l.startsWith('8 '));
    expect(k8[0]).toContain(`${(5120 / 6100).toFixed(2)}x`);
    expect(k8[1]!.trimEnd().endsWith(`${(2000 / 2100).toFixed(2)}x`)).toBe(true); // mixed: no floor column
    expect(table).toContain(
      `FAIL (lowest ${(5120 / 6500).toFixed(2)}x at K = 8; there the Node floor is ${(6100 / 6500).toFixed(2)}x of C, and ours ${(5120 / 6100).toFixed(2)}x of the floor)`,
    );
  });

  it('takes ours over the floor within each round of their turns, so a step in the host speed moves one round only', () => {
    // Three rounds (ours, floor | floor, ours | ours, floor); the host slowed down by 40% just
    // before ours' second turn. Pooled, ours' median falls among its slow batches and the
    // floor's among its fast ones; round by round, ours is 0.92x, 0.64x and 0.89x the floor.
    const us = (value: number) => value / 1e6;
    const turn = (value: number, count: number) => Array.from({ length: count }, () => us(value));
    const ours = {
      name: 'scaling',
      system: 'ours',
      shape: 'latency',
      k: 1,
      mode: 'concurrent',
      jobs: 1,
      seconds: [...turn(104, 5), ...turn(145, 5), ...turn(145, 5)],
      turns: [5, 5, 5],
    };
    const floor = {
      ...ours,
      system: 'ours_floor',
      seconds: [...turn(96, 5), ...turn(93, 5), ...turn(129, 5)],
    };
    const built = buildScaling(parseScalingLines(jsonl([ours, floor])).lines);
    const row = built[0]!.rows[0]!;
    expect(row.cells.ours!.turnMedians!.map((s) => s * 1e6)).toEqual(
      [104, 145, 145].map((v) => expect.closeTo(v, 9)),
    );
    expect(row.cells.ours!.jobsPerSecond / row.cells.ours_floor!.jobsPerSecond).toBeCloseTo(
      96 / 145,
      12,
    );
    expect(turnRatio(row.cells.ours!, row.cells.ours_floor!)).toBeCloseTo(129 / 145, 12);
    const table = formatScaling(built, scalingTargets(built), SCALING_DEFAULTS);
    expect(
      table
        .split('\n')
        .find((l) => l.startsWith('1 '))!
        .trimEnd(),
    ).toMatch(new RegExp(`${(129 / 145).toFixed(2)}x$`));
    // Without turns (or with turns that do not add up), the ratio of the pooled medians.
    const plain = buildScaling(
      parseScalingLines(
        jsonl([
          { ...ours, turns: undefined },
          { ...floor, turns: [5, 5, 4] },
        ]),
      ).lines,
    )[0]!.rows[0]!;
    expect(plain.cells.ours!.turnMedians).toBeUndefined();
    expect(plain.cells.ours_floor!.turnMedians).toBeUndefined();
    expect(turnRatio(plain.cells.ours!, plain.cells.ours_floor!)).toBeCloseTo(96 / 145, 12);
  });

  it('formats rates with separators, and "-" for nothing', () => {
    expect(formatRate(123456.7)).toBe('123,457');
    expect(formatRate(42.123)).toBe('42.1');
    expect(formatRate(undefined)).toBe('-');
  });
});

describe('scalingJson', () => {
  it('holds every system at every K with jobs/s and speedup, nulls where none ran', () => {
    const collected = parseScalingLines(
      jsonl([...fixtureLines(), { name: '_skip', system: 'cupy', reason: 'fixture' }]),
    );
    const results = buildScaling(collected.lines.filter((l) => l.system !== 'torch'));
    const json = scalingJson(results, scalingTargets(results), collected, SCALING_DEFAULTS);
    const shapes = json.shapes as {
      shape: string;
      rows: {
        k: number;
        systems: Record<string, { jobs_per_s: number; speedup: number } | null>;
      }[];
    }[];
    expect(shapes.map((shape) => shape.shape)).toEqual(['latency', 'mixed']);
    const k4 = shapes[0]!.rows[2]!;
    expect(k4.k).toBe(4);
    expect(k4.systems.ours!.jobs_per_s).toBeCloseTo(3600, 6);
    expect(k4.systems.ours!.speedup).toBeCloseTo(3600 / 1050, 9);
    expect(k4.systems.torch).toBeNull();
    expect(json.skipped).toEqual([{ system: 'cupy', reason: 'fixture' }]);
    expect(JSON.parse(JSON.stringify(json))).toEqual(json);
  });
});

describe('renderScalingSvg', () => {
  const results = buildScaling(parseScalingLines(jsonl(fixtureLines())).lines);
  const svg = renderScalingSvg(results, 'Fixture <GPU> & co');

  it('is one SVG document with the subtitle escaped', () => {
    expect(svg.startsWith('<?xml')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg).toContain('Fixture &lt;GPU&gt; &amp; co');
    expect(svg.match(/<g /g)!.length).toBe(svg.match(/<\/g>/g)!.length);
    // The document's own title (its alternative text), right after the opening tag.
    expect(svg.split('\n')[2]).toBe(
      '<title>cuda-tasks concurrency scaling: Fixture &lt;GPU&gt; &amp; co</title>',
    );
  });

  it('draws one panel per shape and one line per system with a point per K', () => {
    expect(svg.match(/<g class="panel"/g)).toHaveLength(2);
    const polylines = [...svg.matchAll(/<polyline class="series (\w+)" points="([^"]+)"/g)];
    expect(polylines).toHaveLength(10); // 5 systems x 2 shapes
    for (const [, , points] of polylines) {
      const xy = points!.split(' ').map((p) => p.split(',').map(Number) as [number, number]);
      expect(xy).toHaveLength(KS.length);
      // K grows to the right; every speedup here grows with K, so the line rises (y falls).
      for (let i = 1; i < xy.length; i++) {
        expect(xy[i]![0]).toBeGreaterThan(xy[i - 1]![0]);
        expect(xy[i]![1]).toBeLessThan(xy[i - 1]![1]);
      }
    }
    expect(svg.match(/<circle class="point /g)).toHaveLength(40);
    expect(svg).toContain('<title>ours (K tasks), K = 8: 6,000 jobs/s, 5.71x of K = 1</title>');
  });

  it('puts K = 1 at speedup 1 on the 1x grid line, the same height in every panel', () => {
    const ones = [...svg.matchAll(/<circle class="point ours" cx="[\d.]+" cy="([\d.]+)"/g)]
      .map((match) => Number(match[1]))
      .filter((_, index) => index % KS.length === 0);
    const oneX = [...svg.matchAll(/<text x="[\d.]+" y="([\d.]+)"[^>]*>1x<\/text>/g)].map(
      (match) => Number(match[1]) - 4,
    );
    expect(ones).toHaveLength(2);
    for (const [index, y] of ones.entries()) expect(y).toBeCloseTo(oneX[index]!, 1);
  });

  it('spans the speedup axis over powers of two around the data', () => {
    expect(speedupRange([0.8, 3.1])).toEqual({ low: 0.5, high: 4 });
    expect(speedupRange([1, 1.5])).toEqual({ low: 1, high: 2 });
    expect(speedupRange([])).toEqual({ low: 1, high: 2 });
    expect(speedupRange([1e-6, 1e6])).toEqual({ low: 1 / 16, high: 256 });
  });
});

describe('run.ts --only scaling --from DIR', () => {
  let dir: string;
  let result: SpawnSyncReturns<string>;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'cuda-tasks-scaling-'));
    mkdirSync(join(dir, 'raw'));
    writeFileSync(join(dir, 'raw', 'scaling.jsonl'), jsonl(fixtureLines()));
    writeFileSync(
      join(dir, 'bench.json'),
      JSON.stringify({ machine: { gpus: [{ name: 'Fixture GPU' }] } }),
    );
    result = spawnSync(
      join(packageRoot, 'node_modules/.bin/tsx'),
      [
        '--conditions=@cuda-tasks/source',
        'src/run.ts',
        '--only',
        'scaling',
        '--from',
        dir,
        '--out',
        join(dir, 'out'),
      ],
      { cwd: packageRoot, encoding: 'utf8', timeout: 60_000 },
    );
  }, 70_000);

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('prints the scaling table and writes scaling.json and scaling.svg, nothing else', () => {
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('concurrency scaling: K jobs started together');
    expect(result.stdout).toMatch(/mixed: ours >= 0\.9x the better C variant at every K: FAIL/);
    const json = JSON.parse(readFileSync(join(dir, 'out', 'scaling.json'), 'utf8'));
    expect(json.shapes).toHaveLength(2);
    expect(readFileSync(join(dir, 'out', 'scaling.svg'), 'utf8')).toContain('Fixture GPU');
    expect(existsSync(join(dir, 'out', 'bench.json'))).toBe(false);
  });
});
