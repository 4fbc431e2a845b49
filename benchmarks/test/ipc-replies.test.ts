import type { ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { readerReplies } from '../src/ipc.js';

/** A stand-in for the reader's ChildProcess: only its 'message' and 'exit' events. */
const fakeReader = () => new EventEmitter() as unknown as ChildProcess & EventEmitter;

describe("ipc_event_wait: the reader's replies", () => {
  it('answers asks in order, keeping messages that came before the ask', async () => {
    const reader = fakeReader();
    const next = readerReplies(reader);
    reader.emit('message', { ready: true });
    const first = next();
    const second = next();
    reader.emit('message', { startNs: '12', flagSeen: 1 });
    expect(await first).toEqual({ ready: true });
    expect(await second).toEqual({ startNs: '12', flagSeen: 1 });
  });

  it('a reader that exits answers the pending ask and every later one with why', async () => {
    const reader = fakeReader();
    const next = readerReplies(reader);
    const pending = next();
    reader.emit('exit', 1, null);
    expect(await pending).toEqual({ failed: 'ipc_event_wait: the reader exited (code 1)' });
    reader.emit('exit', null, 'SIGKILL');
    expect(await next()).toEqual({ failed: 'ipc_event_wait: the reader exited (code 1)' });
  });

  it('a message already received is answered before the exit', async () => {
    const reader = fakeReader();
    const next = readerReplies(reader);
    reader.emit('message', { failed: 'ipc_event_wait reader: no handle' });
    reader.emit('exit', null, 'SIGTERM');
    expect(await next()).toEqual({ failed: 'ipc_event_wait reader: no handle' });
    expect(await next()).toEqual({ failed: 'ipc_event_wait: the reader exited (SIGTERM)' });
  });
});
