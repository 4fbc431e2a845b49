import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  issueOffThread,
  issueWorkerStatistics,
  startIssueWorkerWith,
  stopIssueWorker,
} from './issue-worker.js';

// The worker's own program, run in a real worker thread on a koffi test double
// (testing/koffi-double.cjs) that logs every native call it receives.
const double = fileURLToPath(new URL('./testing/koffi-double.cjs', import.meta.url));
const directory = mkdtempSync(join(tmpdir(), 'issue-worker-'));
const logFile = join(directory, 'calls.jsonl');
const saved = process.env.ISSUE_WORKER_DOUBLE_LOG;

/** The native calls logged since the last time, as strings like `cuCtxSetCurrent(1n)`. */
function calls(): string[] {
  const text = readFileSync(logFile, 'utf8');
  writeFileSync(logFile, '');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      const [fn, ...args] = JSON.parse(line) as [string, ...unknown[]];
      return `${fn}(${args.join(', ')})`;
    });
}

const getrf = (context: bigint, stream: bigint, m = 4) =>
  issueOffThread('cusolverDnDgetrf', context, stream, [m, 4, 1000n, m, 2000n, 3000n, 4000n]);

describe("the issue worker's program, on a koffi test double", () => {
  beforeAll(() => {
    process.env.ISSUE_WORKER_DOUBLE_LOG = logFile;
    writeFileSync(logFile, '');
  });
  afterEach(async () => {
    await stopIssueWorker();
  });
  afterAll(() => {
    if (saved === undefined) delete process.env.ISSUE_WORKER_DOUBLE_LOG;
    else process.env.ISSUE_WORKER_DOUBLE_LOG = saved;
    rmSync(directory, { recursive: true, force: true });
  });

  const start = (handlesPerContext = 16) =>
    startIssueWorkerWith({
      koffi: double,
      cuda: ['libcuda.so.1'],
      cusolver: ['libcusolver.so.12'],
      handlesPerContext,
    });

  it('gives each stream a handle of its own, bound once, ordered after its previous call', async () => {
    expect(await start()).toBe(true);
    expect(await getrf(1n, 10n)).toEqual({ status: 0, id: expect.any(Number) });
    expect(calls()).toEqual([
      'cuCtxSetCurrent(1n)',
      'cuEventCreate(100n)',
      'cusolverDnCreate(101n)',
      'cusolverDnSetStream(101n, 10n)',
      'cusolverDnDgetrf(101n, 4, 4, 1000n, 4, 2000n, 3000n, 4000n)',
      'cuEventRecord(100n, 10n)',
    ]);
    await getrf(1n, 10n);
    expect(calls()).toEqual([
      'cuStreamWaitEvent(10n, 100n, 0)',
      'cusolverDnDgetrf(101n, 4, 4, 1000n, 4, 2000n, 3000n, 4000n)',
      'cuEventRecord(100n, 10n)',
    ]);
    await getrf(1n, 11n);
    expect(calls()).toEqual([
      'cuEventCreate(102n)',
      'cusolverDnCreate(103n)',
      'cusolverDnSetStream(103n, 11n)',
      'cusolverDnDgetrf(103n, 4, 4, 1000n, 4, 2000n, 3000n, 4000n)',
      'cuEventRecord(102n, 11n)',
    ]);
    // Another context: made current, handles of its own.
    await getrf(2n, 20n);
    expect(calls().slice(0, 3)).toEqual([
      'cuCtxSetCurrent(2n)',
      'cuEventCreate(104n)',
      'cusolverDnCreate(105n)',
    ]);
    expect(issueWorkerStatistics()).toMatchObject({ state: 'ready', offThread: 4 });
  });

  it('past its bound per context, the least recently used handle moves, after its last work', async () => {
    expect(await start(2)).toBe(true);
    await getrf(1n, 10n); // handle 101
    await getrf(1n, 11n); // handle 103
    await getrf(1n, 11n);
    calls();
    await getrf(1n, 12n); // stream 10's handle was used least recently
    expect(calls()).toEqual([
      'cuStreamWaitEvent(12n, 100n, 0)',
      'cusolverDnSetStream(101n, 12n)',
      'cusolverDnDgetrf(101n, 4, 4, 1000n, 4, 2000n, 3000n, 4000n)',
      'cuEventRecord(100n, 12n)',
    ]);
  });

  it('issues nothing on a capturing stream, and reports a failing routine after recording', async () => {
    expect(await start()).toBe(true);
    expect(await getrf(1n, 666n)).toMatchObject({ status: 0, capturing: true });
    expect(calls()).toEqual(['cuCtxSetCurrent(1n)']);
    expect(await getrf(1n, 10n, 13)).toMatchObject({
      status: 7,
      call: 'cusolverDnDgetrf',
      driver: false,
    });
    expect(calls().slice(-2)).toEqual([
      'cusolverDnDgetrf(101n, 13, 4, 1000n, 13, 2000n, 3000n, 4000n)',
      'cuEventRecord(100n, 10n)',
    ]);
    const unknown = await issueOffThread('cusolverDnXgetrf' as never, 1n, 10n, []);
    expect(unknown).toMatchObject({ status: -1, call: 'cusolverDnXgetrf' });
    // Only the call that succeeded is counted.
    expect(issueWorkerStatistics().offThread).toBe(0);
  });

  it('a library it cannot load fails the start with its name; a later start can succeed', async () => {
    const failed = await startIssueWorkerWith({
      koffi: double,
      cuda: ['libcuda.so.1'],
      cusolver: ['missing-libcusolver.so.12', 'missing-libcusolver.so.11'],
      handlesPerContext: 16,
    });
    expect(failed).toBe(false);
    const statistics = issueWorkerStatistics();
    expect(statistics.state).toBe('failed');
    expect(statistics.failure).toContain(
      'the worker could not load missing-libcusolver.so.12: missing-libcusolver.so.12: cannot open shared object file; missing-libcusolver.so.11',
    );
    expect(await start()).toBe(true);
    expect(issueWorkerStatistics().state).toBe('ready');
  });
});
