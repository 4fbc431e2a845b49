import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { formatHostTable } from '../src/host.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const compiler = process.env.CC ?? 'cc';
const hasCompiler = spawnSync(compiler, ['--version']).status === 0;
if (!hasCompiler) {
  console.warn(
    `[cuda-tasks] bench:host test skipped: no C compiler (${compiler}) to build the stand-in libraries`,
  );
}

describe('formatHostTable', () => {
  it('prints ours, bare, their difference and ratio per row, aligned', () => {
    const table = formatHostTable([
      { name: 'launch', what: 'launch()', ours: 310, bare: 95.5, unit: 'ns' },
      { name: 'latency_job_k4', what: '4 jobs', ours: 13.4, bare: 6.36, unit: 'us' },
    ]);
    const lines = table.split('\n');
    expect(lines[0]).toMatch(/^row\s+ours\s+bare\s+ours - bare\s+ours\/bare\s+operation$/);
    expect(lines[2]).toMatch(/^launch\s+310 ns\s+95\.5 ns\s+215 ns\s+3\.25x\s+launch\(\)$/);
    expect(lines[3]).toMatch(/^latency_job_k4\s+13\.4 us\s+6\.36 us\s+7\.04 us\s+2\.11x\s+4 jobs$/);
    // Right-aligned number columns: every line ends its "ours" column at the same place.
    const end = lines[0]!.indexOf('ours') + 'ours'.length;
    for (const line of lines.slice(2)) expect(line.slice(0, end)).toMatch(/(ns|us)$/);
  });
});

/** `src/host.ts --quick` with `args`, the libraries' paths unset (it builds its stand-ins). */
function runHost(args: readonly string[]) {
  return spawnSync(
    join(root, 'node_modules', '.bin', 'tsx'),
    ['--conditions=@cuda-tasks/source', 'src/host.ts', '--quick', ...args],
    {
      cwd: root,
      encoding: 'utf8',
      timeout: 60_000,
      env: {
        ...process.env,
        CUDA_TASKS_LIBCUDA: '',
        CUDA_TASKS_LIBCUBLAS: '',
        CUDA_TASKS_LIBCUBLASLT: '',
        CUDA_TASKS_LIBCURAND: '',
      },
    },
  );
}

describe.skipIf(!hasCompiler)('bench:host against the stand-in libraries', () => {
  it('builds the stand-ins and measures every row, ours and bare', () => {
    const run = runHost([]);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const names = [
      'launch',
      'launch_no_arguments',
      'launch_synchronize',
      'task',
      'latency_job_k1',
      'latency_job_k4',
      'latency_job_k16',
      'gemm',
      'uniform',
      'mixed_job_k1',
      'mixed_job_k16',
    ];
    for (const name of names) {
      const line = run.stdout.split('\n').find((text) => text.startsWith(`${name} `));
      expect(line, `row ${name}`).toBeDefined();
      const [ours, bare] = [...line!.matchAll(/(\d+(?:\.\d+)?) (ns|us)/g)].map((m) => Number(m[1]));
      expect(ours).toBeGreaterThan(0);
      expect(bare).toBeGreaterThan(0);
    }
  }, 90_000);

  it('with --pressure, builds the stand-in with a driver call footprint and runs the launch rows only', () => {
    const run = runHost(['--pressure']);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout).toContain("a driver call's cache footprint (--pressure");
    const rows = run.stdout
      .split('\n')
      .map((text) => text.split(' ')[0])
      .filter((name) => /^(launch|withstream|task|latency|gemm|uniform|mixed)/.test(name ?? ''));
    expect(rows).toEqual([
      'launch',
      'launch_no_arguments',
      'withstream_launch',
      'launch_synchronize',
      'task',
      'latency_job_k1',
      'latency_job_k4',
      'latency_job_k16',
    ]);
    // Each launch runs through the stand-in's 32 KiB of code and data: microseconds, where the
    // plain stand-in's bare launch takes tens of nanoseconds.
    const launchLine = run.stdout.split('\n').find((text) => text.startsWith('launch '))!;
    const bare = [...launchLine.matchAll(/(\d+(?:\.\d+)?) (ns|us)/g)][1]!;
    expect(Number(bare[1]) * (bare[2] === 'us' ? 1000 : 1)).toBeGreaterThan(500);
  }, 90_000);
});
