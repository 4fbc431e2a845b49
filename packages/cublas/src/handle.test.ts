import type { Stream } from '@cuda-tasks/cudadrv';
import { describe, expect, it, vi } from 'vitest';

// The driver and cuBLAS replaced by test doubles: which cublasSetStream / cublasSetWorkspace
// calls a rebind makes. The stream-ordered pool double hands a block freed on a stream back
// to the next allocation of the same size on that stream, as the real pool does.
const fake = await vi.hoisted(async () => {
  const driver = (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver();
  const calls: string[] = [];
  const freed = new Map<unknown, number[]>();
  let nextAddress = 0x10_0000;
  class DeviceBuffer {
    disposed = false;
    constructor(
      readonly address: number,
      readonly byteLength: number,
      public stream: unknown,
    ) {}
    get lastStream(): unknown {
      return this.stream;
    }
    /** A use on another stream moves the buffer there (the handle cache hands spares over). */
    useOn(stream: unknown): bigint {
      this.stream = stream;
      return BigInt(this.address);
    }
    static allocate(byteLength: number, options: { stream: unknown }): DeviceBuffer {
      const address = freed.get(options.stream)?.pop() ?? (nextAddress += 0x1000_0000);
      return new DeviceBuffer(address, byteLength, options.stream);
    }
    dispose(): void {
      if (this.disposed) return;
      this.disposed = true;
      let list = freed.get(this.stream);
      if (list === undefined) freed.set(this.stream, (list = []));
      list.push(this.address);
    }
  }
  Object.assign(driver.module, { DeviceBuffer, ffiValue: (h: bigint) => Number(h) });
  Object.defineProperty(driver.FakeStream.prototype, 'ffiHandle', {
    get(this: { name: string }) {
      return this.name;
    },
  });
  let nextHandle = 1n;
  const api = {
    cublasCreate_v2(out: bigint[]) {
      out[0] = nextHandle++;
      return 0;
    },
    cublasSetPointerMode_v2: () => 0,
    cublasSetMathMode: () => 0,
    cublasSetStream_v2(_handle: unknown, stream: unknown) {
      calls.push(`setStream ${stream}`);
      return 0;
    },
    cublasSetWorkspace_v2(_handle: unknown, address: number, bytes: number) {
      calls.push(`setWorkspace 0x${address.toString(16)} ${bytes}`);
      return 0;
    },
    cublasDestroy_v2: () => 0,
  };
  return { driver, api, calls, DeviceBuffer };
});

// The error classes and their factory are the real ones: errors.ts builds the library's on them.
vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => {
  const { CudaError, libraryErrors } = await importOriginal<typeof import('@cuda-tasks/cudadrv')>();
  return Object.assign(fake.driver.module, { CudaError, libraryErrors });
});
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.driver.module);
vi.mock('./ffi/cublas.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./ffi/cublas.js')>()),
  cublas: () => fake.api,
}));

import { capture, stream, task, withStream } from '@cuda-tasks/task-runtime';
import { handle, handleCache, setWorkspaceSize, workspaceFor } from './handle.js';

const MiB32 = 32 * 1024 * 1024;
const context = fake.driver.devices[0]!.context;
const calls = () => fake.calls.splice(0);
const nameOf = (s: Stream) => (s as unknown as { name: string }).name;

describe('cuBLAS handle rebinding', () => {
  it('a task that gets its predecessor’s stream and handle makes no cuBLAS call to rebind', async () => {
    let first: Stream | undefined;
    await task(async () => {
      handle();
      first = stream();
    });
    const bound = calls();
    expect(bound).toEqual([`setStream ${nameOf(first!)}`, expect.stringMatching(/^setWorkspace /)]);
    // The handle went idle: its workspace is its spare, given to its next task.
    await task(async () => {
      const h = handle();
      expect(stream()).toBe(first); // the pool hands the same stream back
      expect(workspaceFor(h, stream())?.byteLength).toBe(MiB32);
    });
    // Same stream in cuBLAS, same workspace: nothing to do.
    expect(calls()).toEqual([]);
  });

  it('sets the workspace again when the pool gives it back elsewhere, without a stream switch', async () => {
    let first: Stream | undefined;
    await task(async () => {
      handle();
      first = stream();
    });
    calls();
    // The spares go back to the pool (MemoryPool.releaseCached() does this).
    handleCache().releaseWorkspaces();
    // Someone else takes the freed block on that stream first.
    const squatter = fake.DeviceBuffer.allocate(MiB32, { stream: first });
    await task(async () => {
      handle();
      expect(stream()).toBe(first);
    });
    const made = calls();
    expect(made).toHaveLength(1);
    expect(made[0]).toMatch(/^setWorkspace /);
    expect(made[0]).not.toBe(`setWorkspace 0x${squatter.address.toString(16)} ${MiB32}`);
    squatter.dispose();
  });

  it('a stream switch sets stream and workspace; switching back restores both', async () => {
    const other = new fake.driver.FakeStream(context, 'other') as unknown as Stream;
    await task(async () => {
      handle();
      const own = stream();
      calls();
      withStream(other, () => handle());
      const switched = calls();
      expect(switched[0]).toBe('setStream other');
      expect(switched[1]).toMatch(/^setWorkspace /);
      handle();
      const back = calls();
      expect(back[0]).toBe(`setStream ${nameOf(own)}`);
      expect(back[1]).toMatch(/^setWorkspace /);
      expect(back[1]).not.toBe(switched[1]);
    });
  });

  it('setWorkspaceSize(0) hands the workspace back to cuBLAS through cublasSetStream', async () => {
    await task(async () => {
      handle();
      calls();
      setWorkspaceSize(0);
      handle();
      expect(calls()).toEqual([`setStream ${nameOf(stream())}`]);
      setWorkspaceSize(MiB32);
      handle();
      expect(calls()).toEqual([expect.stringMatching(/^setWorkspace .* 33554432$/)]);
    });
  });

  it('inside a capture: a workspace the graph owns, allocated outside; the stream’s own after', async () => {
    await task(async () => {
      handle(); // bound to the task's stream, with its workspace
      calls();
      type Buffer = InstanceType<typeof fake.DeviceBuffer>;
      let inside: { stream: Stream; workspace: Buffer; owned: unknown[] } | undefined;
      await capture(() => {
        const captureStream = stream();
        const h = handle();
        handle(); // a second call in the same capture sets nothing again
        const session = (captureStream as unknown as { capture: { owned: unknown[] } }).capture;
        inside = {
          stream: captureStream,
          workspace: workspaceFor(h, captureStream) as unknown as Buffer,
          owned: [...session.owned],
        };
      });
      const { stream: captureStream, workspace, owned } = inside!;
      // Allocated on the default stream (outside the capture), owned by the graph.
      expect(workspace.stream).toBe(context.defaultStream);
      expect(workspace.byteLength).toBe(MiB32);
      expect(owned).toEqual([workspace]);
      const made = calls();
      expect(made).toEqual([
        `setStream ${nameOf(captureStream)}`,
        `setWorkspace 0x${workspace.address.toString(16)} ${MiB32}`,
      ]);
      expect(workspace.disposed).toBe(false);
      // After the capture: the next call rebinds the handle with a workspace of its own,
      // never the graph's.
      const h = handle();
      const own = workspaceFor(h, stream());
      expect(own).toBeDefined();
      expect(own).not.toBe(workspace);
      const after = calls();
      expect(after).toEqual([
        `setStream ${nameOf(stream())}`,
        `setWorkspace 0x${(own as unknown as Buffer).address.toString(16)} ${MiB32}`,
      ]);
    });
  });
});
