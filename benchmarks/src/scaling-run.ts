/**
 * Runs the concurrency scaling programs (C's c/scaling.cu, ours src/scaling.ts, the Python
 * peers' python/scaling.py) for src/run.ts, and writes their report: scaling.json,
 * scaling.svg and raw/scaling.jsonl in the output folder.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { kernelsPtxPath, kernelsSourcePath } from '@cuda-tasks/examples/kernels';
import { renderScalingSvg } from './scaling-chart.js';
import { type ScalingConfig, scalingArguments } from './scaling-config.js';
import {
  buildScaling,
  formatScaling,
  issuersOf,
  parseScalingLines,
  scalingJson,
  scalingTargets,
  workersOf,
} from './scaling-report.js';

const packageRoot = fileURLToPath(new URL('..', import.meta.url));

/** How run.ts runs a child program: its stdout lines echoed with a label as they arrive. */
export type RunProgram = (
  label: string,
  command: string,
  args: readonly string[],
  timeoutMs: number,
) => Promise<{ stdout: string; stderr: string; code: number | null; error?: string }>;

/** What to run. */
export interface ScalingRunOptions {
  /** The folder build.sh builds into (the scaling binary lands there). */
  buildDir: string;
  /** Whether build.sh already ran with its `all` target (then the binary is not rebuilt). */
  built: boolean;
  /** Leave out C, ours, the Python peers. */
  skipC: boolean;
  /** See `skipC`. */
  skipOurs: boolean;
  /** See `skipC`. */
  skipPython: boolean;
  /** Python peers to run (empty: both). */
  peers: readonly string[];
  /**
   * The settings passed to every program (`workers` and `issuers` to ours only: Python rejects
   * them).
   */
  config: ScalingConfig;
  /** run.ts's child-program runner. */
  run: RunProgram;
}

const lastLines = (text: string, count = 3) => text.trim().split('\n').slice(-count).join(' | ');

/** The JSON line that records a program that did not run or failed. */
const skipLine = (system: string, reason: string) =>
  `${JSON.stringify({ name: '_skip', system, reason })}\n`;

/**
 * Runs the programs one after another (C, ours, then the Python peers) and returns all their
 * output lines as one text (the raw scaling.jsonl), with a `_skip` line for each program that
 * could not run or failed.
 */
export async function runScalingPrograms(options: ScalingRunOptions): Promise<string> {
  const settings = scalingArguments(options.config);
  let text = '';
  const record = (system: string, result: Awaited<ReturnType<RunProgram>>) => {
    text += result.stdout;
    if (result.code !== 0) {
      const reason = `${result.error ?? `exited with ${result.code}`}: ${lastLines(result.stderr)}`;
      console.log(`[scaling ${system}] ${reason}`);
      text += skipLine(system, reason);
    }
  };
  if (!options.skipC) {
    const binary = join(options.buildDir, 'scaling');
    if (!options.built) {
      console.log(`[scaling c] building c/scaling.cu into ${options.buildDir}`);
      const build = spawnSync(
        'bash',
        [join(packageRoot, 'c/build.sh'), options.buildDir, 'scaling'],
        { encoding: 'utf8', timeout: 180_000 },
      );
      if (build.status !== 0) {
        const reason = `not built: ${build.error?.message ?? (lastLines(build.stderr ?? '') || `exit ${build.status}`)}`;
        console.log(`[scaling c] ${reason}`);
        text += skipLine('c', reason);
      }
    }
    if (existsSync(binary)) {
      record('c', await options.run('scaling c', binary, [kernelsPtxPath, ...settings], 300_000));
    } else if (options.built) {
      text += skipLine('c', 'c/scaling.cu was not built (see build.sh output above)');
    }
  }
  if (!options.skipOurs) {
    record(
      'ours',
      await options.run(
        'scaling ours',
        process.execPath,
        [
          ...process.execArgv,
          join(packageRoot, 'src/scaling.ts'),
          ...scalingArguments(options.config, { ours: true }),
        ],
        300_000,
      ),
    );
  }
  if (!options.skipPython) {
    const probe = spawnSync('python3', ['--version'], { encoding: 'utf8' });
    if (probe.error || probe.status !== 0) {
      text += skipLine('python', 'python3 not found: CuPy and PyTorch skipped');
    } else {
      const peers = options.peers.length > 0 ? [`peers=${options.peers.join(',')}`] : [];
      record(
        'python',
        await options.run(
          'scaling python',
          'python3',
          [join(packageRoot, 'python/scaling.py'), kernelsSourcePath, ...settings, ...peers],
          300_000,
        ),
      );
    }
  }
  return text;
}

/**
 * Builds the report from the raw lines, writes scaling.json, scaling.svg and
 * raw/scaling.jsonl into `out`, and returns the JSON document and the table text.
 */
export function writeScalingReport(
  text: string,
  config: ScalingConfig,
  out: string,
  subtitle: string,
): { json: Record<string, unknown>; table: string; paths: string[] } {
  const collected = parseScalingLines(text);
  const results = buildScaling(collected.lines);
  const targets = scalingTargets(results);
  const json = scalingJson(results, targets, collected, config);
  mkdirSync(join(out, 'raw'), { recursive: true });
  const jsonPath = join(out, 'scaling.json');
  const svgPath = join(out, 'scaling.svg');
  writeFileSync(join(out, 'raw', 'scaling.jsonl'), text);
  writeFileSync(jsonPath, `${JSON.stringify(json, null, 2)}\n`);
  writeFileSync(
    svgPath,
    renderScalingSvg(
      results,
      subtitle,
      workersOf(collected.meta, config),
      issuersOf(collected.meta, config),
    ),
  );
  const skipped = collected.skipped.map((skip) => `skipped scaling ${skip.system}: ${skip.reason}`);
  const table = [
    ...skipped,
    ...(skipped.length ? [''] : []),
    formatScaling(results, targets, config, collected.meta),
  ];
  return { json, table: table.join('\n'), paths: [jsonPath, svgPath] };
}
