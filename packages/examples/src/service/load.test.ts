import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { concurrentResult, splitMeasureOptions } from './client.js';
import {
  checkSolution,
  loopDelayFootnote,
  type ModeResult,
  makeProblem,
  makeRandomRequest,
  parseLoadArguments,
  pooledResult,
  randomSource,
  report,
  runMeasureOptions,
  serverInThisProcess,
  serverLoopDelay,
  turnOrder,
} from './load.js';
import { resultsTable } from './workloads.js';

describe('parseLoadArguments', () => {
  it('has the documented defaults', () => {
    expect(parseLoadArguments([])).toEqual({
      requests: undefined,
      seconds: 20,
      concurrency: 32,
      n: 128,
      modes: ['task', 'shared'],
      rounds: 6,
      url: undefined,
      warmup: undefined,
      problems: 16,
      seed: 1,
      route: 'solve',
      workloads: ['solve'],
      smallN: 256,
      largeN: 4096,
      smallRate: 200,
      largeEveryMs: 250,
      rows: 1_000_000,
      k: 10,
      inFlight: undefined,
      searchBatch: undefined,
      clients: 1,
    });
  });

  it('reads the GPU-bound workloads and their settings', () => {
    const options = parseLoadArguments([
      '--workload',
      'head-of-line,search',
      '--small-n=128',
      '--large-n',
      '2048',
      '--small-rate',
      '50',
      '--large-every',
      '500',
      '--rows',
      '20000',
      '--k',
      '100',
    ]);
    expect(options).toMatchObject({
      workloads: ['head-of-line', 'search'],
      smallN: 128,
      largeN: 2048,
      smallRate: 50,
      largeEveryMs: 500,
      rows: 20_000,
      k: 100,
    });
    expect(() => parseLoadArguments(['--workload', 'solve,matmul'])).toThrow(
      '--workload takes solve, head-of-line and search, got matmul',
    );
    expect(() => parseLoadArguments(['--workload', ','])).toThrow(/needs at least one/);
    expect(() => parseLoadArguments(['--k', '101'])).toThrow(
      '--k must be an integer in 1..100, got 101',
    );
    expect(() => parseLoadArguments(['--large-n', '9000'])).toThrow(
      /--large-n must be an integer in 1..8192/,
    );
    expect(parseLoadArguments(['--in-flight', '4']).inFlight).toBe(4);
    expect(parseLoadArguments(['--in-flight', '0']).inFlight).toBe(0);
    expect(() => parseLoadArguments(['--in-flight=-1'])).toThrow(/--in-flight must be/);
    expect(parseLoadArguments(['--search-batch', '0']).searchBatch).toBe(0);
    expect(parseLoadArguments(['--search-batch', '16']).searchBatch).toBe(16);
    expect(parseLoadArguments([]).searchBatches).toBeUndefined();
    expect(parseLoadArguments(['--search-batches', '1']).searchBatches).toBe(1);
    expect(() => parseLoadArguments(['--search-batches', '0'])).toThrow(/--search-batches must be/);
    expect(() => parseLoadArguments(['--search-batches', '65'])).toThrow(
      /--search-batches must be/,
    );
    const clustered = parseLoadArguments([
      '--processes',
      '4',
      '--cluster-search',
      'workers',
      '--search-messages',
      '16',
    ]);
    expect([clustered.clusterSearch, clustered.searchMessages]).toEqual(['workers', 16]);
    expect(parseLoadArguments(['--processes', '4']).clusterSearch).toBeUndefined();
    expect(() => parseLoadArguments(['--processes', '4', '--cluster-search', 'gpu'])).toThrow(
      '--cluster-search takes primary or workers, got gpu',
    );
    expect(() => parseLoadArguments(['--cluster-search', 'primary'])).toThrow(
      '--cluster-search needs --processes',
    );
    expect(() => parseLoadArguments(['--search-messages', '4'])).toThrow(
      '--search-messages needs --processes',
    );
    expect(() => parseLoadArguments(['--processes', '2', '--search-messages', '65'])).toThrow(
      /--search-messages must be/,
    );
    expect(parseLoadArguments([]).parseWorkers).toBeUndefined();
    expect(parseLoadArguments(['--parse-workers', '8']).parseWorkers).toBe(8);
    expect(parseLoadArguments(['--parse-workers', '0']).parseWorkers).toBe(0);
    expect(() => parseLoadArguments(['--parse-workers', '65'])).toThrow(
      '--parse-workers must be an integer in 0..64, got 65',
    );
    expect(parseLoadArguments(['--clients', '4', '--concurrency', '64']).clients).toBe(4);
    expect(() => parseLoadArguments(['--clients', '8', '--concurrency', '4'])).toThrow(
      '--clients must be at most the concurrency (4), got 8',
    );
  });

  it('reads --name value and --name=value', () => {
    const options = parseLoadArguments([
      '--requests',
      '100',
      '--seconds=2.5',
      '--concurrency',
      '8',
      '--n=64',
      '--mode',
      'shared',
      '--warmup',
      '0',
    ]);
    expect(options).toMatchObject({
      requests: 100,
      seconds: 2.5,
      concurrency: 8,
      n: 64,
      modes: ['shared'],
      warmup: 0,
    });
    expect(parseLoadArguments(['--rounds', '5']).rounds).toBe(5);
    expect(() => parseLoadArguments(['--rounds', '0'])).toThrow(
      '--rounds must be an integer in 1..100, got 0',
    );
  });

  it("gives the closed-loop workloads' runs the defaults the command line left out", () => {
    const defaults = parseLoadArguments(['--seconds', '6', '--concurrency', '16']);
    expect(runMeasureOptions(defaults)).toEqual({
      requests: 6000,
      seconds: 6,
      concurrency: 16,
      warmup: 1000,
    });
    const given = parseLoadArguments(['--requests', '300', '--warmup', '0']);
    expect(runMeasureOptions(given)).toMatchObject({ requests: 300, warmup: 0 });
  });

  it('accepts loopback URLs only', () => {
    expect(parseLoadArguments(['--url', 'http://127.0.0.1:8080/']).url).toBe(
      'http://127.0.0.1:8080',
    );
    expect(parseLoadArguments(['--url', 'http://localhost:1']).url).toBe('http://localhost:1');
    expect(() => parseLoadArguments(['--url', 'http://example.com'])).toThrow(
      /must be an http:\/\/ loopback address/,
    );
    expect(() => parseLoadArguments(['--url', 'nonsense'])).toThrow('--url is not a URL: nonsense');
  });

  it('refuses unknown options and bad values', () => {
    expect(() => parseLoadArguments(['--reqs', '1'])).toThrow(
      /^unknown option --reqs \(did you mean --requests\?\); valid options: --requests N, --seconds S, /,
    );
    expect(() => parseLoadArguments(['--n', '0'])).toThrow(
      '--n must be an integer in 1..2048, got 0',
    );
    expect(() => parseLoadArguments(['--concurrency'])).toThrow(
      /^Option '--concurrency <value>' argument missing; valid options: /,
    );
    expect(() => parseLoadArguments(['--seconds=-1'])).toThrow(/--seconds must be a number/);
    expect(() => parseLoadArguments(['--mode', 'all'])).toThrow(/--mode must be/);
    expect(() => parseLoadArguments(['--route', 'matmul'])).toThrow(
      '--route must be solve or solve-random, got matmul',
    );
    expect(() => parseLoadArguments(['fast'])).toThrow(
      "unexpected argument 'fast': load.ts takes only options: --requests N,",
    );
  });
});

describe('problems and the residual check', () => {
  it('makes strictly diagonally dominant systems and their JSON bodies', () => {
    const problem = makeProblem(5, randomSource(3));
    for (let i = 0; i < 5; i++) {
      let offDiagonal = 0;
      for (let j = 0; j < 5; j++) if (j !== i) offDiagonal += Math.abs(problem.a[i + j * 5]!);
      expect(problem.a[i + i * 5]!).toBeCloseTo(offDiagonal + 1, 12);
    }
    const body = JSON.parse(problem.body.toString());
    expect(body.n).toBe(5);
    expect(body.a).toEqual(Array.from(problem.a));
    expect(body.b).toEqual(Array.from(problem.b));
  });

  it('accepts an exact solution and rejects a wrong one', () => {
    // A = [[2, 1], [1, 3]] (column-major [2, 1, 1, 3]), x = [1, -1] -> b = [1, -2]
    const problem = { n: 2, a: new Float64Array([2, 1, 1, 3]), b: new Float64Array([1, -2]) };
    expect(checkSolution(problem, [1, -1], [0, 1])).toBeUndefined();
    expect(checkSolution(problem, [1, -1 + 1e-6], [0, 1])).toMatch(/^row 0: residual 1.00e-6/);
    expect(checkSolution(problem, [1], [0])).toBe('expected x with 2 numbers, got 1');
    expect(checkSolution(problem, undefined, [0])).toBe('expected x with 2 numbers, got undefined');
    expect(checkSolution(problem, [1, null], [1])).toMatch(/^row 1: residual/);
  });
});

describe('solve-random requests', () => {
  it('reads --route', () => {
    expect(parseLoadArguments(['--route', 'solve-random']).route).toBe('solve-random');
    expect(parseLoadArguments(['--route=solve']).route).toBe('solve');
  });

  it('sends {n, seed} and checks the residual and that a seed always gives the same x', () => {
    const request = makeRandomRequest(512, 7);
    expect(request.path).toBe('/solve-random');
    expect(JSON.parse(request.body.toString())).toEqual({ n: 512, seed: 7 });
    const x = [0.5, -1.25, 2, 3];
    expect(request.check({ residual: 3e-14, x }, 0)).toBeUndefined();
    expect(request.check({ residual: 3e-14, x: [...x] }, 1)).toBeUndefined();
    expect(request.check({ residual: 3e-14, x: [0.5, -1.25, 2, 3.0000001] }, 2)).toMatch(
      /^seed 7: x starts .* this time, .* before$/,
    );
    expect(request.check({ residual: 1e-3, x }, 3)).toBe(
      'seed 7: residual 0.001 is not below 1e-8',
    );
    expect(request.check({ residual: Number.NaN, x }, 4)).toMatch(/residual NaN/);
    expect(request.check({ residual: 1e-15, x: [1, 2] }, 5)).toMatch(
      /expected the first 4 entries of x/,
    );
    expect(makeRandomRequest(2, 1).check({ residual: 0, x: [1, 2] }, 0)).toBeUndefined();
  });
});

describe('report', () => {
  const result = (mode: string, requestsPerSecond: number, p99: number): ModeResult => ({
    mode,
    completed: 100,
    errors: 0,
    messages: [],
    seconds: 1,
    requestsPerSecond,
    p50: 1,
    p99,
    max: 10,
    latencies: [],
    loopDelayMax: 2,
  });

  it('prints a table and the comparison of the two modes', () => {
    const text = report([result('task', 900, 5), result('shared', 300, 20)]);
    expect(text).toContain('stream per request');
    expect(text).toContain('one shared stream');
    expect(text).toContain('throughput x3.00, p99 latency x0.25');
    expect(text).not.toContain('per round');
  });

  it('adds the ratios round by round', () => {
    const text = report(
      [result('task', 900, 5), result('shared', 300, 20)],
      [
        [result('task', 800, 5), result('shared', 400, 20)],
        [result('task', 1000, 6), result('shared', 250, 12)],
      ],
    );
    expect(text).toContain(
      'per round (stream per request / one shared stream): throughput x2.00, x4.00; p99 x0.25, x0.50',
    );
  });
});

describe("the server's loop delay", () => {
  const inProcess = { url: undefined, processes: undefined };
  const clustered = { url: undefined, processes: 4 };
  const remote = { url: 'http://127.0.0.1:8080', processes: undefined };

  it("is this process's only where the server runs in it", () => {
    expect(serverInThisProcess(inProcess)).toBe(true);
    expect(serverInThisProcess(clustered)).toBe(false);
    expect(serverInThisProcess({ url: undefined, processes: 1 })).toBe(false);
    expect(serverInThisProcess(remote)).toBe(false);
    expect(serverLoopDelay(inProcess, [3.5, 7.25, 1])).toBe(7.25);
    // Elsewhere this process's delays are its own (the load script's), not the server's.
    expect(serverLoopDelay(clustered, [32.5])).toBeNaN();
    expect(serverLoopDelay(remote, [4])).toBeNaN();
  });

  it('prints as not measured, pooled or not, and the footnote says why', () => {
    const run: ModeResult = {
      mode: 'task',
      completed: 3,
      errors: 0,
      messages: [],
      seconds: 1,
      requestsPerSecond: 3,
      p50: 1,
      p99: 2,
      max: 2,
      latencies: [1, 1.5, 2],
      loopDelayMax: serverLoopDelay(clustered, [32.5]),
    };
    const pooled = pooledResult([run, { ...run }]);
    expect(pooled.loopDelayMax).toBeNaN();
    const table = resultsTable([{ label: 'stream per request', result: pooled }]);
    const row = table.split('\n').at(-1)!;
    expect(row.trim().endsWith(' -')).toBe(true);
    expect(row).not.toContain('32.5');
    // With --processes the servers' own reports fill the column in after they exit.
    expect(loopDelayFootnote(clustered)).toContain("the server's processes");
    expect(loopDelayFootnote(clustered)).toContain('as each reported it at exit');
    expect(loopDelayFootnote(remote)).toContain('not measured (-)');
    expect(loopDelayFootnote(remote)).toContain('--url');
    expect(loopDelayFootnote(inProcess)).toContain("the server process's largest event-loop delay");
  });
});

describe('measuring the modes in turns', () => {
  const run = (mode: string, latencies: number[], seconds: number, loopDelayMax: number) => ({
    mode,
    completed: latencies.length + 1,
    errors: 1,
    messages: [`${mode} failed once`],
    seconds,
    requestsPerSecond: latencies.length / seconds,
    p50: Number.NaN,
    p99: Number.NaN,
    max: Number.NaN,
    latencies,
    loopDelayMax,
  });

  it('reverses the order every other round', () => {
    expect(turnOrder(['task', 'shared'], 0)).toEqual(['task', 'shared']);
    expect(turnOrder(['task', 'shared'], 1)).toEqual(['shared', 'task']);
    expect(turnOrder(['task', 'shared'], 2)).toEqual(['task', 'shared']);
    const modes = ['a', 'b', 'c'];
    expect(turnOrder(modes, 3)).toEqual(['c', 'b', 'a']);
    expect(modes).toEqual(['a', 'b', 'c']); // not modified
  });

  it("pools a mode's runs: summed answers and time, statistics of all latencies together", () => {
    // 100 latencies 1..100 ms split over two runs of 2 s and 3 s.
    const latencies = Array.from({ length: 100 }, (_, i) => i + 1);
    const pooled = pooledResult([
      run(
        'task',
        latencies.filter((x) => x % 2 === 0),
        2,
        4,
      ),
      run(
        'task',
        latencies.filter((x) => x % 2 === 1),
        3,
        7,
      ),
    ]);
    expect(pooled.mode).toBe('task');
    expect(pooled.completed).toBe(102);
    expect(pooled.errors).toBe(2);
    expect(pooled.messages).toEqual(['task failed once']);
    expect(pooled.seconds).toBe(5);
    expect(pooled.requestsPerSecond).toBe(20);
    // Interpolated percentiles of 1..100: p50 at rank 49.5, p99 at rank 98.01.
    expect(pooled.p50).toBeCloseTo(50.5, 12);
    expect(pooled.p99).toBeCloseTo(99.01, 12);
    expect(pooled.max).toBe(100);
    expect(pooled.latencies).toHaveLength(100);
    expect(pooled.loopDelayMax).toBe(7);
  });

  it('refuses no runs and runs of different modes', () => {
    expect(() => pooledResult([])).toThrow('pooledResult: no runs');
    expect(() => pooledResult([run('task', [1], 1, 0), run('shared', [1], 1, 0)])).toThrow(
      'pooledResult: runs of task and shared',
    );
  });

  it('clients at once: their answers over the longest measured time, latencies together', () => {
    const latencies = Array.from({ length: 100 }, (_, i) => i + 1);
    const together = concurrentResult([
      run(
        'task',
        latencies.filter((x) => x <= 60),
        2,
        4,
      ),
      run(
        'task',
        latencies.filter((x) => x > 60),
        2.5,
        9,
      ),
    ]);
    expect(together.completed).toBe(102);
    expect(together.seconds).toBe(2.5);
    expect(together.requestsPerSecond).toBe(40);
    expect(together.p50).toBeCloseTo(50.5, 12);
    expect(together.max).toBe(100);
    expect(together.loopDelayMax).toBe(9);
    expect(() => concurrentResult([])).toThrow('pooledResult: no runs');
  });

  it('splits a run among clients: every request and slot given out once', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 500 }),
        fc.integer({ min: 0, max: 10_000 }),
        fc.integer({ min: 0, max: 2000 }),
        fc.integer({ min: 1, max: 64 }),
        (concurrency, requests, warmup, wanted) => {
          const clients = Math.min(wanted, concurrency);
          const shares = splitMeasureOptions(
            { requests, seconds: 3, concurrency, warmup },
            clients,
          );
          expect(shares).toHaveLength(clients);
          const sum = (key: 'requests' | 'concurrency' | 'warmup') =>
            shares.reduce((total, share) => total + share[key], 0);
          expect(sum('concurrency')).toBe(concurrency);
          expect(sum('requests')).toBe(requests);
          expect(sum('warmup')).toBe(warmup);
          for (const share of shares) {
            expect(share.seconds).toBe(3);
            expect(share.concurrency).toBeGreaterThanOrEqual(1);
            expect(share.concurrency - shares.at(-1)!.concurrency).toBeLessThanOrEqual(1);
          }
        },
      ),
    );
    expect(() =>
      splitMeasureOptions({ requests: 1, seconds: 1, concurrency: 2, warmup: 0 }, 3),
    ).toThrow('clients must be an integer in 1..2 (the concurrency), got 3');
  });
});
