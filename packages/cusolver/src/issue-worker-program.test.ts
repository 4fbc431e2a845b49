import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CusolverError } from './errors.js';
import {
  issueFailureError,
  issueOffThread,
  issueWorkerStatistics,
  nativeStreamKept,
  setIssuingWaitMs,
  startIssueWorkerWith,
  stopIssueWorker,
  streamDisposed,
} from './issue-worker.js';

// The worker's own program, run in a real worker thread on a test double of its native
// functions (test/issue-bindings-double.ts) that logs every native call it receives.
const double = fileURLToPath(new URL('../test/issue-bindings-double.ts', import.meta.url));
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

/** A stand-in for a Stream: its CUstream and its context's CUcontext (fake handles). */
const streamOf = (context: bigint, stream: bigint) => ({
  context: { handle: context },
  ffiHandle: stream,
});
const streams = new Map<string, ReturnType<typeof streamOf>>();
/** The same stand-in each time for a (context, stream) pair, as a Stream object would be. */
const target = (context: bigint, stream: bigint) => {
  const key = `${context}:${stream}`;
  let value = streams.get(key);
  if (value === undefined) streams.set(key, (value = streamOf(context, stream)));
  return value;
};
const getrf = (
  context: bigint | ReturnType<typeof streamOf>,
  stream = 0n,
  m = 4,
  signal?: AbortSignal,
) =>
  issueOffThread(
    'cusolverDnDgetrf',
    typeof context === 'bigint' ? target(context, stream) : context,
    [m, 4, 1000n, m, 2000n, 3000n, 4000n],
    signal,
  );

/** Resolves once the double has logged a call matching `pattern` (not consuming the log). */
async function logged(pattern: RegExp): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (pattern.test(readFileSync(logFile, 'utf8'))) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`${pattern} was never logged`);
}

describe("the issue worker's program, on a test double of its native functions", () => {
  beforeAll(() => {
    process.env.ISSUE_WORKER_DOUBLE_LOG = logFile;
    writeFileSync(logFile, '');
  });
  afterEach(async () => {
    await stopIssueWorker();
    streams.clear();
    calls();
  });
  afterAll(() => {
    if (saved === undefined) delete process.env.ISSUE_WORKER_DOUBLE_LOG;
    else process.env.ISSUE_WORKER_DOUBLE_LOG = saved;
    rmSync(directory, { recursive: true, force: true });
  });

  const start = (handlesPerContext = 16) =>
    startIssueWorkerWith({ bindings: double, handlesPerContext });

  it('gives each stream a handle of its own, bound once, ordered after its previous call', async () => {
    expect(await start()).toBe(true);
    expect(await getrf(1n, 10n)).toEqual({});
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

  it('issues nothing on a capturing stream, and reports a failing routine after recording, as a CusolverError', async () => {
    expect(await start()).toBe(true);
    expect(await getrf(1n, 666n)).toEqual({ capturing: true });
    expect(calls()).toEqual(['cuCtxSetCurrent(1n)']);
    const failed = await getrf(1n, 10n, 13);
    expect(failed).toEqual({
      error: { name: 'CusolverError', status: 7, call: 'cusolverDnDgetrf' },
    });
    expect(calls().slice(-2)).toEqual([
      'cusolverDnDgetrf(101n, 13, 4, 1000n, 13, 2000n, 3000n, 4000n)',
      'cuEventRecord(100n, 10n)',
    ]);
    // Rebuilt on this thread as the library's own error, as a call on this thread throws it.
    const error = issueFailureError(failed.error!);
    expect(error).toBeInstanceOf(CusolverError);
    expect(error).toMatchObject({
      code: 7,
      status: 'CUSOLVER_STATUS_INTERNAL_ERROR',
      call: 'cusolverDnDgetrf',
    });
    // An error thrown in the worker comes back with its kind and message.
    const unknown = await issueOffThread('cusolverDnXgetrf' as never, target(1n, 10n), []);
    expect(unknown).toEqual({
      error: {
        name: 'TypeError',
        status: -1,
        call: 'cusolverDnXgetrf',
        message: 'the cuSOLVER issue worker issues no cusolverDnXgetrf',
      },
    });
    expect(() => {
      throw issueFailureError(unknown.error!);
    }).toThrow(
      new TypeError(
        'cusolverDnXgetrf in the cuSOLVER issue worker: the cuSOLVER issue worker issues no cusolverDnXgetrf',
      ),
    );
    // Only the call that succeeded is counted.
    expect(issueWorkerStatistics().offThread).toBe(0);
  });

  it('bindings it cannot load fail the start with their message; a later start can succeed', async () => {
    process.env.ISSUE_WORKER_DOUBLE_MISSING = 'missing-libcusolver.so.12';
    let failed: boolean;
    try {
      failed = await start();
    } finally {
      delete process.env.ISSUE_WORKER_DOUBLE_MISSING;
    }
    expect(failed).toBe(false);
    const statistics = issueWorkerStatistics();
    expect(statistics.state).toBe('failed');
    expect(statistics.failure).toBe('missing-libcusolver.so.12: cannot open shared object file');
    expect(await start()).toBe(true);
    expect(issueWorkerStatistics().state).toBe('ready');
  });

  it('a stream disposed while its call is queued: the call is cancelled, nothing reaches the driver for it', async () => {
    expect(await start()).toBe(true);
    const busy = getrf(1n, 10n, 17); // the worker is busy with this one for 300 ms
    const disposed = target(1n, 11n);
    const queued = getrf(disposed);
    streamDisposed(disposed);
    expect(await queued).toEqual({ cancelled: true });
    expect(await busy).toEqual({});
    const log = calls();
    expect(log.filter((call) => /\b11n\b/.test(call))).toEqual([]);
    expect(log).toContain('cusolverDnDgetrf(101n, 17, 4, 1000n, 17, 2000n, 3000n, 4000n)');
    expect(issueWorkerStatistics().offThread).toBe(1);
  });

  it('a stream disposed while the worker issues on it: the disposal waits until the worker is done; a new stream at its address is bound afresh', async () => {
    expect(await start()).toBe(true);
    const disposed = target(1n, 10n);
    const pending = getrf(disposed, 0n, 17);
    await logged(/cusolverDnDgetrf.*17/);
    // Blocks until the worker has issued everything of that call; the stream may be destroyed.
    expect(streamDisposed(disposed)).toBeUndefined();
    expect(nativeStreamKept(disposed)).toBe(false);
    // Every call of it was on the stream before the disposal went on to drain and destroy it.
    expect(calls()).toEqual([
      'cuCtxSetCurrent(1n)',
      'cuEventCreate(100n)',
      'cusolverDnCreate(101n)',
      'cusolverDnSetStream(101n, 10n)',
      'cusolverDnDgetrf(101n, 17, 4, 1000n, 17, 2000n, 3000n, 4000n)',
      'cuEventRecord(100n, 10n)',
    ]);
    expect(await pending).toEqual({});
    // A stream created later at the same address: the handle is bound to it again.
    await getrf(streamOf(1n, 10n));
    expect(calls()).toEqual([
      'cuStreamWaitEvent(10n, 100n, 0)',
      'cusolverDnSetStream(101n, 10n)',
      'cusolverDnDgetrf(101n, 4, 4, 1000n, 4, 2000n, 3000n, 4000n)',
      'cuEventRecord(100n, 10n)',
    ]);
  });

  it('a signal that aborts while the call is queued cancels it; once issuing, the reply comes when done', async () => {
    expect(await start()).toBe(true);
    const busy = getrf(1n, 10n, 17);
    const controller = new AbortController();
    const queued = getrf(1n, 11n, 4, controller.signal);
    controller.abort(new Error('deadline'));
    expect(await queued).toEqual({ cancelled: true });
    await busy;
    expect(calls().filter((call) => /\b11n\b/.test(call))).toEqual([]);
    // Already aborted: not even posted.
    expect(await getrf(1n, 11n, 4, AbortSignal.abort())).toEqual({ cancelled: true });
    // Aborting during the worker's call: its real reply.
    const late = new AbortController();
    const issuing = getrf(1n, 12n, 17, late.signal);
    await logged(/cusolverDnDgetrf.*17/);
    late.abort();
    expect(await issuing).toEqual({});
    expect(await issuing).not.toHaveProperty('cancelled');
  });

  it('a disposal that times out waiting for the worker still cancels the stream’s queued calls, forgets its handle, and keeps the native stream', async () => {
    expect(await start()).toBe(true);
    const disposed = target(1n, 10n);
    const issuing = getrf(disposed, 0n, 17); // the worker issues it for 300 ms
    const queued = [getrf(disposed), getrf(disposed, 0n, 5)];
    await logged(/cusolverDnDgetrf.*17/);
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    const previous = setIssuingWaitMs(20); // far less than the 300 ms the worker takes
    let answer: unknown;
    try {
      answer = streamDisposed(disposed);
    } finally {
      setIssuingWaitMs(previous);
    }
    // Told to keep the native stream: the worker may still issue on it.
    expect(answer).toBe('keep-native-stream');
    expect(nativeStreamKept(disposed)).toBe(true);
    // Every later call of the stream was cancelled, although the wait timed out.
    for (const call of queued) expect(await call).toEqual({ cancelled: true });
    expect(await issuing).toEqual({});
    // The handle was unbound: a new stream at the same address is bound afresh.
    await getrf(streamOf(1n, 10n));
    const log = calls();
    expect(log.filter((call) => call.startsWith('cusolverDnDgetrf'))).toEqual([
      'cusolverDnDgetrf(101n, 17, 4, 1000n, 17, 2000n, 3000n, 4000n)',
      'cusolverDnDgetrf(101n, 4, 4, 1000n, 4, 2000n, 3000n, 4000n)',
    ]);
    expect(log).toContain('cusolverDnSetStream(101n, 10n)');
    expect(log.filter((call) => call === 'cusolverDnSetStream(101n, 10n)')).toHaveLength(2);
    await new Promise((resolve) => setImmediate(resolve));
    process.off('warning', onWarning);
    expect(warnings).toEqual([
      expect.stringMatching(/still issuing a call on Stream.*after 0\.02 s.*not destroyed/),
    ]);
  });
});
