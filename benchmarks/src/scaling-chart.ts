/**
 * The concurrency scaling chart (scaling.svg): one panel per job shape, speedup over K = 1
 * against K, one line per system, both axes log2, with the ideal (speedup = K) dashed. A
 * self-contained SVG; pure function of the report's results.
 */
import { formatRatio } from './report.js';
import { SHAPES } from './scaling-config.js';
import {
  formatRate,
  SCALING_SYSTEMS,
  type ScalingShapeResult,
  systemLabel,
} from './scaling-report.js';

const escapeXml = (text: string) =>
  text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');

const round = (value: number) => Math.round(value * 10) / 10;

/** The plotted range of one axis, as powers of two. */
export interface Log2Range {
  /** Smallest value shown (a power of two). */
  low: number;
  /** Largest value shown (a power of two). */
  high: number;
}

/**
 * The speedup axis: from the power of two at or below min(1, smallest speedup) to the one at or
 * above max(2, largest speedup), within [1/16, 256].
 * @example speedupRange([0.8, 3.1]); // { low: 0.5, high: 4 }
 */
export function speedupRange(speedups: readonly number[]): Log2Range {
  const finite = speedups.filter((value) => Number.isFinite(value) && value > 0);
  const low = 2 ** Math.floor(Math.log2(Math.min(1, ...finite)));
  const high = 2 ** Math.ceil(Math.log2(Math.max(2, ...finite)));
  return { low: Math.max(1 / 16, low), high: Math.min(256, high) };
}

/**
 * Renders the chart. `subtitle` says where and when it was measured; `workers`, the worker
 * threads of ours' worker tasks, and `issuers`, the issuer threads of ours with the issue
 * engine (in their labels), where known.
 * @example writeFileSync('scaling.svg', renderScalingSvg(results, 'NVIDIA H200; 2026-05-01'));
 */
export function renderScalingSvg(
  results: readonly ScalingShapeResult[],
  subtitle: string,
  workers?: number,
  issuers?: number,
): string {
  const panelWidth = 360;
  const panelHeight = 300;
  const gap = 36;
  const left = 58;
  const top = 120;
  const panels = Math.max(1, results.length);
  const width = left + panels * panelWidth + (panels - 1) * gap + 24;
  const height = top + panelHeight + 60;
  const out: string[] = [];
  out.push('<?xml version="1.0" encoding="UTF-8"?>');
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, &apos;Segoe UI&apos;, Helvetica, Arial, sans-serif">`,
  );
  out.push(`<title>cuda-tasks concurrency scaling: ${escapeXml(subtitle)}</title>`);
  out.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(
    '<text x="16" y="26" font-size="17" font-weight="600" fill="#1f1f1f">Concurrency scaling: speedup over K = 1 (K jobs started together)</text>',
  );
  out.push(`<text x="16" y="45" font-size="12" fill="#555555">${escapeXml(subtitle)}</text>`);
  out.push(
    '<text x="16" y="62" font-size="12" fill="#555555">both axes log2; the dashed line is the ideal, speedup = K. Hover a point for jobs/s.</text>',
  );
  // The legend: the systems that appear anywhere, then the ideal.
  const shown = SCALING_SYSTEMS.filter((system) =>
    results.some((result) => result.rows.some((row) => row.cells[system.key] !== undefined)),
  ).map((system) => ({ ...system, label: systemLabel(system.key, workers, issuers) }));
  let legendX = 16;
  for (const system of shown) {
    out.push(
      `<line x1="${legendX}" y1="80" x2="${legendX + 22}" y2="80" stroke="${system.color}" stroke-width="2.5"/><circle cx="${legendX + 11}" cy="80" r="3.5" fill="${system.color}"/><text x="${legendX + 28}" y="84" font-size="12" fill="#1f1f1f">${escapeXml(system.label)}</text>`,
    );
    legendX += 44 + system.label.length * 6.6;
  }
  out.push(
    `<line x1="${legendX}" y1="80" x2="${legendX + 22}" y2="80" stroke="#9a9a9a" stroke-width="1.5" stroke-dasharray="5 4"/><text x="${legendX + 28}" y="84" font-size="12" fill="#1f1f1f">ideal</text>`,
  );

  results.forEach((result, index) => {
    const x0 = left + index * (panelWidth + gap);
    const ks = result.rows.map((row) => row.k);
    const kLow = Math.min(...ks);
    const kHigh = Math.max(...ks);
    const speedups = result.rows.flatMap((row) =>
      Object.values(row.cells)
        .map((cell) => cell?.speedup)
        .filter((value): value is number => value !== undefined),
    );
    const range = speedupRange(speedups);
    const xOf = (k: number) =>
      kHigh === kLow
        ? x0 + panelWidth / 2
        : x0 +
          ((Math.log2(k) - Math.log2(kLow)) / (Math.log2(kHigh) - Math.log2(kLow))) * panelWidth;
    const yOf = (speedup: number) =>
      top +
      panelHeight -
      ((Math.log2(speedup) - Math.log2(range.low)) /
        (Math.log2(range.high) - Math.log2(range.low))) *
        panelHeight;
    const clip = `clip-${result.shape}`;
    out.push(`<g class="panel" data-shape="${result.shape}">`);
    out.push(
      `<clipPath id="${clip}"><rect x="${x0}" y="${top}" width="${panelWidth}" height="${panelHeight}"/></clipPath>`,
    );
    out.push(
      `<text x="${x0}" y="${top - 14}" font-size="13" font-weight="600" fill="#1f1f1f">${escapeXml(SHAPES[result.shape].title)}</text>`,
    );
    out.push(
      `<rect x="${x0}" y="${top}" width="${panelWidth}" height="${panelHeight}" fill="none" stroke="#cccccc"/>`,
    );
    // Grid and ticks: every power of two on the speedup axis, every K on the other.
    for (let exponent = Math.log2(range.low); exponent <= Math.log2(range.high); exponent++) {
      const value = 2 ** exponent;
      const y = round(yOf(value));
      out.push(
        `<line x1="${x0}" y1="${y}" x2="${x0 + panelWidth}" y2="${y}" stroke="${exponent === 0 ? '#888888' : '#eeeeee'}"/>`,
      );
      out.push(
        `<text x="${x0 - 6}" y="${y + 4}" font-size="10" fill="#666666" text-anchor="end">${value >= 1 ? `${value}x` : `1/${1 / value}x`}</text>`,
      );
    }
    for (const k of ks) {
      const x = round(xOf(k));
      out.push(
        `<line x1="${x}" y1="${top}" x2="${x}" y2="${top + panelHeight}" stroke="#f2f2f2"/>`,
      );
      out.push(
        `<text x="${x}" y="${top + panelHeight + 16}" font-size="10" fill="#666666" text-anchor="middle">${k}</text>`,
      );
    }
    out.push(
      `<text x="${round(x0 + panelWidth / 2)}" y="${top + panelHeight + 34}" font-size="11" fill="#444444" text-anchor="middle">K (jobs started together)</text>`,
    );
    out.push(
      `<polyline class="ideal" points="${ks.map((k) => `${round(xOf(k))},${round(yOf(k))}`).join(' ')}" fill="none" stroke="#9a9a9a" stroke-width="1.5" stroke-dasharray="5 4" clip-path="url(#${clip})"/>`,
    );
    for (const system of SCALING_SYSTEMS) {
      const label = systemLabel(system.key, workers, issuers);
      const points = result.rows
        .map((row) => ({ k: row.k, cell: row.cells[system.key] }))
        .filter(
          (point): point is { k: number; cell: NonNullable<typeof point.cell> } =>
            point.cell?.speedup !== undefined,
        );
      if (points.length === 0) continue;
      out.push(
        `<polyline class="series ${system.key}" points="${points.map((point) => `${round(xOf(point.k))},${round(yOf(point.cell.speedup!))}`).join(' ')}" fill="none" stroke="${system.color}" stroke-width="2.5" clip-path="url(#${clip})"/>`,
      );
      for (const point of points) {
        out.push(
          `<circle class="point ${system.key}" cx="${round(xOf(point.k))}" cy="${round(yOf(point.cell.speedup!))}" r="3.5" fill="${system.color}" clip-path="url(#${clip})"><title>${escapeXml(`${label}, K = ${point.k}: ${formatRate(point.cell.jobsPerSecond)} jobs/s, ${formatRatio(point.cell.speedup)} of K = 1`)}</title></circle>`,
        );
      }
    }
    out.push('</g>');
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
