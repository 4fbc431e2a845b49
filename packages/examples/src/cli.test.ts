import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CommandLineError, parseCommandLine, usage } from './cli.js';
import { demoCommandLine, parseDemoArguments } from './seed/demo.js';
import { loadCommandLine, parseLoadArguments } from './service/load.js';
import { parseServerArguments, serverCommandLine } from './service/server.js';
import { cli as renderCli, renderCommandLine } from './trace/render.js';

const spec = {
  command: 'tool',
  options: {
    trace: { type: 'boolean', description: 'trace' },
    out: { type: 'string', placeholder: 'DIR', description: 'where' },
  },
} as const;

function refusal(fn: () => unknown): CommandLineError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(CommandLineError);
    return error as CommandLineError;
  }
  throw new Error('expected a CommandLineError');
}

describe('parseCommandLine', () => {
  it('reads switches and values, in both --name value and --name=value forms', () => {
    expect(parseCommandLine(['--trace', '--out', 'a'], spec).values).toEqual({
      trace: true,
      out: 'a',
    });
    expect(parseCommandLine(['--out=b'], spec).values).toEqual({ out: 'b' });
    expect(parseCommandLine([], spec).values).toEqual({});
    // A leading "--" (what `pnpm run x -- ...` may pass on) is dropped.
    expect(parseCommandLine(['--', '--trace'], spec).values).toEqual({ trace: true });
    expect(parseCommandLine(['-h'], spec).help).toBe(true);
    expect(parseCommandLine(['--help'], spec).help).toBe(true);
    expect(parseCommandLine(['--trace'], spec).help).toBe(false);
  });

  it('refuses an unknown flag, naming every valid one and the closest', () => {
    const error = refusal(() => parseCommandLine(['--trcae'], spec));
    expect(error.message).toBe(
      'unknown option --trcae (did you mean --trace?); valid options: --trace, --out DIR, --help',
    );
    expect(error.usage).toBe(usage(spec));
    // Nothing close: no suggestion, still the list.
    expect(refusal(() => parseCommandLine(['--zzzzzz'], spec)).message).toBe(
      'unknown option --zzzzzz; valid options: --trace, --out DIR, --help',
    );
    expect(refusal(() => parseCommandLine(['-x'], spec)).message).toMatch(
      /^unknown option -x; valid options: --trace, --out DIR, --help$/,
    );
  });

  it('refuses a missing value, a value for a switch, and positionals it does not take', () => {
    expect(refusal(() => parseCommandLine(['--out'], spec)).message).toBe(
      "Option '--out <value>' argument missing; valid options: --trace, --out DIR, --help",
    );
    expect(refusal(() => parseCommandLine(['--trace=1'], spec)).message).toBe(
      "Option '--trace' does not take an argument; valid options: --trace, --out DIR, --help",
    );
    expect(refusal(() => parseCommandLine(['file'], spec)).message).toBe(
      "unexpected argument 'file': tool takes only options: --trace, --out DIR, --help",
    );
    const withFiles = { ...spec, positionals: 'in out' };
    expect(parseCommandLine(['a', '--trace', 'b'], withFiles).positionals).toEqual(['a', 'b']);
  });

  it('writes a usage line with every flag and one line per flag', () => {
    expect(usage(spec)).toBe(
      [
        'usage: tool [--trace] [--out DIR] [--help]',
        '  --trace    trace',
        '  --out DIR  where',
        '  --help     print this help and exit',
      ].join('\n'),
    );
  });
});

describe('each command line refuses a misspelt flag and lists the valid ones', () => {
  it.each([
    ['demo', demoCommandLine, () => parseDemoArguments(['--trcae'], {}), '--trace'],
    ['server', serverCommandLine, () => parseServerArguments(['--prot', '1'], {}), '--port'],
    ['load', loadCommandLine, () => parseLoadArguments(['--concurency', '4']), '--concurrency'],
  ] as const)('%s', (_name, commandLine, parse, closest) => {
    const error = refusal(parse);
    expect(error.message).toContain(`(did you mean ${closest}?)`);
    for (const name of Object.keys(commandLine.options)) {
      expect(error.message).toContain(`--${name}`);
    }
  });

  it('render (exit status 2, the valid flags on stderr)', () => {
    const errors: string[] = [];
    const original = console.error;
    console.error = (text: string) => errors.push(text);
    try {
      expect(renderCli(['in.json', 'out.svg', '--widht', '10'])).toBe(2);
    } finally {
      console.error = original;
    }
    expect(errors.join('\n')).toContain('unknown option --widht (did you mean --width?)');
    expect(errors.join('\n')).toContain(usage(renderCommandLine));
  });
});

describe('the commands read their values', () => {
  it('demo: numbers, the output folder, CUDA_TASKS_TRACE', () => {
    const parsed = parseDemoArguments(['--n', '64', '--warmups=0', '--out', 'x'], {});
    expect(parsed).toMatchObject({ n: 64, warmups: 0, trace: false });
    expect(parsed.out).toBe(join(process.cwd(), 'x'));
    expect(parseDemoArguments([], { CUDA_TASKS_TRACE: '1' }).trace).toBe(true);
    expect(refusal(() => parseDemoArguments(['--n', '0'], {})).message).toBe(
      '--n must be a positive integer, got 0',
    );
  });

  it('server: --port, then $PORT, then 0; --shared-stream, --no-priorities', () => {
    expect(parseServerArguments(['--port', '8080'], { PORT: '9' })).toEqual({
      port: 8080,
      sharedStream: false,
      priorities: true,
      graceMs: 10_000,
      searchBatch: 64,
      searchBatches: 2,
      searchMessages: 8,
    });
    expect(parseServerArguments(['--shared-stream', '--no-priorities'], { PORT: '9' })).toEqual({
      port: 9,
      sharedStream: true,
      priorities: false,
      graceMs: 10_000,
      searchBatch: 64,
      searchBatches: 2,
      searchMessages: 8,
    });
    expect(parseServerArguments(['--grace-ms', '250'], {}).graceMs).toBe(250);
    expect(parseServerArguments(['--search-batch', '0'], {}).searchBatch).toBe(0);
    expect(parseServerArguments(['--search-batch', '16'], {}).searchBatch).toBe(16);
    expect(refusal(() => parseServerArguments(['--search-batch=-1'], {})).message).toBe(
      '--search-batch must be an integer >= 0, got -1',
    );
    expect(parseServerArguments(['--search-batches', '1'], {}).searchBatches).toBe(1);
    expect(parseServerArguments(['--search-messages', '64'], {}).searchMessages).toBe(64);
    expect(parseServerArguments([], {}).parseWorkers).toBeUndefined();
    expect(parseServerArguments(['--parse-workers', '0'], {}).parseWorkers).toBe(0);
    expect(parseServerArguments(['--parse-workers', '12'], {}).parseWorkers).toBe(12);
    for (const bad of ['65', '-1', '1.5', '', ' 2', '0x2']) {
      expect(refusal(() => parseServerArguments([`--parse-workers=${bad}`], {})).message).toBe(
        `--parse-workers must be an integer in 0..64, got ${bad || 'nothing'}`,
      );
    }
    for (const bad of ['0', '65', '1.5', '', ' 2', '0x2']) {
      expect(refusal(() => parseServerArguments([`--search-batches=${bad}`], {})).message).toBe(
        `--search-batches must be an integer in 1..64, got ${bad || 'nothing'}`,
      );
      expect(refusal(() => parseServerArguments([`--search-messages=${bad}`], {})).message).toBe(
        `--search-messages must be an integer in 1..64, got ${bad || 'nothing'}`,
      );
    }
    expect(refusal(() => parseServerArguments(['--grace-ms', '2.5'], {})).message).toBe(
      '--grace-ms must be an integer >= 0, got 2.5',
    );
    expect(parseServerArguments([], {}).port).toBe(0);
    expect(refusal(() => parseServerArguments(['--port', '70000'], {})).message).toBe(
      '--port must be an integer in 0..65535, got 70000',
    );
  });
});

// The root's `pnpm demo` runs the examples' bin: where there is no GPU, the demo's message is
// the last thing printed (no pnpm lifecycle error after it) and the status is non-zero.
const repositoryRoot = fileURLToPath(new URL('../../..', import.meta.url));
const noDriver = { ...process.env, CUDA_TASKS_LIBCUDA: '/nonexistent/libcuda.so.1' };

describe('pnpm demo and pnpm bench without a driver', () => {
  it('pnpm demo: one message, status 1, nothing from pnpm after it', () => {
    const result = spawnSync('pnpm', ['demo', '--n', '64'], {
      cwd: repositoryRoot,
      encoding: 'utf8',
      env: noDriver,
      timeout: 60_000,
    });
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^The NVIDIA CUDA driver \(libcuda\) is not available: /);
    expect(result.stderr).not.toMatch(/ELIFECYCLE|ERR_PNPM|Command failed/);
  }, 60_000);

  it('pnpm bench: one message, status 1, no report written', () => {
    const out = mkdtempSync(join(tmpdir(), 'bench-out-'));
    try {
      const result = spawnSync('pnpm', ['bench', '--out', join(out, 'report')], {
        cwd: repositoryRoot,
        encoding: 'utf8',
        env: noDriver,
        timeout: 60_000,
      });
      expect(result.status).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(/^The NVIDIA CUDA driver \(libcuda\) is not available: /);
      expect(result.stderr).toMatch(/pnpm bench needs an NVIDIA GPU/);
      expect(result.stderr).not.toMatch(/ELIFECYCLE|ERR_PNPM|Command failed/);
      expect(existsSync(join(out, 'report'))).toBe(false);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 60_000);

  it('pnpm demo with a misspelt flag: status 2 and the valid flags', () => {
    const result = spawnSync('pnpm', ['demo', '--tarce'], {
      cwd: repositoryRoot,
      encoding: 'utf8',
      env: noDriver,
      timeout: 60_000,
    });
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(
      /^unknown option --tarce \(did you mean --trace\?\); valid options: --trace, --out DIR, --n N, --warmups N, --help\n/,
    );
    expect(result.stderr).not.toMatch(/ELIFECYCLE|ERR_PNPM/);
  }, 60_000);
});
