/**
 * `pnpm bench`: the whole benchmark suite in one command. Builds and runs the C baseline, runs
 * the Python peers (CuPy, PyTorch), runs ours (driver/runtime and library benchmarks), and
 * prints one table with the ratios, last. Writes bench.json, bench.svg and the raw JSON lines
 * into the output folder.
 *
 * Usage: tsx --conditions=@cuda-tasks/source bench/run.ts [--out DIR] [--from DIR]
 *        [--skip-c] [--skip-python] [--skip-ours] [--peers cupy,torch]
 *
 * --from DIR  runs nothing: rebuilds the report from DIR/raw/{c,python,ours}.jsonl (what an
 *             earlier run saved), e.g. on a machine without a GPU.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, hostname, tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  addLines,
  type BenchLine,
  buildJson,
  buildTable,
  buildTargets,
  type Collected,
  emptyCollected,
  formatTable,
  parseLines,
  renderBenchSvg,
} from './ts/report.js';

const packageRoot = fileURLToPath(new URL('..', import.meta.url));
const ptxPath = join(packageRoot, 'src/kernels/kernels.ptx');
const kernelsSource = join(packageRoot, 'src/kernels/kernels.cu');

interface RunArguments {
  out: string;
  from?: string;
  skipC: boolean;
  skipPython: boolean;
  skipOurs: boolean;
  peers: string[];
}

const usage =
  'usage: run.ts [--out DIR] [--from DIR] [--skip-c] [--skip-python] [--skip-ours] [--peers cupy,torch]';

function parseArguments(argv: readonly string[]): RunArguments {
  const parsed: RunArguments = {
    out: join(packageRoot, 'out'),
    skipC: false,
    skipPython: false,
    skipOurs: false,
    peers: [],
  };
  for (let i = 0; i < argv.length; i++) {
    const argument = argv[i]!;
    const value = () => {
      const next = argv[++i];
      if (next === undefined) fail(`${argument} needs a value`);
      return next!;
    };
    if (argument === '--') continue; // pnpm passes it through
    if (argument === '--out') parsed.out = resolve(value());
    else if (argument === '--from') parsed.from = resolve(value());
    else if (argument === '--skip-c') parsed.skipC = true;
    else if (argument === '--skip-python') parsed.skipPython = true;
    else if (argument === '--skip-ours') parsed.skipOurs = true;
    else if (argument === '--peers') parsed.peers = value().split(',').filter(Boolean);
    else if (argument === '--help' || argument === '-h') {
      console.log(usage);
      process.exit(0);
    } else fail(`unknown argument ${argument}`);
  }
  return parsed;
}

function fail(message: string): never {
  console.error(`${message}\n${usage}`);
  process.exit(2);
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

async function runC(collected: Collected, raw: Record<string, string>): Promise<void> {
  const buildDir = join(tmpdir(), 'cuda-tasks-bench');
  console.log(`[c] building bench/c/bench.cu into ${buildDir}`);
  const build = spawnSync('bash', [join(packageRoot, 'bench/c/build.sh'), buildDir], {
    encoding: 'utf8',
    timeout: 180_000,
  });
  const binary = build.stdout?.trim().split('\n').at(-1);
  if (build.status !== 0 || !binary) {
    const reason = `C baseline not built: ${build.error?.message ?? (lastLines(build.stderr ?? '') || `exit ${build.status}`)}`;
    console.log(`[c] ${reason}`);
    collected.skipped.push({ source: 'c', reason });
    return;
  }
  const result = await runProgram('c', binary, [ptxPath], 180_000);
  raw.c = result.stdout;
  addLines(collected, 'c', parseLines(result.stdout));
  if (result.code !== 0) {
    collected.skipped.push({
      source: 'c',
      reason: `C baseline ${result.error ?? `exited with ${result.code}`}: ${lastLines(result.stderr)}`,
    });
  }
}

async function runPython(
  collected: Collected,
  raw: Record<string, string>,
  peers: readonly string[],
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
    [join(packageRoot, 'bench/python/peers.py'), kernelsSource, ...peers],
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

async function runOurs(collected: Collected, raw: Record<string, string>): Promise<void> {
  console.log('[ours] driver and runtime benchmarks, then libraries and the seed workload');
  try {
    // Imported here so that --from and the C/Python runs work without a GPU or libcuda.
    const { runCore } = await import('./ts/core.js');
    const { runLibraries } = await import('./ts/libraries.js');
    const results = [...(await runCore()), ...(await runLibraries())];
    raw.ours = `${results.map((result) => JSON.stringify(result)).join('\n')}\n`;
    addLines(collected, 'ours', results as BenchLine[]);
  } catch (error) {
    const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    console.log(`[ours] failed: ${message}`);
    const unavailable = error instanceof Error && error.name === 'CudaUnavailableError';
    if (!unavailable && error instanceof Error && error.stack) console.log(error.stack);
    collected.skipped.push({ source: 'ours', reason: message });
  }
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

function subtitleOf(machine: Record<string, unknown>, collected: Collected): string {
  const gpus = machine.gpus;
  const gpu = Array.isArray(gpus)
    ? String((gpus[0] as Record<string, unknown>).name)
    : String(collected.meta.c?.device ?? collected.meta.cupy?.device ?? 'unknown GPU');
  return `${gpu}; Node ${process.version}; median of 15 batches after 3 warm-ups; ${new Date().toISOString().slice(0, 10)}`;
}

const shown = (path: string) => {
  const relativePath = relative(process.cwd(), path);
  return relativePath.startsWith('..') ? path : relativePath;
};

async function main(): Promise<number> {
  const options = parseArguments(process.argv.slice(2));
  const collected = emptyCollected();
  const raw: Record<string, string> = {};
  const started = performance.now();
  let machine: Record<string, unknown>;

  if (options.from !== undefined) {
    const rawDir = existsSync(join(options.from, 'raw')) ? join(options.from, 'raw') : options.from;
    for (const [file, source] of [
      ['c.jsonl', 'c'],
      ['python.jsonl', 'cupy'],
      ['ours.jsonl', 'ours'],
    ] as const) {
      const path = join(rawDir, file);
      if (existsSync(path)) addLines(collected, source, parseLines(readFileSync(path, 'utf8')));
    }
    const savedMachine = join(options.from, 'bench.json');
    machine = existsSync(savedMachine)
      ? ((JSON.parse(readFileSync(savedMachine, 'utf8')) as { machine?: Record<string, unknown> })
          .machine ?? machineInfo())
      : machineInfo();
  } else {
    machine = machineInfo();
    // Children first, while this process holds no CUDA context of its own.
    if (!options.skipC) await runC(collected, raw);
    if (!options.skipPython) await runPython(collected, raw, options.peers);
    if (!options.skipOurs) await runOurs(collected, raw);
  }

  const rows = buildTable(collected);
  const targets = buildTargets(collected);
  mkdirSync(join(options.out, 'raw'), { recursive: true });
  for (const [name, text] of Object.entries(raw)) {
    writeFileSync(join(options.out, 'raw', `${name}.jsonl`), text);
  }
  const jsonPath = join(options.out, 'bench.json');
  const svgPath = join(options.out, 'bench.svg');
  const document = buildJson(collected, rows, targets, machine);
  document.elapsed_s = Math.round((performance.now() - started) / 100) / 10;
  writeFileSync(jsonPath, `${JSON.stringify(document, null, 2)}\n`);
  writeFileSync(svgPath, renderBenchSvg(rows, targets, subtitleOf(machine, collected)));

  console.log('');
  for (const skip of collected.skipped) {
    console.log(`skipped ${skip.source}${skip.id ? ` ${skip.id}` : ''}: ${skip.reason}`);
  }
  console.log(
    `wrote ${shown(jsonPath)}, ${shown(svgPath)} and raw lines in ${shown(join(options.out, 'raw'))} (${document.elapsed_s} s)`,
  );
  console.log('');
  console.log(formatTable(rows, targets, collected));
  return collected.results.ours.size > 0 || options.skipOurs || options.from ? 0 : 1;
}

process.exit(await main());
