/**
 * Renders a trace from `startTrace()` (Chrome / Perfetto JSON) as a self-contained SVG
 * timeline: one row per GPU stream with its operations as bars colored by the task that issued
 * them, one row per task with its host lifetime, a time axis and a legend. Opens in any
 * browser; no tool, no dependency.
 */
import type { TraceEvent } from '@cuda-tasks/task-runtime';

/** Options of `renderTimelineSvg`. */
export interface TimelineOptions {
  /** Width of the SVG in pixels (default 1200). */
  width?: number;
  /** Title line (default "cuda-tasks timeline"). */
  title?: string;
}

/** A bar on a row. */
interface Bar {
  name: string;
  /** Task that issued it (GPU rows) or the task itself (host rows). */
  task: string;
  start: number;
  duration: number;
}

/** A row: one stream of a GPU, or one task. */
interface Row {
  pid: number;
  tid: number;
  label: string;
  bars: Bar[];
}

/** Rows of one process (a GPU, or the host's tasks). */
interface Group {
  pid: number;
  label: string;
  host: boolean;
  rows: Row[];
}

/** Tableau 10: fill, and a text color readable on it. */
const PALETTE: readonly (readonly [string, string])[] = [
  ['#4e79a7', '#ffffff'],
  ['#f28e2b', '#1f1f1f'],
  ['#e15759', '#ffffff'],
  ['#76b7b2', '#1f1f1f'],
  ['#59a14f', '#ffffff'],
  ['#edc948', '#1f1f1f'],
  ['#b07aa1', '#ffffff'],
  ['#ff9da7', '#1f1f1f'],
  ['#9c755f', '#ffffff'],
  ['#bab0ac', '#1f1f1f'],
];

const FONT = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
const LABEL_WIDTH = 200;
const RIGHT_PAD = 24;
const ROW_HEIGHT = 26;
const BAR_HEIGHT = 18;
const GROUP_HEADER = 24;
/** Rough width of one character of the 11 px bar labels. */
const CHAR_WIDTH = 6.3;

/** The host process of the recorder: pid 0 holds the tasks' lifetimes. */
const HOST_PID = 0;

/** Escapes text for SVG content and attribute values. */
export function escapeXml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}

/** A round tick step (1, 2 or 5 times a power of ten) giving about `target` ticks over `span`. */
export function tickStep(span: number, target = 8): number {
  if (!(span > 0)) return 1;
  const raw = span / target;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  for (const factor of [1, 2, 5, 10]) {
    if (factor * magnitude >= raw) return factor * magnitude;
  }
  return 10 * magnitude;
}

/** Formats microseconds for the axis and tooltips: µs below 2 ms, else ms. */
export function formatTime(us: number, span = us): string {
  if (span < 2000) {
    const digits = Math.abs(us) < 10 && us !== Math.round(us) ? 1 : 0;
    return `${us.toFixed(digits)} µs`;
  }
  const ms = us / 1000;
  const digits = span < 20_000 ? 2 : span < 200_000 ? 1 : 0;
  return `${Number(ms.toFixed(digits))} ms`;
}

const round = (value: number) => Math.round(value * 10) / 10;

/** Groups the trace's complete ('X') events into processes and rows, sorted by time. */
function layout(events: readonly TraceEvent[]): {
  groups: Group[];
  tasks: string[];
  start: number;
  end: number;
} {
  const processNames = new Map<number, string>();
  const threadNames = new Map<string, string>();
  for (const event of events) {
    if (event.ph !== 'M') continue;
    const name = typeof event.args?.name === 'string' ? event.args.name : undefined;
    if (name === undefined) continue;
    if (event.name === 'process_name') processNames.set(event.pid, name);
    else if (event.name === 'thread_name') threadNames.set(`${event.pid}:${event.tid}`, name);
  }

  const rows = new Map<string, Row>();
  const tasks: string[] = [];
  const seenTasks = new Set<string>();
  let start = Number.POSITIVE_INFINITY;
  let end = Number.NEGATIVE_INFINITY;
  for (const event of events) {
    if (event.ph !== 'X' || typeof event.ts !== 'number' || !Number.isFinite(event.ts)) continue;
    const duration = typeof event.dur === 'number' && event.dur > 0 ? event.dur : 0;
    const host = event.pid === HOST_PID;
    const taskName = host
      ? event.name
      : typeof event.args?.task === 'string'
        ? event.args.task
        : event.name;
    if (!seenTasks.has(taskName)) {
      seenTasks.add(taskName);
      tasks.push(taskName);
    }
    const key = `${event.pid}:${event.tid}`;
    let row = rows.get(key);
    if (row === undefined) {
      const fallback = host ? `task ${event.tid}` : `stream ${event.tid}`;
      row = { pid: event.pid, tid: event.tid, label: threadNames.get(key) ?? fallback, bars: [] };
      rows.set(key, row);
    }
    row.bars.push({ name: event.name, task: taskName, start: event.ts, duration });
    start = Math.min(start, event.ts);
    end = Math.max(end, event.ts + duration);
  }

  const groups = new Map<number, Group>();
  for (const row of rows.values()) {
    row.bars.sort((x, y) => x.start - y.start);
    let group = groups.get(row.pid);
    if (group === undefined) {
      const host = row.pid === HOST_PID;
      const label = processNames.get(row.pid) ?? (host ? 'tasks (host)' : `GPU ${row.pid - 1}`);
      group = { pid: row.pid, label, host, rows: [] };
      groups.set(row.pid, group);
    }
    group.rows.push(row);
  }
  const ordered = [...groups.values()].sort((x, y) => {
    // GPU streams first (what overlaps), then the host's tasks.
    if (x.host !== y.host) return x.host ? 1 : -1;
    return x.pid - y.pid;
  });
  for (const group of ordered) group.rows.sort((x, y) => x.tid - y.tid);
  return { groups: ordered, tasks, start, end };
}

/**
 * An SVG timeline of a trace written by `startTrace()` / `TraceRecorder` (Chrome trace JSON):
 * a row per GPU stream (labelled with the stream's name) with each operation as a bar colored
 * by its task and labelled with the operation's name where it fits, a row per task showing when
 * it was alive on the host, a time axis (µs or ms from the first event) and a legend of tasks.
 * Hovering a bar shows its name, task, duration and start.
 * @example
 * const recorder = startTrace();
 * await Promise.all([task(job1, { name: 'job 1' }), task(job2, { name: 'job 2' })]);
 * writeFileSync('timeline.svg', renderTimelineSvg(await recorder.stop()));
 */
export function renderTimelineSvg(
  trace: { traceEvents: readonly TraceEvent[] },
  options: TimelineOptions = {},
): string {
  const width = Math.max(480, options.width ?? 1200);
  const title = options.title ?? 'cuda-tasks timeline';
  const { groups, tasks, start, end } = layout(trace.traceEvents ?? []);
  const plotLeft = LABEL_WIDTH;
  const plotWidth = width - LABEL_WIDTH - RIGHT_PAD;
  const out: string[] = [];

  const colorIndex = new Map(tasks.map((name, index) => [name, index % PALETTE.length]));
  const colorOf = (taskName: string) => PALETTE[colorIndex.get(taskName) ?? 0]!;

  const streamRows = groups.filter((g) => !g.host).reduce((n, g) => n + g.rows.length, 0);
  const gpuOperations = groups
    .filter((g) => !g.host)
    .reduce((n, g) => n + g.rows.reduce((m, row) => m + row.bars.length, 0), 0);
  const hostTasks = groups.filter((g) => g.host).reduce((n, g) => n + g.rows.length, 0);
  const span = Number.isFinite(start) ? Math.max(end - start, 1e-3) : 0;

  // Legend: task swatches, wrapped over as many lines as needed.
  const legendTop = 60;
  const legendItems: { x: number; y: number; name: string }[] = [];
  {
    let x = 16;
    let y = legendTop;
    for (const name of tasks) {
      const itemWidth = 22 + Math.min(name.length, 40) * 7 + 18;
      if (x + itemWidth > width - RIGHT_PAD && x > 16) {
        x = 16;
        y += 20;
      }
      legendItems.push({ x, y, name });
      x += itemWidth;
    }
  }
  const legendBottom = legendItems.length ? legendItems.at(-1)!.y + 14 : legendTop;
  const axisTop = legendBottom + 30;
  const rowsTop = axisTop + 8;
  const rowsHeight = groups.reduce((h, g) => h + GROUP_HEADER + g.rows.length * ROW_HEIGHT, 0);
  const height = rowsTop + rowsHeight + 44;

  out.push('<?xml version="1.0" encoding="UTF-8"?>');
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="${escapeXml(FONT)}">`,
  );
  out.push(`<title>${escapeXml(title)}</title>`);
  out.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(
    `<text x="16" y="26" font-size="17" font-weight="600" fill="#1f1f1f">${escapeXml(title)}</text>`,
  );
  const summary = Number.isFinite(start)
    ? `${gpuOperations} GPU operation${gpuOperations === 1 ? '' : 's'} on ${streamRows} stream${streamRows === 1 ? '' : 's'}, ${hostTasks} task${hostTasks === 1 ? '' : 's'}, ${formatTime(span)} from first to last event`
    : 'empty trace: no events recorded';
  out.push(`<text x="16" y="45" font-size="12" fill="#555555">${escapeXml(summary)}</text>`);

  for (const item of legendItems) {
    const [fill] = colorOf(item.name);
    out.push('<g class="legend-item">');
    out.push(
      `<rect x="${item.x}" y="${item.y - 10}" width="14" height="14" rx="2" fill="${fill}"/>`,
    );
    out.push(
      `<text x="${item.x + 20}" y="${item.y + 1}" font-size="12" fill="#1f1f1f">${escapeXml(item.name)}</text>`,
    );
    out.push('</g>');
  }

  if (Number.isFinite(start)) {
    const scale = plotWidth / span;
    const xOf = (ts: number) => plotLeft + (ts - start) * scale;

    // Axis: ticks and light grid lines through every row.
    const step = tickStep(span);
    out.push('<g class="axis">');
    for (let i = 0; i * step <= span * (1 + 1e-9); i++) {
      const t = i * step;
      const x = round(plotLeft + t * scale);
      out.push(
        `<line x1="${x}" y1="${axisTop}" x2="${x}" y2="${rowsTop + rowsHeight}" stroke="#e4e4e4" stroke-width="1"/>`,
      );
      out.push(
        `<text x="${x}" y="${axisTop - 6}" font-size="11" fill="#555555" text-anchor="middle">${escapeXml(formatTime(t, span))}</text>`,
      );
    }
    out.push('</g>');

    let y = rowsTop;
    for (const group of groups) {
      out.push(`<g class="group${group.host ? ' host' : ' gpu'}">`);
      out.push(
        `<text class="group-label" x="16" y="${y + 16}" font-size="12" font-weight="600" fill="#1f1f1f">${escapeXml(group.label)}</text>`,
      );
      out.push(
        `<line x1="16" y1="${y + GROUP_HEADER - 2}" x2="${width - RIGHT_PAD}" y2="${y + GROUP_HEADER - 2}" stroke="#c8c8c8" stroke-width="1"/>`,
      );
      y += GROUP_HEADER;
      for (const [index, row] of group.rows.entries()) {
        const kind = group.host ? 'task' : 'stream';
        out.push(`<g class="row ${kind}">`);
        if (index % 2 === 1) {
          out.push(
            `<rect x="${plotLeft}" y="${y}" width="${plotWidth}" height="${ROW_HEIGHT}" fill="#f7f7f7"/>`,
          );
        }
        const label = row.label.length > 28 ? `${row.label.slice(0, 27)}…` : row.label;
        out.push(
          `<text class="row-label ${kind}" x="28" y="${y + ROW_HEIGHT / 2 + 4}" font-size="12" fill="#333333">${escapeXml(label)}<title>${escapeXml(`${group.label}: ${row.label}`)}</title></text>`,
        );
        const barTop = y + (ROW_HEIGHT - BAR_HEIGHT) / 2;
        for (const bar of row.bars) {
          const [fill, textColor] = colorOf(bar.task);
          const x = round(xOf(bar.start));
          // At least one pixel, so that even the shortest operation is visible.
          const barWidth = round(Math.max(1, bar.duration * scale));
          const tooltip = group.host
            ? `${bar.name}: alive ${formatTime(bar.duration, span)} from ${formatTime(bar.start - start, span)}`
            : `${bar.name} (${bar.task}): ${formatTime(bar.duration, span)} from ${formatTime(bar.start - start, span)}`;
          const barClass = group.host ? 'task-bar' : 'op';
          const opacity = group.host ? ' fill-opacity="0.55"' : '';
          out.push(
            `<rect class="${barClass}" x="${x}" y="${barTop}" width="${barWidth}" height="${BAR_HEIGHT}" rx="2" fill="${fill}"${opacity} data-start-us="${round(bar.start - start)}" data-duration-us="${round(bar.duration)}"><title>${escapeXml(tooltip)}</title></rect>`,
          );
          const text = fittingLabel(bar.name, barWidth);
          if (text !== undefined) {
            out.push(
              `<text x="${round(x + 4)}" y="${barTop + BAR_HEIGHT / 2 + 4}" font-size="11" fill="${group.host ? '#1f1f1f' : textColor}" pointer-events="none">${escapeXml(text)}</text>`,
            );
          }
        }
        out.push('</g>');
        y += ROW_HEIGHT;
      }
      out.push('</g>');
    }
    out.push(
      `<text x="${plotLeft}" y="${rowsTop + rowsHeight + 28}" font-size="11" fill="#555555">time since the first event; GPU bars are timed with CUDA events, task bars with the host clock</text>`,
    );
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/**
 * The bar's label if it fits: the full name, else its last dotted part (`cublas.sgemm` ->
 * `sgemm`), else a prefix with an ellipsis when at least three characters fit.
 */
function fittingLabel(name: string, barWidth: number): string | undefined {
  const room = Math.floor((barWidth - 8) / CHAR_WIDTH);
  if (name.length <= room) return name;
  const short = name.slice(name.lastIndexOf('.') + 1);
  if (short.length <= room) return short;
  return room >= 4 ? `${short.slice(0, room - 1)}…` : undefined;
}
