import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';

// Lifetimes of memory shared across processes, against a scripted driver: what is allocated,
// exported, opened, closed and freed, and when. The other processes are made up: `alive`
// says which pids exist, and the lease records live in a temporary folder.
const fake = vi.hoisted(() => {
  const state = {
    calls: [] as string[],
    nextAddress: 0x7000_0000,
    /** What cuMemGetAddressRange_v2 answers for a mapped base (default: the handle's size). */
    mappedSize: 1 << 20,
    openResult: 0,
  };
  const lastAllocation = { value: 0 };
  const api = {
    cuCtxSetCurrent: () => 0,
    cuStreamCreateWithPriority(out: (bigint | null)[]) {
      out[0] = 500n + BigInt(state.calls.length);
      return 0;
    },
    cuStreamSynchronize(stream: unknown) {
      state.calls.push(`cuStreamSynchronize s${Number(stream)}`);
      return 0;
    },
    cuStreamQuery: () => 0,
    cuStreamDestroy_v2: () => 0,
    cuStreamWaitEvent: () => 0,
    cuEventCreate(out: (bigint | null)[]) {
      out[0] = 900n;
      return 0;
    },
    cuEventRecord: () => 0,
    cuMemAllocAsync(_out: unknown, bytes: number) {
      state.calls.push(`cuMemAllocAsync ${bytes}`);
      lastAllocation.value = state.nextAddress;
      state.nextAddress += 0x10_0000;
      return 0;
    },
    cuMemFreeAsync: () => 0,
    cuMemAlloc_v2(out: number[], bytes: number) {
      out[0] = state.nextAddress;
      state.calls.push(`cuMemAlloc_v2 ${bytes} -> 0x${state.nextAddress.toString(16)}`);
      state.nextAddress += 0x10_0000;
      return 0;
    },
    cuPointerSetAttribute(value: Uint32Array, attribute: number) {
      state.calls.push(`cuPointerSetAttribute ${attribute}=${value[0]}`);
      return 0;
    },
    cuMemFree_v2(address: number) {
      state.calls.push(`cuMemFree_v2 0x${Number(address).toString(16)}`);
      return 0;
    },
    cuIpcGetMemHandle(bytes: Uint8Array, address: number) {
      bytes.fill(0x5a);
      state.calls.push(`cuIpcGetMemHandle 0x${Number(address).toString(16)}`);
      return 0;
    },
    cuIpcOpenMemHandle(out: number[], handle: { reserved: Uint8Array }, flags: number) {
      state.calls.push(
        `cuIpcOpenMemHandle ${Buffer.from(handle.reserved).toString('hex').slice(0, 8)} flags ${flags}`,
      );
      if (state.openResult !== 0) return state.openResult;
      out[0] = 0x9000_0000;
      return 0;
    },
    cuMemGetAddressRange_v2(base: number[], size: number[], address: number) {
      base[0] = address;
      size[0] = state.mappedSize;
      return 0;
    },
    cuIpcCloseMemHandle(address: number) {
      state.calls.push(`cuIpcCloseMemHandle 0x${Number(address).toString(16)}`);
      return 0;
    },
  };
  return { state, api, lastAllocation, alive: new Set<number>() };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  const arena = {
    address: 1,
    pointer: 1n,
    u64: new BigUint64Array(2),
    readAddress: () => fake.lastAllocation.value,
  };
  const cudaError = (result: number, call: string) =>
    Object.assign(new Error(`${call} returned ${result}`), { status: `STATUS_${result}` });
  return {
    ...original,
    driver: () => fake.api,
    check: (result: number, call: string) => {
      if (result !== 0) throw cudaError(result, call);
    },
    cudaError,
    scratch: () => arena,
  };
});

const device = {
  ordinal: 0,
  uuid: 'GPU-11111111-2222-3333-4444-555555555555',
  pciBusId: '0000:3B:00.0',
};
vi.mock('../context/ipc-device.js', async () => {
  const { SharedMemoryError } = await import('../context/ipc-handle.js');
  return {
    identityOf: () => device,
    deviceOf: (what: string, identity: { uuid: string }) => {
      if (identity.uuid === secondDevice.uuid) return secondTestDevice;
      if (identity.uuid !== device.uuid) {
        throw new SharedMemoryError('other-device', `${what}: not this device`);
      }
      return testDevice;
    },
    checkExporter: (what: string, pid: number) => {
      if (pid === process.pid) throw new SharedMemoryError('own-process', what);
      if (!fake.alive.has(pid)) throw new SharedMemoryError('exporter-exited', what);
    },
  };
});

import { Context, type Device } from '../context/device.js';
import { SharedMemoryError, type SharedMemoryHandle } from '../context/ipc-handle.js';
import { LeaseStore } from '../context/ipc-leases.js';
import { Stream } from '../stream/stream.js';
import { DeviceArray } from './array.js';
import {
  allocateShareable,
  checkSharedMemory,
  openSharedMemory,
  setLeaseStore,
  shareableArray,
  sharedMemoryHolders,
  shareMemory,
} from './ipc.js';
import { MemoryPool } from './memory-pool.js';

const context = new Context(
  { ordinal: 0, memoryInfo: () => ({ free: 0, total: 1 << 30 }) } as unknown as Device,
  77n,
);
const testDevice = { ordinal: 0, primaryContext: () => context };
/** A second device this process sees, with a context of its own. */
const secondDevice = { ...device, ordinal: 1, uuid: 'GPU-66666666-2222-3333-4444-555555555555' };
const secondContext = new Context(
  { ordinal: 1, memoryInfo: () => ({ free: 0, total: 1 << 30 }) } as unknown as Device,
  78n,
);
const secondTestDevice = { ordinal: 1, primaryContext: () => secondContext };
const pool = Object.create(MemoryPool.prototype) as MemoryPool;
Object.assign(pool, { context, handle: 5n });
Object.defineProperty(context, 'memoryPool', { value: pool });
const stream = Stream.create({ context, name: 's' });
/** The native calls since the last look, without the stream synchronizes of releases. */
const calls = () =>
  fake.state.calls.splice(0).filter((call) => !call.startsWith('cuStreamSynchronize'));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const leaseRoot = mkdtempSync(join(tmpdir(), 'ipc-test-'));
const leases = new LeaseStore(join(leaseRoot, 'root'), (pid) => fake.alive.has(pid));
const previousStore = setLeaseStore(leases);
afterAll(() => {
  setLeaseStore(previousStore);
  rmSync(leaseRoot, { recursive: true, force: true });
});

const EXPORTER = 4242;
let exportCount = 0;
/** A handle of another (made-up) process's export of `bytes` bytes, its lease folder made. */
function foreignHandle(change: Partial<SharedMemoryHandle> = {}): SharedMemoryHandle {
  const exportId = (++exportCount).toString(16).padStart(32, '0');
  leases.openExport(EXPORTER, exportId);
  return {
    format: 'cuda-tasks/ipc-memory',
    version: 1,
    ipcHandle: 'c3'.repeat(64),
    allocationBytes: 1 << 20,
    byteOffset: 0,
    byteLength: 64 * 32 * 4,
    dtype: 'float32',
    shape: [64, 32],
    pid: EXPORTER,
    exportId,
    device,
    ...change,
  };
}

beforeEach(() => {
  fake.alive.clear();
  fake.alive.add(process.pid).add(EXPORTER);
  fake.state.mappedSize = 1 << 20;
  fake.state.openResult = 0;
  calls();
});

describe('exporting', () => {
  it('memory for sharing: cuMemAlloc with synchronous memory operations, one IPC handle, freed at dispose when nobody holds it', () => {
    const array = shareableArray('float32', [256, 4], { stream });
    expect(array.buffer.byteLength).toBe(4096);
    const first = shareMemory(array);
    const second = shareMemory(array.slice !== undefined ? array.reshape([1024]) : array);
    expect(calls()).toEqual([
      'cuMemAlloc_v2 4096 -> 0x70000000',
      'cuPointerSetAttribute 6=1',
      'cuIpcGetMemHandle 0x70000000',
    ]);
    expect(first.ipcHandle).toBe('5a'.repeat(64));
    expect(second.exportId).toBe(first.exportId);
    expect(second.shape).toEqual([1024]);
    expect(first).toMatchObject({
      dtype: 'float32',
      shape: [256, 4],
      byteLength: 4096,
      pid: process.pid,
      device,
    });
    expect(JSON.parse(JSON.stringify(first))).toEqual(first);
    expect(sharedMemoryHolders(array)).toEqual([]);
    const folder = join(leases.root, `${process.pid}-${first.exportId}`);
    expect(existsSync(folder)).toBe(true);
    array.dispose();
    expect(calls()).toEqual(['cuMemFree_v2 0x70000000']);
    expect(existsSync(folder)).toBe(false);
    array.dispose();
    expect(calls()).toEqual([]);
  });

  it('a view of a slice carries its offset', () => {
    const array = shareableArray('float64', 100, { stream });
    const handle = shareMemory(array.slice(10, 20));
    expect(handle).toMatchObject({
      byteOffset: 80,
      byteLength: 160,
      shape: [20],
      allocationBytes: 800,
    });
    array.dispose();
  });

  it("pool memory, strided views and other processes' memory are refused before any native call", () => {
    const pooled = DeviceArray.empty('float32', [8, 8], { stream });
    calls();
    const refused = (source: Parameters<typeof shareMemory>[0]) => {
      try {
        shareMemory(source);
      } catch (error) {
        return error as SharedMemoryError;
      }
      throw new Error('not refused');
    };
    expect(refused(pooled).reason).toBe('not-shareable');
    expect(refused(pooled).message).toContain('stream-ordered pool');
    const shared = shareableArray('float32', [8, 8], { stream });
    calls();
    expect(refused(shared.block(0, 0, 4, 4)).reason).toBe('not-shareable');
    const view = openSharedMemory(foreignHandle(), { stream });
    calls();
    expect(refused(view).message).toContain('another process');
    expect(calls()).toEqual([]);
    expect(() => shareMemory({} as DeviceArray)).toThrow(TypeError);
    pooled.dispose();
    shared.dispose();
    view.dispose();
  });

  it('dispose while an importer holds it defers the free until the importer gives it back', async () => {
    const buffer = allocateShareable(1 << 16, { stream });
    const handle = shareMemory(buffer);
    calls();
    fake.alive.add(777);
    leases.take(process.pid, handle.exportId, 777);
    expect(sharedMemoryHolders(buffer)).toEqual([777]);
    buffer.dispose();
    expect(buffer.disposed).toBe(true);
    expect(calls()).toEqual([]); // not freed: process 777 holds it
    await sleep(600);
    expect(calls()).toEqual([]);
    leases.give(process.pid, handle.exportId, 777);
    await sleep(600);
    expect(calls()).toEqual([expect.stringMatching(/^cuMemFree_v2 0x/)]);
  });

  it('an importer killed while holding it does not pin it', async () => {
    const buffer = allocateShareable(4096, { stream });
    const handle = shareMemory(buffer);
    fake.alive.add(778);
    leases.take(process.pid, handle.exportId, 778);
    buffer.dispose();
    calls();
    fake.alive.delete(778); // killed mid-read
    await sleep(600);
    expect(calls()).toEqual([expect.stringMatching(/^cuMemFree_v2 0x/)]);
    expect(sharedMemoryHolders(buffer)).toEqual([]);
  });

  it('an importer taking its lease while the exporter frees either holds live memory or is refused (never a lease on freed memory)', () => {
    const buffer = allocateShareable(4096, { stream });
    const handle = shareMemory(buffer);
    // A lease of a dead importer: the exporter's look at the holders asks whether 779 lives,
    // and another importer (780) takes its lease at that moment, as a concurrent process may.
    fake.alive.add(779);
    leases.take(process.pid, handle.exportId, 779);
    fake.alive.delete(779);
    let racer: boolean | null = null;
    const racing = new LeaseStore(leases.root, (pid) => {
      if (pid === 779 && racer === null) racer = leases.take(process.pid, handle.exportId, 780);
      return pid === 780 || fake.alive.has(pid);
    });
    const previous = setLeaseStore(racing);
    try {
      calls();
      buffer.dispose();
      const freed = calls().some((call) => call.startsWith('cuMemFree_v2'));
      expect(racer).not.toBeNull();
      expect(freed && racer === true).toBe(false);
      expect(freed).toBe(racer === false);
      if (racer === true) leases.give(process.pid, handle.exportId, 780);
    } finally {
      setLeaseStore(previous);
    }
  });

  it('bad sizes are refused before any native call', () => {
    for (const bytes of [0, -1, 1.5, Number.NaN]) {
      expect(() => allocateShareable(bytes, { stream })).toThrow(TypeError);
    }
    expect(() => shareableArray('float32', [-1], { stream })).toThrow(TypeError);
    expect(calls()).toEqual([]);
  });
});

describe('opening', () => {
  it('maps once, gives views of the dtype and shape, holds a lease, closes with the last view', () => {
    const handle = foreignHandle();
    const first = openSharedMemory<'float32'>(handle, { stream });
    const second = openSharedMemory<'float32'>(JSON.stringify(handle), {
      stream,
      access: 'readwrite',
    });
    expect(calls()).toEqual([`cuIpcOpenMemHandle c3c3c3c3 flags 1`]);
    expect(first.dtype).toBe('float32');
    expect(first.shape).toEqual([64, 32]);
    expect(first.pointer).toBe(0x9000_0000n);
    expect(second.pointer).toBe(0x9000_0000n);
    expect(leases.holders(EXPORTER, handle.exportId)).toEqual([process.pid]);
    first.dispose();
    expect(calls()).toEqual([]);
    second.ffiAddressOn(stream, 'write');
    second.dispose();
    // The stream that used the view finishes that work before the memory is unmapped.
    expect(fake.state.calls.splice(0)).toEqual([
      'cuStreamSynchronize s500',
      'cuIpcCloseMemHandle 0x90000000',
    ]);
    expect(leases.holders(EXPORTER, handle.exportId)).toEqual([]);
  });

  it('a byte offset lands inside the mapping', () => {
    const view = openSharedMemory(
      foreignHandle({ byteOffset: 4096, shape: [16], byteLength: 64 }),
      {
        stream,
      },
    );
    expect(view.pointer).toBe(0x9000_0000n + 4096n);
    view.dispose();
  });

  it('a read-only view refuses writes before any native call; reads go on; readwrite views write', () => {
    const handle = foreignHandle();
    const view = openSharedMemory(handle, { stream });
    const other = Stream.create({ context, name: 'other' });
    calls();
    const writes = [
      () => view.ffiAddressOn(stream, 'write'),
      () => view.useOn(other, 'write'),
      () => view.buffer.ffiAddressOn(stream),
      () => view.fill(0, { stream }),
    ];
    for (const write of writes) {
      let caught: unknown;
      try {
        write();
      } catch (error) {
        caught = error;
      }
      expect(SharedMemoryError.isInstance(caught)).toBe(true);
      expect((caught as SharedMemoryError).reason).toBe('read-only');
    }
    expect(calls()).toEqual([]);
    expect(view.ffiAddressOn(stream, 'read')).toBe(0x9000_0000);
    expect(view.ffiAddressOn(other, 'read')).toBe(0x9000_0000);
    // Still refused after reads from several streams (the common case never takes a write).
    expect(() => view.ffiAddressOn(stream, 'write')).toThrow(SharedMemoryError);
    const writable = openSharedMemory(handle, { stream, access: 'readwrite' });
    expect(writable.ffiAddressOn(stream, 'write')).toBe(0x9000_0000);
    expect(writable.ffiAddressOn(other, 'write')).toBe(0x9000_0000);
    view.dispose();
    writable.dispose();
    other.dispose();
  });

  it('the exporter exits: the views become unusable with exporter-exited, the listener hears it, the mapping closes', async () => {
    const handle = foreignHandle();
    const heard: SharedMemoryError[] = [];
    const view = openSharedMemory(handle, { stream, onExporterExit: (error) => heard.push(error) });
    // A view closed before the exit is not told.
    openSharedMemory(handle, { stream, onExporterExit: () => heard.push(undefined!) }).dispose();
    checkSharedMemory(view);
    calls();
    fake.alive.delete(EXPORTER);
    await sleep(600);
    expect(heard.map((error) => error.reason)).toEqual(['exporter-exited']);
    expect(calls()).toEqual(['cuIpcCloseMemHandle 0x90000000']);
    let caught: unknown;
    try {
      view.ffiAddressOn(stream, 'read');
    } catch (error) {
      caught = error;
    }
    expect((caught as SharedMemoryError).reason).toBe('exporter-exited');
    expect(() => checkSharedMemory(view)).toThrow(/has exited/);
    view.dispose(); // nothing more to close
    expect(calls()).toEqual([]);
  });

  it('checkSharedMemory finds an exit at once', () => {
    const view = openSharedMemory(foreignHandle(), { stream });
    fake.alive.delete(EXPORTER);
    expect(() => checkSharedMemory(view)).toThrow(SharedMemoryError);
    expect(calls()).toContain('cuIpcCloseMemHandle 0x90000000');
  });

  it('refuses, before any native call: an exited exporter, a freed export, this process, another device, bad access', () => {
    const reasonOf = (open: () => unknown) => {
      try {
        open();
      } catch (error) {
        expect(SharedMemoryError.isInstance(error) || error instanceof TypeError).toBe(true);
        return (error as SharedMemoryError).reason ?? 'argument';
      }
      throw new Error('not refused');
    };
    const handle = foreignHandle();
    leases.closeExport(EXPORTER, handle.exportId);
    expect(reasonOf(() => openSharedMemory(handle, { stream }))).toBe('stale');
    expect(reasonOf(() => openSharedMemory({ ...foreignHandle(), pid: 31337 }, { stream }))).toBe(
      'exporter-exited',
    );
    expect(reasonOf(() => openSharedMemory(foreignHandle({ pid: process.pid }), { stream }))).toBe(
      'own-process',
    );
    const elsewhere = { ...device, uuid: 'GPU-99999999-2222-3333-4444-555555555555' };
    expect(reasonOf(() => openSharedMemory(foreignHandle({ device: elsewhere }), { stream }))).toBe(
      'other-device',
    );
    expect(
      reasonOf(() => openSharedMemory(foreignHandle(), { stream, access: 'write' as 'readwrite' })),
    ).toBe('argument');
    expect(reasonOf(() => openSharedMemory({ ...foreignHandle(), shape: [1] }, { stream }))).toBe(
      'malformed',
    );
    expect(calls()).toEqual([]);
  });

  it('a mapping smaller than the handle says is refused and closed, the lease given back', () => {
    fake.state.mappedSize = 4096;
    const handle = foreignHandle();
    let caught: unknown;
    try {
      openSharedMemory(handle, { stream });
    } catch (error) {
      caught = error;
    }
    expect((caught as SharedMemoryError).reason).toBe('malformed');
    expect(calls()).toEqual([
      'cuIpcOpenMemHandle c3c3c3c3 flags 1',
      'cuIpcCloseMemHandle 0x90000000',
    ]);
    expect(leases.holders(EXPORTER, handle.exportId)).toEqual([]);
  });

  it('a second handle of a mapped export claiming more bytes than are mapped is refused', () => {
    fake.state.mappedSize = 8192;
    const handle = foreignHandle({ allocationBytes: 8192 });
    const view = openSharedMemory(handle, { stream });
    calls();
    let caught: unknown;
    try {
      openSharedMemory({ ...handle, allocationBytes: 1 << 20 }, { stream });
    } catch (error) {
      caught = error;
    }
    expect((caught as SharedMemoryError).reason).toBe('malformed');
    expect(() => openSharedMemory({ ...handle, ipcHandle: 'd4'.repeat(64) }, { stream })).toThrow(
      /other memory/,
    );
    expect(calls()).toEqual([]); // the mapping stays, for the view that is open
    view.dispose();
    expect(calls()).toEqual(['cuIpcCloseMemHandle 0x90000000']);
  });

  it('a second handle of a mapped export naming another device is refused (the mapping is of the first)', () => {
    const handle = foreignHandle();
    const view = openSharedMemory(handle, { stream });
    calls();
    let caught: unknown;
    try {
      openSharedMemory(
        { ...handle, device: secondDevice },
        { stream: Stream.create({ context: secondContext, name: 's2' }) },
      );
    } catch (error) {
      caught = error;
    }
    expect((caught as SharedMemoryError).reason).toBe('malformed');
    expect(calls()).toEqual([]);
    view.dispose();
    expect(calls()).toEqual(['cuIpcCloseMemHandle 0x90000000']);
  });

  it('a handle CUDA refuses (freed memory, a forged handle) is stale, the lease given back', () => {
    fake.state.openResult = 400; // CUDA_ERROR_INVALID_HANDLE
    const handle = foreignHandle();
    let caught: unknown;
    try {
      openSharedMemory(handle, { stream });
    } catch (error) {
      caught = error;
    }
    expect((caught as SharedMemoryError).reason).toBe('stale');
    expect(leases.holders(EXPORTER, handle.exportId)).toEqual([]);
  });
});
