import type { Context } from '@cuda-tasks/cudadrv';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { onCleanupError } from './cleanup.js';
import type { ContextHandles } from './handle-leases.js';
import type { HandleRecord } from './handle-record.js';
import { HandleTrim } from './handle-trim.js';

const context0 = { name: 'context 0' } as unknown as Context;
const context1 = { name: 'context 1' } as unknown as Context;

interface Plain {
  handle: string;
  context: Context;
  idleSince: number;
  workspaces: { spareCount: number; freeSpares(name: string): number } | undefined;
}

/**
 * A trim over plain records: `idle` lists each context's idle handles, oldest first; a handle
 * with `spares` holds that many 1 KiB spare workspaces, freed by `freeSpares` (logged); the
 * handles in `failing` throw when freed or destroyed.
 */
function trimOf(
  idle: { context: Context; handles: string[] }[],
  options: {
    leased?: { context: Context; handle: string }[];
    spares?: Record<string, number>;
    idleSince?: Record<string, number>;
    failing?: string[];
    keepIdleMs?: number;
  } = {},
) {
  const log: string[] = [];
  const fail = (handle: string, what: string) => {
    log.push(`${what} ${handle}`);
    if (options.failing?.includes(handle)) throw new Error(`${what} ${handle} failed`);
  };
  const records = new Map<string, Plain>();
  const make = (handle: string, context: Context): Plain => {
    const spares = options.spares?.[handle];
    const record: Plain = {
      handle,
      context,
      idleSince: options.idleSince?.[handle] ?? 0,
      workspaces:
        spares === undefined
          ? undefined
          : {
              spareCount: spares,
              freeSpares(name: string) {
                fail(handle, `free (${name})`);
                const bytes = record.workspaces!.spareCount * 1024;
                record.workspaces!.spareCount = 0;
                return bytes;
              },
            },
    };
    records.set(handle, record);
    return record;
  };
  const contexts = new Map<Context, { idle: Plain[] }>();
  for (const { context, handles } of idle) {
    contexts.set(context, { idle: handles.map((handle) => make(handle, context)) });
  }
  for (const { context, handle } of options.leased ?? []) make(handle, context);
  const trim = new HandleTrim<string>(
    'lib',
    contexts as unknown as Map<Context, ContextHandles<HandleRecord<string>>>,
    records as unknown as Map<string, HandleRecord<string>>,
    options.keepIdleMs ?? 500,
    (record) => fail(record.handle, 'destroy'),
  );
  made.push(trim);
  const idleOf = (context: Context) => contexts.get(context)!.idle.map((r) => r.handle);
  return { trim, log, idleOf };
}

const made: HandleTrim<string>[] = [];
const reported: string[] = [];
const stopReporting = onCleanupError((error) => reported.push((error as Error).message));
afterEach(() => {
  for (const trim of made.splice(0)) trim.stop();
  reported.length = 0;
  vi.useRealTimers();
});
afterAll(stopReporting);

describe('HandleTrim: what idle handles and spares give back', () => {
  it('destroyIdle: every idle handle of that context (or of all), counted; the list emptied', () => {
    const { trim, log, idleOf } = trimOf([
      { context: context0, handles: ['a', 'b'] },
      { context: context1, handles: ['c'] },
    ]);
    expect(trim.destroyIdle(context1)).toBe(1);
    expect(log).toEqual(['destroy c']);
    expect(idleOf(context0)).toEqual(['a', 'b']);
    expect(trim.destroyIdle()).toBe(2);
    expect(log).toEqual(['destroy c', 'destroy a', 'destroy b']);
    expect(idleOf(context0)).toEqual([]);
  });

  it('destroyIdle: a failing destroy stops no other; one failure is thrown as it is, several as an AggregateError', () => {
    const one = trimOf([{ context: context0, handles: ['a', 'b', 'c'] }], { failing: ['b'] });
    expect(() => one.trim.destroyIdle()).toThrow(new Error('destroy b failed'));
    expect(one.log).toEqual(['destroy a', 'destroy b', 'destroy c']);
    const two = trimOf([{ context: context0, handles: ['a', 'b', 'c'] }], { failing: ['a', 'c'] });
    let thrown: unknown;
    try {
      two.trim.destroyIdle();
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(AggregateError);
    expect((thrown as AggregateError).message).toBe('lib: destroying idle handles failed');
    expect((thrown as AggregateError).errors.map((e: Error) => e.message)).toEqual([
      'destroy a failed',
      'destroy c failed',
    ]);
    expect(two.idleOf(context0)).toEqual([]);
  });

  it('toBound: the longest idle handles go first, down to the bound in each context', () => {
    const { trim, log, idleOf } = trimOf([
      { context: context0, handles: ['a', 'b', 'c', 'd'] },
      { context: context1, handles: ['e'] },
    ]);
    trim.toBound(2);
    expect(log).toEqual(['destroy a', 'destroy b']);
    expect(idleOf(context0)).toEqual(['c', 'd']);
    expect(idleOf(context1)).toEqual(['e']);
    trim.toBound(0);
    expect(log).toEqual(['destroy a', 'destroy b', 'destroy c', 'destroy d', 'destroy e']);
  });

  it('releaseWorkspaces: the spares of idle and leased handles of that context (or all); the bytes freed', () => {
    const { trim, log } = trimOf(
      [
        { context: context0, handles: ['a', 'b'] },
        { context: context1, handles: ['c'] },
      ],
      {
        leased: [{ context: context0, handle: 'l' }],
        spares: { a: 2, c: 1, l: 1 },
      },
    );
    expect(trim.releaseWorkspaces(context0)).toBe(3 * 1024);
    expect(log).toEqual(['free (lib) a', 'free (lib) l']);
    expect(trim.releaseWorkspaces()).toBe(1024);
    expect(trim.releaseWorkspaces()).toBe(0);
  });

  it('the idle trim: armed once, frees the spares of handles idle for keepIdleMs, re-arms for the rest; a failure is reported', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const now = performance.now();
    const { trim, log } = trimOf([{ context: context0, handles: ['a', 'b', 'c', 'd'] }], {
      spares: { a: 1, b: 1, c: 1, d: 0 },
      idleSince: { a: now - 100, b: now + 300, c: now - 100 },
      failing: ['c'],
      keepIdleMs: 400,
    });
    trim.scheduleSpares();
    trim.scheduleSpares(); // armed already: the same timer
    vi.advanceTimersByTime(399);
    expect(log).toEqual([]);
    vi.advanceTimersByTime(1);
    // a and c have been idle 500 ms; b only 100: it is freed 300 ms later.
    expect(log).toEqual(['free (lib) a', 'free (lib) c']);
    expect(reported).toEqual(['free (lib) c failed']);
    vi.advanceTimersByTime(299);
    expect(log).toEqual(['free (lib) a', 'free (lib) c']);
    vi.advanceTimersByTime(1);
    // c's spares, not freed, are tried again with b's; then nothing is left to wait for.
    expect(log).toEqual(['free (lib) a', 'free (lib) c', 'free (lib) b', 'free (lib) c']);
    expect(reported).toEqual(['free (lib) c failed', 'free (lib) c failed']);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('the idle trim: never armed for Infinity, disarmed for good by stop()', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const forever = trimOf([{ context: context0, handles: ['a'] }], {
      spares: { a: 1 },
      keepIdleMs: Number.POSITIVE_INFINITY,
    });
    forever.trim.scheduleSpares();
    expect(vi.getTimerCount()).toBe(0);
    const stopped = trimOf([{ context: context0, handles: ['a'] }], { spares: { a: 1 } });
    stopped.trim.scheduleSpares();
    expect(vi.getTimerCount()).toBe(1);
    stopped.trim.stop();
    expect(vi.getTimerCount()).toBe(0);
    stopped.trim.scheduleSpares();
    vi.advanceTimersByTime(10_000);
    expect(stopped.log).toEqual([]);
  });
});
