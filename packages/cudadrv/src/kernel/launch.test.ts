import { streamDouble, thrown } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import type { DType } from '../dtype.js';
import { CudaArgumentError, DisposedError } from '../errors.js';
import { koffi } from '../ffi/library.js';
import { DeviceArray } from '../memory/array.js';
import type { DeviceBuffer } from '../memory/memory.js';
import { Kernel, type KernelArgument, type KernelParameter } from './kernel.js';
import { launch, launchOn } from './launch.js';
import type { Module } from './module.js';

// No GPU here: a Kernel only needs koffi for its argument arena, so a fake module and a
// made-up CUfunction handle are enough to exercise marshalling.
const context = { name: 'fake context' };
const fakeModule = { context, disposed: false } as unknown as Module;
const fakeStream = streamDouble({ context, name: 'fake stream', assertUsable() {} });

function makeKernel(name: string, parameters: KernelParameter[]): Kernel {
  return new Kernel(fakeModule, name, 1n, parameters);
}

/** What cuLaunchKernel would see: the slot addresses in the void* array, and 8 bytes at each. */
function readSlots(
  argumentArray: bigint,
  count: number,
): { addresses: bigint[]; slots: DataView[] } {
  const k = koffi();
  const addresses = Array.from(new BigUint64Array(k.view(argumentArray, count * 8)));
  const slots = addresses.map((address) => new DataView(k.view(address, 8)));
  return { addresses, slots };
}

interface FakeBuffer {
  byteLength: number;
  pointer: bigint;
  disposed: boolean;
  context: object;
  usedOn: unknown[];
  address: number;
  useOn(stream: unknown): bigint;
  ffiAddressOn(stream: unknown): number;
}

function fakeBuffer(pointer: bigint, byteLength = 4096): FakeBuffer {
  const buffer: FakeBuffer = {
    byteLength,
    pointer,
    disposed: false,
    context,
    usedOn: [],
    address: Number(pointer),
    useOn(stream) {
      buffer.usedOn.push(stream);
      return pointer;
    },
    ffiAddressOn(stream) {
      buffer.usedOn.push(stream);
      return Number(pointer);
    },
  };
  return buffer;
}

function fakeArray<D extends DType>(
  dtype: D,
  length: number,
  pointer: bigint,
  offset = 0,
): { array: DeviceArray<D>; buffer: FakeBuffer } {
  const buffer = fakeBuffer(pointer);
  const array = new DeviceArray(
    buffer as unknown as DeviceBuffer,
    dtype,
    [length],
    [1],
    offset,
    false,
  );
  return { array, buffer };
}

describe('Kernel.marshal: scalar slots', () => {
  const parameters: KernelParameter[] = [
    'float32',
    'float64',
    'int32',
    'uint32',
    'int64',
    'int64',
    'int64',
    'uint64',
    'uint64',
    'int8',
    'uint8',
    'int16',
    'uint16',
    'int32',
    'uint8',
  ];
  const kernel = makeKernel('scalars', parameters);
  const args: KernelArgument[] = [
    1.5, // float32
    Math.PI, // float64
    -123456789, // int32
    4294967295, // uint32 max
    -5, // int64 from a negative number
    -(2 ** 40) - 3, // int64, a negative number beyond 32 bits
    -9223372036854775808n, // int64 from a bigint (its minimum)
    2 ** 53 - 1, // uint64 from a large number
    18446744073709551615n, // uint64 max as a bigint
    -128, // int8
    255, // uint8
    -32768, // int16
    65535, // uint16
    true, // boolean -> 1
    false, // boolean -> 0
  ];

  it('writes each argument into its slot, as cuLaunchKernel reads it', () => {
    const address = kernel.marshal(args, fakeStream);
    expect(typeof address).toBe('bigint');
    expect(address).not.toBe(0n);
    const { addresses, slots } = readSlots(address, parameters.length);
    // Slots follow the pointer array, 8 bytes each.
    addresses.forEach((slot, i) => {
      expect(slot).toBe(address + BigInt(parameters.length * 8 + i * 8));
    });
    const little = true;
    expect(slots[0]!.getFloat32(0, little)).toBe(1.5);
    expect(slots[1]!.getFloat64(0, little)).toBe(Math.PI);
    expect(slots[2]!.getInt32(0, little)).toBe(-123456789);
    expect(slots[3]!.getUint32(0, little)).toBe(4294967295);
    expect(slots[4]!.getBigInt64(0, little)).toBe(-5n);
    expect(slots[5]!.getBigInt64(0, little)).toBe(-(2n ** 40n) - 3n);
    expect(slots[6]!.getBigInt64(0, little)).toBe(-9223372036854775808n);
    expect(slots[7]!.getBigUint64(0, little)).toBe(9007199254740991n);
    expect(slots[8]!.getBigUint64(0, little)).toBe(18446744073709551615n);
    expect(slots[9]!.getInt8(0)).toBe(-128);
    expect(slots[10]!.getUint8(0)).toBe(255);
    expect(slots[11]!.getInt16(0, little)).toBe(-32768);
    expect(slots[12]!.getUint16(0, little)).toBe(65535);
    expect(slots[13]!.getInt32(0, little)).toBe(1);
    expect(slots[14]!.getUint8(0)).toBe(0);
  });

  it('rounds a float32 argument to float32 precision', () => {
    const single = makeKernel('single', ['float32']);
    const { slots } = readSlots(single.marshal([0.1], fakeStream), 1);
    expect(slots[0]!.getFloat32(0, true)).toBe(Math.fround(0.1));
  });

  it('int64 and uint64 from numbers match BigInt conversions over random values', () => {
    const wide = makeKernel('wide', ['int64', 'uint64']);
    let seed = 12345;
    const random = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed / 4294967296;
    };
    for (let i = 0; i < 200; i++) {
      const magnitude = Math.floor(random() * 2 ** Math.floor(random() * 53));
      const signed = random() < 0.5 ? -magnitude : magnitude;
      const { slots } = readSlots(wide.marshal([signed, magnitude], fakeStream), 2);
      expect(slots[0]!.getBigInt64(0, true)).toBe(BigInt(signed));
      expect(slots[1]!.getBigUint64(0, true)).toBe(BigInt(magnitude));
    }
  });

  it('reuses one arena: marshalling again returns the same address with the new values', () => {
    const first = kernel.marshal(args, fakeStream);
    const changed = [...args];
    changed[0] = -2.25;
    changed[2] = 7;
    const second = kernel.marshal(changed, fakeStream);
    expect(second).toBe(first);
    const { slots } = readSlots(second, parameters.length);
    expect(slots[0]!.getFloat32(0, true)).toBe(-2.25);
    expect(slots[2]!.getInt32(0, true)).toBe(7);
    expect(slots[1]!.getFloat64(0, true)).toBe(Math.PI);
  });

  it('a kernel without parameters passes a non-null argument array (koffi fast path), reused', () => {
    const none = makeKernel('noParameters', []);
    const first = none.marshal([], fakeStream);
    expect(first).not.toBe(0n);
    expect(none.marshal([], fakeStream)).toBe(first);
    expect(() => none.marshal([1], fakeStream)).toThrow(/takes 0 arguments/);
  });
});

describe('Kernel.marshal: pointer slots', () => {
  it('a DeviceArray argument passes its element address and is used on the stream', () => {
    const kernel = makeKernel('saxpy', ['float32*', 'float32*', 'float32', 'int32']);
    const y = fakeArray('float32', 16, 0x7f0000001000n, 4);
    const x = fakeArray('float32', 16, 0x7f0000002000n);
    const { slots } = readSlots(kernel.marshal([y.array, x.array, 2, 16], fakeStream), 4);
    expect(slots[0]!.getBigUint64(0, true)).toBe(0x7f0000001000n + 16n); // offset 4 * 4 bytes
    expect(slots[1]!.getBigUint64(0, true)).toBe(0x7f0000002000n);
    expect(slots[2]!.getFloat32(0, true)).toBe(2);
    expect(slots[3]!.getInt32(0, true)).toBe(16);
    expect(y.buffer.usedOn).toEqual([fakeStream]);
    expect(x.buffer.usedOn).toEqual([fakeStream]);
  });

  it("'pointer' takes a DeviceArray of any dtype, a DeviceBuffer or a bigint address", () => {
    const kernel = makeKernel('raw', ['pointer', 'pointer', 'pointer']);
    const array = fakeArray('uint8', 8, 0x10000n, 3);
    const buffer = {
      [Symbol.for('@cuda-tasks/DeviceBuffer')]: true,
      disposed: false,
      usedOn: [] as unknown[],
      ffiAddressOn(stream: unknown) {
        buffer.usedOn.push(stream);
        return 0x20000;
      },
    };
    const address = kernel.marshal(
      [array.array, buffer as unknown as DeviceBuffer, 0xdeadbeef00n],
      fakeStream,
    );
    const { slots } = readSlots(address, 3);
    expect(slots[0]!.getBigUint64(0, true)).toBe(0x10003n);
    expect(slots[1]!.getBigUint64(0, true)).toBe(0x20000n);
    expect(slots[2]!.getBigUint64(0, true)).toBe(0xdeadbeef00n);
    expect(buffer.usedOn).toEqual([fakeStream]);
  });
});

describe('Kernel.marshal: argument errors', () => {
  const kernel = makeKernel('mixed', [
    'float32*',
    'float32',
    'int32',
    'uint8',
    'uint64',
    'int64',
    'pointer',
  ]);
  const good = (): KernelArgument[] => [
    fakeArray('float32', 4, 0x1000n).array,
    1,
    1,
    1,
    1,
    1,
    0x2000n,
  ];
  function errorFor(index: number, value: unknown): Error {
    const args = good();
    args[index] = value as KernelArgument;
    try {
      kernel.marshal(args, fakeStream);
    } catch (error) {
      return error as Error;
    }
    throw new Error(`argument ${index} = ${String(value)} was accepted`);
  }

  it('the wrong argument count names the kernel, the counts and the parameter types', () => {
    expect(() => kernel.marshal(good().slice(0, 6), fakeStream)).toThrow(CudaArgumentError);
    expect(() => kernel.marshal(good().slice(0, 6), fakeStream)).toThrow(
      'kernel mixed takes 7 arguments (float32*, float32, int32, uint8, uint64, int64, pointer), got 6',
    );
    expect(() => kernel.marshal([...good(), 1], fakeStream)).toThrow(/takes 7 arguments.*got 8/);
    const single = makeKernel('one', ['int32']);
    expect(() => single.marshal([], fakeStream)).toThrow(
      'kernel one takes 1 argument (int32), got 0',
    );
  });

  it.each([
    [1, '1.5', 'kernel mixed: argument 1 must be a number (float32), got "1.5"'],
    [1, true, 'kernel mixed: argument 1 must be a number (float32), got true'],
    [1, 2n, 'kernel mixed: argument 1 must be a number (float32), got 2n'],
    [2, 1.5, 'kernel mixed: argument 2 must be an integer in the int32 range, got 1.5'],
    [2, 2 ** 31, 'kernel mixed: argument 2 must be an integer in the int32 range, got 2147483648'],
    [2, 1n, 'kernel mixed: argument 2 must be an integer in the int32 range, got 1n'],
    [3, 256, 'kernel mixed: argument 3 must be an integer in the uint8 range, got 256'],
    [3, -1, 'kernel mixed: argument 3 must be an integer in the uint8 range, got -1'],
    [4, -1, 'kernel mixed: argument 4 must be an integer (uint64, number or bigint), got -1'],
    [4, 0.5, 'kernel mixed: argument 4 must be an integer (uint64, number or bigint), got 0.5'],
    [
      5,
      2 ** 53,
      'kernel mixed: argument 5 must be an integer (int64, number or bigint), got 9007199254740992',
    ],
    [
      6,
      12,
      'kernel mixed: argument 6 must be a DeviceArray, DeviceBuffer or bigint device address, got 12',
    ],
    [0, 0x1000n, 'kernel mixed: argument 0 must be a DeviceArray of float32, got 4096n'],
    [0, null, 'kernel mixed: argument 0 must be a DeviceArray of float32, got null'],
  ])('argument %i = %s is rejected', (index, value, message) => {
    const error = errorFor(index, value);
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toBe(message);
  });

  it('a DeviceArray of the wrong dtype for a typed pointer names both dtypes', () => {
    const error = errorFor(0, fakeArray('float64', 4, 0x1000n).array);
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toBe(
      'kernel mixed: argument 0 must be a DeviceArray of float32, got float64',
    );
  });

  it('a DeviceBuffer is not accepted for a typed pointer', () => {
    const buffer = { [Symbol.for('@cuda-tasks/DeviceBuffer')]: true, disposed: false };
    const error = errorFor(0, buffer);
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toMatch(/^kernel mixed: argument 0 must be a DeviceArray of float32/);
  });

  it('a disposed DeviceArray is a DisposedError naming the argument', () => {
    const { array, buffer } = fakeArray('float32', 4, 0x1000n);
    buffer.disposed = true;
    const error = errorFor(0, array);
    expect(error).toBeInstanceOf(DisposedError);
    expect(error.message).toBe(
      'kernel mixed: argument 0 (DeviceArray) has been disposed and cannot be used',
    );
    expect(buffer.usedOn).toEqual([]);
  });

  it('an unknown parameter type is rejected when the kernel is declared', () => {
    expect(() => makeKernel('k', ['float128' as KernelParameter])).toThrow(
      'kernel k: unknown parameter type "float128"',
    );
    expect(() => makeKernel('k', ['int16*' as KernelParameter])).toThrow(CudaArgumentError);
    expect(() => makeKernel('k', ['int16*' as KernelParameter])).toThrow(
      'kernel k: unknown parameter type "int16*"',
    );
  });
});

describe('launch: checks before any native call', () => {
  const kernel = makeKernel('fill', ['float32*', 'int32']);
  const args = (): KernelArgument[] => [fakeArray('float32', 4, 0x1000n).array, 4];

  it('rejects grid and block dimensions below 1', () => {
    expect(() => launch(kernel, { grid: 0, block: 32, stream: fakeStream }, ...args())).toThrow(
      'launch: grid must be positive integers, got 0',
    );
    expect(() =>
      launch(kernel, { grid: [2, 0], block: 32, stream: fakeStream }, ...args()),
    ).toThrow('launch: grid must be positive integers, got [2,0]');
    expect(() =>
      launch(kernel, { grid: 1, block: [32, 1, 0], stream: fakeStream }, ...args()),
    ).toThrow('launch: block must be positive integers, got [32,1,0]');
    expect(() =>
      launch(kernel, { grid: Number.NaN, block: 32, stream: fakeStream }, ...args()),
    ).toThrow(CudaArgumentError);
  });

  it('rejects dimensions and shared memory that do not fit the launch configuration', () => {
    // The CUlaunchConfig holds 32-bit fields: a larger value must be an error, never wrap.
    expect(() =>
      launch(kernel, { grid: [1, 65536], block: 32, stream: fakeStream }, ...args()),
    ).toThrow('launch: grid dimensions must be at most [2^32 - 1, 65535, 65535], got [1,65536,1]');
    expect(() =>
      launch(kernel, { grid: 2 ** 32, block: 32, stream: fakeStream }, ...args()),
    ).toThrow(CudaArgumentError);
    expect(() =>
      launch(kernel, { grid: 1, block: 2 ** 32 + 1, stream: fakeStream }, ...args()),
    ).toThrow('launch: block dimensions must fit in 32 bits, got [4294967297,1,1]');
    expect(() =>
      launch(kernel, { grid: 1, block: 32, sharedMemory: -1, stream: fakeStream }, ...args()),
    ).toThrow('launch: sharedMemory must be a non-negative integer of bytes, got -1');
    expect(() =>
      launch(kernel, { grid: 1, block: 32, sharedMemory: 1.5, stream: fakeStream }, ...args()),
    ).toThrow(CudaArgumentError);
  });

  it('checks the arguments first', () => {
    expect(() => launch(kernel, { grid: 1, block: 32, stream: fakeStream }, 4)).toThrow(
      'kernel fill takes 2 arguments (float32*, int32), got 1',
    );
  });

  it('rejects a stream of another context', () => {
    const otherStream = streamDouble({ context: { name: 'other' }, assertUsable() {} });
    expect(() => launch(kernel, { grid: 1, block: 32, stream: otherStream }, ...args())).toThrow(
      CudaArgumentError,
    );
    expect(() => launch(kernel, { grid: 1, block: 32, stream: otherStream }, ...args())).toThrow(
      /^launch: kernel fill belongs to/,
    );
  });

  it('rejects a kernel whose module was disposed', () => {
    const disposedModule = { context, disposed: true } as unknown as Module;
    const orphan = new Kernel(disposedModule, 'orphan', 1n, ['int32']);
    expect(() => launch(orphan, { grid: 1, block: 1, stream: fakeStream }, 1)).toThrow(
      DisposedError,
    );
    expect(() => launch(orphan, { grid: 1, block: 1, stream: fakeStream }, 1)).toThrow(
      "kernel orphan's module has been disposed and cannot be used",
    );
  });
});

describe('launch: a rejected call leaves no trace (issue 14, bug 4)', () => {
  const kernel = makeKernel('scale', ['float32*', 'const float32*', 'float32', 'int32']);
  function operands() {
    const y = fakeArray('float32', 4, 0x1000n);
    const x = fakeArray('float32', 4, 0x2000n);
    return { y, x, args: [y.array, x.array, 2, 4] as KernelArgument[] };
  }

  it.each([
    ['a grid below 1', { grid: 0, block: 32 }],
    ['a block beyond 32 bits', { grid: 1, block: 2 ** 32 }],
    ['a grid y beyond 65535', { grid: [1, 65536], block: 32 }],
    ['negative shared memory', { grid: 1, block: 32, sharedMemory: -1 }],
  ] as const)('%s: no buffer is declared used', (_what, config) => {
    const { y, x, args } = operands();
    expect(() => launch(kernel, { ...config, stream: fakeStream }, ...args)).toThrow(
      CudaArgumentError,
    );
    expect(y.buffer.usedOn).toEqual([]);
    expect(x.buffer.usedOn).toEqual([]);
  });

  it('a bad argument after pointer arguments: none of them is declared used', () => {
    const { y, x, args } = operands();
    args[3] = 1.5; // not an int32
    expect(() => launch(kernel, { grid: 1, block: 32, stream: fakeStream }, ...args)).toThrow(
      'kernel scale: argument 3 must be an integer in the int32 range, got 1.5',
    );
    expect(y.buffer.usedOn).toEqual([]);
    expect(x.buffer.usedOn).toEqual([]);
  });

  it('a wrong dtype or a disposed array after a good pointer: the good one is not used', () => {
    const { y, x, args } = operands();
    args[1] = fakeArray('float64', 4, 0x3000n).array;
    expect(() => launch(kernel, { grid: 1, block: 32, stream: fakeStream }, ...args)).toThrow(
      'kernel scale: argument 1 must be a DeviceArray of float32, got float64',
    );
    x.buffer.disposed = true;
    args[1] = x.array;
    expect(() => launch(kernel, { grid: 1, block: 32, stream: fakeStream }, ...args)).toThrow(
      DisposedError,
    );
    expect(y.buffer.usedOn).toEqual([]);
  });

  it('a good call declares every pointer used once, after the checks', () => {
    const { y, x, args } = operands();
    // The fake stream has no driver behind it: the call gets as far as the native launch.
    const stream = streamDouble({ ...fakeStream, context, assertUsable() {} });
    const reached = thrown(() => launch(kernel, { grid: 1, block: 32, stream }, ...args));
    expect(reached).not.toBeInstanceOf(CudaArgumentError);
    expect(y.buffer.usedOn).toEqual([stream]);
    expect(x.buffer.usedOn).toEqual([stream]);
  });
});

describe('launchOn (a resolved stream, a computed geometry): the checks of launch', () => {
  const kernel = makeKernel('scale', ['float32*', 'const float32*', 'float32', 'int32']);
  function operands() {
    const y = fakeArray('float32', 4, 0x1000n);
    const x = fakeArray('float32', 4, 0x2000n);
    return { y, x, args: [y.array, x.array, 2, 4] as KernelArgument[] };
  }

  it('refuses bad arguments, a disposed module and another context, leaving no trace', () => {
    const { y, x, args } = operands();
    expect(() => launchOn(kernel, fakeStream, 1, 32, 0, args.slice(0, 3))).toThrow(
      'kernel scale takes 4 arguments (float32*, const float32*, float32, int32), got 3',
    );
    args[3] = 1.5;
    expect(() => launchOn(kernel, fakeStream, 1, 32, 0, args)).toThrow(
      'kernel scale: argument 3 must be an integer in the int32 range, got 1.5',
    );
    args[3] = 4;
    const orphan = new Kernel({ context, disposed: true } as unknown as Module, 'orphan', 1n, [
      'int32',
    ]);
    expect(() => launchOn(orphan, fakeStream, 1, 1, 0, [1])).toThrow(DisposedError);
    const otherStream = streamDouble({ context: { name: 'other' }, assertUsable() {} });
    expect(() => launchOn(kernel, otherStream, 1, 32, 0, args)).toThrow(
      /^launch: kernel scale belongs to/,
    );
    const disposedStream = streamDouble({
      context,
      assertUsable() {
        throw new DisposedError('Stream');
      },
    });
    expect(() => launchOn(kernel, disposedStream, 1, 32, 0, args)).toThrow(DisposedError);
    expect(y.buffer.usedOn).toEqual([]);
    expect(x.buffer.usedOn).toEqual([]);
  });

  it('a good call declares every pointer used on the stream once', () => {
    const { y, x, args } = operands();
    const stream = streamDouble({ ...fakeStream, context, assertUsable() {} });
    const reached = thrown(() => launchOn(kernel, stream, 1, 32, 0, args));
    expect(reached).not.toBeInstanceOf(CudaArgumentError);
    expect(y.buffer.usedOn).toEqual([stream]);
    expect(x.buffer.usedOn).toEqual([stream]);
  });
});

describe('launch marshals as Kernel.marshal does, without an argument array', () => {
  // The fake stream has no driver behind it: each call gets as far as the native launch, with
  // the arguments written into the kernel's arena.
  const stream = streamDouble({ ...fakeStream, context, assertUsable() {} });
  const arenaBytes = (kernel: Kernel) => {
    const count = kernel.parameters.length;
    const { slots } = readSlots(BigInt(kernel.ffiArgumentArray), count);
    return slots.map((slot) => slot.getBigUint64(0, true));
  };

  it('every scalar type and pointers, arguments one by one: the same slots as the list', () => {
    const parameters: KernelParameter[] = [
      'int8',
      'uint16',
      'int32',
      'uint32',
      'int64',
      'uint64',
      'float32',
      'float64',
    ];
    const kernel = makeKernel('scalars', parameters);
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let trial = 0; trial < 50; trial++) {
      const args: KernelArgument[] = [
        Math.floor(random() * 256) - 128,
        Math.floor(random() * 65536),
        Math.floor(random() * 2 ** 32) - 2 ** 31,
        Math.floor(random() * 2 ** 32),
        trial % 2 === 0 ? Math.floor((random() - 0.5) * 2 ** 53) : -(2n ** 62n) + BigInt(trial),
        trial % 2 === 0 ? Math.floor(random() * 2 ** 53) : 2n ** 64n - 1n - BigInt(trial),
        (random() - 0.5) * 1e6,
        (random() - 0.5) * 1e300,
      ];
      kernel.marshal(args, stream);
      const expected = arenaBytes(kernel);
      kernel.marshal(
        args.map(() => 0),
        stream,
      ); // clear the slots
      thrown(() => launch(kernel, { grid: 1, block: 1, stream }, ...args));
      expect(arenaBytes(kernel)).toEqual(expected);
    }
    const { y, x } = { y: fakeArray('float32', 4, 0x1000n), x: fakeArray('float32', 4, 0x2000n) };
    const pointers = makeKernel('pointers', ['float32*', 'const float32*', 'pointer', 'int32']);
    thrown(() => launch(pointers, { grid: 1, block: 1, stream }, y.array, x.array, 0x3000n, 4));
    expect(arenaBytes(pointers)).toEqual([0x1000n, 0x2000n, 0x3000n, 4n]);
    expect(y.buffer.usedOn).toEqual([stream]);
    expect(x.buffer.usedOn).toEqual([stream]);
  });

  it('a kernel of more than eight parameters takes its arguments as a list', () => {
    const wide = makeKernel(
      'wide',
      Array.from({ length: 10 }, () => 'int32' as const),
    );
    const args = Array.from({ length: 10 }, (_, i) => 100 + i);
    const reached = thrown(() => launch(wide, { grid: 1, block: 1, stream }, ...args));
    expect(reached).not.toBeInstanceOf(CudaArgumentError);
    expect(arenaBytes(wide)).toEqual(args.map((value) => BigInt(value)));
    expect(() => launch(wide, { grid: 1, block: 1, stream }, ...args.slice(0, 9))).toThrow(
      /^kernel wide takes 10 arguments \(int32, .*\), got 9$/,
    );
    expect(() => launch(wide, { grid: 1, block: 1, stream }, ...args.slice(0, 3))).toThrow(
      /takes 10 arguments .*got 3$/,
    );
  });

  it('more than eight arguments to a kernel of fewer parameters: the count error', () => {
    const small = makeKernel('small', ['int32', 'int32']);
    expect(() =>
      launch(small, { grid: 1, block: 1, stream }, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
    ).toThrow('kernel small takes 2 arguments (int32, int32), got 10');
    expect(() => launch(small, { grid: 1, block: 1, stream }, 1, 2, 3)).toThrow(
      'kernel small takes 2 arguments (int32, int32), got 3',
    );
    expect(() => launch(small, { grid: 1, block: 1, stream })).toThrow(
      'kernel small takes 2 arguments (int32, int32), got 0',
    );
  });
});
