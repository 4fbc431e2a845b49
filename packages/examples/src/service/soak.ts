/**
 * Soak test of the GPU service's memory: starts `server.ts` in a child process on 127.0.0.1,
 * runs mixed closed-loop load against it for `--minutes` (default 10), in rounds of
 * `--round-seconds` (20) that take turns: `POST /search` (top 10 of 1,000,000 x 128 resident
 * embeddings), `POST /solve-random` (n = `--n`, 512) and `POST /matmul` (64 x 64 float64), each
 * with `--concurrency` (32) requests in flight. Every `--sample-seconds` (15) it prints one row:
 * the server's GPU memory as nvidia-smi reports it for the server's pid, its RSS, and from
 * `GET /stats` the memory pool's used and reserved bytes, the small blocks cached per stream,
 * the cuBLAS workspaces, the streams held, with the requests answered since the last row.
 *
 * The verdict (soak-verdict.ts) judges the samples after `--warmup-minutes` (default 1, at least
 * one round of each workload): GPU memory, RSS and the pool's reserve must not grow from the
 * early half's peak to the late half's by more than their tolerances (2% or 64 MiB; 5% or
 * 32 MiB for RSS). It prints `soak: ... : FLAT` (exit 0), `GROWING (...)` (exit 1) or
 * `INCONCLUSIVE` (too few samples, exit 2); failed requests (not 200 and not a 503 refusal)
 * also exit 1, and a server that dies exits 3. Bounded: the load stops after `--minutes`, the
 * server gets SIGTERM (SIGKILL 20 s later), and a watchdog ends everything 3 minutes past the
 * planned end.
 *
 * Run: `pnpm --filter @cuda-tasks/examples soak -- [--minutes 10] [--sample-seconds 15]
 * [--round-seconds 20] [--warmup-minutes 1] [--concurrency 32] [--n 512]`
 */
import { type ChildProcess, execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import {
  CommandLineError,
  isEntryPoint,
  parseCommandLine,
  parseCommandLineOrExit,
  usage,
} from '../cli.js';
import { makeSearchRequest, randomSource } from './client.js';
import {
  formatVerdict,
  gpuMemoryOf,
  judge,
  onlyProcessMemory,
  type SoakSample,
} from './soak-verdict.js';
import { startServiceProcess } from './spawn-service.js';
import type { MemoryStatistics } from './stats.js';

/** The soak's flags. */
export const soakCommandLine = {
  command: 'pnpm --filter @cuda-tasks/examples soak --',
  options: {
    minutes: { type: 'string', placeholder: 'M', description: 'minutes of load', default: 10 },
    'sample-seconds': {
      type: 'string',
      placeholder: 'S',
      description: 'seconds between samples of the memory figures',
      default: 15,
    },
    'round-seconds': {
      type: 'string',
      placeholder: 'S',
      description: 'seconds per round; rounds take turns: search, solve-random, matmul',
      default: 20,
    },
    'warmup-minutes': {
      type: 'string',
      placeholder: 'M',
      description: 'minutes not judged at the start, at most half the run',
      default: 'at least 1 and one round of each workload',
    },
    concurrency: {
      type: 'string',
      placeholder: 'N',
      description: 'requests in flight',
      default: 32,
    },
    n: {
      type: 'string',
      placeholder: 'N',
      description: 'size of the /solve-random systems',
      default: 512,
    },
  },
} as const;

/** What the soak runs (see `parseSoakArguments`). */
export interface SoakOptions {
  /** Minutes of load. */
  minutes: number;
  /** Seconds between samples. */
  sampleSeconds: number;
  /** Seconds per workload round. */
  roundSeconds: number;
  /** Minutes at the start that the verdict does not judge. */
  warmupMinutes: number;
  /** Requests in flight. */
  concurrency: number;
  /** `/solve-random` size. */
  n: number;
}

/** The workloads, in the order the rounds take them. */
export const SOAK_WORKLOADS = ['search', 'solve-random', 'matmul'] as const;

/**
 * Parses the soak's command line (every flag has a default; see `soakCommandLine`). Throws a
 * `CommandLineError` for an unknown flag or a value out of range.
 * @example parseSoakArguments(['--minutes', '2']).warmupMinutes; // 1
 */
export function parseSoakArguments(argv: readonly string[]): SoakOptions {
  const { values } = parseCommandLine(argv, soakCommandLine);
  const number = (name: keyof typeof soakCommandLine.options, fallback: number, min: number) => {
    const text = values[name];
    if (text === undefined) return fallback;
    const value = Number(text);
    if (text === '' || !Number.isFinite(value) || value < min) {
      throw new CommandLineError(
        `--${name} must be a number >= ${min}, got ${text || 'nothing'}`,
        usage(soakCommandLine),
      );
    }
    return value;
  };
  const minutes = number('minutes', soakCommandLine.options.minutes.default, 0.1);
  const sampleSeconds = number(
    'sample-seconds',
    soakCommandLine.options['sample-seconds'].default,
    1,
  );
  const roundSeconds = number('round-seconds', soakCommandLine.options['round-seconds'].default, 1);
  const concurrency = Math.round(
    number('concurrency', soakCommandLine.options.concurrency.default, 1),
  );
  const n = Math.round(number('n', soakCommandLine.options.n.default, 1));
  if (n > 2048) {
    throw new CommandLineError(`--n must be at most 2048, got ${n}`, usage(soakCommandLine));
  }
  const oneOfEach = (SOAK_WORKLOADS.length * roundSeconds) / 60;
  const warmupMinutes = Math.min(number('warmup-minutes', Math.max(1, oneOfEach), 0), minutes / 2);
  return { minutes, sampleSeconds, roundSeconds, warmupMinutes, concurrency, n };
}

const MiB = 1024 * 1024;

/** A request body of each workload, made ahead (the soak's own CPU stays off the figures). */
function requestBodies(
  options: SoakOptions,
): Record<(typeof SOAK_WORKLOADS)[number], () => string> {
  const queries = Array.from({ length: 64 }, (_, seed) =>
    makeSearchRequest(128, 1_000_000, 10, seed).body.toString(),
  );
  const random = randomSource(7);
  const size = 64;
  const values = () => Array.from({ length: size * size }, () => random() * 2 - 1);
  const products = Array.from({ length: 8 }, () =>
    JSON.stringify({ m: size, k: size, n: size, a: values(), b: values() }),
  );
  let seed = 0;
  return {
    search: () => queries[seed++ % queries.length]!,
    'solve-random': () => JSON.stringify({ n: options.n, seed: seed++ }),
    matmul: () => products[seed++ % products.length]!,
  };
}

/** Requests answered since the last sample. */
interface Counts {
  ok: number;
  busy: number;
  failed: number;
  lastFailure: string | undefined;
}

/** Runs `concurrency` closed-loop clients of `workload` until `until` (performance.now()). */
async function runRound(
  base: string,
  workload: (typeof SOAK_WORKLOADS)[number],
  body: () => string,
  until: number,
  options: SoakOptions,
  counts: Counts,
  stop: AbortSignal,
): Promise<void> {
  const client = async () => {
    while (performance.now() < until && !stop.aborted) {
      try {
        const response = await fetch(`${base}/${workload}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: body(),
          signal: AbortSignal.any([stop, AbortSignal.timeout(30_000)]),
        });
        const text = await response.text();
        if (response.status === 200) counts.ok++;
        else if (response.status === 503) counts.busy++;
        else {
          counts.failed++;
          counts.lastFailure = `${workload}: ${response.status} ${text.slice(0, 160)}`;
        }
      } catch (error) {
        if (stop.aborted) return;
        counts.failed++;
        counts.lastFailure = `${workload}: ${error instanceof Error ? error.message : String(error)}`;
        await sleep(100);
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, client));
}

/** nvidia-smi's per-process GPU memory (MiB) of `pid`, or why it is not known. */
function queryGpuMemory(pid: number): Promise<{ mib?: number; problem?: string }> {
  return new Promise((resolve) => {
    execFile(
      'nvidia-smi',
      ['--query-compute-apps=pid,used_memory', '--format=csv,noheader,nounits'],
      { timeout: 10_000 },
      (error, stdout) => {
        if (error !== null) {
          const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
          resolve({
            problem: missing
              ? 'nvidia-smi was not found on PATH: the GPU memory column stays empty, and the verdict judges RSS and the pool reserve only'
              : `nvidia-smi failed (${error.message.split('\n')[0]}): GPU memory not sampled this time`,
          });
          return;
        }
        const mib = gpuMemoryOf(stdout, pid);
        if (mib !== undefined) {
          resolve({ mib });
          return;
        }
        // In a container nvidia-smi may list host pids: with one compute process on the GPU
        // (the soak's clients use none), that one is the server.
        const only = onlyProcessMemory(stdout);
        resolve(
          only === undefined
            ? {
                problem: `nvidia-smi lists no compute process with the server's pid ${pid} (another pid namespace?) and not exactly one other: GPU memory not sampled`,
              }
            : { mib: only },
        );
      },
    );
  });
}

async function fetchStats(base: string): Promise<MemoryStatistics | undefined> {
  try {
    const response = await fetch(`${base}/stats`, { signal: AbortSignal.timeout(10_000) });
    return response.status === 200 ? ((await response.json()) as MemoryStatistics) : undefined;
  } catch {
    return undefined;
  }
}

const COLUMNS =
  '   time  round workload       req/s   503  fail   GPU MiB   RSS MiB  pool used  reserved  cached  cuBLAS ws  streams held';

function cell(value: number | undefined, width: number, digits = 0): string {
  return (value === undefined ? '-' : value.toFixed(digits)).padStart(width);
}

function clock(minutes: number): string {
  const seconds = Math.round(minutes * 60);
  return `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, '0')}`.padStart(7);
}

/** Runs the soak; resolves with the process's exit code. */
export async function soak(options: SoakOptions, log = console.log): Promise<number> {
  const serverScript = fileURLToPath(new URL('./server.ts', import.meta.url));
  log(
    `soak: ${options.minutes} min of mixed load (${SOAK_WORKLOADS.join(', ')} in rounds of ${options.roundSeconds} s, ${options.concurrency} in flight, solve-random n = ${options.n}, matmul 64 x 64) against server.ts in a child process on 127.0.0.1; a sample every ${options.sampleSeconds} s; the first ${options.warmupMinutes.toFixed(1)} min are warm-up`,
  );
  const service = await startServiceProcess(serverScript, ['--port', '0']);
  const child: ChildProcess = service.child;
  const base = `http://127.0.0.1:${service.port}`;
  log(`server pid ${child.pid} listening on ${base}`);
  let serverGone = false;
  void service.exited.then(() => {
    serverGone = true;
  });
  const stop = new AbortController();
  const stopServer = async () => {
    if (!serverGone) child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await service.exited;
    clearTimeout(killer);
  };
  const onSignal = () => {
    stop.abort();
    void stopServer().then(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  const watchdog = setTimeout(
    () => {
      log('soak: the watchdog ended the run (3 minutes past its planned end)');
      child.kill('SIGKILL');
      process.exit(3);
    },
    (options.minutes + 3) * 60_000,
  );
  watchdog.unref();

  const samples: SoakSample[] = [];
  const counts: Counts = { ok: 0, busy: 0, failed: 0, lastFailure: undefined };
  const totals = { ok: 0, busy: 0, failed: 0 };
  const problems = new Set<string>();
  const start = performance.now();
  let lastSampleAt = start;
  let workload = '-';
  let round = 0;
  const takeSample = async (label?: string) => {
    const now = performance.now();
    const minutes = (now - start) / 60_000;
    const [stats, gpu] = await Promise.all([fetchStats(base), queryGpuMemory(child.pid!)]);
    if (gpu.problem !== undefined && !problems.has(gpu.problem)) {
      problems.add(gpu.problem);
      log(`  note: ${gpu.problem}`);
    }
    if (stats?.reason !== undefined && !problems.has(stats.reason)) {
      problems.add(stats.reason);
      log(`  note: GET /stats has no GPU figures: ${stats.reason}`);
    }
    const pool = stats?.pool;
    const sample: SoakSample = {
      minutes,
      gpuMiB: gpu.mib,
      rssMiB: stats === undefined ? undefined : stats.rssBytes / MiB,
      poolUsedMiB: pool === undefined ? undefined : pool.usedBytes / MiB,
      poolReservedMiB: pool === undefined ? undefined : pool.reservedBytes / MiB,
    };
    samples.push(sample);
    const seconds = Math.max(1e-3, (now - lastSampleAt) / 1000);
    lastSampleAt = now;
    const cublas = stats?.handles?.cublas;
    const held =
      stats?.streams === undefined ? undefined : stats.streams.streams - stats.streams.idle;
    log(
      `${clock(minutes)} ${String(label ?? round).padStart(6)} ${(label === undefined ? workload : '-').padEnd(13)} ${cell(counts.ok / seconds, 6)} ${cell(counts.busy, 5)} ${cell(counts.failed, 5)} ${cell(sample.gpuMiB, 9)} ${cell(sample.rssMiB, 9)} ${cell(sample.poolUsedMiB, 10, 1)} ${cell(sample.poolReservedMiB, 9, 1)} ${cell(pool === undefined ? undefined : pool.cachedBytes / MiB, 7, 1)} ${(cublas === undefined ? '-' : `${cublas.workspaces}/${(cublas.workspaceBytes / MiB).toFixed(0)}M`).padStart(10)} ${cell(held, 13)}`,
    );
    if (counts.lastFailure !== undefined) log(`  last failure: ${counts.lastFailure}`);
    totals.ok += counts.ok;
    totals.busy += counts.busy;
    totals.failed += counts.failed;
    counts.ok = counts.busy = counts.failed = 0;
    counts.lastFailure = undefined;
  };

  log(COLUMNS);
  await takeSample('start');
  const bodies = requestBodies(options);
  const end = start + options.minutes * 60_000;
  let nextSample = performance.now() + options.sampleSeconds * 1000;
  const sampler = (async () => {
    while (!stop.signal.aborted && performance.now() < end - 1000 && !serverGone) {
      await sleep(Math.max(0, nextSample - performance.now()));
      nextSample += options.sampleSeconds * 1000;
      if (stop.signal.aborted || serverGone) break;
      await takeSample();
    }
  })();
  while (performance.now() < end && !stop.signal.aborted && !serverGone) {
    const name = SOAK_WORKLOADS[round % SOAK_WORKLOADS.length]!;
    round++;
    workload = name;
    await runRound(
      base,
      name,
      bodies[name],
      Math.min(end, performance.now() + options.roundSeconds * 1000),
      options,
      counts,
      stop.signal,
    );
  }
  stop.abort();
  await sampler;
  if (!serverGone) await takeSample('end');
  process.off('SIGINT', onSignal);
  if (serverGone) {
    log(
      `soak: the server exited during the run; its stderr ended with:\n${service.stderr().slice(-2000)}`,
    );
    clearTimeout(watchdog);
    return 3;
  }
  await stopServer();
  clearTimeout(watchdog);
  const verdict = judge(samples, options.warmupMinutes);
  log(
    `requests: ${totals.ok.toLocaleString('en-US')} answered 200, ${totals.busy} refused 503 (busy), ${totals.failed} failed`,
  );
  log(formatVerdict(verdict));
  if (totals.ok === 0) {
    log('soak: no request was answered 200 (no usable GPU?): the figures say nothing of a load');
    return 3;
  }
  if (totals.failed > 0) {
    log(`soak: ${totals.failed} requests failed (see the last failure notes above)`);
    return 1;
  }
  return verdict.status === 'FLAT' ? 0 : verdict.status === 'GROWING' ? 1 : 2;
}

if (isEntryPoint(import.meta.url)) {
  parseCommandLineOrExit(process.argv.slice(2), soakCommandLine);
  Promise.resolve()
    .then(() => soak(parseSoakArguments(process.argv.slice(2))))
    .then(
      (code) => process.exit(code),
      (error: unknown) => {
        const usageText = error instanceof CommandLineError ? `\n\n${error.usage}` : '';
        console.error(`${error instanceof Error ? error.message : error}${usageText}`);
        process.exit(error instanceof CommandLineError ? 2 : 3);
      },
    );
}
