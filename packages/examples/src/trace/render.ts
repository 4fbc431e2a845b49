/**
 * Renders a Chrome / Perfetto trace written by `startTrace()` as an SVG timeline.
 *
 * Usage: pnpm --filter @cuda-tasks/examples trace:render trace.json out.svg [--width PX] [--title TEXT]
 */
import { readFileSync, writeFileSync } from 'node:fs';
import type { TraceEvent } from '@cuda-tasks/task-runtime';
import { CommandLineError, isEntryPoint, parseCommandLine, usage } from '../cli.js';
import { renderTimelineSvg } from './timeline.js';

/** The renderer's flags (`pnpm --filter @cuda-tasks/examples trace:render --help`). */
export const renderCommandLine = {
  command: 'render.ts',
  options: {
    width: { type: 'string', placeholder: 'PX', description: 'width of the SVG in pixels' },
    title: { type: 'string', placeholder: 'TEXT', description: 'title above the timeline' },
  },
  positionals: 'trace.json out.svg',
} as const;

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

/**
 * Runs the renderer's command line; returns the exit status (0 written, 1 an unreadable
 * trace, 2 a bad command line: an unknown flag is an error that lists the valid ones).
 */
export function cli(argv: readonly string[]): number {
  let positional: string[];
  let width: number | undefined;
  let title: string | undefined;
  try {
    const parsed = parseCommandLine(argv, renderCommandLine);
    if (parsed.help) {
      console.log(usage(renderCommandLine));
      return 0;
    }
    positional = parsed.positionals;
    title = parsed.values.title;
    width = parsed.values.width === undefined ? undefined : Number(parsed.values.width);
    if (positional.length !== 2) {
      throw new CommandLineError(
        `expected two arguments, trace.json and out.svg; got ${positional.length}`,
        usage(renderCommandLine),
      );
    }
    if (width !== undefined && !(width > 0)) {
      throw new CommandLineError(
        `--width must be a positive number, got ${parsed.values.width}`,
        usage(renderCommandLine),
      );
    }
  } catch (error) {
    if (!(error instanceof CommandLineError)) throw error;
    console.error(`${error.message}\n\n${error.usage}`);
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

if (isEntryPoint(import.meta.url)) {
  process.exitCode = cli(process.argv.slice(2));
}
