import { Worker } from 'node:worker_threads';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';

// The driver is a double whose calls succeed and are logged with their handle arguments;
// the pool hands out made-up addresses (nothing dereferences device memory here). Two
// "threads" are two sets of records in this one: the lender's array and the borrower's
// array over the same memory, each with its own allocation record, as in two isolates.
const fake = vi.hoisted(() => {
  const state = {
    nextHandle: 500,
    nextAddress: 0x7000_0000,
    log: [] as string[],
    failRecord: false,
  };
  const h = (value: unknown) => (typeof value === 'bigint' ? Number(value) : value);
  const api = new Proxy({} as Record<string, (...args: any[]) => number>, {
    get(_target, name: string) {
      return (...args: any[]) => {
        if (name === 'cuStreamCreateWithPriority' || name === 'cuEventCreate') {
          args[0][0] = BigInt(state.nextHandle++);
          state.log.push(`${name} -> ${args[0][0]}`);
          return 0;
        }
        if (name === 'cuEventRecord' && state.failRecord) return 700; // ILLEGAL_ADDRESS
        if (
          name === 'cuEventRecord' ||
          name === 'cuStreamWaitEvent' ||
          name === 'cuMemFreeAsync' ||
          name === 'cuEventDestroy_v2'
        ) {
          state.log.push(`${name} ${args.slice(0, 2).map(h).join(' ')}`);
        }
        return 0;
      };
    },
  });
  return { state, api };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  return {
    ...original,
    driver: () => fake.api,
    check: (result: number, call: string) => {
      if (result !== 0) throw new Error(`${call} returned ${result}`);
    },
  };
});

vi.mock('./memory-pool.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./memory-pool.js')>()),
  waitForContext: async () => {
    fake.state.log.push('waitForContext');
  },
}));

import { Context, Device } from '../context/device.js';
import { CudaArgumentError, DisposedError } from '../errors.js';
import { Event } from '../stream/event.js';
import { Stream } from '../stream/stream.js';
import { DeviceArray } from './array.js';
import {
  borrowArray,
  type LentArrayDescriptor,
  lendArray,
  pendingArrayLoans,
  receiveArray,
  transferArray,
} from './thread-share.js';

function fakeContext(ordinal: number, handle: bigint): Context {
  const context = new Context({ ordinal } as unknown as Device, handle);
  Object.defineProperty(context, 'memoryPool', {
    value: { allocate: (bytes: number) => (fake.state.nextAddress += Math.max(256, bytes) + 256) },
  });
  const defaultStream = Stream.create({ context, name: `default${ordinal}` });
  Object.defineProperty(context, 'defaultStream', { value: defaultStream });
  return context;
}

const context0 = fakeContext(0, 77n);
const context1 = fakeContext(1, 78n);
vi.spyOn(Device, 'get').mockImplementation(
  (ordinal = 0) =>
    ({ primaryContext: () => (ordinal === 0 ? context0 : context1) }) as unknown as Device,
);
const lender = Stream.create({ context: context0, name: 'lender' });
const borrower = Stream.create({ context: context0, name: 'borrower' });
const other = Stream.create({ context: context0, name: 'other' });
const h = (stream: Stream) => Number(stream.handle);

afterEach(() => {
  fake.state.log.length = 0;
  fake.state.failRecord = false;
});

describe('lendArray / borrowArray', () => {
  it('orders the borrower after the lender and the lender after the borrower, on the GPU', () => {
    const x = DeviceArray.empty('float32', [4, 3], { stream: lender });
    const loan = lendArray(x, { stream: lender });
    const { ready, done } = loan.descriptor;
    expect(fake.state.log).toContain(`cuEventRecord ${ready} ${h(lender)}`);
    fake.state.log.length = 0;
    const y = borrowArray<'float32'>(loan.descriptor, { stream: borrower });
    expect(y.shape).toEqual([4, 3]);
    expect(y.dtype).toBe('float32');
    expect(y.ffiAddress).toBe(x.ffiAddress);
    expect(fake.state.log).toEqual([`cuStreamWaitEvent ${h(borrower)} ${ready}`]);
    expect(loan.returned).toBe(false);
    expect(() => loan.end()).toThrow(/still holds the array/);
    // The borrower writes on another stream of its own, then returns the array.
    y.buffer.useOn(other, 'write');
    fake.state.log.length = 0;
    y.dispose();
    expect(fake.state.log.at(-1)).toBe(`cuEventRecord ${done} ${h(other)}`);
    expect(loan.returned).toBe(true);
    fake.state.log.length = 0;
    loan.end();
    expect(fake.state.log.slice(0, 1)).toEqual([`cuStreamWaitEvent ${h(lender)} ${done}`]);
    expect(fake.state.log).toContain(`cuEventDestroy_v2 ${ready}`);
    expect(fake.state.log).toContain(`cuEventDestroy_v2 ${done}`);
    expect(loan.ended).toBe(true);
    // The array is the lender's again; a use on another stream waits for the loan's stream.
    fake.state.log.length = 0;
    x.buffer.useOn(other, 'write');
    expect(fake.state.log.some((line) => line.startsWith(`cuStreamWaitEvent ${h(other)}`))).toBe(
      true,
    );
    loan.end();
    x.dispose();
  });

  it('refuses the lender’s uses while lent for writing, and its writes while lent read-only', () => {
    const x = DeviceArray.empty('int32', 8, { stream: lender });
    const loan = lendArray(x, { stream: lender });
    for (const [stream, access] of [
      [lender, 'read'],
      [lender, 'write'],
      [other, 'read'],
    ] as const) {
      expect(() => x.buffer.useOn(stream, access)).toThrow(CudaArgumentError);
      expect(() => x.buffer.useOn(stream, access)).toThrow(/lent to another thread/);
    }
    expect(() => lendArray(x, { stream: lender })).toThrow(/lent to another thread/);
    expect(() => transferArray(x, { stream: lender })).toThrow(/lent/);
    loan.end(); // never borrowed: ends at once
    expect(() => borrowArray(loan.descriptor, { stream: borrower })).toThrow(/ended by its lender/);
    x.buffer.useOn(lender, 'write');

    const readLoan = lendArray(x, { stream: lender, readOnly: true });
    // Read-only loans overlap (one array read by several jobs); the writes stay refused until
    // the last of them ends.
    const secondRead = lendArray(x, { stream: lender, readOnly: true });
    const z = borrowArray(secondRead.descriptor, { stream: borrower });
    z.dispose();
    secondRead.end();
    expect(() => x.buffer.useOn(lender, 'write')).toThrow(/lent/);
    // A loan for writing is refused before any event is made (none leaks).
    fake.state.log.length = 0;
    expect(() => lendArray(x, { stream: lender })).toThrow(/lent/);
    expect(fake.state.log.filter((line) => line.startsWith('cuEventCreate'))).toEqual([]);
    x.buffer.useOn(lender, 'read');
    x.buffer.useOn(other, 'read');
    expect(() => x.buffer.useOn(lender, 'write')).toThrow(/lent/);
    const y = borrowArray(readLoan.descriptor, { stream: borrower });
    expect(() => y.buffer.useOn(borrower, 'write')).toThrow(/read-only/);
    y.buffer.useOn(borrower, 'read');
    y.dispose();
    readLoan.end();
    x.buffer.useOn(lender, 'write');
    x.dispose();
  });

  it('a descriptor is borrowed once; a disposed lent array is freed after the borrower, at the end', () => {
    const x = DeviceArray.empty('float64', 16, { stream: lender });
    const loan = lendArray(x, { stream: lender });
    const y = borrowArray(loan.descriptor, { stream: borrower });
    expect(() => borrowArray(loan.descriptor, { stream: borrower })).toThrow(/borrowed already/);
    x.dispose();
    expect(x.disposed).toBe(true);
    expect(fake.state.log.some((line) => line.startsWith('cuMemFreeAsync'))).toBe(false);
    y.dispose();
    fake.state.log.length = 0;
    loan.end();
    const wait = fake.state.log.indexOf(`cuStreamWaitEvent ${h(lender)} ${loan.descriptor.done}`);
    const free = fake.state.log.findIndex((line) => line.startsWith('cuMemFreeAsync'));
    expect(wait).toBeGreaterThanOrEqual(0);
    expect(free).toBeGreaterThan(wait);
    expect(fake.state.log[free]).toBe(`cuMemFreeAsync ${x.ffiAddress} ${h(lender)}`);
  });

  it('a borrower whose record failed leaves a loan only abandon() ends; loans are counted', async () => {
    const before = pendingArrayLoans();
    const x = DeviceArray.empty('float32', 4, { stream: lender });
    const loan = lendArray(x, { stream: lender });
    expect(pendingArrayLoans()).toBe(before + 1);
    const y = borrowArray(loan.descriptor, { stream: borrower });
    fake.state.failRecord = true;
    expect(() => y.dispose()).toThrow(/cuEventRecord/);
    fake.state.failRecord = false;
    expect(() => loan.end()).toThrow(/abandon/);
    fake.state.log.length = 0;
    await loan.abandon();
    expect(fake.state.log[0]).toBe('waitForContext');
    expect(fake.state.log.some((line) => line.startsWith('cuStreamWaitEvent'))).toBe(false);
    expect(loan.ended).toBe(true);
    expect(pendingArrayLoans()).toBe(before);
    x.buffer.useOn(lender, 'write');
    x.dispose();
  });

  it('a view lends its own elements; empty arrays cross without events', () => {
    const x = DeviceArray.empty('float32', [5, 4], { stream: lender });
    const view = x.block(1, 1, 3, 2);
    const loan = lendArray(view, { stream: lender });
    const y = borrowArray(loan.descriptor, { stream: borrower });
    expect(y.shape).toEqual([3, 2]);
    expect(y.strides).toEqual([1, 5]);
    expect(y.ffiAddress).toBe(view.ffiAddress);
    y.dispose();
    loan.end();
    const empty = DeviceArray.empty('float32', 0, { stream: lender });
    fake.state.log.length = 0;
    const emptyLoan = lendArray(empty, { stream: lender });
    const borrowed = borrowArray(emptyLoan.descriptor, { stream: borrower });
    expect(borrowed.length).toBe(0);
    expect(emptyLoan.returned).toBe(true);
    emptyLoan.end();
    expect(fake.state.log.some((line) => line.startsWith('cuStreamWaitEvent'))).toBe(false);
    x.dispose();
  });
});

describe('transferArray / receiveArray', () => {
  it('moves ownership: the sender’s array is disposed, the receiver frees the memory once', () => {
    const x = DeviceArray.empty('float32', [3, 3], { stream: lender });
    const address = x.ffiAddress;
    const descriptor = transferArray(x, { stream: lender });
    expect(x.disposed).toBe(true);
    expect(() => x.buffer.useOn(lender)).toThrow(DisposedError);
    expect(fake.state.log).toContain(`cuEventRecord ${descriptor.ready} ${h(lender)}`);
    expect(fake.state.log.some((line) => line.startsWith('cuMemFreeAsync'))).toBe(false);
    x.dispose(); // safe: nothing to free
    fake.state.log.length = 0;
    const y = receiveArray<'float32'>(descriptor, { stream: borrower });
    expect(fake.state.log).toEqual([
      `cuStreamWaitEvent ${h(borrower)} ${descriptor.ready}`,
      `cuEventDestroy_v2 ${descriptor.ready}`,
    ]);
    expect(y.ffiAddress).toBe(address);
    expect(y.shape).toEqual([3, 3]);
    expect(() => receiveArray(descriptor, { stream: borrower })).toThrow(/received already/);
    fake.state.log.length = 0;
    y.dispose();
    y.dispose();
    expect(fake.state.log.filter((line) => line.startsWith('cuMemFreeAsync'))).toEqual([
      `cuMemFreeAsync ${address} ${h(borrower)}`,
    ]);
  });

  it('refuses views, borrowed memory and arrays of another device’s stream', () => {
    const x = DeviceArray.empty('float32', [4, 4], { stream: lender });
    expect(() => transferArray(x.block(0, 0, 2, 2), { stream: lender })).toThrow(/view/);
    const loan = lendArray(x, { stream: lender, readOnly: true });
    const y = borrowArray(loan.descriptor, { stream: borrower });
    expect(() => transferArray(y, { stream: borrower })).toThrow(/not from the pool/);
    expect(() => lendArray(y, { stream: borrower })).toThrow(/not its own/);
    y.dispose();
    loan.end();
    const elsewhere = Stream.create({ context: context1, name: 'device1' });
    expect(() => transferArray(x, { stream: elsewhere })).toThrow(/the stream of/);
    expect(x.disposed).toBe(false);
    x.dispose();
    expect(() => transferArray(x)).toThrow(DisposedError);
  });
});

describe('descriptors', () => {
  function valid(): LentArrayDescriptor {
    const x = DeviceArray.empty('float32', [2, 3], { stream: lender });
    return lendArray(x, { stream: lender }).descriptor;
  }

  it('refuses another process’s descriptor with a message that names the cross-process API', () => {
    const descriptor = { ...valid(), pid: process.pid + 1 };
    expect(() => borrowArray(descriptor, { stream: borrower })).toThrow(/shareMemory/);
  });

  it('refuses a descriptor of another context', () => {
    const descriptor = { ...valid(), context: 99n };
    expect(() => borrowArray(descriptor, { stream: borrower })).toThrow(/primary context/);
  });

  it('any corrupted field gives a CudaArgumentError and borrows nothing', () => {
    const corruptions = fc.oneof(
      fc.record({
        key: fc.constant('address'),
        value: fc.oneof(fc.integer(), fc.constant(-1n), fc.constant(1n << 64n)),
      }),
      fc.record({
        key: fc.constant('byteLength'),
        value: fc.oneof(
          fc.constant(-4),
          fc.constant(0.5),
          fc.constant('24'),
          fc.integer({ min: 0, max: 23 }),
        ),
      }),
      fc.record({
        key: fc.constant('dtype'),
        value: fc.oneof(fc.constant('float128'), fc.constant('constructor'), fc.constant(7)),
      }),
      fc.record({
        key: fc.constant('shape'),
        value: fc.oneof(
          fc.constant([3, 3]),
          fc.constant([-1]),
          fc.constant('2,3'),
          fc.constant([1.5]),
        ),
      }),
      fc.record({
        key: fc.constant('strides'),
        value: fc.oneof(fc.constant([1]), fc.constant([1, 9]), fc.constant([-1, 2])),
      }),
      fc.record({
        key: fc.constant('offset'),
        value: fc.oneof(fc.constant(-1), fc.constant(1), fc.constant(0.5)),
      }),
      fc.record({ key: fc.constant('kind'), value: fc.string() }),
      fc.record({
        key: fc.constant('state'),
        value: fc.oneof(fc.constant(new ArrayBuffer(4)), fc.constant(new SharedArrayBuffer(2))),
      }),
      fc.record({ key: fc.constant('ready'), value: fc.oneof(fc.constant(5), fc.constant(null)) }),
      fc.record({ key: fc.constant('device'), value: fc.oneof(fc.constant(-1), fc.constant('0')) }),
    );
    fc.assert(
      fc.property(corruptions, ({ key, value }) => {
        const descriptor = valid();
        const corrupted = { ...descriptor, [key]: value } as unknown as LentArrayDescriptor;
        fake.state.log.length = 0;
        expect(() => borrowArray(corrupted, { stream: borrower })).toThrow(CudaArgumentError);
        expect(fake.state.log).toEqual([]);
        // The real descriptor is still borrowable: nothing was claimed.
        borrowArray(descriptor, { stream: borrower }).dispose();
      }),
      { numRuns: 150 },
    );
    for (const value of [null, 3, 'x', [], {}]) {
      expect(() => borrowArray(value as never)).toThrow(CudaArgumentError);
      expect(() => receiveArray(value as never)).toThrow(CudaArgumentError);
    }
  });

  it('postMessage carries a descriptor to a real worker thread intact, its state word shared', async () => {
    const descriptor = valid();
    const worker = new Worker(
      `const { parentPort } = require('node:worker_threads');
       parentPort.once('message', (d) => {
         const state = new Int32Array(d.state);
         Atomics.store(state, 0, 3);
         parentPort.postMessage({ address: d.address, ready: d.ready, context: d.context, shape: d.shape, strides: d.strides, kind: d.kind, pid: d.pid });
       });`,
      { eval: true },
    );
    const echoed = await new Promise<Record<string, unknown>>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
      worker.postMessage(descriptor);
    });
    await worker.terminate();
    expect(echoed).toEqual({
      address: descriptor.address,
      ready: descriptor.ready,
      context: descriptor.context,
      shape: [...descriptor.shape],
      strides: [...descriptor.strides],
      kind: descriptor.kind,
      pid: process.pid,
    });
    expect(Atomics.load(new Int32Array(descriptor.state), 0)).toBe(3);
  });
});

describe('events across threads', () => {
  it('the last holder destroys the event, once; a gone event cannot be opened', () => {
    const event = Event.create({ context: context0 });
    const descriptor = event.toThreadDescriptor();
    const other = Event.fromThreadDescriptor(descriptor);
    const third = Event.fromThreadDescriptor(event.toThreadDescriptor());
    expect(other.handle).toBe(event.handle);
    expect(other.context).toBe(context0);
    const destroyed = () =>
      fake.state.log.filter((line) => line === `cuEventDestroy_v2 ${event.handle}`).length;
    fake.state.log.length = 0;
    event.dispose();
    other.dispose();
    other.dispose();
    expect(destroyed()).toBe(0);
    third.record(borrower);
    third.dispose();
    expect(destroyed()).toBe(1);
    expect(() => Event.fromThreadDescriptor(descriptor)).toThrow(/every holder/);
    expect(() => event.toThreadDescriptor()).toThrow(DisposedError);
  });

  it('refuses another process’s, another context’s or a malformed descriptor', () => {
    using event = Event.create({ context: context0 });
    const descriptor = event.toThreadDescriptor();
    expect(() => Event.fromThreadDescriptor({ ...descriptor, pid: process.pid + 1 })).toThrow(
      /InterprocessEvent/,
    );
    expect(() => Event.fromThreadDescriptor({ ...descriptor, context: 1n })).toThrow(
      /primary context/,
    );
    for (const broken of [
      { ...descriptor, handle: 0n },
      { ...descriptor, kind: 'x' },
      { ...descriptor, holders: new ArrayBuffer(4) },
      { ...descriptor, timing: 'no' },
      null,
    ]) {
      expect(() => Event.fromThreadDescriptor(broken as never)).toThrow(CudaArgumentError);
    }
    const holders = new Int32Array(descriptor.holders);
    expect(holders[0]).toBe(1);
  });
});
