import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { renderScalingSvg } from '../src/scaling-chart.js';
import {
  MAX_ISSUERS,
  parseScalingArguments,
  SCALING_DEFAULTS,
  scalingArguments,
} from '../src/scaling-config.js';
import {
  buildScaling,
  ENGINE_LOOP_DELAY_TARGET_MS,
  formatEngineLoopDelay,
  formatScaling,
  issuersOf,
  loopDelayOf,
  parseScalingLines,
  type ScalingLine,
  type ScalingSystem,
  type ScalingTarget,
  scalingJson,
  scalingTargets,
  systemLabel,
} from '../src/scaling-report.js';
import { type RunProgram, runScalingPrograms } from '../src/scaling-run.js';

// The issue-engine column of the concurrency scaling report (ours_engine, issue 34): the
// `issuers` setting, its result and `_meta` lines, its targets (the worker tasks' bars: >= 1.0x
// the better C at K >= 8, >= 0.9x at K = 4, ahead of CuPy and PyTorch at every K), the event
// loop's largest delay (<= 5 ms), the table, the JSON and the chart.

const jsonl = (lines: readonly object[]) => `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;

/** A result line whose median batch gives `rate` jobs/s (three batches: 1.5x, 1x, 0.5x). */
const line = (
  system: string,
  shape: string,
  k: number,
  rate: number,
  mode: 'concurrent' | 'serial' = 'concurrent',
  loopDelayMaxMs?: number,
): ScalingLine => {
  const jobs = mode === 'serial' ? 8 : k;
  const middle = jobs / rate;
  return {
    name: 'scaling',
    system: system as ScalingSystem,
    shape: shape as 'latency',
    k,
    mode,
    jobs,
    seconds: [middle * 1.5, middle, middle * 0.5],
    ...(loopDelayMaxMs === undefined ? {} : { loop_delay_max_ms: loopDelayMaxMs }),
  };
};

function linesOf(
  shape: string,
  rates: Partial<Record<ScalingSystem, (number | undefined)[]>>,
  ks: readonly number[],
): ScalingLine[] {
  const lines: ScalingLine[] = [];
  for (const [system, values] of Object.entries(rates)) {
    ks.forEach((k, index) => {
      const rate = values![index];
      if (rate !== undefined) lines.push(line(system, shape, k, rate));
    });
  }
  return lines;
}

const targetsOf = (lines: readonly ScalingLine[]) =>
  scalingTargets(buildScaling(parseScalingLines(jsonl(lines)).lines));
const find = (targets: readonly ScalingTarget[], shape: string, name: ScalingTarget['name']) =>
  targets.find((target) => target.shape === shape && target.name === name)!;

describe('the issuers setting', () => {
  it('defaults to 8, parses issuers=N, and round-trips through ours’ arguments', () => {
    expect(SCALING_DEFAULTS.issuers).toBe(8);
    expect(parseScalingArguments([]).issuers).toBe(8);
    expect(parseScalingArguments(['issuers=4']).issuers).toBe(4);
    const custom = parseScalingArguments(['ks=1,4', 'workers=2', 'issuers=16']);
    expect(parseScalingArguments(scalingArguments(custom, { ours: true }))).toEqual(custom);
  });

  it('is passed to ours only, as workers is', () => {
    const config = { ...SCALING_DEFAULTS, issuers: 4 };
    const shared = scalingArguments(config);
    expect(shared.some((argument) => argument.startsWith('issuers='))).toBe(false);
    expect(scalingArguments(config, { ours: true })).toEqual([
      ...shared,
      `workers=${config.workers}`,
      'issuers=4',
      'engine_queries=1',
      'floor_sync=1',
    ]);
  });

  it('engine_queries: 1 (the issuers query, the default) or 0 (the main thread does)', () => {
    expect(parseScalingArguments([]).engineQueries).toBe(1);
    const custom = parseScalingArguments(['engine_queries=0']);
    expect(custom.engineQueries).toBe(0);
    expect(parseScalingArguments(scalingArguments(custom, { ours: true }))).toEqual(custom);
    expect(scalingArguments(custom).some((a) => a.startsWith('engine_queries='))).toBe(false);
    expect(() => parseScalingArguments(['engine_queries=2'])).toThrow(
      /engine_queries must be 0 or 1, got '2'/,
    );
    expect(() => parseScalingArguments(['engine_queries=-1'])).toThrow(
      /engine_queries must be an integer >= 0/,
    );
  });

  it.each([
    ['issuers=0', /issuers must be an integer >= 1/],
    ['issuers=1.5', /issuers must be an integer >= 1/],
    ['issuers=', /issuers must be an integer >= 1/],
    [`issuers=${MAX_ISSUERS + 1}`, new RegExp(`issuers must be at most ${MAX_ISSUERS}`)],
  ])('rejects %s', (argument, message) => {
    expect(() => parseScalingArguments([argument])).toThrow(message);
  });

  it('accepts 1 to 64 issuers (startIssueEngine’s range)', () => {
    expect(MAX_ISSUERS).toBe(64);
    expect(parseScalingArguments(['issuers=1']).issuers).toBe(1);
    expect(parseScalingArguments(['issuers=64']).issuers).toBe(64);
  });

  it('reaches ours’ command line in what pnpm bench runs', async () => {
    const calls: { label: string; args: readonly string[] }[] = [];
    const run: RunProgram = async (label, _command, args) => {
      calls.push({ label, args });
      return { stdout: '', stderr: '', code: 0 };
    };
    await runScalingPrograms({
      buildDir: '/nonexistent',
      built: true,
      skipC: true,
      skipOurs: false,
      skipPython: true,
      peers: [],
      config: { ...SCALING_DEFAULTS, issuers: 6 },
      run,
    });
    const ours = calls.find((call) => call.label === 'scaling ours')!;
    expect(ours.args).toContain('issuers=6');
  });
});

describe('parsing the issue engine’s lines', () => {
  it('keeps ours_engine result lines and its _meta line, which names the issuers', () => {
    const meta = {
      name: '_meta',
      system: 'ours_engine',
      issuers: 4,
      turns: 30,
      launches: 123_456,
      wake_ups: 10,
      fence_waits: 99,
    };
    const collected = parseScalingLines(
      jsonl([
        meta,
        line('ours_engine', 'latency', 1, 9000, 'serial'),
        line('ours_engine', 'latency', 8, 30_000),
        { name: '_skip', system: 'ours_engine', reason: 'the issue engine: no GPU' },
      ]),
    );
    expect(collected.lines.map((l) => `${l.system} ${l.k} ${l.mode}`)).toEqual([
      'ours_engine 1 serial',
      'ours_engine 8 concurrent',
    ]);
    const { name: _name, system: _system, ...rest } = meta;
    expect(collected.meta.ours_engine).toEqual(rest);
    expect(collected.skipped).toEqual([
      { system: 'ours_engine', reason: 'the issue engine: no GPU' },
    ]);
  });

  it('takes the issuers from the _meta line, else from the settings, and labels with them', () => {
    expect(issuersOf({ ours_engine: { issuers: 4 } }, SCALING_DEFAULTS)).toBe(4);
    expect(issuersOf({}, SCALING_DEFAULTS)).toBe(8);
    expect(issuersOf({ ours_engine: { issuers: 'many' } }, { issuers: 3 })).toBe(3);
    expect(issuersOf({ ours_engine: { issuers: 0 } })).toBeUndefined();
    expect(issuersOf(undefined)).toBeUndefined();
    expect(systemLabel('ours_engine', 6, 4)).toBe('ours, issue engine (4 issuers)');
    expect(systemLabel('ours_engine', undefined, 1)).toBe('ours, issue engine (1 issuer)');
    expect(systemLabel('ours_engine')).toBe('ours, issue engine (W issuers)');
    // Each label takes its own count.
    expect(systemLabel('ours_workers', 6, 4)).toBe('ours, worker tasks (6 threads)');
    expect(systemLabel('ours', 6, 4)).toBe('ours (K tasks)');
  });
});

describe('the issue engine’s targets', () => {
  const KS = [1, 2, 4, 8, 16];
  type Case = [string, (number | undefined)[], Partial<Record<ScalingSystem, number[]>>, boolean];
  const cases: Case[] = [
    [
      '1.0x from K = 8 and 0.9x at K = 4: met',
      [5, 5, 90, 100, 100],
      { c_threads: [100, 100, 100, 100, 100] },
      true,
    ],
    [
      '0.89x at K = 4: missed',
      [5, 5, 89, 100, 100],
      { c_threads: [100, 100, 100, 100, 100] },
      false,
    ],
    [
      '0.99x at K = 16: missed',
      [5, 5, 95, 100, 99],
      { c_threads: [100, 100, 100, 100, 100] },
      false,
    ],
    [
      'against the better of the two C variants',
      [5, 5, 95, 100, 100],
      { c_threads: [100, 100, 100, 100, 90], c_polling: [50, 50, 50, 50, 101] },
      false,
    ],
    [
      'K = 1 and 2 are not checked',
      [1, 1, 90, 100, 100],
      { c_threads: [100, 100, 100, 100, 100] },
      true,
    ],
    [
      'a K without the engine is not checked',
      [5, 5, 95, undefined, 100],
      { c_threads: [100, 100, 100, 1000, 100] },
      true,
    ],
  ];
  it.each(cases)('against C: %s', (_what, engine, others, met) => {
    for (const shape of ['latency', 'mixed']) {
      const target = find(
        targetsOf(linesOf(shape, { ours_engine: engine, ...others }, KS)),
        shape,
        'engine_vs_c',
      );
      expect(target.system).toBe('ours_engine');
      expect(target.met).toBe(met);
    }
  });

  it('needs the engine ahead of both Python peers at every K, strictly', () => {
    const rates = (engine: number[]) =>
      linesOf(
        'latency',
        { ours_engine: engine, cupy: [10, 10, 10], torch: [12, 12, 12] },
        [1, 4, 8],
      );
    expect(find(targetsOf(rates([13, 20, 30])), 'latency', 'engine_vs_peers').met).toBe(true);
    const tie = find(targetsOf(rates([12, 20, 30])), 'latency', 'engine_vs_peers');
    expect(tie.met).toBe(false);
    expect(tie.worst).toEqual({ k: 1, ratio: 1 });
  });

  it('has no engine target on the control shape, and "not measured" without the engine', () => {
    const targets = targetsOf([
      ...linesOf('control', { ours_engine: [1, 2], c_threads: [1, 2] }, [1, 8]),
      ...linesOf('latency', { ours: [1, 2], c_threads: [1, 2] }, [1, 8]),
    ]);
    expect(targets.some((t) => t.shape === 'control')).toBe(false);
    expect(find(targets, 'latency', 'engine_vs_c').met).toBeUndefined();
  });

  it('checks the engine exactly as the worker tasks, and leaves the others as they were (property)', () => {
    const rate = fc.double({ min: 1, max: 100_000, noNaN: true });
    fc.assert(
      fc.property(
        fc.array(fc.tuple(rate, rate, rate, rate, rate), { minLength: 1, maxLength: 6 }),
        (rows) => {
          const ks = rows.map((_, index) => 2 ** index);
          const pick = (column: number) => rows.map((row) => row[column]!);
          const common = { ours: pick(0), c_threads: pick(2), cupy: pick(3), torch: pick(4) };
          const withEngine = targetsOf(linesOf('mixed', { ...common, ours_engine: pick(1) }, ks));
          const asWorkers = targetsOf(linesOf('mixed', { ...common, ours_workers: pick(1) }, ks));
          const without = targetsOf(linesOf('mixed', common, ks));
          for (const [engine, workers] of [
            ['engine_vs_c', 'workers_vs_c'],
            ['engine_vs_peers', 'workers_vs_peers'],
          ] as const) {
            const a = find(withEngine, 'mixed', engine);
            const b = find(asWorkers, 'mixed', workers);
            expect(a.met).toBe(b.met);
            expect(a.worst).toEqual(b.worst);
            expect(a.checked).toEqual(b.checked);
          }
          for (const name of ['vs_c', 'vs_peers'] as const) {
            expect(find(withEngine, 'mixed', name)).toEqual(find(without, 'mixed', name));
          }
        },
      ),
    );
  });
});

describe('the event loop under the issue engine', () => {
  const results = (engineDelays: [number, number | 'serial', number][], oursDelay?: number) =>
    buildScaling(
      parseScalingLines(
        jsonl([
          ...engineDelays.map(([delay, k, rate]) =>
            k === 'serial'
              ? line('ours_engine', 'mixed', 1, rate, 'serial', delay)
              : line('ours_engine', 'latency', k, rate, 'concurrent', delay),
          ),
          ...(oursDelay === undefined
            ? []
            : [line('ours', 'latency', 64, 100, 'concurrent', oursDelay)]),
        ]),
      ).lines,
    );

  it('finds the largest delay over every K, shape and the serial batches', () => {
    const worst = loopDelayOf(
      results([
        [1.5, 1, 10],
        [4.25, 64, 10],
        [0.5, 'serial', 10],
      ]),
      'ours_engine',
    );
    expect(worst).toEqual({ maxMs: 4.25, shape: 'latency', k: 64 });
    expect(
      loopDelayOf(
        results([
          [1, 4, 10],
          [7, 'serial', 10],
        ]),
        'ours_engine',
      ),
    ).toEqual({ maxMs: 7, shape: 'mixed', k: 'serial' });
    expect(loopDelayOf(results([[1, 4, 10]]), 'ours')).toBeUndefined();
  });

  it('passes at 5 ms and below, fails above, and shows ours beside it', () => {
    expect(ENGINE_LOOP_DELAY_TARGET_MS).toBe(5);
    expect(formatEngineLoopDelay(results([[5, 8, 10]], 2.5))).toBe(
      "ours, issue engine: the event loop's largest delay over its batches 5.00 ms (latency-bound, K = 8; target <= 5 ms): PASS   [ours without the engine: 2.50 ms, latency-bound, K = 64]",
    );
    expect(formatEngineLoopDelay(results([[5.01, 'serial', 10]]))).toBe(
      "ours, issue engine: the event loop's largest delay over its batches 5.01 ms (mixed, serial; target <= 5 ms): FAIL",
    );
    // Lines without the delay (C's, the peers'): no line.
    expect(
      formatEngineLoopDelay(buildScaling([line('ours_engine', 'latency', 4, 10)])),
    ).toBeUndefined();
  });
});

describe('the issue engine in the table, the JSON and the chart', () => {
  const KS = [1, 4, 8];
  const lines = [
    { name: '_meta', system: 'ours_engine', issuers: 4, turns: 20, launches: 1000 },
    ...linesOf(
      'latency',
      {
        ours: [10_000, 11_000, 11_400],
        ours_engine: [10_500, 27_000, 31_000],
        c_threads: [11_000, 28_000, 29_000],
        c_polling: [11_200, 26_000, 27_000],
        cupy: [1500, 1800, 1900],
        torch: [1600, 2200, 2300],
      },
      KS,
    ),
    line('ours_engine', 'latency', 1, 9000, 'serial', 0.75),
    line('ours_engine', 'latency', 8, 31_000, 'concurrent', 3.5),
    ...linesOf(
      'mixed',
      {
        ours: [4000, 4300, 4330],
        ours_engine: [3900, 12_000, 15_000],
        c_threads: [5000, 15_000, 16_000],
        cupy: [800, 840, 846],
        torch: [1200, 1350, 1357],
      },
      KS,
    ),
  ];
  const collected = parseScalingLines(jsonl(lines));
  const results = buildScaling(collected.lines);
  const targets = scalingTargets(results);
  const text = formatScaling(results, targets, SCALING_DEFAULTS, collected.meta);
  const rows = text.split('\n');

  it('adds the column beside ours, and engine/C and engine/py', () => {
    const headers = rows.filter((l) => l.startsWith('K '));
    expect(headers).toHaveLength(2);
    for (const header of headers) {
      expect(header).toMatch(
        /^K\s+ours \(K tasks\)\s+ours, issue engine \(4 issuers\)\s+C, K threads/,
      );
      expect(header).toMatch(/ours\/C\s+ours\/py\s+engine\/C\s+engine\/py$/);
    }
    const k8 = rows.filter((l) => l.startsWith('8 '));
    // latency at K = 8: 31,000 (31000/10500 = 2.95x); over C 31000/29000, over py 31000/2300.
    expect(k8[0]).toMatch(/^8\s+11,400 \(1\.14x\)\s+31,000 \(2\.95x\)\s+29,000/);
    expect(k8[0]).toMatch(
      new RegExp(`${(31_000 / 29_000).toFixed(2)}x\\s+${(31_000 / 2300).toFixed(1)}x$`),
    );
    expect(rows.filter((l) => l.startsWith('serial '))[0]).toMatch(/^serial\s+-\s+9,000/);
    expect(text).toContain('engine/C, engine/py: ours with the issue engine');
    expect(text).toContain('made by 4 issuer threads');
  });

  it('prints the engine’s targets and its event-loop line', () => {
    // latency: 27000/28000 = 0.96 at K = 4 (bar 0.9), 31000/29000 = 1.07 at K = 8 (bar 1).
    expect(text).toContain(
      'latency-bound: ours, issue engine >= 1.0x the better C variant at every K >= 8 and >= 0.9x at K = 4: PASS (worst 1.07x at K = 8, where 1.00x is needed)',
    );
    // mixed: 12000/15000 = 0.80 at K = 4.
    expect(text).toContain(
      'mixed: ours, issue engine >= 1.0x the better C variant at every K >= 8 and >= 0.9x at K = 4: FAIL (worst 0.80x at K = 4, where 0.90x is needed)',
    );
    expect(text).toContain('mixed: ours, issue engine ahead of CuPy and PyTorch at every K: PASS');
    expect(text).toContain(
      "ours, issue engine: the event loop's largest delay over its batches 3.50 ms (latency-bound, K = 8; target <= 5 ms): PASS",
    );
  });

  it('labels the system with its issuers in the JSON and the chart', () => {
    const json = scalingJson(results, targets, collected, SCALING_DEFAULTS);
    expect(json.systems).toContainEqual({
      key: 'ours_engine',
      label: 'ours, issue engine (4 issuers)',
    });
    expect((json.targets as ScalingTarget[]).map((t) => `${t.shape} ${t.name}`)).toEqual(
      expect.arrayContaining(['latency engine_vs_c', 'mixed engine_vs_peers']),
    );
    expect(String(json.method)).toContain('4 issuer threads');
    const svg = renderScalingSvg(results, 'fixture', 8, 4);
    expect(svg.match(/<polyline class="series ours_engine"/g)).toHaveLength(2);
    expect(svg).toContain('>ours, issue engine (4 issuers)</text>');
    expect(svg).toContain('<title>ours, issue engine (4 issuers), K = 8: 31,000 jobs/s');
  });
});
