import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ENGINE_ISSUERS,
  engineIdleLine,
  PAIRED_USAGE,
  parsePairedArguments,
} from '../src/paired.js';
import {
  type BenchLine,
  ENGINE_IDLE_BUSY_CORES_TARGET,
  ENGINE_PAIRED_TARGETS,
  formatEngineIdle,
  formatEngineStats,
  formatPaired,
  PAIRED_TARGETS,
  pairedTarget,
} from '../src/report.js';

// The issue engine's same-process rows (issue 34; the GPU rows run only on a GPU machine):
// paired.ts's arguments, the idle line, the rows' targets and how the table shows them.

const pairLine = (name: string, ours: number, c: number, ratio = ours / c): BenchLine => ({
  name,
  paired: true,
  ours_us: ours,
  c_us: c,
  ratio,
  ratio_lo: ratio * 0.98,
  ratio_hi: ratio * 1.02,
  pairs: 25,
  c_call: 'cuLaunchKernel',
});

describe('parsePairedArguments', () => {
  it('takes the library path, --only and --issuers in any order; the engine rows default to W = 4 and 8', () => {
    expect(ENGINE_ISSUERS).toEqual([4, 8]);
    expect(parsePairedArguments(['lib.so'])).toEqual({ path: 'lib.so', issuers: [4, 8] });
    expect(parsePairedArguments(['lib.so', '--only', 'engine', '--issuers', '8'])).toEqual({
      path: 'lib.so',
      only: 'engine',
      issuers: [8],
    });
    expect(parsePairedArguments(['lib.so', '--issuers', '1,2,64', '--only', 'latency'])).toEqual({
      path: 'lib.so',
      only: 'latency',
      issuers: [1, 2, 64],
    });
    expect(parsePairedArguments(['lib.so', '--engine-queries', 'caller'])).toEqual({
      path: 'lib.so',
      issuers: [4, 8],
      engineQueries: 'caller',
    });
    for (const only of ['graphs', 'tasks100', 'latency', 'engine', 'withstream']) {
      expect(parsePairedArguments(['x.so', '--only', only]).only).toBe(only);
    }
  });

  it.each([
    [[], /path is missing/],
    [['--only', 'engine'], /path is missing/],
    [['lib.so', '--only'], /--only needs a value/],
    [['lib.so', '--only', 'scaling'], /--only must be one of graphs, tasks100, latency, engine/],
    [['lib.so', '--issuers', '0'], /--issuers must be integers from 1 to 64/],
    [['lib.so', '--issuers', '65'], /--issuers must be integers from 1 to 64/],
    [['lib.so', '--issuers', '4,'], /--issuers must be integers from 1 to 64/],
    [['lib.so', '--issuers', '2.5'], /--issuers must be integers from 1 to 64/],
    [['lib.so', '--rounds', '3'], /unknown argument '--rounds'/],
    [
      ['lib.so', '--engine-queries', 'gpu'],
      /--engine-queries must be issuers or caller, got 'gpu'/,
    ],
  ])('rejects %j', (argv, message) => {
    expect(() => parsePairedArguments(argv)).toThrow(message);
  });

  it('has a usage line naming every option', () => {
    expect(PAIRED_USAGE).toContain('--only graphs|tasks100|latency|engine');
    expect(PAIRED_USAGE).toContain('--issuers 4,8');
    expect(PAIRED_USAGE).toContain('--engine-queries issuers|caller');
  });
});

describe('engineIdleLine', () => {
  it('gives the CPU time over the idle wait as cores, with the engine started and stopped', () => {
    expect(
      engineIdleLine(8, { wall_ms: 1000.4, cpu_ms: 12.5 }, { wall_ms: 1001, cpu_ms: 2 }),
    ).toEqual({
      name: 'engine_idle_w8',
      engine_idle: true,
      issuers: 8,
      wall_ms: 1000.4,
      cpu_ms: 12.5,
      busy_cores: 0.012,
      stopped_wall_ms: 1001,
      stopped_cpu_ms: 2,
      stopped_busy_cores: 0.002,
    });
    // A spinning issuer: a whole core.
    expect(
      engineIdleLine(4, { wall_ms: 1000, cpu_ms: 1000 }, { wall_ms: 1000, cpu_ms: 0 }).busy_cores,
    ).toBe(1);
  });

  it('refuses a wait that was not measured', () => {
    const good = { wall_ms: 1000, cpu_ms: 1 };
    expect(() => engineIdleLine(4, { wall_ms: 0, cpu_ms: 1 }, good)).toThrow(/a wait of 0 ms/);
    expect(() => engineIdleLine(4, good, { wall_ms: Number.NaN, cpu_ms: 1 })).toThrow(
      /engine idle/,
    );
    expect(() => engineIdleLine(4, good, { wall_ms: 1000, cpu_ms: -1 })).toThrow(/engine idle/);
  });
});

describe('the engine rows’ targets', () => {
  it('holds tasks100 to 1.0x C and the latency-bound job to 1.12x with the engine, at any W', () => {
    expect(ENGINE_PAIRED_TARGETS).toEqual({ tasks100: 1, latency_job: 1.12 });
    expect(pairedTarget('tasks100_engine_w4')).toEqual({ on: 'ratio', value: 1 });
    expect(pairedTarget('tasks100_engine_w16')).toEqual({ on: 'ratio', value: 1 });
    expect(pairedTarget('latency_job_engine_w8')).toEqual({ on: 'ratio', value: 1.12 });
    expect(pairedTarget('engine_push_w4')).toEqual({ on: 'us', value: 1 });
    expect(pairedTarget('engine_push_8streams_w8')).toEqual({ on: 'us', value: 1 });
  });

  it('leaves the rows without the engine as they were, and others without a target', () => {
    for (const [name, value] of Object.entries(PAIRED_TARGETS)) {
      expect(pairedTarget(name)).toEqual({ on: 'ratio', value });
    }
    expect(pairedTarget('tasks100')).toEqual({ on: 'ratio', value: 1.15 });
    for (const name of [
      'tasks100_bare_koffi',
      'tasks100_engine',
      'tasks100_engine_w0',
      'tasks100_engine_wx',
      'launch_empty_engine_w4',
      'engine_push',
      'constructor',
      'toString_engine_w4',
    ]) {
      expect(pairedTarget(name)).toBeUndefined();
    }
  });

  it('finds no target for names of any other form (property)', () => {
    const known = new Set(Object.keys(PAIRED_TARGETS));
    fc.assert(
      fc.property(fc.string(), (name) => {
        const target = pairedTarget(name);
        if (target === undefined) return;
        const base = name.replace(/_w[1-9][0-9]*$/, '').replace(/_engine$/, '');
        expect(
          known.has(name) || base in ENGINE_PAIRED_TARGETS || name.startsWith('engine_push'),
        ).toBe(true);
      }),
    );
  });
});

describe('the engine rows in the same-process table', () => {
  const lines: BenchLine[] = [
    pairLine('tasks100', 134, 100),
    pairLine('tasks100_engine_w4', 98, 100),
    pairLine('latency_job_engine_w8', 45, 40),
    pairLine('engine_push_w4', 0.45, 2.5),
    pairLine('engine_push_8streams_w8', 1.2, 2.5),
    engineIdleLine(
      4,
      { wall_ms: 1000, cpu_ms: 3 },
      { wall_ms: 1000, cpu_ms: 1 },
    ) as unknown as BenchLine,
    engineIdleLine(
      8,
      { wall_ms: 1000, cpu_ms: 1010 },
      { wall_ms: 1000, cpu_ms: 1 },
    ) as unknown as BenchLine,
  ];
  const text = formatPaired(lines);
  const row = (name: string) => text.split('\n').find((l) => l.startsWith(`${name} `))!;

  it('judges the engine’s ratio rows by their own targets', () => {
    expect(row('tasks100')).toMatch(/1\.34x .*1\.15x FAIL clear/);
    expect(row('tasks100_engine_w4')).toMatch(/0\.98x .*1\.00x PASS/);
    // 1.125x: above 1.12x, the interval (1.10-1.15) across it.
    expect(row('latency_job_engine_w8')).toMatch(/1\.13x .*1\.12x FAIL(?! clear)/);
  });

  it('judges the push rows by ours’ microseconds, not by the ratio', () => {
    expect(row('engine_push_w4')).toMatch(
      /^engine_push_w4\s+0\.450\s+2\.500\s+0\.18x.*<= 1 us PASS/,
    );
    expect(row('engine_push_8streams_w8')).toMatch(/<= 1 us FAIL/);
  });

  it('prints the idle lines with their verdicts after the table', () => {
    expect(ENGINE_IDLE_BUSY_CORES_TARGET).toBe(0.1);
    expect(text).toContain(
      'issue engine idle (4 issuers): 3.0 ms of CPU over 1000 ms idle = 0.003 cores (target <= 0.1: no busy core) PASS   [engine stopped: 0.001 cores]',
    );
    expect(text).toContain(
      'issue engine idle (8 issuers): 1010.0 ms of CPU over 1000 ms idle = 1.010 cores',
    );
    expect(text.split('\n').at(-1)).toMatch(/\(8 issuers\).* FAIL/);
  });

  it('prints idle lines alone, and skips idle lines without figures', () => {
    const idle = lines.slice(5);
    expect(formatPaired(idle).split('\n')).toHaveLength(2);
    expect(
      formatEngineIdle([{ name: 'engine_idle_w4', engine_idle: true, busy_cores: 'x' }]),
    ).toEqual([]);
    expect(formatEngineIdle([pairLine('tasks100', 1, 1)])).toEqual([]);
  });
});

describe('the engine’s counts', () => {
  it('prints each engine_stats line with its counts per launch, after the table', () => {
    const stats: BenchLine = {
      name: 'engine_stats_tasks100_w4',
      engine_stats: true,
      issuers: 4,
      launches: 20_000,
      wake_ups: 500,
      fence_waits: 12_000,
    };
    const expected =
      'issue engine counts (engine_stats_tasks100_w4): 20,000 launches, 500 wake-ups (0.025 a launch), 12,000 fence waits (0.600 a launch)';
    expect(formatEngineStats([stats])).toEqual([expected]);
    expect(
      formatPaired([pairLine('tasks100_engine_w4', 98, 100), stats])
        .split('\n')
        .at(-1),
    ).toBe(expected);
    expect(
      formatEngineStats([
        { ...stats, launches: 0, wake_ups: 0, fence_waits: 0, failure: 'exited' },
      ]),
    ).toEqual([
      'issue engine counts (engine_stats_tasks100_w4): 0 launches, 0 wake-ups (- a launch), 0 fence waits (- a launch); failed: exited',
    ]);
    expect(formatEngineStats([{ ...stats, launches: 1.5 }, pairLine('tasks100', 1, 1)])).toEqual(
      [],
    );
  });

  it('adds the waits for room and the longest wait where the line has them', () => {
    const stats: BenchLine = {
      name: 'engine_stats_latency_w8',
      engine_stats: true,
      issuers: 8,
      launches: 1_000,
      wake_ups: 10,
      fence_waits: 40,
      room_waits: 1_234,
      longest_wait_ms: 2.5,
    };
    expect(formatEngineStats([stats])).toEqual([
      'issue engine counts (engine_stats_latency_w8): 1,000 launches, 10 wake-ups (0.010 a launch), 40 fence waits (0.040 a launch), 1,234 waits for room; the longest wait held the thread 2.500 ms',
    ]);
    // A longest wait that is not a number leaves both out rather than printing NaN.
    expect(formatEngineStats([{ ...stats, longest_wait_ms: 'x' }])[0]).not.toMatch(/room|NaN/);
  });

  it('adds the waits the issuers queried, and those left to the waiting thread, where the line has them', () => {
    const stats: BenchLine = {
      name: 'engine_stats_tasks100_w8',
      engine_stats: true,
      issuers: 8,
      launches: 3_000,
      wake_ups: 0,
      fence_waits: 0,
      queries: 3_000,
      queries_left: 12,
    };
    expect(formatEngineStats([stats])[0]).toMatch(
      /3,000 waits queried by the issuers \(12 left to the waiting thread\)$/,
    );
    expect(formatEngineStats([{ ...stats, queries_left: 1.5 }])[0]).not.toMatch(/queried/);
  });
});
