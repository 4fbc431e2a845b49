/**
 * Renders a Chrome / Perfetto trace written by `startTrace()` as an SVG timeline.
 *
 * Usage: tsx --conditions=@cuda-tasks/source src/trace/render.ts trace.json out.svg [--width PX]
 */
import { readFileSync, writeFileSync } from 'node:fs';
import type { TraceEvent } from '@cuda-tasks/task-runtime';
import { renderTimelineSvg } from './timeline.js';

const usage = 'usage: render.ts trace.json out.svg [--width PX] [--title TEXT]';

/** Reads a trace file: `{ traceEvents: [...] }` or a bare array of events (both are Chrome's format). */
export function readTrace(path: string): { traceEvents: TraceEvent[] } {
  const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
  if (Array.isArray(parsed)) return { traceEvents: parsed as TraceEvent[] };
  if (
    typeof parsed === 'object' &&
    parsed !== null &&
    Array.isArray((parsed as { traceEvents?: unknown }).traceEvents)
  ) {
    return parsed as { traceEvents: TraceEvent[] };
  }
  throw new Error(`${path}: not a Chrome trace (expected { "traceEvents": [...] } or an array)`);
}

function cli(argv: readonly string[]): number {
  const positional: string[] = [];
  let width: number | undefined;
  let title: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const argument = argv[i]!;
    if (argument === '--width') width = Number(argv[++i]);
    else if (argument === '--title') title = argv[++i];
    else if (argument === '--help' || argument === '-h') {
      console.log(usage);
      return 0;
    } else positional.push(argument);
  }
  if (positional.length !== 2 || (width !== undefined && !(width > 0))) {
    console.error(usage);
    return 2;
  }
  const [input, output] = positional as [string, string];
  let trace: { traceEvents: TraceEvent[] };
  try {
    trace = readTrace(input);
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    return 1;
  }
  writeFileSync(output, renderTimelineSvg(trace, { width, title }));
  console.log(`wrote ${output}`);
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.exitCode = cli(process.argv.slice(2));
}
