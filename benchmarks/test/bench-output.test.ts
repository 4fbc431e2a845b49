import { type SpawnSyncReturns, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addLines,
  type BenchLine,
  buildJson,
  buildTable,
  buildTargets,
  emptyCollected,
  formatTable,
  parseLines,
  renderBenchSvg,
  type TableRow,
  type Target,
} from '../src/report.js';

// What the benchmark suite writes: the routing of every program's lines, the ours/best-peer
// column, bench.json, bench.svg, and `src/run.ts --from DIR` end to end on saved lines (no
// GPU: --from runs no benchmark).

const packageRoot = fileURLToPath(new URL('..', import.meta.url));

const jsonl = (lines: readonly object[]) => `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;

describe('addLines', () => {
  it('routes peer lines to CuPy / PyTorch and the rest to the given source', () => {
    const collected = emptyCollected();
    addLines(collected, 'cupy', [
      { name: '_meta', peer: 'cupy', device: 'H200', version: '13.4' },
      { name: '_meta', peer: 'torch', device: 'H200', version: '2.7' },
      { name: 'launch_empty', peer: 'cupy', median_us: 7 },
      { name: 'launch_empty', peer: 'torch', median_us: 5 },
      { name: 'sgemm_8', median_us: 9 }, // no peer field: the source given, cupy
      { name: '_skip', peer: 'torch', id: 'seed_concurrent', reason: 'no streams API' },
      { name: '_skip', peer: 'cupy', reason: 'CuPy is not installed' },
    ]);
    addLines(collected, 'c', [
      { name: '_meta', device: 'H200 (C)' },
      { name: 'launch_empty', median_us: 3.2 },
      { name: 'sgemm_8', median_us: 6 },
      { name: '_skip', id: 'tasks100' }, // no reason: "skipped"
      { name: '_progress', median_us: 1 }, // other underscore lines are not results
      { name: 'no_median', note: 'did not run' }, // no median: not a result
    ]);
    addLines(collected, 'ours', [{ name: 'launch_empty', median_us: 3.5 }]);

    const ids = (source: 'ours' | 'c' | 'cupy' | 'torch') => [
      ...collected.results[source].entries(),
    ];
    expect(ids('ours').map(([id, l]) => [id, l.median_us])).toEqual([['launch_empty', 3.5]]);
    expect(ids('c').map(([id, l]) => [id, l.median_us])).toEqual([
      ['launch_empty', 3.2],
      ['sgemm_8', 6],
    ]);
    expect(ids('cupy').map(([id, l]) => [id, l.median_us])).toEqual([
      ['launch_empty', 7],
      ['sgemm_8', 9],
    ]);
    expect(ids('torch').map(([id, l]) => [id, l.median_us])).toEqual([['launch_empty', 5]]);
    expect(collected.meta.cupy?.version).toBe('13.4');
    expect(collected.meta.torch?.version).toBe('2.7');
    expect(collected.meta.c?.device).toBe('H200 (C)');
    expect(collected.meta.ours).toBeUndefined();
    expect(collected.skipped).toEqual([
      { source: 'torch', id: 'seed_concurrent', reason: 'no streams API' },
      { source: 'cupy', reason: 'CuPy is not installed' },
      { source: 'c', id: 'tasks100', reason: 'skipped' },
    ]);
  });
});

describe('the ours/best-peer column', () => {
  const collect = (peers: { cupy?: number; torch?: number }) => {
    const collected = emptyCollected();
    addLines(collected, 'ours', [
      { name: 'launch_empty', median_us: 3.5 },
      { name: 'launch_args2', median_us: 3.6 },
    ]);
    addLines(collected, 'c', [
      { name: 'launch_empty', median_us: 3.5 },
      { name: 'launch_args2', median_us: 3.0 },
    ]);
    const python: BenchLine[] = [];
    for (const peer of ['cupy', 'torch'] as const) {
      const value = peers[peer];
      if (value === undefined) continue;
      python.push({ name: 'launch_empty', peer, median_us: value });
      // launch_args2 has no peer counterpart (peer: null in ROWS): never used.
      python.push({ name: 'launch_args2', peer, median_us: value / 100 });
    }
    addLines(collected, 'cupy', python);
    return collected;
  };
  const rowOf = (rows: TableRow[], id: string) => rows.find((row) => row.operation === id)!;
  const tableLine = (text: string, id: string) =>
    text.split('\n').find((line) => line.startsWith(`${id} `))!;

  it('divides ours by the faster peer and names it (cp / pt)', () => {
    const collected = collect({ cupy: 7, torch: 5 });
    const rows = buildTable(collected);
    const launch = rowOf(rows, 'launch_empty');
    expect(launch.bestPeer).toBe('torch');
    expect(launch.oursOverBestPeer).toBeCloseTo(3.5 / 5, 12);
    const text = formatTable(rows, buildTargets(collected), collected);
    expect(tableLine(text, 'launch_empty')).toMatch(
      /^launch_empty\s+3\.500\s+3\.500\s+7\.000\s+5\.000\s+1\.00x\s+0\.70x pt(\s|$)/,
    );

    const cupyFaster = buildTable(collect({ cupy: 1.75, torch: 5 }));
    expect(rowOf(cupyFaster, 'launch_empty').bestPeer).toBe('cupy');
    expect(rowOf(cupyFaster, 'launch_empty').oursOverBestPeer).toBeCloseTo(2, 12);
  });

  it('uses the one peer that ran, and shows "-" without any (or for rows without a peer)', () => {
    const onlyTorch = collect({ torch: 7 });
    const text = formatTable(buildTable(onlyTorch), buildTargets(onlyTorch), onlyTorch);
    expect(tableLine(text, 'launch_empty')).toMatch(/\s-\s+7\.000\s+1\.00x\s+0\.50x pt(\s|$)/);
    // launch_args2 takes no peer value even though the peers printed one under its id.
    const args = rowOf(buildTable(onlyTorch), 'launch_args2');
    expect(args.torch).toBeUndefined();
    expect(args.oursOverBestPeer).toBeUndefined();
    expect(tableLine(text, 'launch_args2')).toMatch(/1\.20x\s+-$/);

    const none = collect({});
    const noneText = formatTable(buildTable(none), buildTargets(none), none);
    expect(tableLine(noneText, 'launch_empty')).toMatch(/3\.500\s+-\s+-\s+1\.00x\s+-$/);
  });
});

describe('buildJson', () => {
  it('holds the table with nulls for what did not run, every result, the skips and the machine', () => {
    const collected = emptyCollected();
    addLines(collected, 'ours', [
      { name: 'launch_empty', median_us: 3.5, rounds_us: [3.0, 3.5, 5.0] },
      { name: 'stream_query', median_us: 0.2 },
    ]);
    addLines(collected, 'c', [
      { name: 'launch_empty', median_us: 3.2, rounds_us: [3.0, 3.2, 5.0] },
      { name: '_meta', device: 'H200' },
    ]);
    addLines(collected, 'cupy', [
      { name: 'launch_empty', peer: 'cupy', median_us: 7 },
      { name: '_skip', peer: 'torch', reason: 'torch missing' },
    ]);
    const rows = buildTable(collected);
    const targets = buildTargets(collected);
    const machine = { hostname: 'test-host', gpus: [{ name: 'H200' }] };
    const before = Date.now();
    const document = buildJson(collected, rows, targets, machine, 3) as any;
    expect(Date.parse(document.generated)).toBeGreaterThanOrEqual(before - 1000);
    expect(document.method).toContain('ran 3 rounds alternating');
    expect(buildJson(collected, rows, targets, machine).method).toBe(
      'median of 15 timed batches after 3 warm-ups, microseconds per operation',
    );
    expect(document.machine).toEqual(machine);
    expect(document.meta).toEqual({ c: { name: '_meta', device: 'H200' } });
    expect(document.targets).toEqual(targets);
    expect(document.table).toEqual([
      {
        operation: 'launch_empty',
        c_id: 'launch_empty',
        ours_us: 3.5,
        c_us: 3.2,
        cupy_us: 7,
        torch_us: null,
        ours_over_c: 1, // per round 1.0, 1.09375, 1.0
        best_peer: 'cupy',
        ours_over_best_peer: 0.5,
        notes: [],
      },
      {
        operation: 'stream_query',
        c_id: 'stream_query',
        ours_us: 0.2,
        c_us: null,
        cupy_us: null,
        torch_us: null,
        ours_over_c: null,
        best_peer: null,
        ours_over_best_peer: null,
        notes: [],
      },
    ]);
    expect(document.results.ours.map((l: BenchLine) => l.name)).toEqual([
      'launch_empty',
      'stream_query',
    ]);
    expect(document.results.c.map((l: BenchLine) => l.median_us)).toEqual([3.2]);
    expect(document.results.cupy.map((l: BenchLine) => l.median_us)).toEqual([7]);
    expect(document.results.torch).toEqual([]);
    expect(document.skipped).toEqual([{ source: 'torch', reason: 'torch missing' }]);
    // It survives JSON as is (what run.ts writes).
    expect(JSON.parse(JSON.stringify(document))).toEqual(document);
  });
});

describe('renderBenchSvg', () => {
  // Ratios to C in [1/2, 2]: the scale runs from 1/2x to 2x (log2), C = 1x in the middle.
  const plotLeft = 210;
  const plotWidth = 1100 - 210 - 150;
  const rows: TableRow[] = [
    {
      operation: 'launch_empty',
      cId: 'launch_empty',
      ours: 8,
      c: 4,
      cupy: 2,
      torch: 4,
      notes: [],
    },
    { operation: 'withstream_launch', cId: 'launch_switch', ours: 4, c: 4, notes: [] },
    { operation: 'stream_query', cId: 'stream_query', ours: 0.25, notes: [] },
  ];
  const targets: Target[] = [
    { name: 'seed_overlap', description: 'overlap <here>', value: 0.9, limit: 0.85, met: false },
    { name: 'seed_vs_c', description: 'versus C', value: 1.01, limit: 1.05, met: true },
  ];
  const svg = renderBenchSvg(rows, targets, 'H200 & <friends>');
  const bars = [
    ...svg.matchAll(/<rect class="bar (\w+)" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"/g),
  ];

  it('is one SVG document with the subtitle escaped', () => {
    expect(svg.startsWith('<?xml version="1.0" encoding="UTF-8"?>\n<svg ')).toBe(true);
    expect(svg.endsWith('</svg>\n')).toBe(true);
    expect(svg).toContain('H200 &amp; &lt;friends&gt;');
    expect(svg).not.toContain('<friends>');
    expect(svg.match(/<svg /g)).toHaveLength(1);
  });

  it('draws one bar per implementation that ran, its length the log2 ratio to C', () => {
    expect(svg.match(/<g class="bench-row">/g)).toHaveLength(2); // stream_query has no C
    expect(bars.map(([, series]) => series)).toEqual(['ours', 'c', 'cupy', 'torch', 'ours', 'c']);
    const expectedWidth = (ratio: number) => Math.max(1, ((Math.log2(ratio) + 1) / 2) * plotWidth);
    const expected = [8 / 4, 1, 2 / 4, 1, 1, 1].map(expectedWidth);
    bars.forEach(([, , x, width], i) => {
      expect(Number(x)).toBe(plotLeft);
      expect(Number(width)).toBeCloseTo(expected[i]!, 1);
    });
    // 2x fills the plot, 1x reaches the C line in the middle, 1/2x is a 1-pixel stub.
    expect(Number(bars[0]![3])).toBe(plotWidth);
    expect(Number(bars[1]![3])).toBe(plotWidth / 2);
    expect(Number(bars[2]![3])).toBe(1);
    expect(svg).toContain('8.000 µs (2.00x)');
    expect(svg).toContain('2.000 µs (0.50x)');
    expect(svg).toContain('C: launch_switch, 4.000 µs');
  });

  it('lists rows without C, and the targets with their verdicts', () => {
    expect(svg).toContain('no C baseline, not charted: stream_query (ours 0.250 µs)');
    expect(svg).toContain('overlap &lt;here&gt;: 0.900 (target &lt;= 0.85)');
    expect(svg).toMatch(/versus C: 1\.01x \(target &lt;= 1\.05x\) <tspan[^>]*>PASS<\/tspan>/);
    expect(svg).toMatch(/0\.85\) <tspan[^>]*fill="#c62828">FAIL<\/tspan>/);
  });
});

describe('src/run.ts --from DIR', () => {
  let dir: string;
  let result: SpawnSyncReturns<string>;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'cuda-tasks-bench-'));
    const raw = join(dir, 'raw');
    mkdirSync(raw);
    const round = (launch: number, serial: number, concurrent: number) => [
      { name: 'launch_empty', median_us: launch },
      { name: 'seed_serial', median_us: serial },
      { name: 'seed_concurrent', median_us: concurrent },
    ];
    // Three rounds each, one after the other, as run.ts saves them.
    writeFileSync(
      join(raw, 'ours.jsonl'),
      jsonl([...round(3.0, 140, 126), ...round(3.5, 150, 120), ...round(5.0, 130, 117)]),
    );
    writeFileSync(
      join(raw, 'c.jsonl'),
      `not a JSON line\n${jsonl([
        { name: '_meta', device: 'Fixture GPU' },
        ...round(3.0, 135, 118),
        ...round(3.2, 136, 119),
        ...round(5.0, 134, 117),
      ])}`,
    );
    writeFileSync(
      join(raw, 'python.jsonl'),
      jsonl([
        { name: '_meta', peer: 'cupy', device: 'Fixture GPU' },
        { name: 'launch_empty', peer: 'cupy', median_us: 7 },
        { name: 'launch_empty', peer: 'torch', median_us: 5 },
        { name: 'seed_concurrent', peer: 'cupy', median_us: 100 },
        { name: '_skip', peer: 'torch', id: 'seed_concurrent', reason: 'fixture skip' },
      ]),
    );
    writeFileSync(
      join(raw, 'paired.jsonl'),
      jsonl([
        {
          name: 'launch_empty',
          paired: true,
          ours_us: 4.2,
          c_us: 4.1,
          ratio: 1.03,
          pairs: 15,
          c_call: 'cuLaunchKernel',
        },
      ]),
    );
    writeFileSync(
      join(dir, 'bench.json'),
      JSON.stringify({ machine: { hostname: 'fixture', gpus: [{ name: 'Fixture <GPU>' }] } }),
    );
    result = spawnSync(
      join(packageRoot, 'node_modules/.bin/tsx'),
      ['--conditions=@cuda-tasks/source', 'src/run.ts', '--from', dir, '--out', join(dir, 'out')],
      { cwd: packageRoot, encoding: 'utf8', timeout: 60_000 },
    );
  }, 70_000);

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  const tableLine = (id: string) =>
    result.stdout.split('\n').find((line) => line.startsWith(`${id} `));

  it('exits with 0 and prints the table last, with the ratios', () => {
    expect(result.error).toBeUndefined();
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('3 rounds, C and ours alternating');
    // ours median of 3.0, 3.5, 5.0; C of 3.0, 3.2, 5.0; ours/C per round 1, 1.09, 1 -> 1.00;
    // against the faster peer, PyTorch's 5.0: 0.70.
    expect(tableLine('launch_empty')).toMatch(
      /^launch_empty\s+3\.500\s+3\.200\s+7\.000\s+5\.000\s+1\.00x\s+0\.70x pt(\s|$)/,
    );
    // 120 against CuPy's 100 (PyTorch skipped it); per round 126/118, 120/119, 117/117.
    expect(tableLine('seed_concurrent')).toMatch(
      /^seed_concurrent\s+120\.0\s+118\.0\s+100\.0\s+-\s+1\.01x\s+1\.20x cp(\s|$)/,
    );
    expect(tableLine('seed_serial')).toMatch(
      /^seed_serial\s+140\.0\s+135\.0\s+-\s+-\s+1\.04x\s+-$/,
    );
    // Per round 0.9, 0.8, 0.9 against 0.85; C's 118/135, 119/136, 117/134 -> 0.874.
    expect(result.stdout).toContain(
      'seed overlap: ours concurrent/serial = 0.900 (target <= 0.85) FAIL   [C 0.874]',
    );
    expect(result.stdout).toMatch(
      /seed vs C: {4}ours seed_concurrent \/ C seed_concurrent = 1\.01x \(target <= 1\.05x\) PASS/,
    );
    expect(result.stdout).toContain('skipped torch seed_concurrent: fixture skip');
    expect(result.stdout).toMatch(
      /ours\/C per round[^\n]*\n\s+launch_empty\s+1\.00 {2}1\.09 {2}1\.00/,
    );
    expect(result.stdout).toMatch(/same process \(src\/paired\.ts\)/);
    expect(result.stdout).toMatch(/\nlaunch_empty\s+4\.200\s+4\.100\s+1\.03x\s+1\.05x PASS/);
  });

  it('writes bench.json with the same numbers and the saved machine', () => {
    const document = JSON.parse(readFileSync(join(dir, 'out', 'bench.json'), 'utf8'));
    expect(document.machine).toEqual({ hostname: 'fixture', gpus: [{ name: 'Fixture <GPU>' }] });
    expect(document.method).toContain('ran 3 rounds alternating');
    const launch = document.table.find((row: any) => row.operation === 'launch_empty');
    expect(launch).toMatchObject({
      ours_us: 3.5,
      c_us: 3.2,
      cupy_us: 7,
      torch_us: 5,
      ours_over_c: 1,
      best_peer: 'torch',
    });
    expect(launch.ours_over_best_peer).toBeCloseTo(0.7, 12);
    const ours = document.results.ours.find((line: BenchLine) => line.name === 'launch_empty');
    expect(ours.rounds_us).toEqual([3.0, 3.5, 5.0]);
    expect(document.meta.c.device).toBe('Fixture GPU');
    expect(document.skipped).toEqual([
      { source: 'torch', id: 'seed_concurrent', reason: 'fixture skip' },
    ]);
    expect(document.targets.map((t: Target) => [t.name, t.met])).toEqual([
      ['seed_overlap', false],
      ['seed_vs_c', true],
    ]);
    expect(document.paired).toHaveLength(1);
    expect(typeof document.elapsed_s).toBe('number');
  });

  it('writes bench.svg for the same rows, titled with the saved GPU', () => {
    const svg = readFileSync(join(dir, 'out', 'bench.svg'), 'utf8');
    expect(svg.startsWith('<?xml')).toBe(true);
    expect(svg).toContain('Fixture &lt;GPU&gt;; Node');
    expect(svg).toContain('median of 3 alternating rounds');
    // Three rows with C: launch_empty (4 bars), seed_serial (2), seed_concurrent (3).
    expect(svg.match(/<g class="bench-row">/g)).toHaveLength(3);
    expect(svg.match(/<rect class="bar /g)).toHaveLength(9);
    expect(svg).toContain('3.500 µs (1.09x)'); // ours launch_empty, 3.5 / 3.2 of C
    // The saved lines parse back the same (the report reads what it wrote).
    expect(parseLines(readFileSync(join(dir, 'raw', 'ours.jsonl'), 'utf8'))).toHaveLength(9);
  });
});
