import { describe, expect, it, vi } from 'vitest';

// InterprocessEvent against a scripted driver: the flags it is created with, the handle it
// shares, and the handles it refuses before any native call.
const fake = vi.hoisted(() => {
  const calls: string[] = [];
  const api = {
    cuCtxSetCurrent: () => 0,
    cuStreamCreateWithPriority(out: (bigint | null)[]) {
      out[0] = 300n;
      return 0;
    },
    cuEventCreate(out: (bigint | null)[], flags: number) {
      calls.push(`cuEventCreate flags 0x${flags.toString(16)}`);
      out[0] = 700n;
      return 0;
    },
    cuIpcGetEventHandle(bytes: Uint8Array, event: bigint) {
      calls.push(`cuIpcGetEventHandle ${event}`);
      bytes.fill(0xe1);
      return 0;
    },
    cuIpcOpenEventHandle(out: (bigint | null)[], handle: { reserved: Uint8Array }) {
      calls.push(
        `cuIpcOpenEventHandle ${Buffer.from(handle.reserved).toString('hex').slice(0, 4)}`,
      );
      out[0] = 701n;
      return 0;
    },
    cuEventRecord(event: number, stream: number) {
      calls.push(`cuEventRecord ${event} on ${stream}`);
      return 0;
    },
    cuStreamWaitEvent(stream: number, event: number, flags: number) {
      calls.push(`cuStreamWaitEvent ${stream} ${event} ${flags}`);
      return 0;
    },
    cuEventDestroy_v2(event: bigint) {
      calls.push(`cuEventDestroy_v2 ${event}`);
      return 0;
    },
  };
  return { calls, api };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  return {
    ...original,
    driver: () => fake.api,
    check: (result: number, call: string) => {
      if (result !== 0) throw new Error(`${call} returned ${result}`);
    },
    cudaError: (result: number, call: string) =>
      Object.assign(new Error(`${call} returned ${result}`), { status: `STATUS_${result}` }),
  };
});
const device = {
  ordinal: 0,
  uuid: 'GPU-11111111-2222-3333-4444-555555555555',
  pciBusId: '0000:3B:00.0',
};
vi.mock('../context/ipc-device.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../context/ipc-device.js')>();
  const { SharedMemoryError } = await import('../context/ipc-handle.js');
  return {
    checkExporter: original.checkExporter,
    identityOf: () => device,
    deviceOf: (what: string, identity: { uuid: string }) => {
      if (identity.uuid !== device.uuid) throw new SharedMemoryError('other-device', what);
      return { primaryContext: () => context };
    },
  };
});

import { Context, type Device } from '../context/device.js';
import { parseSharedEventHandle, SharedMemoryError } from '../context/ipc-handle.js';
import { InterprocessEvent } from './ipc-event.js';
import { Stream } from './stream.js';

const context = new Context({ ordinal: 0 } as unknown as Device, 77n);
const stream = Stream.create({ context, name: 's' });
const calls = () => fake.calls.splice(0);

describe('InterprocessEvent', () => {
  it('is created interprocess with timing off, shares a handle that parses, records and waits', () => {
    calls();
    const event = InterprocessEvent.create({ context });
    const handle = event.share();
    expect(parseSharedEventHandle(JSON.stringify(handle))).toEqual(handle);
    expect(handle).toMatchObject({ ipcHandle: 'e1'.repeat(64), pid: process.pid, device });
    event.record(stream).wait(stream);
    event.dispose();
    event.dispose();
    expect(calls()).toEqual([
      'cuEventCreate flags 0x6', // CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING
      'cuIpcGetEventHandle 700',
      'cuEventRecord 700 on 300',
      'cuStreamWaitEvent 300 700 0',
      'cuEventDestroy_v2 700',
    ]);
    expect(() => event.record(stream)).toThrow(/disposed/);
  });

  it("opens another live process's event on the device of its UUID", () => {
    const handle = { ...InterprocessEvent.create({ context }).share(), pid: process.ppid };
    calls();
    const opened = InterprocessEvent.open(JSON.stringify(handle));
    expect(opened.exporterPid).toBe(process.ppid);
    expect(opened.context).toBe(context);
    expect(calls()).toEqual(['cuIpcOpenEventHandle e1e1']);
    opened.dispose();
  });

  it('a handle CUDA refuses (a forged one, or its event destroyed) is a SharedMemoryError', () => {
    const handle = { ...InterprocessEvent.create({ context }).share(), pid: process.ppid };
    const open = fake.api.cuIpcOpenEventHandle;
    fake.api.cuIpcOpenEventHandle = () => 400; // CUDA_ERROR_INVALID_HANDLE
    try {
      let caught: unknown;
      try {
        InterprocessEvent.open(handle);
      } catch (error) {
        caught = error;
      }
      expect(SharedMemoryError.isInstance(caught)).toBe(true);
      expect((caught as SharedMemoryError).reason).toBe('stale');
    } finally {
      fake.api.cuIpcOpenEventHandle = open;
    }
  });

  it('refuses, before any native call: its own process, an exited one, another device, malformed input', () => {
    const handle = InterprocessEvent.create({ context }).share();
    calls();
    const reasonOf = (input: unknown) => {
      try {
        InterprocessEvent.open(input as string);
      } catch (error) {
        expect(SharedMemoryError.isInstance(error)).toBe(true);
        return (error as SharedMemoryError).reason;
      }
      throw new Error('not refused');
    };
    expect(reasonOf(handle)).toBe('own-process');
    expect(reasonOf({ ...handle, pid: 4_000_000 })).toBe('exporter-exited');
    expect(
      reasonOf({
        ...handle,
        pid: process.ppid,
        device: { ...device, uuid: 'GPU-99999999-2222-3333-4444-555555555555' },
      }),
    ).toBe('other-device');
    expect(reasonOf({ ...handle, ipcHandle: 'x' })).toBe('malformed');
    expect(reasonOf('[]')).toBe('malformed');
    expect(calls()).toEqual([]);
  });
});
