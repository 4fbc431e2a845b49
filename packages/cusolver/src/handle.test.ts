import type { Stream } from '@cuda-tasks/cudadrv';
import { describe, expect, it, vi } from 'vitest';

// The driver and cuSOLVER replaced by test doubles: which cusolverDnSetStream calls the
// handle cache's lazy binding makes.
const fake = await vi.hoisted(async () => {
  const driver = (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver();
  const calls: string[] = [];
  let nextHandle = 1n;
  const api = {
    cusolverDnCreate(out: bigint[]) {
      out[0] = nextHandle++;
      return 0;
    },
    cusolverDnDestroy: () => 0,
    cusolverDnSetStream(handle: bigint, stream: unknown) {
      calls.push(`setStream ${handle} ${stream}`);
      return 0;
    },
  };
  Object.defineProperty(driver.FakeStream.prototype, 'handle', {
    get(this: { name: string }) {
      return this.name;
    },
  });
  return { driver, api, calls };
});

// The error classes and their factory are the real ones: errors.ts builds the library's on them.
vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => {
  const { CudaError, libraryErrors } = await importOriginal<typeof import('@cuda-tasks/cudadrv')>();
  return Object.assign(fake.driver.module, { CudaError, libraryErrors });
});
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.driver.module);
vi.mock('./ffi/cusolver.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./ffi/cusolver.js')>()),
  cusolver: () => fake.api,
}));

import { stream, task, withStream } from '@cuda-tasks/task-runtime';
import { handle } from './handle.js';

const context = fake.driver.devices[0]!.context;
const calls = () => fake.calls.splice(0);
const nameOf = (s: Stream) => (s as unknown as { name: string }).name;

describe('cusolverDn handle binding', () => {
  it('a task that gets back the handle and the pooled stream cuSOLVER still has makes no call', async () => {
    let first: Stream | undefined;
    let firstHandle = 0n;
    await task(async () => {
      firstHandle = handle();
      first = stream();
    });
    expect(calls()).toEqual([`setStream ${firstHandle} ${nameOf(first!)}`]);
    await task(async () => {
      expect(handle()).toBe(firstHandle);
      expect(stream()).toBe(first);
    });
    expect(calls()).toEqual([]);
  });

  it('a stream switch rebinds, and switching back rebinds again', async () => {
    const other = new fake.driver.FakeStream(context, 'other') as unknown as Stream;
    await task(async () => {
      const h = handle();
      const own = stream();
      calls();
      withStream(other, () => handle());
      expect(calls()).toEqual([`setStream ${h} other`]);
      handle();
      expect(calls()).toEqual([`setStream ${h} ${nameOf(own)}`]);
      handle();
      expect(calls()).toEqual([]);
    });
  });
});
