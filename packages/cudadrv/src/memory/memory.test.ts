import { streamDouble, thrown } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { CudaArgumentError, DisposedError } from '../errors.js';
import type { DeviceBuffer } from './memory.js';
import {
  copyDeviceToDevice,
  copyDeviceToPinned,
  copyHostToDevice,
  memset,
  memsetWords,
  PinnedHostBuffer,
} from './transfer.js';

// With an explicit stream, range checks run before any native call (there is no libcuda
// here: reaching the driver would throw CudaUnavailableError instead).

const stream = streamDouble({ context: {}, name: 'fake', assertUsable() {} });
const used: unknown[] = [];
function buffer(byteLength: number): DeviceBuffer {
  return {
    byteLength,
    context: {},
    useOn(s: unknown) {
      used.push(s);
      return 0x1000n;
    },
  } as unknown as DeviceBuffer;
}

describe('memory operations: range checks', () => {
  it('copyHostToDevice rejects a region that does not fit', () => {
    const error = thrown(() =>
      copyHostToDevice({ buffer: buffer(16), byteOffset: 8 }, new Uint8Array(12), { stream }),
    );
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toBe(
      'copyHostToDevice: 12 bytes at offset 8 do not fit in a buffer of 16 bytes',
    );
    expect(
      thrown(() =>
        copyHostToDevice({ buffer: buffer(16), byteOffset: -4 }, new Uint8Array(4), { stream }),
      ),
    ).toBeInstanceOf(CudaArgumentError);
  });

  it('copyHostToDevice rejects a byteLength beyond the source', () => {
    expect(
      thrown(() =>
        copyHostToDevice({ buffer: buffer(64) }, new Float32Array(2), { stream, byteLength: 12 }),
      ).message,
    ).toBe('copyHostToDevice: source has 8 bytes, 12 asked');
  });

  it('copyDeviceToDevice checks both regions', () => {
    expect(
      thrown(() =>
        copyDeviceToDevice({ buffer: buffer(8) }, { buffer: buffer(64) }, 16, { stream }),
      ).message,
    ).toBe(
      'copyDeviceToDevice (destination): 16 bytes at offset 0 do not fit in a buffer of 8 bytes',
    );
    expect(
      thrown(() =>
        copyDeviceToDevice({ buffer: buffer(64) }, { buffer: buffer(64), byteOffset: 60 }, 16, {
          stream,
        }),
      ).message,
    ).toBe('copyDeviceToDevice (source): 16 bytes at offset 60 do not fit in a buffer of 64 bytes');
  });

  it('copyDeviceToPinned checks the destination size and that it is usable', () => {
    const empty = PinnedHostBuffer.allocate(0);
    expect(empty.byteLength).toBe(0);
    expect(
      thrown(() => copyDeviceToPinned(empty, { buffer: buffer(8) }, 8, { stream })).message,
    ).toBe('copyDeviceToPinned: destination has 0 bytes, 8 asked');
    const disposed = { disposed: true, byteLength: 64 } as unknown as PinnedHostBuffer;
    expect(
      thrown(() => copyDeviceToPinned(disposed, { buffer: buffer(8) }, 8, { stream })),
    ).toBeInstanceOf(DisposedError);
  });

  it('memset checks the value and the range; memsetWords the alignment', () => {
    expect(thrown(() => memset({ buffer: buffer(8) }, -1, 8, { stream })).message).toBe(
      'memset: value must be a byte (0..255), got -1',
    );
    expect(thrown(() => memset({ buffer: buffer(8) }, 1, 9, { stream })).message).toBe(
      'memset: 9 bytes at offset 0 do not fit in a buffer of 8 bytes',
    );
    expect(
      thrown(() => memsetWords({ buffer: buffer(64), byteOffset: 2 }, 0, 4, 4, { stream })).message,
    ).toBe('memsetWords: offset 2 is not 4-byte aligned');
    expect(thrown(() => memsetWords({ buffer: buffer(64) }, 0, 17, 4, { stream })).message).toBe(
      'memsetWords: 68 bytes at offset 0 do not fit in a buffer of 64 bytes',
    );
  });

  it('zero-byte operations return without a native call', () => {
    used.length = 0;
    expect(copyHostToDevice({ buffer: buffer(0) }, new Uint8Array(0), { stream })).toBeUndefined();
    expect(
      copyDeviceToDevice({ buffer: buffer(8) }, { buffer: buffer(8) }, 0, { stream }),
    ).toBeUndefined();
    expect(memset({ buffer: buffer(8) }, 0, 0, { stream })).toBeUndefined();
    expect(memsetWords({ buffer: buffer(8) }, 0, 0, 2, { stream })).toBeUndefined();
    expect(used).toEqual([]);
  });

  it('byteLength validation in allocate', () => {
    expect(thrown(() => PinnedHostBuffer.allocate(-1)).message).toBe(
      'byteLength must be a non-negative integer, got -1',
    );
  });
});
