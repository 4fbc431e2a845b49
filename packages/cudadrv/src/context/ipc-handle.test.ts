import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DTYPES, type DType } from '../dtype.js';
import {
  MAX_HANDLE_TEXT,
  parseSharedEventHandle,
  parseSharedMemoryHandle,
  type SharedEventHandle,
  SharedMemoryError,
  type SharedMemoryHandle,
} from './ipc-handle.js';

// The handle formats are untrusted input (a message, a file): every field is checked, sizes
// are bounded and consistent, and anything else is a SharedMemoryError before any native call.

const device = {
  ordinal: 0,
  uuid: 'GPU-0123abcd-4567-89ab-cdef-0123456789ab',
  pciBusId: '0000:3B:00.0',
};
const memory: SharedMemoryHandle = {
  format: 'cuda-tasks/ipc-memory',
  version: 1,
  ipcHandle: 'ab'.repeat(64),
  allocationBytes: 4096,
  byteOffset: 512,
  byteLength: 8 * 16 * 4,
  dtype: 'float32',
  shape: [8, 16],
  pid: 1234,
  exportId: '0f'.repeat(16),
  device,
};
const event: SharedEventHandle = {
  format: 'cuda-tasks/ipc-event',
  version: 1,
  ipcHandle: '01'.repeat(64),
  pid: 99,
  device,
};

function refused(
  input: unknown,
  parse: (input: unknown) => unknown = parseSharedMemoryHandle,
): SharedMemoryError {
  let caught: unknown;
  try {
    parse(input);
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(SharedMemoryError);
  expect(SharedMemoryError.isInstance(caught)).toBe(true);
  expect(caught).toBeInstanceOf(TypeError); // a CudaArgumentError
  return caught as SharedMemoryError;
}

describe('shared memory handles', () => {
  it('round-trips through JSON text and as an object, frozen', () => {
    const parsed = parseSharedMemoryHandle(JSON.stringify(memory));
    expect(parsed).toEqual(memory);
    expect(parseSharedMemoryHandle(memory)).toEqual(memory);
    expect(Object.isFrozen(parsed)).toBe(true);
    expect(Object.isFrozen(parsed.shape)).toBe(true);
    expect(Object.isFrozen(parsed.device)).toBe(true);
    expect(parseSharedEventHandle(JSON.stringify(event))).toEqual(event);
  });

  const bad: [string, Record<string, unknown>][] = [
    ['format', { format: 'cuda-tasks/ipc-event' }],
    ['ipcHandle short', { ipcHandle: 'ab'.repeat(63) }],
    ['ipcHandle upper case', { ipcHandle: 'AB'.repeat(64) }],
    ['ipcHandle not hex', { ipcHandle: 'zz'.repeat(64) }],
    ['ipcHandle a number', { ipcHandle: 5 }],
    ['allocationBytes 0', { allocationBytes: 0 }],
    ['allocationBytes fractional', { allocationBytes: 4096.5 }],
    ['allocationBytes huge', { allocationBytes: 2 ** 60 }],
    ['allocationBytes a string', { allocationBytes: '4096' }],
    ['byteOffset negative', { byteOffset: -4 }],
    ['byteOffset unaligned', { byteOffset: 2 }],
    ['byteOffset past the allocation', { byteOffset: 4096 - 256 }],
    ['byteLength not the shape', { byteLength: 8 * 16 * 4 + 4 }],
    ['byteLength NaN', { byteLength: Number.NaN }],
    ['dtype unknown', { dtype: 'float128' }],
    ['dtype a prototype key', { dtype: 'toString' }],
    ['shape empty', { shape: [] }],
    ['shape too many dimensions', { shape: [1, 1, 1, 1, 1, 1, 1, 1, 1], byteLength: 4 }],
    ['shape negative', { shape: [-8, -16] }],
    ['shape fractional', { shape: [8.5, 16] }],
    ['shape not an array', { shape: '8x16' }],
    ['pid 0', { pid: 0 }],
    ['pid too large', { pid: 2 ** 23 }],
    ['pid a string', { pid: '1234' }],
    ['exportId short', { exportId: '0f' }],
    ['device missing uuid', { device: { ordinal: 0, pciBusId: '0000:3B:00.0' } }],
    ['device bad uuid', { device: { ...device, uuid: 'GPU-nope' } }],
    ['device ordinal negative', { device: { ...device, ordinal: -1 } }],
    ['device bad bus id', { device: { ...device, pciBusId: '../../etc' } }],
    ['device extra field', { device: { ...device, extra: 1 } }],
    ['device null', { device: null }],
    ['extra field', { extra: true }],
  ];
  for (const [name, change] of bad) {
    it(`refuses ${name} as malformed`, () => {
      expect(refused({ ...memory, ...change }).reason).toBe('malformed');
    });
  }

  it('refuses missing fields, one at a time', () => {
    for (const key of Object.keys(memory)) {
      const copy: Record<string, unknown> = { ...memory };
      delete copy[key];
      expect(refused(copy).message).toContain(key);
    }
  });

  it('refuses another version with its own reason', () => {
    expect(refused({ ...memory, version: 2 }).reason).toBe('version');
    expect(refused({ ...event, version: 0 }, parseSharedEventHandle).reason).toBe('version');
  });

  it('refuses what is not a plain object of data: arrays, null, getters, class instances, long or broken text', () => {
    for (const input of [null, undefined, 42, [memory], 'not json', '{"format":', 7n]) {
      expect(refused(input).reason).toBe('malformed');
    }
    let read = false;
    const withGetter = { ...memory };
    Object.defineProperty(withGetter, 'pid', {
      enumerable: true,
      get() {
        read = true;
        return 1234;
      },
    });
    expect(refused(withGetter).message).toContain('pid');
    expect(read).toBe(false); // no code of the sender's ran
    class Fake {
      constructor() {
        Object.assign(this, memory);
      }
    }
    refused(new Fake());
    const long = JSON.stringify({ ...memory, padding: 'x'.repeat(MAX_HANDLE_TEXT) });
    expect(refused(long).message).toContain(`at most ${MAX_HANDLE_TEXT}`);
    // A prototype pollution attempt is an unknown field, not a change of Object.prototype.
    refused(`{"__proto__":{"polluted":1},${JSON.stringify(memory).slice(1)}`);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('keeps messages short whatever the input', () => {
    const error = refused({ ...memory, dtype: 'y'.repeat(100_000) });
    expect(error.message.length).toBeLessThan(400);
  });

  it('event handles: every field checked', () => {
    for (const change of [
      { format: 'cuda-tasks/ipc-memory' },
      { ipcHandle: '0' },
      { pid: -1 },
      { device: { ...device, uuid: 5 } },
      { shape: [1] },
    ]) {
      expect(refused({ ...event, ...change }, parseSharedEventHandle).reason).toBe('malformed');
    }
  });
});

/** A random valid handle: a view inside its allocation, consistent sizes. */
const validHandle = fc
  .record({
    dtype: fc.constantFrom(...(Object.keys(DTYPES) as DType[])),
    shape: fc.array(fc.integer({ min: 0, max: 64 }), { minLength: 1, maxLength: 8 }),
    offsetElements: fc.integer({ min: 0, max: 1000 }),
    slack: fc.integer({ min: 0, max: 1 << 20 }),
    handleBytes: fc.uint8Array({ minLength: 64, maxLength: 64 }),
    idBytes: fc.uint8Array({ minLength: 16, maxLength: 16 }),
    pid: fc.integer({ min: 1, max: 4_194_304 }),
    ordinal: fc.integer({ min: 0, max: 1023 }),
  })
  .map(({ dtype, shape, offsetElements, slack, handleBytes, idBytes, pid, ordinal }) => {
    const elementBytes = DTYPES[dtype].bytes;
    const byteLength = shape.reduce((a, b) => a * b, 1) * elementBytes;
    const byteOffset = offsetElements * elementBytes;
    return {
      format: 'cuda-tasks/ipc-memory',
      version: 1,
      ipcHandle: Buffer.from(handleBytes).toString('hex'),
      allocationBytes: Math.max(1, byteOffset + byteLength + slack),
      byteOffset,
      byteLength,
      dtype,
      shape,
      pid,
      exportId: Buffer.from(idBytes).toString('hex'),
      device: { ...device, ordinal },
    } as SharedMemoryHandle;
  });

describe('shared memory handles (properties)', () => {
  it('every valid handle round-trips through JSON unchanged', () => {
    fc.assert(
      fc.property(validHandle, (handle) => {
        expect(parseSharedMemoryHandle(JSON.stringify(handle))).toEqual(handle);
      }),
      { numRuns: 500 },
    );
  });

  it('a random corruption of the text is refused with a SharedMemoryError or parses to a handle that passes the checks again', () => {
    fc.assert(
      fc.property(
        validHandle,
        fc.nat(),
        fc.integer({ min: 0x20, max: 0x7e }),
        (handle, at, code) => {
          const text = JSON.stringify(handle);
          const index = at % text.length;
          const corrupted =
            text.slice(0, index) + String.fromCharCode(code) + text.slice(index + 1);
          let parsed: SharedMemoryHandle | undefined;
          try {
            parsed = parseSharedMemoryHandle(corrupted);
          } catch (error) {
            expect(error).toBeInstanceOf(SharedMemoryError);
            return;
          }
          // Still a handle: its sizes still agree (a changed hex digit or pid is still valid).
          const elements = parsed.shape.reduce((a, b) => a * b, 1);
          expect(parsed.byteLength).toBe(elements * DTYPES[parsed.dtype].bytes);
          expect(parsed.byteOffset + parsed.byteLength).toBeLessThanOrEqual(parsed.allocationBytes);
          expect(parseSharedMemoryHandle(parsed)).toEqual(parsed);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('a field replaced by a random JSON value is refused unless it is a valid value of that field', () => {
    fc.assert(
      fc.property(
        validHandle,
        fc.constantFrom(...(Object.keys(memory) as (keyof SharedMemoryHandle)[])),
        fc.jsonValue(),
        (handle, key, value) => {
          const changed = { ...handle, [key]: value };
          try {
            const parsed = parseSharedMemoryHandle(JSON.parse(JSON.stringify(changed)));
            expect(parsed[key]).toEqual(JSON.parse(JSON.stringify(value)));
          } catch (error) {
            expect(error).toBeInstanceOf(SharedMemoryError);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});
