import type { DeviceBuffer, Stream } from '@cuda-tasks/cudadrv';
import { describe, expect, it, vi } from 'vitest';

// The fake driver's DeviceBuffer logs each allocation, free and hand-off to another stream in
// `fake.state.gpuLog` (see testing/fake-driver.ts).
const fake = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver(),
);

vi.mock('@cuda-tasks/cudadrv', () => fake.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.module);

import { HandleWorkspaces, type WorkspaceCount, WorkspaceHolders } from './handle-workspaces.js';
import { StreamBinding } from './stream-binding.js';

const context0 = fake.devices[0]!.context;
type Buffer = InstanceType<typeof fake.FakeDeviceBuffer>;

function fakeStream(name: string): Stream {
  return new fake.FakeStream(context0, name) as unknown as Stream;
}

const gpu = () => fake.state.gpuLog.splice(0);

/** One handle's workspaces, as a cache makes them; `bind` binds the stream, then these. */
function workspacesOf(options: { max?: number; resetBySetStream?: boolean } = {}) {
  let size = 1024;
  const set = vi.fn((_h: string, _w: DeviceBuffer | undefined, _s: Stream) => {});
  const binding = new StreamBinding({
    context: context0 as never,
    setStream: () => {},
    ordered: false,
  });
  const holders = new WorkspaceHolders();
  const workspaces = new HandleWorkspaces(
    'handle',
    { bytes: () => size, set, resetBySetStream: options.resetBySetStream },
    binding,
    holders,
    options.max ?? 2,
  );
  const bind = (stream: Stream) => {
    workspaces.bind(stream, binding.bind(stream));
    return workspaces.bound as unknown as Buffer | undefined;
  };
  const count = (): WorkspaceCount => {
    const c = { workspaces: 0, workspaceBytes: 0 };
    workspaces.count(c);
    return c;
  };
  gpu();
  return { workspaces, binding, holders, set, bind, count, resize: (n: number) => (size = n) };
}

describe('HandleWorkspaces: one handle’s workspaces', () => {
  it('one per stream, allocated on it, handed to the library when it differs from what the library has', () => {
    const { set, bind, holders, workspaces, count } = workspacesOf({ max: 3 });
    const a = fakeStream('a');
    const b = fakeStream('b');
    const onA = bind(a)!;
    expect(gpu()).toEqual([`allocate 1024 on a at 0x${onA.address.toString(16)}`]);
    const onB = bind(b)!;
    expect(onB).not.toBe(onA);
    expect(bind(a)).toBe(onA);
    expect(workspaces.on(a)).toBe(onA);
    expect(set.mock.calls.map(([, w, s]) => [w, s])).toEqual([
      [onA, a],
      [onB, b],
      [onA, a],
    ]);
    expect(holders.has(a) && holders.has(b)).toBe(true);
    expect(count()).toEqual({ workspaces: 2, workspaceBytes: 2048 });
  });

  it('at the bound, the workspace bound least recently to another stream is taken over behind a GPU-side wait', () => {
    const { bind, holders, count } = workspacesOf({ max: 2 });
    const [a, b, c] = [fakeStream('a'), fakeStream('b'), fakeStream('c')];
    const onA = bind(a)!;
    bind(b);
    bind(a); // b is now the least recently bound
    gpu();
    const onC = bind(c)!;
    expect(gpu()).toEqual(['c waits for b']);
    expect(onC).not.toBe(onA);
    expect(holders.has(b)).toBe(false);
    expect(count().workspaces).toBe(2);
  });

  it('parkAll makes spares (freed instead past the bound or with keep false); the next bind reuses the one last used on its stream', () => {
    const { bind, workspaces, binding, count } = workspacesOf({ max: 2 });
    const [a, b] = [fakeStream('a'), fakeStream('b')];
    const onA = bind(a)!;
    const onB = bind(b)!;
    binding.release();
    workspaces.parkAll(true, 'lib');
    expect(workspaces.bound).toBeUndefined();
    expect(workspaces.spareCount).toBe(2);
    expect(count()).toEqual({ workspaces: 2, workspaceBytes: 2048 });
    gpu();
    expect(bind(a)).toBe(onA);
    expect(gpu().filter((line) => line.startsWith('allocate'))).toEqual([]);
    binding.release();
    workspaces.parkAll(false, 'lib');
    expect(onA.disposed).toBe(true);
    expect(workspaces.freeSpares('lib')).toBe(1024);
    expect(onB.disposed).toBe(true);
    expect(count().workspaces).toBe(0);
  });

  it('a spare of a size no longer asked for is freed at the next bind', () => {
    const { bind, workspaces, binding, resize } = workspacesOf();
    const a = fakeStream('a');
    const old = bind(a)!;
    binding.release();
    workspaces.parkAll(true, 'lib');
    resize(2048);
    const resized = bind(a)!;
    expect(old.disposed).toBe(true);
    expect(resized.byteLength).toBe(2048);
  });

  it('0 bytes: the workspace there is freed and the library told to use none', () => {
    const { bind, binding, set, resize } = workspacesOf();
    const a = fakeStream('a');
    const onA = bind(a)!;
    binding.invalidate();
    resize(0);
    expect(bind(a)).toBeUndefined();
    expect(onA.disposed).toBe(true);
    expect(set.mock.calls.at(-1)![1]).toBeUndefined();
  });

  it('resetBySetStream: the workspace is handed again after each setStream, never otherwise', () => {
    const { bind, set, binding } = workspacesOf({ resetBySetStream: true });
    const [a, b] = [fakeStream('a'), fakeStream('b')];
    bind(a);
    bind(b);
    bind(a);
    expect(set).toHaveBeenCalledTimes(3);
    binding.invalidate();
    bind(a); // the library has stream a: no setStream, nothing to hand again
    expect(set).toHaveBeenCalledTimes(3);
  });

  it('a stream going back to the pool: its workspace becomes a spare, the handle bound there rebinds', () => {
    const { bind, workspaces, binding, holders } = workspacesOf();
    const a = fakeStream('a');
    const onA = bind(a)!;
    workspaces.streamReleased(a, true);
    expect(workspaces.bound).toBeUndefined();
    expect(binding.stream).toBeUndefined();
    expect(holders.has(a)).toBe(false);
    expect(workspaces.spareCount).toBe(1);
    expect(onA.disposed).toBe(false);
  });

  it('a stream disposed: its workspace and the spares last used there are freed there; the library is handed a live one at the next bind', () => {
    const { bind, workspaces, binding, set } = workspacesOf({ max: 3 });
    const [a, b] = [fakeStream('a'), fakeStream('b')];
    const onA = bind(a)!;
    const onB = bind(b)!;
    binding.release();
    workspaces.parkAll(true, 'lib');
    const again = bind(a)!; // the spare last used on a
    expect(again).toBe(onA);
    gpu();
    workspaces.streamDisposed(b);
    expect(gpu()).toEqual([`free 0x${onB.address.toString(16)} on b`]);
    workspaces.streamDisposed(a);
    expect(onA.disposed).toBe(true);
    expect(workspaces.bound).toBeUndefined();
    const calls = set.mock.calls.length;
    const c = fakeStream('c');
    const fresh = bind(c)!;
    expect(set).toHaveBeenCalledTimes(calls + 1);
    expect(set.mock.calls.at(-1)![1]).toBe(fresh);
  });

  it('freeAll frees every workspace, bound and spare, and counts no stream as holding one', () => {
    const { bind, workspaces, holders, count } = workspacesOf();
    const [a, b] = [fakeStream('a'), fakeStream('b')];
    const onA = bind(a)!;
    const onB = bind(b)!;
    workspaces.freeAll('lib');
    expect(onA.disposed && onB.disposed).toBe(true);
    expect(holders.has(a) || holders.has(b)).toBe(false);
    expect(count().workspaces).toBe(0);
  });
});
