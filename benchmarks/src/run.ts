/**
 * `pnpm bench`: the whole benchmark suite in one command. Builds and runs the C baseline, runs
 * the Python peers (CuPy, PyTorch), runs ours (driver/runtime and library benchmarks), and
 * prints one table with the ratios, last. Writes bench.json, bench.svg and the raw JSON lines
 * into the output folder.
 *
 * Usage: pnpm bench [--out DIR] [--from DIR] [--rounds N] [--skip-c] [--skip-python]
 *        [--skip-ours] [--skip-paired] [--skip-scaling] [--only scaling|kernels]
 *        [--peers cupy,torch] [--scaling 'key=value ...'] [--help]
 *
 * --rounds N  runs the C baseline and ours N times each, alternating (default 3), and reports
 *             per benchmark the median of the rounds: the host drifts over a run, and this
 *             way the drift hits both sides alike. The Python peers run once.
 *
 * --skip-paired leaves out the same-process comparison (src/paired.ts: C's loops as a
 *             shared library, called from the process that runs ours, batch by batch
 *             alternating), which otherwise runs once after the rounds.
 *
 * --from DIR  runs nothing: rebuilds the report from DIR/raw/{c,python,ours}.jsonl (what an
 *             earlier run saved), e.g. on a machine without a GPU.
 *
 * The concurrency scaling benchmark (src/scaling*.ts, c/scaling.cu, python/scaling.py) runs
 * last and writes scaling.json and scaling.svg beside bench.json; `--only scaling` runs it
 * alone (with --from: rebuilds it from DIR/raw/scaling.jsonl), `--skip-scaling` leaves it out.
 * `--scaling 'ks=16,32,64 workers=16'` changes its settings (src/scaling-config.ts) for every
 * program it runs.
 *
 * `--only kernels` runs the expression kernels' rows alone (src/kernels.ts for ours, each
 * round; the Python peers' sin_1m, sin_64m, sum_64m and topk_1m_x*; no C, no same-process comparison, no
 * scaling) and reports them with their targets (kernels_sin_issue, kernels_sum_vs_peers).
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, hostname, tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { availability } from '@cuda-tasks/cudadrv';
import { kernelsPtxPath, kernelsSourcePath } from '@cuda-tasks/examples/kernels';
import { CommandLineError, isEntryPoint, parseCommandLine, usage } from '@cuda-tasks/testing/cli';
import {
  addLines,
  type BenchLine,
  buildJson,
  buildTable,
  buildTargets,
  type Collected,
  emptyCollected,
  formatPaired,
  formatTable,
  mergeRounds,
  parseLines,
  renderBenchSvg,
  splitRounds,
} from './report.js';
import { parseScalingArguments, type ScalingConfig } from './scaling-config.js';
import { runScalingPrograms, writeScalingReport } from './scaling-run.js';

const packageRoot = fileURLToPath(new URL('..', import.meta.url));
const ptxPath = kernelsPtxPath;
const kernelsSource = kernelsSourcePath;

interface RunArguments {
  out: string;
  from?: string;
  skipC: boolean;
  skipPython: boolean;
  skipOurs: boolean;
  peers: string[];
  rounds: number;
  skipPaired: boolean;
  skipScaling: boolean;
  /**
   * `scaling`: run only the concurrency scaling benchmark; `kernels`: only the expression
   * kernels' rows (ours and the Python peers).
   */
  only?: 'scaling' | 'kernels';
  /** The scaling benchmark's settings: the defaults, changed by `--scaling`. */
  scaling: ScalingConfig;
}

/** The suite's flags (`pnpm bench --help`). */
export const benchCommandLine = {
  command: 'pnpm bench',
  options: {
    out: {
      type: 'string',
      placeholder: 'DIR',
      description: 'output folder',
      default: 'benchmarks/out',
    },
    from: {
      type: 'string',
      placeholder: 'DIR',
      description: 'rebuild the report from saved lines',
    },
    rounds: {
      type: 'string',
      placeholder: 'N',
      description: 'alternating C / ours rounds',
      default: 3,
    },
    'skip-c': { type: 'boolean', description: 'leave out the C baseline' },
    'skip-python': { type: 'boolean', description: 'leave out CuPy and PyTorch' },
    'skip-ours': { type: 'boolean', description: 'leave out ours' },
    'skip-paired': { type: 'boolean', description: 'leave out the same-process comparison' },
    'skip-scaling': { type: 'boolean', description: 'leave out the concurrency scaling part' },
    only: {
      type: 'string',
      placeholder: 'scaling|kernels',
      description: 'run only that part',
    },
    peers: { type: 'string', placeholder: 'cupy,torch', description: 'which Python peers' },
    scaling: {
      type: 'string',
      placeholder: "'key=value ...'",
      description:
        "settings of the scaling part, space-separated, as src/scaling-config.ts names them: 'ks=16,32,64 shapes=mixed workers=16'",
    },
  },
} as const;

/**
 * Parses the suite's command line. Throws a `CommandLineError` for an unknown flag (listing
 * the valid ones) or a bad `--rounds`.
 * @example parseBenchArguments(['--rounds', '5']).rounds; // 5
 */
export function parseBenchArguments(argv: readonly string[]): RunArguments {
  const { values } = parseCommandLine(argv, benchCommandLine);
  const rounds =
    values.rounds === undefined ? benchCommandLine.options.rounds.default : Number(values.rounds);
  if (!Number.isSafeInteger(rounds) || rounds < 1) {
    throw new CommandLineError(
      `--rounds needs a positive integer, got ${values.rounds || 'nothing'}`,
      usage(benchCommandLine),
    );
  }
  if (values.only !== undefined && values.only !== 'scaling' && values.only !== 'kernels') {
    throw new CommandLineError(
      `--only takes scaling or kernels, got ${values.only}`,
      usage(benchCommandLine),
    );
  }
  let scaling: ScalingConfig;
  try {
    scaling = parseScalingArguments((values.scaling ?? '').split(/\s+/).filter(Boolean));
  } catch (error) {
    throw new CommandLineError(
      `--scaling: ${(error as Error).message.replace(/^scaling: /, '')}`,
      usage(benchCommandLine),
    );
  }
  const kernelsOnly = values.only === 'kernels';
  return {
    out: values.out === undefined ? join(packageRoot, 'out') : resolve(values.out),
    ...(values.from === undefined ? {} : { from: resolve(values.from) }),
    skipC: values['skip-c'] === true || kernelsOnly,
    skipPython: values['skip-python'] === true,
    skipOurs: values['skip-ours'] === true,
    skipPaired: values['skip-paired'] === true || kernelsOnly,
    skipScaling: values['skip-scaling'] === true || kernelsOnly,
    ...(values.only === undefined ? {} : { only: values.only }),
    peers: (values.peers ?? '').split(',').filter(Boolean),
    rounds,
    scaling,
  };
}

/** Output of a child program: its stdout lines echoed with a prefix as they arrive. */
async function runProgram(
  label: string,
  command: string,
  args: readonly string[],
  timeoutMs: number,
): Promise<{ stdout: string; stderr: string; code: number | null; error?: string }> {
  return new Promise((resolvePromise) => {
    const child = spawn(command, args, { cwd: packageRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let settled = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      finish(null, `timed out after ${timeoutMs / 1000} s`);
    }, timeoutMs);
    const finish = (code: number | null, error?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolvePromise({ stdout, stderr, code, ...(error ? { error } : {}) });
    };
    createInterface({ input: child.stdout }).on('line', (line) => {
      stdout += `${line}\n`;
      console.log(`[${label}] ${line}`);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('error', (error) => finish(null, error.message));
    child.on('close', (code) => finish(code));
  });
}

const lastLines = (text: string, count = 3) => text.trim().split('\n').slice(-count).join(' | ');

/** Builds the C baseline; returns the binary, or undefined (and records why) when it fails. */
const buildDir = join(tmpdir(), 'cuda-tasks-bench');

function buildC(collected: Collected): string | undefined {
  console.log(`[c] building c/bench.cu into ${buildDir}`);
  const build = spawnSync('bash', [join(packageRoot, 'c/build.sh'), buildDir, 'all'], {
    encoding: 'utf8',
    timeout: 180_000,
  });
  const binary = build.stdout?.trim().split('\n').at(-1);
  if (build.status !== 0 || !binary) {
    const reason = `C baseline not built: ${build.error?.message ?? (lastLines(build.stderr ?? '') || `exit ${build.status}`)}`;
    console.log(`[c] ${reason}`);
    collected.skipped.push({ source: 'c', reason });
    return undefined;
  }
  return binary;
}

/** One round of the C baseline; returns its lines. */
async function runC(
  binary: string,
  collected: Collected,
  raw: string[],
  round: number,
): Promise<BenchLine[]> {
  const result = await runProgram(`c ${round}`, binary, [ptxPath], 180_000);
  raw.push(result.stdout);
  if (result.code !== 0) {
    collected.skipped.push({
      source: 'c',
      reason: `C baseline (round ${round}) ${result.error ?? `exited with ${result.code}`}: ${lastLines(result.stderr)}`,
    });
  }
  return parseLines(result.stdout);
}

/** The Python peers' benchmarks of the expression kernels (what `--only kernels` runs of them). */
export const KERNEL_PEER_IDS = [
  'sin_1m',
  'sin_64m',
  'sum_64m',
  'topk_1m_x8',
  'topk_1m_x64',
] as const;

async function runPython(
  collected: Collected,
  raw: Record<string, string>,
  peers: readonly string[],
  only?: readonly string[],
): Promise<void> {
  const probe = spawnSync('python3', ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    const reason = 'python3 not found: CuPy and PyTorch peers skipped';
    console.log(`[python] ${reason}`);
    collected.skipped.push({ source: 'python', reason });
    return;
  }
  const result = await runProgram(
    'python',
    'python3',
    [
      join(packageRoot, 'python/peers.py'),
      kernelsSource,
      ...peers,
      ...(only === undefined ? [] : ['--only', only.join(',')]),
    ],
    240_000,
  );
  raw.python = result.stdout;
  addLines(collected, 'cupy', parseLines(result.stdout));
  if (result.code !== 0) {
    collected.skipped.push({
      source: 'python',
      reason: `peers.py ${result.error ?? `exited with ${result.code}`}: ${lastLines(result.stderr)}`,
    });
  }
}

/**
 * One round of ours, as a program of its own (src/ours.ts, under the same loader as this
 * one), so that every round starts from a fresh process as C's does. Returns its lines.
 */
async function runOurs(
  collected: Collected,
  raw: string[],
  round: number,
  kernelsOnly = false,
): Promise<BenchLine[]> {
  if (round === 1) {
    console.log(
      kernelsOnly
        ? '[ours] the expression kernels (src/kernels.ts)'
        : '[ours] driver and runtime benchmarks, then libraries and the seed workload',
    );
  }
  const script = join(packageRoot, kernelsOnly ? 'src/kernels.ts' : 'src/ours.ts');
  const result = await runProgram(
    `ours ${round}`,
    process.execPath,
    [...process.execArgv, script],
    300_000,
  );
  raw.push(result.stdout);
  if (result.code !== 0) {
    const reason = `ours (round ${round}) ${result.error ?? `exited with ${result.code}`}: ${lastLines(result.stderr)}`;
    console.log(`[ours] ${reason}`);
    collected.skipped.push({ source: 'ours', reason });
  }
  return parseLines(result.stdout);
}

/**
 * The same-process comparison (src/paired.ts with the libinproc.so that build.sh put
 * beside the C binary); returns its lines.
 */
async function runPairedProgram(
  binary: string,
  collected: Collected,
  raw: Record<string, string>,
): Promise<BenchLine[]> {
  const library = join(dirname(binary), 'libinproc.so');
  if (!existsSync(library)) {
    collected.skipped.push({ source: 'c', reason: `same-process comparison: ${library} missing` });
    return [];
  }
  console.log('[paired] C (inproc.cu) and ours in one process, batch by batch alternating');
  const script = join(packageRoot, 'src/paired.ts');
  const result = await runProgram(
    'paired',
    process.execPath,
    [...process.execArgv, script, library],
    300_000,
  );
  raw.paired = result.stdout;
  if (result.code !== 0) {
    collected.skipped.push({
      source: 'ours',
      reason: `same-process comparison ${result.error ?? `exited with ${result.code}`}: ${lastLines(result.stderr)}`,
    });
  }
  return parseLines(result.stdout);
}

/** ours/C per round, for each benchmark both sides ran in every round. */
function formatRounds(collected: Collected): string {
  const lines = ['ours/C per round (C and ours alternating; the table shows the median):'];
  for (const [name, ours] of collected.results.ours) {
    const c = collected.results.c.get(name);
    const oursRounds = ours.rounds_us as number[] | undefined;
    const cRounds = c?.rounds_us as number[] | undefined;
    if (!oursRounds || !cRounds || oursRounds.length !== cRounds.length) continue;
    const ratios = oursRounds.map((value, i) => (value / cRounds[i]!).toFixed(2));
    lines.push(`  ${name.padEnd(24)} ${ratios.join('  ')}`);
  }
  return lines.join('\n');
}

/** GPU and host description for bench.json. */
function machineInfo(): Record<string, unknown> {
  const info: Record<string, unknown> = {
    hostname: hostname(),
    platform: `${process.platform} ${process.arch}`,
    cpu: `${cpus()[0]?.model ?? 'unknown'} x ${cpus().length}`,
    node: process.version,
  };
  const fields = [
    'name',
    'driver_version',
    'memory.total',
    'clocks.max.sm',
    'power.limit',
    'pci.bus_id',
  ];
  const smi = spawnSync(
    'nvidia-smi',
    [`--query-gpu=${fields.join(',')}`, '--format=csv,noheader'],
    { encoding: 'utf8', timeout: 20_000 },
  );
  if (smi.status === 0 && smi.stdout) {
    info.gpus = smi.stdout
      .trim()
      .split('\n')
      .map((line) => {
        const values = line.split(',').map((value) => value.trim());
        return Object.fromEntries(fields.map((field, i) => [field, values[i] ?? null]));
      });
  } else {
    info.gpus = `nvidia-smi unavailable${smi.error ? `: ${smi.error.message}` : ''}`;
  }
  return info;
}

function subtitleOf(
  machine: Record<string, unknown>,
  collected: Collected,
  rounds: number,
): string {
  const gpus = machine.gpus;
  const gpu = Array.isArray(gpus)
    ? String((gpus[0] as Record<string, unknown>).name)
    : String(collected.meta.c?.device ?? collected.meta.cupy?.device ?? 'unknown GPU');
  return `${gpu}; Node ${process.version}; median of 15 batches after 3 warm-ups${rounds > 1 ? `, median of ${rounds} alternating rounds` : ''}; ${new Date().toISOString().slice(0, 10)}`;
}

const shown = (path: string) => {
  const relativePath = relative(process.cwd(), path);
  return relativePath.startsWith('..') ? path : relativePath;
};

/**
 * Why the benchmarks cannot run here (no driver, no GPU, too old a driver), or undefined when
 * a device answers. `availability()` creates no CUDA context in this process.
 */
function gpuUnavailable(): string | undefined {
  const gpu = availability();
  return gpu.available ? undefined : gpu.reason;
}

/** The concurrency scaling part: runs it (or with --from reloads its lines) and reports it. */
async function scaling(
  options: RunArguments,
  machine: Record<string, unknown>,
  built: boolean,
): Promise<{ json: Record<string, unknown>; table: string; paths: string[] } | undefined> {
  const config = options.scaling;
  let text: string;
  if (options.from !== undefined) {
    const rawDir = existsSync(join(options.from, 'raw')) ? join(options.from, 'raw') : options.from;
    const path = join(rawDir, 'scaling.jsonl');
    if (!existsSync(path)) return undefined;
    text = readFileSync(path, 'utf8');
  } else {
    console.log('[scaling] K jobs started together: C, ours, then CuPy and PyTorch');
    text = await runScalingPrograms({
      buildDir,
      built,
      skipC: options.skipC,
      skipOurs: options.skipOurs,
      skipPython: options.skipPython,
      peers: options.peers,
      config,
      run: runProgram,
    });
  }
  const gpus = machine.gpus;
  const gpu = Array.isArray(gpus) ? String((gpus[0] as Record<string, unknown>).name) : 'GPU';
  const subtitle = `${gpu}; Node ${process.version}; median batch of each (system, shape, K); ${new Date().toISOString().slice(0, 10)}`;
  return writeScalingReport(text, config, options.out, subtitle);
}

/** The machine saved in DIR/bench.json by an earlier run, or this one's. */
function savedMachine(from: string): Record<string, unknown> {
  const path = join(from, 'bench.json');
  return existsSync(path)
    ? ((JSON.parse(readFileSync(path, 'utf8')) as { machine?: Record<string, unknown> }).machine ??
        machineInfo())
    : machineInfo();
}

/** `--only scaling`: the scaling benchmark alone. */
async function mainScaling(options: RunArguments): Promise<number> {
  const started = performance.now();
  const machine = options.from !== undefined ? savedMachine(options.from) : machineInfo();
  const report = await scaling(options, machine, false);
  if (report === undefined) {
    console.error(`no raw/scaling.jsonl in ${options.from}`);
    return 1;
  }
  console.log('');
  console.log(
    `wrote ${report.paths.map(shown).join(', ')} (${Math.round((performance.now() - started) / 100) / 10} s)`,
  );
  console.log('');
  console.log(report.table);
  return 0;
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  let options: RunArguments;
  try {
    if (parseCommandLine(argv, benchCommandLine).help) {
      console.log(usage(benchCommandLine));
      return 0;
    }
    options = parseBenchArguments(argv);
  } catch (error) {
    if (!(error instanceof CommandLineError)) throw error;
    console.error(`${error.message}\n\n${error.usage}`);
    return 2;
  }
  // Without a GPU, stop before building or running anything (and write no report).
  const unavailable = options.from === undefined ? gpuUnavailable() : undefined;
  if (unavailable !== undefined) {
    console.error(
      `${unavailable}\npnpm bench needs an NVIDIA GPU; --from DIR rebuilds a report from saved lines.`,
    );
    return 1;
  }
  if (options.only === 'scaling') return mainScaling(options);
  const collected = emptyCollected();
  const raw: Record<string, string> = {};
  const started = performance.now();
  let machine: Record<string, unknown>;
  let roundsRun = options.rounds;
  let paired: BenchLine[] = [];

  if (options.from !== undefined) {
    roundsRun = 1;
    const rawDir = existsSync(join(options.from, 'raw')) ? join(options.from, 'raw') : options.from;
    for (const [file, source] of [
      ['c.jsonl', 'c'],
      ['python.jsonl', 'cupy'],
      ['ours.jsonl', 'ours'],
    ] as const) {
      const path = join(rawDir, file);
      if (!existsSync(path)) continue;
      const rounds = splitRounds(parseLines(readFileSync(path, 'utf8')));
      if (source !== 'cupy') roundsRun = Math.max(roundsRun, rounds.length);
      addLines(collected, source, mergeRounds(rounds));
    }
    const pairedPath = join(rawDir, 'paired.jsonl');
    if (existsSync(pairedPath)) paired = parseLines(readFileSync(pairedPath, 'utf8'));
    machine = savedMachine(options.from);
  } else {
    machine = machineInfo();
    // Every program is a child process; this one never creates a CUDA context.
    const binary = options.skipC ? undefined : buildC(collected);
    const cRounds: BenchLine[][] = [];
    const oursRounds: BenchLine[][] = [];
    const cRaw: string[] = [];
    const oursRaw: string[] = [];
    // The Python peers first, once: what a heavy process leaves behind (CPU state, the
    // driver's) then precedes C and ours alike.
    const kernelsOnly = options.only === 'kernels';
    if (!options.skipPython) {
      await runPython(collected, raw, options.peers, kernelsOnly ? KERNEL_PEER_IDS : undefined);
    }
    for (let round = 1; round <= options.rounds; round++) {
      if (binary !== undefined) cRounds.push(await runC(binary, collected, cRaw, round));
      if (!options.skipOurs) {
        oursRounds.push(await runOurs(collected, oursRaw, round, kernelsOnly));
      }
    }
    if (cRounds.length > 0) {
      addLines(collected, 'c', mergeRounds(cRounds));
      raw.c = cRaw.join('');
    }
    if (oursRounds.length > 0) {
      addLines(collected, 'ours', mergeRounds(oursRounds));
      raw.ours = oursRaw.join('');
    }
    if (binary !== undefined && !options.skipOurs && !options.skipPaired) {
      paired = await runPairedProgram(binary, collected, raw);
    }
  }
  const scalingReport = options.skipScaling
    ? undefined
    : await scaling(options, machine, options.from === undefined && !options.skipC);

  const rows = buildTable(collected);
  const targets = buildTargets(collected);
  mkdirSync(join(options.out, 'raw'), { recursive: true });
  for (const [name, text] of Object.entries(raw)) {
    writeFileSync(join(options.out, 'raw', `${name}.jsonl`), text);
  }
  const jsonPath = join(options.out, 'bench.json');
  const svgPath = join(options.out, 'bench.svg');
  const document = buildJson(collected, rows, targets, machine, roundsRun);
  if (paired.length > 0) document.paired = paired.filter((line) => line.paired === true);
  const engineIdle = paired.filter((line) => line.engine_idle === true);
  if (engineIdle.length > 0) document.engine_idle = engineIdle;
  const engineStats = paired.filter((line) => line.engine_stats === true);
  if (engineStats.length > 0) document.engine_stats = engineStats;
  if (scalingReport !== undefined) document.scaling = scalingReport.json;
  document.elapsed_s = Math.round((performance.now() - started) / 100) / 10;
  writeFileSync(jsonPath, `${JSON.stringify(document, null, 2)}\n`);
  writeFileSync(svgPath, renderBenchSvg(rows, targets, subtitleOf(machine, collected, roundsRun)));

  console.log('');
  for (const skip of collected.skipped) {
    console.log(`skipped ${skip.source}${skip.id ? ` ${skip.id}` : ''}: ${skip.reason}`);
  }
  console.log(
    `wrote ${shown(jsonPath)}, ${shown(svgPath)} and raw lines in ${shown(join(options.out, 'raw'))} (${document.elapsed_s} s)`,
  );
  console.log('');
  console.log(formatTable(rows, targets, collected));
  if (roundsRun > 1) console.log(`\n${formatRounds(collected)}`);
  const pairedTable = formatPaired(paired);
  if (pairedTable) console.log(`\n${pairedTable}`);
  if (scalingReport !== undefined) {
    console.log(`\n(also wrote ${scalingReport.paths.map(shown).join(', ')})\n`);
    console.log(scalingReport.table);
  }
  return collected.results.ours.size > 0 || options.skipOurs || options.from ? 0 : 1;
}

if (isEntryPoint(import.meta.url)) process.exit(await main());
