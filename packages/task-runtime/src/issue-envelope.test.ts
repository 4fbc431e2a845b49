import type { Context, Stream } from '@cuda-tasks/cudadrv';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

// The driver is replaced by a test double (see testing/fake-driver.ts), with the operation
// observer's hooks recording into the same log as the library's calls: what is tested is the
// order of the envelope's steps and which handle, bound to which stream, a call gets.
const fake = await vi.hoisted(async () => {
  const driver = (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver();
  const log: string[] = [];
  let nextToken = 0;
  return {
    driver,
    log,
    resetTokens: () => {
      nextToken = 0;
    },
    internal: {
      ...driver.module,
      beginOperation(name: string, stream: { name: string; capture: unknown }) {
        if (stream.capture !== null) return -1;
        const token = nextToken++;
        log.push(`begin ${name} on ${stream.name} (token ${token})`);
        return token;
      },
      endOperation(token: number) {
        if (token >= 0) log.push(`end token ${token}`);
      },
    },
  };
});

vi.mock('@cuda-tasks/cudadrv', () => fake.driver.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.internal);

import { HandleCache } from './handle-cache.js';
import { SharedHandle } from './handle-shared.js';
import { IssueEnvelope } from './issue-envelope.js';
import { task } from './task.js';

interface FakeHandle {
  id: number;
}

const context0 = fake.driver.devices[0]!.context;
const log = () => fake.log.splice(0);
beforeEach(() => {
  log();
  fake.resetTokens();
});
const nameOf = (s: Stream | undefined) => (s as unknown as { name: string } | undefined)?.name;
const userStream = (name: string): Stream =>
  new fake.driver.FakeStream(context0, name) as unknown as Stream;

/** A library's status check: a failure throws an error naming the call. */
function check(status: number, call: string): void {
  fake.log.push(`check ${status} ${call}`);
  if (status !== 0) throw new Error(`fakelib: ${call} failed with status ${status}`);
}

const made: HandleCache<FakeHandle>[] = [];
afterEach(() => {
  for (const cache of made.splice(0)) cache.dispose();
  log();
});

function makeEnvelope() {
  let next = 0;
  const handles = new HandleCache<FakeHandle>({
    name: 'fakelib',
    create: () => ({ id: next++ }),
    destroy() {},
    setStream(handle, stream) {
      fake.log.push(`setStream ${handle.id} ${nameOf(stream)}`);
    },
    maxHandlesPerContext: 2,
  });
  made.push(handles);
  return { handles, envelope: new IssueEnvelope({ name: 'fakelib', check, handles }) };
}

/** One library call through the envelope, as the library packages write it. */
function call(
  envelope: IssueEnvelope<FakeHandle>,
  stream: Stream,
  operand: { ffiAddressOn(stream: Stream, use?: 'read'): number },
  status: number,
): FakeHandle {
  const handle = envelope.handle(stream);
  const pointer = operand.ffiAddressOn(stream, 'read');
  const token = envelope.begin(stream, 'fakelib.op');
  fake.log.push(`native op(${handle.id}, ${pointer})`);
  envelope.end(token, status, 'fakelibOp');
  return handle;
}

const operand = {
  ffiAddressOn(stream: Stream, use?: 'read') {
    fake.log.push(`use ${use ?? 'write'} on ${nameOf(stream)}`);
    return 0x1000;
  },
};

describe('IssueEnvelope', () => {
  it('runs the steps in order: handle bound, operands used, trace begun, call, trace ended, status checked', async () => {
    const { envelope } = makeEnvelope();
    const stream = userStream('s1');
    await task(() => {
      call(envelope, stream, operand, 0);
    });
    expect(log()).toEqual([
      'setStream 0 s1',
      'use read on s1',
      'begin fakelib.op on s1 (token 0)',
      'native op(0, 4096)',
      'end token 0',
      'check 0 fakelibOp',
    ]);
  });

  it("gives the task's handle bound to the call's stream, with its context current", async () => {
    const { handles, envelope } = makeEnvelope();
    const s1 = userStream('s1');
    const s2 = userStream('s2');
    await task(() => {
      const before = context0.makeCurrentCalls;
      const first = envelope.handle(s1);
      expect(context0.makeCurrentCalls).toBeGreaterThan(before);
      expect(nameOf(handles.boundStream(first))).toBe('s1');
      // The same task, another stream: the same handle, rebound there.
      const second = envelope.handle(s2);
      expect(second).toBe(first);
      expect(nameOf(handles.boundStream(second))).toBe('s2');
      const binding = envelope.binding(s1);
      expect(binding.handle).toBe(first);
      expect(nameOf(binding.stream)).toBe('s1');
      expect(binding.workspace).toBeUndefined();
    });
    expect(handles.statistics().leased).toBe(0);
  });

  it('a failing status throws the library error after the trace has ended', async () => {
    const { envelope } = makeEnvelope();
    const stream = userStream('s1');
    await expect(
      task(() => {
        call(envelope, stream, operand, 13);
      }),
    ).rejects.toThrow('fakelib: fakelibOp failed with status 13');
    expect(log().slice(-3)).toEqual(['native op(0, 4096)', 'end token 0', 'check 13 fakelibOp']);
  });

  it('a handle that cannot be had leaves no use declared on the operands and no trace', async () => {
    const { envelope } = makeEnvelope();
    const stream = userStream('gone');
    (stream as unknown as { disposed: boolean }).disposed = true;
    await expect(
      task(() => {
        call(envelope, stream, operand, 0);
      }),
    ).rejects.toThrow(/gone/);
    expect(log()).toEqual([]);
  });

  it('endTrace closes the trace of a call that throws; check reads a status later', async () => {
    const { envelope } = makeEnvelope();
    const stream = userStream('s1');
    await task(() => {
      envelope.handle(stream);
      const token = envelope.begin(stream, 'fakelib.awaited');
      try {
        throw new Error('koffi: bad argument');
      } catch {
        // The error a real call would carry up; the trace is closed all the same.
      } finally {
        envelope.endTrace(token);
      }
      envelope.check(0, 'fakelibAwaited');
    });
    expect(log()).toEqual([
      'setStream 0 s1',
      'begin fakelib.awaited on s1 (token 0)',
      'end token 0',
      'check 0 fakelibAwaited',
    ]);
  });

  it('a capturing stream is not traced, and its status is still checked', async () => {
    const { envelope } = makeEnvelope();
    const stream = userStream('capturing');
    (stream as unknown as { capture: unknown }).capture = {};
    await task(() => {
      const handle = envelope.handle(stream);
      const token = envelope.begin(stream, 'fakelib.op');
      expect(token).toBe(-1);
      expect(() => envelope.end(token, 3, 'fakelibOp')).toThrow('status 3');
      expect(handle.id).toBe(0);
    });
    expect(log().filter((entry) => entry.startsWith('begin') || entry.startsWith('end'))).toEqual(
      [],
    );
  });

  it('a library without a handle cache uses the trace and the check only', () => {
    const envelope = new IssueEnvelope<never>({ name: 'selfbound', check });
    const stream = userStream('s1');
    expect(() => envelope.handle(stream)).toThrow('no handle cache');
    const token = envelope.begin(stream, 'selfbound.op');
    envelope.end(token, 0, 'selfboundOp');
    expect(log()).toEqual([
      'begin selfbound.op on s1 (token 0)',
      'end token 0',
      'check 0 selfboundOp',
    ]);
  });
});

describe('SharedHandle', () => {
  const other = { name: 'context 1' } as unknown as Context;

  it('makes one handle per context at its first get, and gives the same one after', () => {
    const created: string[] = [];
    const shared = new SharedHandle<{ id: number }>({
      name: 'fakelt',
      create: (context) => {
        created.push((context as unknown as { name?: string }).name ?? 'context 0');
        return { id: created.length };
      },
      destroy() {},
    });
    const a = shared.get(context0 as unknown as Context);
    expect(shared.get(context0 as unknown as Context)).toBe(a);
    const b = shared.get(other);
    expect(b).not.toBe(a);
    expect(created).toEqual(['context 0', 'context 1']);
    expect(shared.size).toBe(2);
    expect([...shared.entries()].map(([, handle]) => handle)).toEqual([a, b]);
  });

  it('release destroys every handle, each in its own try, and the next get makes one again', () => {
    const destroyed: number[] = [];
    let next = 0;
    const shared = new SharedHandle<number>({
      name: 'fakelt',
      create: () => next++,
      destroy(handle) {
        destroyed.push(handle);
        if (handle === 0) throw new Error('destroy 0 failed');
      },
    });
    shared.get(context0 as unknown as Context);
    shared.get(other);
    expect(() => shared.release()).toThrow('destroy 0 failed');
    expect(destroyed).toEqual([0, 1]);
    expect(shared.size).toBe(0);
    expect(shared.release()).toBe(0);
    expect(shared.get(other)).toBe(2);
  });
});
