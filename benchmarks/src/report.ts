/**
 * The benchmark report: turns the JSON lines of ours, the C baseline and the Python peers
 * into one table (text), one JSON document and one SVG bar chart. Pure functions: nothing
 * here touches a GPU, so the report can be rebuilt from saved lines anywhere.
 */

/** One JSON line printed by a benchmark program (ours, C, or a Python peer). */
export interface BenchLine {
  /** The benchmark's id, or `_meta` / `_skip` for the lines about the run itself. */
  name: string;
  /** Median in microseconds per operation (absent on `_meta` / `_skip` lines). */
  median_us?: number;
  /** What one operation is, e.g. `us/launch`. */
  unit?: string;
  /** A remark shown beside the value. */
  note?: string;
  /** Python peers: 'cupy' or 'torch'. */
  peer?: string;
  /** `_skip` lines: why a peer or a benchmark did not run. */
  reason?: string;
  /** `_skip` lines of one benchmark: its id. */
  id?: string;
  /** Further named numbers (a `max_` prefix: merged across rounds by the largest). */
  extra?: Record<string, number>;
  /** Any other field a program prints (`rounds_us`, `device`, the paired fields...). */
  [key: string]: unknown;
}

/** Where a set of results comes from. */
export type Source = 'ours' | 'c' | 'cupy' | 'torch';

/** All results, by source and id, plus what did not run. */
export interface Collected {
  /** Result lines by source, each by benchmark id. */
  results: Record<Source, Map<string, BenchLine>>;
  /** `_meta` lines by source. */
  meta: Partial<Record<Source, BenchLine>>;
  /** Skipped peers / benchmarks and sources that could not run at all. */
  skipped: { source: Source | 'python'; id?: string; reason: string }[];
}

/** Parses JSON lines, ignoring everything that is not a JSON object. */
export function parseLines(text: string): BenchLine[] {
  const lines: BenchLine[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line.startsWith('{')) continue;
    try {
      const parsed = JSON.parse(line) as BenchLine;
      if (typeof parsed === 'object' && parsed !== null && typeof parsed.name === 'string') {
        lines.push(parsed);
      }
    } catch {
      // A line that merely starts with "{": not ours to judge.
    }
  }
  return lines;
}

/** An empty collection. */
export function emptyCollected(): Collected {
  return {
    results: { ours: new Map(), c: new Map(), cupy: new Map(), torch: new Map() },
    meta: {},
    skipped: [],
  };
}

/**
 * Adds the lines of one program. Lines with a `peer` field go to that peer; the rest to
 * `source` (for the Python program, pass 'cupy': every line of it names its peer anyway).
 */
export function addLines(collected: Collected, source: Source, lines: readonly BenchLine[]): void {
  for (const line of lines) {
    const target: Source =
      line.peer === 'cupy' || line.peer === 'torch' ? (line.peer as Source) : source;
    if (line.name === '_meta') collected.meta[target] = line;
    else if (line.name === '_skip') {
      collected.skipped.push({
        source: target,
        ...(typeof line.id === 'string' ? { id: line.id } : {}),
        reason: String(line.reason ?? 'skipped'),
      });
    } else if (!line.name.startsWith('_') && typeof line.median_us === 'number') {
      collected.results[target].set(line.name, line);
    }
  }
}

/**
 * Merges the lines of several rounds of one program (the suite alternates C and ours, so that
 * a drift of the host over time hits both alike): per benchmark, the median of the rounds'
 * medians, with every round's value in `rounds_us`. `extra` values whose key starts with
 * `max_` take the largest round's value, the others the median.
 */
export function mergeRounds(rounds: readonly (readonly BenchLine[])[]): BenchLine[] {
  if (rounds.length === 1) return [...rounds[0]!];
  const byName = new Map<string, BenchLine[]>();
  const order: string[] = [];
  for (const lines of rounds) {
    for (const line of lines) {
      const key = `${line.peer ?? ''}\u0000${line.name}`;
      let list = byName.get(key);
      if (list === undefined) {
        byName.set(key, (list = []));
        order.push(key);
      }
      list.push(line);
    }
  }
  return order.map((key) => {
    const list = byName.get(key)!;
    const first = list[0]!;
    const timed = list.filter((line) => typeof line.median_us === 'number');
    if (first.name.startsWith('_') || timed.length === 0) return first;
    const merged: BenchLine = {
      ...first,
      median_us: middle(timed.map((line) => line.median_us!)),
      rounds_us: timed.map((line) => line.median_us!),
    };
    if (first.extra !== undefined) {
      const extra: Record<string, number> = {};
      for (const name of Object.keys(first.extra)) {
        const values = timed.map((line) => line.extra?.[name]).filter((v) => v !== undefined);
        extra[name] = name.startsWith('max_') ? Math.max(...values) : middle(values);
      }
      merged.extra = extra;
    }
    return merged;
  });
}

/**
 * Splits the lines of several rounds written one after another (the raw .jsonl files) back
 * into rounds: a round ends where a benchmark name comes again.
 */
export function splitRounds(lines: readonly BenchLine[]): BenchLine[][] {
  const rounds: BenchLine[][] = [];
  let seen = new Set<string>();
  let current: BenchLine[] = [];
  for (const line of lines) {
    const key = `${line.peer ?? ''}\u0000${line.name}`;
    if (seen.has(key)) {
      rounds.push(current);
      current = [];
      seen = new Set();
    }
    seen.add(key);
    current.push(line);
  }
  if (current.length > 0) rounds.push(current);
  return rounds;
}

function middle(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  return n % 2 ? sorted[(n - 1) / 2]! : 0.5 * (sorted[n / 2 - 1]! + sorted[n / 2]!);
}

/** How one row of the table is assembled. */
export interface RowSpec {
  /** Our id (and the row's label). */
  ours: string;
  /** The C id doing the same work (default: the same id). */
  c?: string;
  /** The CuPy / PyTorch id doing the same work (default: the C id); null: none. */
  peer?: string | null;
  /** Further C ids to compare against, shown as notes. */
  alsoC?: readonly string[];
  /** Further ids of ours to compare against (same process), shown as notes. */
  alsoOurs?: readonly { id: string; label: string }[];
  /** A fixed note. */
  note?: string;
}

/** The H200's peak memory bandwidth, GB/s: what the reached bandwidth is compared with. */
export const PEAK_BANDWIDTH_GBS = 4800;

/** The table's rows, in order. Ids that differ between ours and C are mapped here. */
export const ROWS: readonly RowSpec[] = [
  { ours: 'launch_empty' },
  { ours: 'launch_args2', peer: null },
  { ours: 'withstream_launch', c: 'launch_switch', alsoC: ['launch_empty'] },
  { ours: 'withstream_launch_libs', c: 'launch_switch', alsoC: ['launch_empty'] },
  { ours: 'launch_sync', alsoC: ['launch_query_spin'], note: 'await synchronize()' },
  { ours: 'launch_sync_blocking', c: 'launch_sync' },
  { ours: 'alloc_free', note: 'ours: cached block, no driver call' },
  {
    ours: 'alloc_free_driver',
    c: 'alloc_free_128k',
    peer: null,
    alsoC: ['alloc_free'],
    note: '128 KiB: past the cache',
  },
  { ours: 'event_record' },
  { ours: 'stream_query', peer: null },
  { ours: 'sgemm_8' },
  { ours: 'sgemm_1024', note: 'device time' },
  { ours: 'seed_serial' },
  { ours: 'seed_concurrent' },
  {
    ours: 'sin_1m',
    alsoOurs: [{ id: 'sin_1m_handwritten', label: 'hand-written' }],
    note: "map(x, 'sin', x), 1 M float32, device time",
  },
  { ours: 'sin_1m_handwritten', peer: null, note: 'sin_inplace (kernels.ptx), device time' },
  {
    ours: 'sin_64m',
    alsoOurs: [{ id: 'sin_64m_handwritten', label: 'hand-written' }],
    note: "map(x, 'sin', x), 64 M float32, device time",
  },
  { ours: 'sin_64m_handwritten', peer: null, note: 'sin_inplace (kernels.ptx), device time' },
  {
    ours: 'sin_1m_issue',
    peer: null,
    alsoOurs: [{ id: 'sin_1m_issue_handwritten', label: 'hand-written launch' }],
    note: 'host issue cost, cached kernel',
  },
  { ours: 'sin_1m_issue_handwritten', peer: null, note: 'launch(sin_inplace), host issue cost' },
  { ours: 'sum_64m', note: 'sum of 64 M float32, device time' },
  {
    ours: 'topk_1m_x8',
    note: 'top 10 of each column, 1,000,000 x 8 float32, device time',
  },
  {
    ours: 'topk_1m_x64',
    note: 'top 10 of each column, 1,000,000 x 64 float32, device time',
  },
  {
    ours: 'ipc_event_wait',
    peer: null,
    note: "GPU time, writer's kernel end to the reader's start in another process",
  },
  { ours: 'tasks100', peer: null, note: 'whole batch' },
];

/** One row of the report. */
export interface TableRow {
  /** Our benchmark id (the row's label). */
  operation: string;
  /** The C benchmark id compared against. */
  cId: string;
  /** Our median, us. */
  ours?: number;
  /** C's median, us. */
  c?: number;
  /** CuPy's median, us. */
  cupy?: number;
  /** PyTorch's median, us. */
  torch?: number;
  /** ours / C (see `pairedRatio`). */
  oursOverC?: number;
  /** The faster of the Python peers that ran this row. */
  bestPeer?: 'cupy' | 'torch';
  /** ours / the best peer's median. */
  oursOverBestPeer?: number;
  /** Remarks shown in the notes column. */
  notes: string[];
}

/** A target the suite checks (the seed's overlap and its cost against C). */
export interface Target {
  /** `seed_overlap` or `seed_vs_c`. */
  name: string;
  /** What is measured, in words. */
  description: string;
  /** The measured ratio (absent when a side did not run). */
  value?: number;
  /** The largest value that meets the target. */
  limit: number;
  /** Whether `value <= limit` (absent when not measured). */
  met?: boolean;
}

const medianOf = (map: Map<string, BenchLine>, id: string | null | undefined) =>
  id === null || id === undefined ? undefined : map.get(id)?.median_us;

/**
 * `top / bottom` for two benchmark lines: where both ran the same number of rounds (C and ours
 * alternate, see run.ts), the median of the per-round ratios, each of which pairs two runs made
 * next to each other in time, so that the host's drift over the whole run cancels out; else
 * the ratio of the medians.
 */
export function pairedRatio(
  top: BenchLine | undefined,
  bottom: BenchLine | undefined,
): number | undefined {
  if (top?.median_us === undefined || bottom?.median_us === undefined) return undefined;
  const a = top.rounds_us as number[] | undefined;
  const b = bottom.rounds_us as number[] | undefined;
  if (a !== undefined && b !== undefined && a.length === b.length && a.length > 1) {
    return middle(a.map((value, i) => value / b[i]!));
  }
  return top.median_us / bottom.median_us;
}

const lineOf = (map: Map<string, BenchLine>, id: string | null | undefined) =>
  id === null || id === undefined ? undefined : map.get(id);

/** Builds the table rows: the fixed rows first, then any other id of ours. */
export function buildTable(collected: Collected): TableRow[] {
  const { ours, c, cupy, torch } = collected.results;
  const specs: RowSpec[] = [...ROWS];
  for (const id of ours.keys()) {
    if (!specs.some((spec) => spec.ours === id)) specs.push({ ours: id });
  }
  const rows: TableRow[] = [];
  for (const spec of specs) {
    const cId = spec.c ?? spec.ours;
    const peerId = spec.peer === null ? null : (spec.peer ?? cId);
    const row: TableRow = {
      operation: spec.ours,
      cId,
      ours: medianOf(ours, spec.ours),
      c: medianOf(c, cId),
      cupy: medianOf(cupy, peerId),
      torch: medianOf(torch, peerId),
      notes: [],
    };
    if (row.ours === undefined && row.c === undefined) continue;
    if (spec.note) row.notes.push(spec.note);
    if (cId !== spec.ours) row.notes.push(`C: ${cId}`);
    row.oursOverC = pairedRatio(ours.get(spec.ours), lineOf(c, cId));
    for (const other of spec.alsoC ?? []) {
      const ratio = pairedRatio(ours.get(spec.ours), lineOf(c, other));
      if (ratio !== undefined) row.notes.push(`vs C ${other} ${formatRatio(ratio)}`);
    }
    for (const other of spec.alsoOurs ?? []) {
      const ratio = pairedRatio(ours.get(spec.ours), ours.get(other.id));
      if (ratio !== undefined) row.notes.push(`vs ${other.label} ${formatRatio(ratio)}`);
    }
    const peers = (['cupy', 'torch'] as const).filter((peer) => row[peer] !== undefined);
    if (peers.length > 0) {
      const best = peers.reduce((x, y) => (row[y]! < row[x]! ? y : x));
      row.bestPeer = best;
      if (row.ours !== undefined) row.oursOverBestPeer = row.ours / row[best]!;
    }
    const extra = ours.get(spec.ours)?.extra;
    if (extra?.max_event_loop_delay_us !== undefined) {
      row.notes.push(`max event-loop delay ${formatUs(extra.max_event_loop_delay_us)} us`);
    }
    const bandwidths = (
      [
        ['ours', ours],
        ['cupy', cupy],
        ['torch', torch],
      ] as const
    )
      .map(
        ([label, map]) =>
          [
            label,
            map.get(label === 'ours' ? spec.ours : (peerId ?? ''))?.extra?.bandwidth_gbs,
          ] as const,
      )
      // A bandwidth that JSON could not carry (a zero time's Infinity comes back as null) is
      // left out rather than printed.
      .filter(([, gbs]) => typeof gbs === 'number' && Number.isFinite(gbs))
      .map(
        ([label, gbs]) =>
          `${label} ${gbs!.toFixed(0)} (${((100 * gbs!) / PEAK_BANDWIDTH_GBS).toFixed(0)}%)`,
      );
    if (bandwidths.length > 0) {
      row.notes.push(`GB/s of ${PEAK_BANDWIDTH_GBS}: ${bandwidths.join(', ')}`);
    }
    rows.push(row);
  }
  return rows;
}

/** The seed targets: concurrent/serial <= 0.85, and our concurrent time <= 1.05x C's. */
export function buildTargets(collected: Collected): Target[] {
  const { ours, c } = collected.results;
  const ratio = pairedRatio(ours.get('seed_concurrent'), ours.get('seed_serial'));
  const versusC = pairedRatio(ours.get('seed_concurrent'), c.get('seed_concurrent'));
  return [
    {
      name: 'seed_overlap',
      description: 'ours seed_concurrent / seed_serial (two tasks overlap)',
      value: ratio,
      limit: 0.85,
      met: ratio === undefined ? undefined : ratio <= 0.85,
    },
    {
      name: 'seed_vs_c',
      description: 'ours seed_concurrent / C seed_concurrent',
      value: versusC,
      limit: 1.05,
      met: versusC === undefined ? undefined : versusC <= 1.05,
    },
    ...kernelTargets(collected),
  ];
}

/**
 * The expression kernels' targets, where ours ran them: `map(x, 'sin', x)`'s issue cost within
 * 1.05x the hand-written kernel's launch (1 M floats, cached), and `sum` over 64 M floats
 * within 1.1x the device time of the faster of cupy.sum and torch.sum.
 */
export function kernelTargets(collected: Collected): Target[] {
  const { ours, cupy, torch } = collected.results;
  const targets: Target[] = [];
  const issue = pairedRatio(ours.get('sin_1m_issue'), ours.get('sin_1m_issue_handwritten'));
  if (issue !== undefined) {
    targets.push({
      name: 'kernels_sin_issue',
      description: "map(x, 'sin', x) issue cost / hand-written launch (1 M floats, cached)",
      value: issue,
      limit: 1.05,
      met: issue <= 1.05,
    });
  }
  const sumUs = medianOf(ours, 'sum_64m');
  const peers = [medianOf(cupy, 'sum_64m'), medianOf(torch, 'sum_64m')].filter(
    (value): value is number => value !== undefined,
  );
  if (sumUs !== undefined && peers.length > 0) {
    const value = sumUs / Math.min(...peers);
    targets.push({
      name: 'kernels_sum_vs_peers',
      description: 'sum over 64 M floats / the faster of cupy.sum and torch.sum (device time)',
      value,
      limit: 1.1,
      met: value <= 1.1,
    });
  }
  return targets;
}

/** Microseconds with 3 significant-ish digits. */
export function formatUs(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return '-';
  if (value >= 100) return value.toFixed(1);
  if (value >= 10) return value.toFixed(2);
  return value.toFixed(3);
}

/** A ratio as "1.03x". */
export function formatRatio(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return '-';
  return `${value >= 10 ? value.toFixed(1) : value.toFixed(2)}x`;
}

/**
 * Lines of a text table: the header, a rule of dashes, then `body`; columns two spaces apart,
 * the first and the last left-aligned (names, notes), the others right-aligned (numbers).
 * @example alignColumns(['row', 'ours'], [['launch', '310 ns']]).join('\n');
 */
export function alignColumns(header: readonly string[], body: readonly string[][]): string[] {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...body.map((cells) => cells[column]!.length)),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, column) =>
        column === 0 || column === cells.length - 1
          ? cell.padEnd(widths[column]!)
          : cell.padStart(widths[column]!),
      )
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((width) => '-'.repeat(width))), ...body.map(line)];
}

/** The table as aligned text, with the targets and a short legend under it. */
export function formatTable(
  rows: readonly TableRow[],
  targets: readonly Target[],
  collected: Collected,
): string {
  const header = ['operation', 'ours', 'C', 'CuPy', 'PyTorch', 'ours/C', 'ours/peer', 'notes'];
  const body = rows.map((row) => [
    row.operation,
    formatUs(row.ours),
    formatUs(row.c),
    formatUs(row.cupy),
    formatUs(row.torch),
    formatRatio(row.oursOverC),
    row.oursOverBestPeer === undefined
      ? '-'
      : `${formatRatio(row.oursOverBestPeer)} ${row.bestPeer === 'cupy' ? 'cp' : 'pt'}`,
    row.notes.join('; '),
  ]);
  const [headerLine, ruleLine, ...bodyLines] = alignColumns(header, body);
  const out: string[] = [];
  out.push(
    'medians in us per operation (lower is better); ours/peer: against the faster of CuPy (cp) and PyTorch (pt)',
  );
  const rounds = [...collected.results.ours.values()].find((line) => Array.isArray(line.rounds_us))
    ?.rounds_us as number[] | undefined;
  if (rounds !== undefined && rounds.length > 1) {
    out.push(
      `${rounds.length} rounds, C and ours alternating: us columns are medians of the rounds; ours/C is the median of the per-round ratios`,
    );
  }
  out.push(headerLine!, ruleLine!, ...bodyLines);
  out.push('');

  const { ours, c, cupy, torch } = collected.results;
  const seedRatio = (map: Map<string, BenchLine>) =>
    pairedRatio(map.get('seed_concurrent'), map.get('seed_serial'));
  const others = (
    [
      ['C', c],
      ['CuPy', cupy],
      ['PyTorch', torch],
    ] as const
  )
    .map(([label, map]) => [label, seedRatio(map)] as const)
    .filter(([, value]) => value !== undefined)
    .map(([label, value]) => `${label} ${value!.toFixed(3)}`);
  const verdict = (target: Target) =>
    target.met === undefined ? 'not measured' : target.met ? 'PASS' : 'FAIL';
  const [overlap, versusC] = targets;
  out.push(
    `seed overlap: ours concurrent/serial = ${overlap?.value === undefined ? '-' : overlap.value.toFixed(3)} (target <= ${overlap?.limit}) ${overlap ? verdict(overlap) : ''}${others.length ? `   [${others.join(', ')}]` : ''}`,
  );
  out.push(
    `seed vs C:    ours seed_concurrent / C seed_concurrent = ${formatRatio(versusC?.value)} (target <= ${versusC?.limit}x) ${versusC ? verdict(versusC) : ''}${medianOf(ours, 'seed_concurrent') !== undefined && medianOf(c, 'seed_concurrent') !== undefined ? `   [${formatUs(medianOf(ours, 'seed_concurrent'))} us vs ${formatUs(medianOf(c, 'seed_concurrent'))} us]` : ''}`,
  );
  for (const target of targets.slice(2)) {
    out.push(
      `${target.description}: ${formatRatio(target.value)} (target <= ${target.limit}x) ${verdict(target)}`,
    );
  }
  return out.join('\n');
}

/** Everything in one JSON document (bench.json). */
export function buildJson(
  collected: Collected,
  rows: readonly TableRow[],
  targets: readonly Target[],
  machine: Record<string, unknown>,
  rounds = 1,
): Record<string, unknown> {
  const lines = (source: Source) => [...collected.results[source].values()];
  return {
    generated: new Date().toISOString(),
    method:
      rounds > 1
        ? `per round, median of 15 timed batches after 3 warm-ups; C and ours ran ${rounds} rounds alternating, and each value is the median of the rounds (all in rounds_us); microseconds per operation`
        : 'median of 15 timed batches after 3 warm-ups, microseconds per operation',
    machine,
    meta: collected.meta,
    targets,
    table: rows.map((row) => ({
      operation: row.operation,
      c_id: row.cId,
      ours_us: row.ours ?? null,
      c_us: row.c ?? null,
      cupy_us: row.cupy ?? null,
      torch_us: row.torch ?? null,
      ours_over_c: row.oursOverC ?? null,
      best_peer: row.bestPeer ?? null,
      ours_over_best_peer: row.oursOverBestPeer ?? null,
      notes: row.notes,
    })),
    results: { ours: lines('ours'), c: lines('c'), cupy: lines('cupy'), torch: lines('torch') },
    skipped: collected.skipped,
  };
}

const escapeXml = (text: string) =>
  text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');

const SERIES = [
  { key: 'ours', label: 'ours (cuda-tasks)', color: '#4e79a7' },
  { key: 'c', label: 'C (driver API + cuBLAS)', color: '#8c8c8c' },
  { key: 'cupy', label: 'CuPy', color: '#f28e2b' },
  { key: 'torch', label: 'PyTorch', color: '#e15759' },
] as const;

/**
 * A horizontal bar chart: per operation, one bar per implementation, its length the time
 * relative to C on a log2 scale (C = 1x; left of the line is faster than C), labelled with
 * the absolute median and the ratio.
 */
export function renderBenchSvg(
  rows: readonly TableRow[],
  targets: readonly Target[],
  subtitle: string,
): string {
  const width = 1100;
  const labelWidth = 210;
  const valueRoom = 150;
  const plotLeft = labelWidth;
  const plotWidth = width - labelWidth - valueRoom;
  const barHeight = 11;
  const barGap = 2;
  const rowPad = 12;
  const charted = rows.filter((row) => row.c !== undefined);
  const ratios = charted.flatMap((row) =>
    SERIES.map((series) => row[series.key])
      .filter((value): value is number => value !== undefined && value > 0)
      .map((value) => value / row.c!),
  );
  const low = Math.max(1 / 64, 2 ** Math.floor(Math.log2(Math.min(0.5, ...ratios))));
  const high = Math.min(256, 2 ** Math.ceil(Math.log2(Math.max(2, ...ratios))));
  const xOf = (ratio: number) => {
    const clamped = Math.min(high, Math.max(low, ratio));
    return (
      plotLeft +
      ((Math.log2(clamped) - Math.log2(low)) / (Math.log2(high) - Math.log2(low))) * plotWidth
    );
  };
  const round = (value: number) => Math.round(value * 10) / 10;

  const headerHeight = 118;
  const rowHeights = charted.map((row) => {
    const bars = SERIES.filter((series) => row[series.key] !== undefined).length;
    return Math.max(2, bars) * (barHeight + barGap) + rowPad;
  });
  const plotHeight = rowHeights.reduce((sum, h) => sum + h, 0);
  const missing = rows.filter((row) => row.c === undefined);
  const footerHeight = 40 + targets.length * 18 + (missing.length ? 18 : 0);
  const height = headerHeight + plotHeight + footerHeight;
  const out: string[] = [];
  out.push('<?xml version="1.0" encoding="UTF-8"?>');
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, &apos;Segoe UI&apos;, Helvetica, Arial, sans-serif">`,
  );
  out.push(`<title>cuda-tasks benchmarks: ${escapeXml(subtitle)}</title>`);
  out.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(
    '<text x="16" y="26" font-size="17" font-weight="600" fill="#1f1f1f">cuda-tasks benchmarks: time relative to the C baseline</text>',
  );
  out.push(`<text x="16" y="45" font-size="12" fill="#555555">${escapeXml(subtitle)}</text>`);
  out.push(
    '<text x="16" y="62" font-size="12" fill="#555555">log scale, C = 1x; shorter bars are faster. Labels: median in µs (ratio to C).</text>',
  );
  let legendX = 16;
  for (const series of SERIES) {
    out.push(
      `<rect x="${legendX}" y="72" width="14" height="14" rx="2" fill="${series.color}"/><text x="${legendX + 20}" y="83" font-size="12" fill="#1f1f1f">${escapeXml(series.label)}</text>`,
    );
    legendX += 40 + series.label.length * 7;
  }

  const top = headerHeight;
  // Grid: powers of two, the 1x line stronger.
  for (let exponent = Math.log2(low); exponent <= Math.log2(high); exponent++) {
    const ratio = 2 ** exponent;
    const x = round(xOf(ratio));
    const isOne = exponent === 0;
    out.push(
      `<line x1="${x}" y1="${top - 8}" x2="${x}" y2="${top + plotHeight}" stroke="${isOne ? '#555555' : '#e4e4e4'}" stroke-width="${isOne ? 1.5 : 1}"/>`,
    );
    const label = ratio >= 1 ? `${ratio}x` : `1/${1 / ratio}x`;
    out.push(
      `<text x="${x}" y="${top - 12}" font-size="11" fill="${isOne ? '#1f1f1f' : '#777777'}" text-anchor="middle">${escapeXml(isOne ? 'C = 1x' : label)}</text>`,
    );
  }

  let y = top;
  charted.forEach((row, index) => {
    const rowHeight = rowHeights[index]!;
    if (index % 2 === 1) {
      out.push(
        `<rect x="8" y="${y}" width="${width - 16}" height="${rowHeight}" fill="#f5f5f5" fill-opacity="0.7"/>`,
      );
    }
    out.push(`<g class="bench-row">`);
    out.push(
      `<text x="16" y="${y + rowPad / 2 + 12}" font-size="12" font-weight="600" fill="#1f1f1f">${escapeXml(row.operation)}</text>`,
    );
    const detail = row.cId !== row.operation ? `C: ${row.cId}` : `C ${formatUs(row.c)} µs`;
    out.push(
      `<text x="16" y="${y + rowPad / 2 + 26}" font-size="11" fill="#666666">${escapeXml(row.cId !== row.operation ? `${detail}, ${formatUs(row.c)} µs` : detail)}</text>`,
    );
    let barY = y + rowPad / 2;
    for (const series of SERIES) {
      const value = row[series.key];
      if (value === undefined) continue;
      const ratio = value / row.c!;
      const x0 = plotLeft;
      const x1 = round(xOf(ratio));
      const barWidth = round(Math.max(1, x1 - x0));
      out.push(
        `<rect class="bar ${series.key}" x="${x0}" y="${round(barY)}" width="${barWidth}" height="${barHeight}" fill="${series.color}"><title>${escapeXml(`${series.label}: ${formatUs(value)} µs, ${formatRatio(ratio)} of C`)}</title></rect>`,
      );
      const clipped = ratio > high ? ' ▸' : '';
      out.push(
        `<text x="${round(x0 + barWidth + 5)}" y="${round(barY + barHeight - 1.5)}" font-size="10" fill="#333333">${escapeXml(`${formatUs(value)} µs (${formatRatio(ratio)})${clipped}`)}</text>`,
      );
      barY += barHeight + barGap;
    }
    out.push('</g>');
    y += rowHeight;
  });

  let footerY = top + plotHeight + 26;
  for (const target of targets) {
    const verdict = target.met === undefined ? 'not measured' : target.met ? 'PASS' : 'FAIL';
    const color = target.met === undefined ? '#777777' : target.met ? '#2e7d32' : '#c62828';
    const value =
      target.value === undefined
        ? '-'
        : target.name === 'seed_vs_c'
          ? formatRatio(target.value)
          : target.value.toFixed(3);
    out.push(
      `<text x="16" y="${footerY}" font-size="12" fill="#1f1f1f">${escapeXml(`${target.description}: ${value} (target <= ${target.limit}${target.name === 'seed_vs_c' ? 'x' : ''})`)} <tspan font-weight="600" fill="${color}">${verdict}</tspan></text>`,
    );
    footerY += 18;
  }
  if (missing.length) {
    out.push(
      `<text x="16" y="${footerY}" font-size="11" fill="#777777">${escapeXml(`no C baseline, not charted: ${missing.map((row) => `${row.operation} (ours ${formatUs(row.ours)} µs)`).join(', ')}`)}</text>`,
    );
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/**
 * The issues' targets for ours/C, by benchmark, as the same-process table shows them
 * (launch <= 1.05x, withStream + launch <= 1.08x, launch + await synchronize() <= 1.2x,
 * alloc+free <= 1.10x, 8x8 SGEMM <= 1.08x, the seed's concurrent iteration <= 1.05x, 100
 * tasks each launching and awaiting <= 1.15x C's 100 streams; a replay of the 20-kernel
 * chain's graph <= 1.05x C's cuGraphLaunch of it, and <= 0.5x C's eager chain; the scaling
 * benchmark's latency-bound job at K = 1, ours >= 0.9x C's jobs/s, as time: <= 1.11x C's
 * polling loop).
 */
export const PAIRED_TARGETS: Readonly<Record<string, number>> = {
  chain20_graph: 1.05,
  chain20_graph_vs_c_eager: 0.5,
  launch_empty: 1.05,
  withstream_launch: 1.08,
  withstream_launch_libs: 1.08,
  launch_sync: 1.2,
  alloc_free: 1.1,
  sgemm_8: 1.08,
  seed_concurrent: 1.05,
  tasks100: 1.15,
  latency_job: 1.11,
};

/**
 * Issue 34's targets for the issue engine's rows (`<row>_engine_w<W>`, W issuer threads),
 * ours/C: the 100 tasks at most as long as C's 100 streams from one thread, the latency-bound
 * job within 1.12x C.
 */
export const ENGINE_PAIRED_TARGETS: Readonly<Record<string, number>> = {
  tasks100: 1,
  latency_job: 1.12,
};

/**
 * Targets on ours' microseconds rather than on ours/C: the main thread's cost per launch with
 * the issue engine (`engine_push_w<W>`, `engine_push_8streams_w<W>`; issue 34: <= 1 us).
 */
export const PAIRED_US_TARGETS: Readonly<Record<string, number>> = {
  engine_push: 1,
  engine_push_8streams: 1,
};

/** A same-process row's target: on the ratio ours/C, or on ours' microseconds. */
export interface PairedTarget {
  /** What the target bounds: the median ratio ours/C, or ours' median microseconds. */
  on: 'ratio' | 'us';
  /** The bound (at most). */
  value: number;
}

/**
 * The target of the same-process row `name`: `PAIRED_TARGETS` by name, `ENGINE_PAIRED_TARGETS`
 * for `<row>_engine_w<W>`, `PAIRED_US_TARGETS` for `<row>_w<W>`; undefined for a row without
 * one.
 * @example pairedTarget('tasks100_engine_w8'); // { on: 'ratio', value: 1 }
 */
export function pairedTarget(name: string): PairedTarget | undefined {
  const own = (table: Readonly<Record<string, number>>, key: string) =>
    Object.hasOwn(table, key) ? table[key] : undefined;
  const exact = own(PAIRED_TARGETS, name);
  if (exact !== undefined) return { on: 'ratio', value: exact };
  const engine = /^(.+)_engine_w[1-9][0-9]*$/.exec(name);
  const ratio = engine === null ? undefined : own(ENGINE_PAIRED_TARGETS, engine[1]!);
  if (ratio !== undefined) return { on: 'ratio', value: ratio };
  const perIssuers = /^(.+)_w[1-9][0-9]*$/.exec(name);
  const us = perIssuers === null ? undefined : own(PAIRED_US_TARGETS, perIssuers[1]!);
  return us === undefined ? undefined : { on: 'us', value: us };
}

/**
 * Issue 34's idle target for the issue engine (no busy core while idle): the process's CPU
 * time over an idle second with the engine started, in cores, at most this (an issuer that
 * spins instead of sleeping shows as about 1).
 */
export const ENGINE_IDLE_BUSY_CORES_TARGET = 0.1;

/**
 * The `engine_idle: true` lines of paired.ts as text, one line each with its verdict against
 * `ENGINE_IDLE_BUSY_CORES_TARGET`; lines without the figures are left out.
 */
export function formatEngineIdle(lines: readonly BenchLine[]): string[] {
  const out: string[] = [];
  const number = (value: unknown) =>
    typeof value === 'number' && Number.isFinite(value) ? value : undefined;
  for (const line of lines) {
    if (line.engine_idle !== true) continue;
    const busy = number(line.busy_cores);
    const cpu = number(line.cpu_ms);
    const wall = number(line.wall_ms);
    if (busy === undefined || cpu === undefined || wall === undefined) continue;
    const stopped = number(line.stopped_busy_cores);
    const pass = busy <= ENGINE_IDLE_BUSY_CORES_TARGET;
    out.push(
      `issue engine idle (${String(line.issuers ?? '?')} issuers): ${cpu.toFixed(1)} ms of CPU over ${wall.toFixed(0)} ms idle = ${busy.toFixed(3)} cores (target <= ${ENGINE_IDLE_BUSY_CORES_TARGET}: no busy core) ${pass ? 'PASS' : 'FAIL'}${
        stopped === undefined ? '' : `   [engine stopped: ${stopped.toFixed(3)} cores]`
      }`,
    );
  }
  return out;
}

/**
 * The `engine_stats: true` lines of paired.ts (what the issue engine counted over a group of
 * its rows) as text, one line each; lines without the counts are left out.
 */
export function formatEngineStats(lines: readonly BenchLine[]): string[] {
  const out: string[] = [];
  const count = (value: unknown) => (Number.isSafeInteger(value) ? (value as number) : undefined);
  for (const line of lines) {
    if (line.engine_stats !== true) continue;
    const launches = count(line.launches);
    const wakeUps = count(line.wake_ups);
    const fenceWaits = count(line.fence_waits);
    if (launches === undefined || wakeUps === undefined || fenceWaits === undefined) continue;
    const per = (value: number) => (launches > 0 ? (value / launches).toFixed(3) : '-');
    // Lines from before the engine counted its waits for room have neither of these.
    const roomWaits = count(line.room_waits);
    const longest = line.longest_wait_ms;
    const waits =
      roomWaits !== undefined && typeof longest === 'number' && Number.isFinite(longest)
        ? `, ${roomWaits.toLocaleString('en-US')} waits for room; the longest wait held the thread ${longest.toFixed(3)} ms`
        : '';
    const queries = count(line.queries);
    const left = count(line.queries_left);
    const asked =
      queries !== undefined && left !== undefined
        ? `, ${queries.toLocaleString('en-US')} waits queried by the issuers (${left.toLocaleString('en-US')} left to the waiting thread)`
        : '';
    out.push(
      `issue engine counts (${line.name}): ${launches.toLocaleString('en-US')} launches, ${wakeUps.toLocaleString('en-US')} wake-ups (${per(wakeUps)} a launch), ${fenceWaits.toLocaleString('en-US')} fence waits (${per(fenceWaits)} a launch)${waits}${asked}${
        typeof line.failure === 'string' ? `; failed: ${line.failure}` : ''
      }`,
    );
  }
  return out;
}

/**
 * PASS or FAIL by the median ratio, with "clear" when the median's 95% interval lies wholly on
 * the same side of the target (below or at it for PASS, above it for FAIL).
 */
export function pairedVerdict(
  ratio: number | undefined,
  low: number | undefined,
  high: number | undefined,
  target: number,
): string {
  if (ratio === undefined) return 'FAIL';
  const pass = ratio <= target;
  const clear = pass ? high !== undefined && high <= target : low !== undefined && low > target;
  return `${pass ? 'PASS' : 'FAIL'}${clear ? ' clear' : ''}`;
}

/**
 * The same-process comparison (src/paired.ts lines, `paired: true`) as aligned text:
 * medians of each side, the median of the per-pair ratios against its target, and the seed's
 * concurrent/serial ratio of both sides.
 */
export function formatPaired(lines: readonly BenchLine[]): string {
  const paired = lines.filter((line) => line.paired === true);
  const idle = [...formatEngineIdle(lines), ...formatEngineStats(lines)];
  if (paired.length === 0) return idle.join('\n');
  const number = (value: unknown) => (typeof value === 'number' ? value : undefined);
  const header = ['operation', 'ours', 'C', 'ours/C', '95% interval', 'target', 'C call'];
  const body = paired.map((line) => {
    const ratio = number(line.ratio);
    const low = number(line.ratio_lo);
    const high = number(line.ratio_hi);
    const target = pairedTarget(line.name);
    const ours = number(line.ours_us);
    return [
      line.name,
      formatUs(ours),
      formatUs(number(line.c_us)),
      formatRatio(ratio),
      low !== undefined && high !== undefined ? `${low.toFixed(2)}-${high.toFixed(2)}` : '',
      target === undefined
        ? ''
        : target.on === 'us'
          ? `<= ${target.value} us ${ours !== undefined && ours <= target.value ? 'PASS' : 'FAIL'}`
          : `${target.value.toFixed(2)}x ${pairedVerdict(ratio, low, high, target.value)}`,
      String(line.c_call ?? ''),
    ];
  });
  const widths = header.map((title, column) =>
    Math.max(title.length, ...body.map((cells) => cells[column]!.length)),
  );
  const format = (cells: readonly string[]) =>
    cells
      .map((cell, column) =>
        column === 0 || column >= 5 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!),
      )
      .join('  ')
      .trimEnd();
  const out = [
    "same process (src/paired.ts): C's loops (c/inproc.cu) and ours alternating batch by batch;",
    'us columns are medians over the pairs, ours/C the median of the per-pair ratios and its 95% interval;',
    'PASS/FAIL by the median, "clear" when the whole interval is on that side of the target',
    format(header),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...body.map(format),
  ];
  const byName = new Map(paired.map((line) => [line.name, line]));
  const serial = byName.get('seed_serial');
  const concurrent = byName.get('seed_concurrent');
  const oursSerial = number(serial?.ours_us);
  const oursConcurrent = number(concurrent?.ours_us);
  const cSerial = number(serial?.c_us);
  const cConcurrent = number(concurrent?.c_us);
  if (oursSerial && oursConcurrent && cSerial && cConcurrent) {
    const ours = oursConcurrent / oursSerial;
    out.push(
      `seed overlap, same process: ours concurrent/serial = ${ours.toFixed(3)} (target <= 0.85) ${ours <= 0.85 ? 'PASS' : 'FAIL'}   [C ${(cConcurrent / cSerial).toFixed(3)}]`,
    );
  }
  out.push(...idle);
  return out.join('\n');
}
