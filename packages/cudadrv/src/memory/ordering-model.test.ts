import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';

// Random sequences of memory operations run through the real buffers, arrays, block cache,
// streams, launches and thread hand-offs against a driver double that reports its calls to an
// independent happens-before model (`OrderingModel`): every stream has a vector clock, an
// event record saves the stream's clock, a stream wait merges it in, and a synchronize (or a
// query that answers idle, or a context synchronize) folds the clock into the host's, which
// every later node inherits. Allocations, frees, reuses of cached blocks and the work issued
// after each declared use are nodes on a stream; each node must be ordered after every earlier
// conflicting node on overlapping memory.
//
// Not generated, because the ordering is missing today:
// - Graph outputs (graphs are left out of this test): a relaunch or the graph's free of an
//   output buffer is not ordered after a read of it on another stream.
// - A lender disposing a lent array while a loan on it is open: the final free is not ordered
//   after the borrower's `done` event once the loan's stream was synchronized or disposed.
// - A read-only borrowed array borrowed onto or read on the context's default stream: the
//   default stream stands in as a reader of read-only memory, so such a read is not ordered
//   after the lender's writes.
const fake = vi.hoisted(() => {
  /** What the double reports to (the model of the run in progress), or null between runs. */
  interface Sink {
    allocate(address: number, bytes: number, stream: number): void;
    free(address: number, stream: number): void;
    record(event: number, stream: number): void;
    wait(stream: number, event: number): void;
    destroyEvent(event: number): void;
    synchronize(stream: number): void;
    synchronizeAll(): void;
  }
  const state = {
    sink: null as Sink | null,
    nextHandle: 1000,
    nextAddress: 0x1000_0000,
    lastAllocation: 0,
    launches: 0,
    /** What cuStreamQuery answers: idle (CUDA_SUCCESS) or busy (CUDA_ERROR_NOT_READY). */
    queryIdle: true,
    /** Stream waits seen since the run began; the one of index `dropWait` is not reported. */
    waits: 0,
    dropWait: -1,
  };
  const h = (value: unknown) => Number(value);
  const handlers: Record<string, (...args: any[]) => number> = {
    cuStreamCreateWithPriority(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextHandle++);
      return 0;
    },
    cuEventCreate(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextHandle++);
      return 0;
    },
    cuMemAllocAsync(_out: unknown, bytes: number, stream: unknown) {
      const address = state.nextAddress;
      state.nextAddress += Math.ceil(bytes / 0x1000) * 0x1000 + 0x1000;
      state.lastAllocation = address;
      state.sink?.allocate(address, bytes, h(stream));
      return 0;
    },
    cuMemFreeAsync(address: unknown, stream: unknown) {
      state.sink?.free(h(address), h(stream));
      return 0;
    },
    cuEventRecord(event: unknown, stream: unknown) {
      state.sink?.record(h(event), h(stream));
      return 0;
    },
    cuStreamWaitEvent(stream: unknown, event: unknown) {
      if (state.waits++ !== state.dropWait) state.sink?.wait(h(stream), h(event));
      return 0;
    },
    cuEventDestroy_v2(event: unknown) {
      state.sink?.destroyEvent(h(event));
      return 0;
    },
    cuStreamSynchronize(stream: unknown) {
      state.sink?.synchronize(h(stream));
      return 0;
    },
    cuStreamQuery(stream: unknown) {
      if (!state.queryIdle) return 600;
      state.sink?.synchronize(h(stream));
      return 0;
    },
    cuCtxSynchronize() {
      state.sink?.synchronizeAll();
      return 0;
    },
    cuLaunchKernelEx() {
      state.launches++;
      return 0;
    },
  };
  // Every other entry point (context current, stream destroy, pool trim) succeeds silently.
  const api = new Proxy(handlers, { get: (target, name: string) => target[name] ?? (() => 0) });
  return { state, api };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  // The scratch arena's address stands for the out-pointer: the double reports its last
  // allocation there.
  const arena = { address: 1, readAddress: () => fake.state.lastAllocation };
  return {
    ...original,
    driver: () => fake.api,
    check: (result: number, call: string) => {
      if (result !== 0) throw new Error(`${call} returned ${result}`);
    },
    scratch: () => arena,
  };
});

import { Context, Device } from '../context/device.js';
import { CudaArgumentError } from '../errors.js';
import { Kernel } from '../kernel/kernel.js';
import { launch } from '../kernel/launch.js';
import type { Module } from '../kernel/module.js';
import { Stream } from '../stream/stream.js';
import { DeviceArray } from './array.js';
import { releaseStreamCache } from './block-cache.js';
import { MemoryPool } from './memory-pool.js';
import {
  type ArrayLoan,
  borrowArray,
  lendArray,
  receiveArray,
  type TransferredArrayDescriptor,
  transferArray,
} from './thread-share.js';

/** What a node does to its memory. */
type Access = 'read' | 'write' | 'allocate' | 'reuse' | 'free';

/** A use of memory [start, end) by work on a stream, with the stream's clock at that point. */
interface AccessNode {
  component: number;
  tick: number;
  clock: number[];
  start: number;
  end: number;
  access: Access;
  what: string;
}

const hex = (n: number) => n.toString(16);

/** Raises each component of `into` to `from`'s. */
function merge(into: number[], from: readonly number[]): void {
  for (let i = 0; i < from.length; i++) if ((into[i] ?? 0) < from[i]!) into[i] = from[i]!;
  for (let i = 0; i < into.length; i++) into[i] ??= 0;
}

/**
 * The happens-before model: vector clocks per stream and for the host, events holding the
 * clock of their last record, and every node's accesses, each checked when it is issued
 * against all earlier ones. It knows nothing of the buffers' records: only driver calls and
 * the work the test issues.
 */
class OrderingModel {
  readonly violations: string[] = [];
  /** Blocks the pool handed out, by address: their size and whether they were freed. */
  readonly blocks = new Map<number, { size: number; freed: boolean }>();
  allocations = 0;
  readonly #components = new Map<number, number>();
  readonly #clocks: number[][] = [];
  readonly #names = new Map<number, string>();
  readonly #host: number[] = [];
  readonly #events = new Map<number, number[]>();
  readonly #destroyed = new Set<number>();
  readonly #nodes: AccessNode[] = [];

  /** Names a stream (by handle) in the violations. */
  name(stream: number, name: string): void {
    this.#names.set(stream, name);
  }

  #streamName(stream: number): string {
    return this.#names.get(stream) ?? `stream ${stream}`;
  }

  #component(stream: number): number {
    let component = this.#components.get(stream);
    if (component === undefined) {
      component = this.#clocks.length;
      this.#components.set(stream, component);
      this.#clocks.push([]);
    }
    return component;
  }

  /** The stream's clock, after the host's knowledge (what is known complete) is merged in. */
  #clock(stream: number): number[] {
    const clock = this.#clocks[this.#component(stream)]!;
    merge(clock, this.#host);
    return clock;
  }

  /** Work issued on `stream` now that accesses [start, end). */
  access(stream: number, start: number, end: number, access: Access, what: string): void {
    const component = this.#component(stream);
    const clock = this.#clock(stream);
    clock[component] = (clock[component] ?? 0) + 1;
    const node: AccessNode = {
      component,
      tick: clock[component]!,
      clock: [...clock],
      start,
      end,
      access,
      what: `${what} on ${this.#streamName(stream)}`,
    };
    for (const earlier of this.#nodes) {
      if (earlier.end <= start || end <= earlier.start) continue;
      if (earlier.access === 'read' && access === 'read') continue;
      if (earlier.access === 'free') {
        this.violations.push(`${node.what} touches memory already freed by ${earlier.what}`);
      } else if ((node.clock[earlier.component] ?? 0) < earlier.tick) {
        this.violations.push(`${node.what} is not ordered after ${earlier.what}`);
      }
    }
    this.#nodes.push(node);
  }

  allocate(address: number, bytes: number, stream: number): void {
    this.allocations++;
    this.blocks.set(address, { size: bytes, freed: false });
    this.access(stream, address, address + bytes, 'allocate', `allocation 0x${hex(address)}`);
  }

  free(address: number, stream: number): void {
    const block = this.blocks.get(address);
    if (block === undefined) {
      this.violations.push(`cuMemFreeAsync of 0x${hex(address)}, not an allocated block`);
      return;
    }
    this.access(stream, address, address + block.size, 'free', `free of 0x${hex(address)}`);
    block.freed = true;
  }

  /** A cached block handed out again without a driver call: a new owner writes it. */
  reuse(address: number, stream: number): void {
    const block = this.blocks.get(address);
    if (block === undefined) {
      this.violations.push(`an allocation reused 0x${hex(address)}, not an allocated block`);
      return;
    }
    this.access(stream, address, address + block.size, 'reuse', `reuse of 0x${hex(address)}`);
  }

  record(event: number, stream: number): void {
    if (this.#destroyed.has(event)) this.violations.push(`record of destroyed event ${event}`);
    this.#events.set(event, [...this.#clock(stream)]);
  }

  wait(stream: number, event: number): void {
    if (this.#destroyed.has(event)) this.violations.push(`wait for destroyed event ${event}`);
    // An event never recorded (in this run) orders nothing.
    const saved = this.#events.get(event);
    if (saved !== undefined) merge(this.#clock(stream), saved);
  }

  destroyEvent(event: number): void {
    this.#destroyed.add(event);
  }

  synchronize(stream: number): void {
    merge(this.#host, this.#clock(stream));
  }

  synchronizeAll(): void {
    for (const clock of this.#clocks) merge(this.#host, clock);
  }

  /** Blocks never freed: each allocation must be freed once by the end of the run. */
  leaks(): string[] {
    return [...this.blocks]
      .filter(([, block]) => !block.freed)
      .map(([address]) => `0x${hex(address)} was never freed`);
  }
}

const context = new Context({ ordinal: 0 } as unknown as Device, 77n);
const pool = Object.create(MemoryPool.prototype) as MemoryPool;
Object.assign(pool, { context, handle: 5n });
Object.defineProperty(context, 'memoryPool', { value: pool });
vi.spyOn(Device, 'get').mockImplementation(
  () => ({ primaryContext: () => context }) as unknown as Device,
);
const module = { context, disposed: false } as unknown as Module;
const writeRead = new Kernel(module, 'y_of_x', 1n, ['float32*', 'const float32*']);
const writes = new Kernel(module, 'fill', 2n, ['float32*']);
const reads = new Kernel(module, 'sum', 3n, ['const float32*']);

/**
 * Array lengths (float32): three share the smallest cached size class, one has a cached class
 * of its own, one is above the cache's limit.
 */
const LENGTHS = [16, 100, 128, 1000, 20_000];
/** Stream slots: the default stream, three owned streams, one wrapped stream. */
const SLOTS = 5;

type Operation =
  | { kind: 'allocate'; length: number; stream: number }
  | {
      kind: 'use';
      target: number;
      stream: number;
      write: boolean;
      via: 'array' | 'buffer' | 'slice';
      at: number;
      borrowed: boolean;
    }
  | {
      kind: 'launch';
      target: number;
      source: number;
      stream: number;
      args: 'both' | 'write' | 'read';
    }
  | { kind: 'dispose'; target: number }
  | { kind: 'reallocate'; target: number }
  | { kind: 'synchronize'; stream: number }
  | { kind: 'query'; stream: number; idle: boolean }
  | { kind: 'synchronizeContext' }
  | { kind: 'disposeStream'; stream: number }
  | { kind: 'releaseCached'; stream: number; all: boolean }
  | { kind: 'lend'; target: number; stream: number; readOnly: boolean; view: boolean }
  | { kind: 'borrow'; loan: number; stream: number }
  | { kind: 'giveBack'; loan: number }
  | { kind: 'endLoan'; loan: number }
  | { kind: 'transfer'; target: number; stream: number }
  | { kind: 'receive'; transfer: number; stream: number };

const slot = fc.nat({ max: SLOTS - 1 });
const index = fc.nat({ max: 63 });

/** A use of a held array, or (`borrowed`) of a borrowed one where the run holds any. */
const use = (borrowed: boolean) =>
  fc.record({
    kind: fc.constant('use' as const),
    target: index,
    stream: slot,
    write: fc.boolean(),
    via: fc.constantFrom('array' as const, 'buffer' as const, 'slice' as const),
    at: index,
    borrowed: fc.constant(borrowed),
  });

function operations(threads: boolean): fc.Arbitrary<Operation[]> {
  const op = <T extends Operation>(weight: number, arbitrary: fc.Arbitrary<T>) => ({
    weight,
    arbitrary: arbitrary as fc.Arbitrary<Operation>,
  });
  const memory = [
    op(
      4,
      fc.record({
        kind: fc.constant('allocate'),
        length: fc.constantFrom(...LENGTHS),
        stream: slot,
      }),
    ),
    op(10, use(false)),
    op(
      3,
      fc.record({
        kind: fc.constant('launch'),
        target: index,
        source: index,
        stream: slot,
        args: fc.constantFrom('both', 'write', 'read'),
      }),
    ),
    op(3, fc.record({ kind: fc.constant('dispose'), target: index })),
    op(2, fc.record({ kind: fc.constant('reallocate'), target: index })),
    op(1, fc.record({ kind: fc.constant('synchronize'), stream: slot })),
    op(1, fc.record({ kind: fc.constant('query'), stream: slot, idle: fc.boolean() })),
    op(1, fc.record({ kind: fc.constant('synchronizeContext') })),
    op(1, fc.record({ kind: fc.constant('disposeStream'), stream: slot })),
    op(1, fc.record({ kind: fc.constant('releaseCached'), stream: slot, all: fc.boolean() })),
  ];
  const handOffs = [
    op(
      4,
      fc.record({
        kind: fc.constant('lend'),
        target: index,
        stream: slot,
        readOnly: fc.boolean(),
        view: fc.boolean(),
      }),
    ),
    op(5, fc.record({ kind: fc.constant('borrow'), loan: index, stream: slot })),
    op(5, use(true)),
    op(2, fc.record({ kind: fc.constant('giveBack'), loan: index })),
    op(2, fc.record({ kind: fc.constant('endLoan'), loan: index })),
    op(2, fc.record({ kind: fc.constant('transfer'), target: index, stream: slot })),
    op(2, fc.record({ kind: fc.constant('receive'), transfer: index, stream: slot })),
  ];
  return fc.array(fc.oneof(...memory, ...(threads ? handOffs : [])), {
    minLength: 5,
    maxLength: 80,
    size: 'max',
  });
}

/** An array the run holds: its own, one borrowed through a loan, or one received. */
interface Held {
  array: DeviceArray<'float32'>;
  /** The block's address (the lent block's, for a borrowed array). */
  base: number;
  kind: 'own' | 'borrowed' | 'received';
  /** A borrowed array of a read-only loan. */
  readOnly: boolean;
  alive: boolean;
}

interface Loan {
  loan: ArrayLoan;
  lender: Held;
  readOnly: boolean;
  borrowed: Held | null;
  ended: boolean;
}

/**
 * Runs `ops` (indices taken modulo what exists; operations that do not apply are skipped),
 * then disposes everything, and returns the model's violations and leaks.
 */
function runSequence(ops: readonly Operation[], dropWait = -1): string[] {
  // Blocks a previous run left cached go back before the model starts listening.
  fake.state.sink = null;
  pool.releaseCached();
  const model = new OrderingModel();
  fake.state.sink = model;
  fake.state.waits = 0;
  fake.state.dropWait = dropWait;
  const streams: Stream[] = [];
  const fresh = (i: number): Stream => {
    const stream =
      i === 0
        ? context.defaultStream
        : i === SLOTS - 1
          ? Stream.wrap(BigInt(fake.state.nextHandle++), context, `wrapped${i}`)
          : Stream.create({ context, name: `owned${i}` });
    model.name(Number(stream.handle), i === 0 ? 'the default stream' : stream.name!);
    return stream;
  };
  for (let i = 0; i < SLOTS; i++) streams.push(fresh(i));
  const held: Held[] = [];
  const loans: Loan[] = [];
  const transfers: { descriptor: TransferredArrayDescriptor; received: boolean }[] = [];
  const pick = <T>(items: T[], i: number): T | undefined =>
    items.length === 0 ? undefined : items[i % items.length];
  const alive = () => held.filter((h) => h.alive);
  /** The arrays alive that this thread owns (its own and those received), not borrowed ones. */
  const owned = () => alive().filter((h) => h.kind !== 'borrowed');
  const openLoansOf = (h: Held) => loans.filter((l) => !l.ended && l.lender === h);

  const allocate = (length: number, stream: Stream): void => {
    const before = model.allocations;
    const array = DeviceArray.empty('float32', length, { stream });
    const base = Number(array.buffer.address);
    if (model.allocations === before) {
      if (held.some((h) => h.alive && h.kind !== 'borrowed' && h.base === base)) {
        model.violations.push(`0x${hex(base)} handed out while a live array holds it`);
      }
      model.reuse(base, Number(stream.handle));
    } else expect(base).toBe(fake.state.lastAllocation);
    held.push({ array, base, kind: 'own', readOnly: false, alive: true });
  };

  /** Whether `h` may be used so (the uses the library refuses are checked to throw). */
  const usable = (h: Held, stream: Stream, write: boolean): boolean => {
    if (h.kind === 'borrowed') {
      if (!h.readOnly) return true;
      // Not generated: a read-only borrowed array on the default stream (see the top).
      if (stream === context.defaultStream) return false;
      if (write) expect(() => h.array.ffiAddressOn(stream, 'write')).toThrow(/read-only/);
      return !write;
    }
    const open = openLoansOf(h);
    if (open.length === 0) return true;
    const refused = write || open.some((l) => !l.readOnly);
    if (refused) {
      expect(() => h.array.ffiAddressOn(stream, write ? 'write' : 'read')).toThrow(
        CudaArgumentError,
      );
    }
    return !refused;
  };

  const use = (op: Extract<Operation, { kind: 'use' }>): void => {
    const borrowed = op.borrowed ? alive().filter((h) => h.kind === 'borrowed') : [];
    const h = pick(borrowed.length > 0 ? borrowed : alive(), op.target);
    const stream = streams[op.stream]!;
    if (h === undefined || !usable(h, stream, op.write)) return;
    const access = op.write ? 'write' : 'read';
    let view = h.array;
    if (op.via === 'slice' && view.length > 1) {
      const start = op.at % view.length;
      view = view.slice(start, 1 + ((op.at * 7) % (view.length - start)));
    }
    let start: number;
    let end: number;
    if (op.via === 'buffer' && h.kind !== 'borrowed') {
      start = Number(h.array.buffer.ffiAddressOn(stream, access));
      end = start + h.array.buffer.byteLength;
    } else {
      start = Number(view.ffiAddressOn(stream, access));
      end = start + view.length * 4;
    }
    model.access(Number(stream.handle), start, end, access, `${access} of 0x${hex(start)}`);
  };

  const launchOn = (op: Extract<Operation, { kind: 'launch' }>): void => {
    const stream = streams[op.stream]!;
    const y = op.args === 'read' ? undefined : pick(alive(), op.target);
    const x = op.args === 'write' ? undefined : pick(alive(), op.source);
    if ((op.args !== 'read' && y === undefined) || (op.args !== 'write' && x === undefined)) return;
    if (y !== undefined && !usable(y, stream, true)) return;
    if (x !== undefined && !usable(x, stream, false)) return;
    const launches = fake.state.launches;
    const config = { grid: 1, block: 64, stream };
    if (y !== undefined && x !== undefined) launch(writeRead, config, y.array, x.array);
    else if (y !== undefined) launch(writes, config, y.array);
    else launch(reads, config, x!.array);
    expect(fake.state.launches).toBe(launches + 1);
    const handle = Number(stream.handle);
    for (const [h, access] of [
      [y, 'write'],
      [x, 'read'],
    ] as const) {
      if (h === undefined) continue;
      const start = Number(h.array.ffiAddress);
      model.access(handle, start, start + h.array.length * 4, access, `launch ${access}`);
    }
  };

  /** Disposes `h`; false when that is not generated (a lent array while its loan is open). */
  const dispose = (h: Held): boolean => {
    // Not generated: the lender disposing a lent array while a loan on it is open (see the top).
    if (openLoansOf(h).length > 0) return false;
    h.array.dispose();
    h.alive = false;
    return true;
  };

  const run = (op: Operation): void => {
    switch (op.kind) {
      case 'allocate':
        allocate(op.length, streams[op.stream]!);
        return;
      case 'use':
        use(op);
        return;
      case 'launch':
        launchOn(op);
        return;
      case 'dispose': {
        const h = pick(alive(), op.target);
        if (h !== undefined) dispose(h);
        return;
      }
      case 'reallocate': {
        // Dispose, then allocate the same size on the stream that used the array last.
        const h = pick(owned(), op.target);
        if (h === undefined) return;
        const last = h.array.buffer.lastStream;
        if (!dispose(h)) return;
        allocate(h.array.length, last.disposed ? context.defaultStream : last);
        return;
      }
      case 'synchronize':
        streams[op.stream]!.synchronize();
        return;
      case 'query':
        fake.state.queryIdle = op.idle;
        expect(streams[op.stream]!.query()).toBe(op.idle);
        return;
      case 'synchronizeContext':
        context.synchronize();
        return;
      case 'disposeStream': {
        // Any slot but the default stream's; a fresh stream of the same kind takes the slot.
        const i = 1 + (op.stream % (SLOTS - 1));
        streams[i]!.dispose();
        streams[i] = fresh(i);
        return;
      }
      case 'releaseCached':
        if (op.all) pool.releaseCached();
        else releaseStreamCache(streams[op.stream]!);
        return;
      case 'lend': {
        const h = pick(owned(), op.target);
        if (h === undefined) return;
        const open = openLoansOf(h);
        if (open.length > 0 && (!op.readOnly || open.some((l) => !l.readOnly))) {
          expect(() => lendArray(h.array, { stream: streams[op.stream]! })).toThrow(/lent/);
          return;
        }
        const length = h.array.length;
        const array = op.view ? h.array.slice(length >> 2, length >> 1) : h.array;
        const loan = lendArray(array, { stream: streams[op.stream]!, readOnly: op.readOnly });
        loans.push({ loan, lender: h, readOnly: op.readOnly, borrowed: null, ended: false });
        return;
      }
      case 'borrow': {
        const l = pick(
          loans.filter((l) => !l.ended && l.borrowed === null),
          op.loan,
        );
        const stream = streams[op.stream]!;
        // Not generated: a read-only borrowed array on the default stream (see the top).
        if (l === undefined || (l.readOnly && stream === context.defaultStream)) return;
        const array = borrowArray<'float32'>(l.loan.descriptor, { stream });
        l.borrowed = {
          array,
          base: l.lender.base,
          kind: 'borrowed',
          readOnly: l.readOnly,
          alive: true,
        };
        held.push(l.borrowed);
        return;
      }
      case 'giveBack': {
        // The borrower disposes its array (the loan can end).
        const l = pick(
          loans.filter((l) => l.borrowed?.alive),
          op.loan,
        );
        if (l !== undefined) dispose(l.borrowed!);
        return;
      }
      case 'endLoan': {
        // Loans given back first, then borrowed ones (refused while the borrower holds the
        // array), then loans never borrowed (they end at once).
        const open = loans.filter((l) => !l.ended);
        const returned = open.filter((l) => l.borrowed !== null && !l.borrowed.alive);
        const borrowed = open.filter((l) => l.borrowed !== null);
        const l = pick(
          returned.length > 0 ? returned : borrowed.length > 0 ? borrowed : open,
          op.loan,
        );
        if (l === undefined) return;
        if (l.borrowed?.alive) {
          expect(() => l.loan.end()).toThrow(/still holds/);
          return;
        }
        l.loan.end();
        l.ended = true;
        return;
      }
      case 'transfer': {
        const h = pick(
          alive().filter((h) => h.kind !== 'borrowed' && openLoansOf(h).length === 0),
          op.target,
        );
        if (h === undefined) return;
        const descriptor = transferArray(h.array, { stream: streams[op.stream]! });
        h.alive = false;
        transfers.push({ descriptor, received: false });
        return;
      }
      case 'receive': {
        const t = pick(
          transfers.filter((t) => !t.received),
          op.transfer,
        );
        if (t !== undefined) receive(t, streams[op.stream]!);
        return;
      }
    }
  };

  const receive = (
    t: { descriptor: TransferredArrayDescriptor; received: boolean },
    stream: Stream,
  ): void => {
    const array = receiveArray<'float32'>(t.descriptor, { stream });
    t.received = true;
    const base = Number(array.buffer.address);
    expect(base).toBe(Number(t.descriptor.address));
    held.push({ array, base, kind: 'received', readOnly: false, alive: true });
  };

  try {
    for (const op of ops) run(op);
    // The end of the run: return and end every loan, receive every transfer, dispose every
    // array and stream, give the cached blocks back. These are checked as well.
    for (const l of loans) {
      if (l.ended) continue;
      if (l.borrowed?.alive) dispose(l.borrowed);
      l.loan.end();
      l.ended = true;
    }
    for (const t of transfers) if (!t.received) receive(t, context.defaultStream);
    for (const h of held) if (h.alive) expect(dispose(h)).toBe(true);
    for (let i = 1; i < SLOTS; i++) streams[i]!.dispose();
    pool.releaseCached();
  } finally {
    // Calls after the run (a collected stream's finalizer) reach no model.
    fake.state.sink = null;
    fake.state.dropWait = -1;
  }
  return [...model.violations, ...model.leaks()];
}

describe('the happens-before model', () => {
  /** A write on stream 1, then `order`, then a read on stream 2: the model's violations. */
  const writeThenRead = (order: (model: OrderingModel) => void) => {
    const model = new OrderingModel();
    model.allocate(0x1000, 512, 1);
    model.access(1, 0x1000, 0x1200, 'write', 'write');
    order(model);
    model.access(2, 0x1100, 0x1104, 'read', 'read');
    return model.violations;
  };

  it('flags a read on another stream not ordered after the write; an event, a synchronize or a context synchronize orders it', () => {
    expect(writeThenRead(() => {})).toEqual([
      'read on stream 2 is not ordered after allocation 0x1000 on stream 1',
      'read on stream 2 is not ordered after write on stream 1',
    ]);
    expect(
      writeThenRead((model) => {
        model.record(9, 1);
        model.wait(2, 9);
      }),
    ).toEqual([]);
    expect(writeThenRead((model) => model.synchronize(1))).toEqual([]);
    expect(writeThenRead((model) => model.synchronizeAll())).toEqual([]);
    // The wait is for another stream's event, or for an event destroyed since its record.
    expect(
      writeThenRead((model) => {
        model.record(9, 3);
        model.wait(2, 9);
      }),
    ).toEqual([
      'read on stream 2 is not ordered after allocation 0x1000 on stream 1',
      'read on stream 2 is not ordered after write on stream 1',
    ]);
    expect(
      writeThenRead((model) => {
        model.record(9, 1);
        model.destroyEvent(9);
        model.wait(2, 9);
      }),
    ).toEqual(['wait for destroyed event 9']);
  });

  it('a wait gets the clock of the last record before it, not of a later one', () => {
    const model = new OrderingModel();
    model.allocate(0x1000, 512, 1);
    model.record(7, 1);
    model.access(1, 0x1000, 0x1004, 'write', 'write');
    model.wait(2, 7);
    model.record(7, 1);
    model.access(2, 0x1000, 0x1004, 'read', 'read');
    expect(model.violations).toEqual(['read on stream 2 is not ordered after write on stream 1']);
  });

  it('reads need no order among themselves; a write, a free or a reuse must follow every read; nothing may follow a free', () => {
    const model = new OrderingModel();
    model.allocate(0x1000, 512, 1);
    model.synchronize(1);
    model.access(2, 0x1000, 0x1004, 'read', 'read');
    model.access(3, 0x1000, 0x1004, 'read', 'read');
    expect(model.violations).toEqual([]);
    model.record(9, 2);
    model.wait(1, 9);
    model.reuse(0x1000, 1); // after the read on 2, not the one on 3
    model.access(4, 0x1100, 0x1200, 'read', 'read'); // disjoint from both reads, not the reuse
    expect(model.violations).toEqual([
      'reuse of 0x1000 on stream 1 is not ordered after read on stream 3',
      'read on stream 4 is not ordered after reuse of 0x1000 on stream 1',
    ]);
    model.violations.length = 0;
    model.synchronizeAll();
    model.free(0x1000, 1);
    model.access(1, 0x1000, 0x1004, 'read', 'read');
    model.free(0x1000, 1);
    model.free(0x2000, 1);
    expect(model.violations).toEqual([
      'read on stream 1 touches memory already freed by free of 0x1000 on stream 1',
      'free of 0x1000 on stream 1 touches memory already freed by free of 0x1000 on stream 1',
      'cuMemFreeAsync of 0x2000, not an allocated block',
    ]);
    expect(model.leaks()).toEqual([]);
    const leaking = new OrderingModel();
    leaking.allocate(0x3000, 512, 1);
    expect(leaking.leaks()).toEqual(['0x3000 was never freed']);
  });

  it('the check fails when the double drops one cuStreamWaitEvent of a generated sequence', () => {
    const result = fc.check(
      fc.property(operations(true), fc.nat({ max: 15 }), (ops, drop) => {
        expect(runSequence(ops, drop)).toEqual([]);
      }),
      { seed: 11, numRuns: 300, endOnFailure: true },
    );
    expect(result.failed).toBe(true);
  });
});

describe('ordering of memory uses across streams, checked against the model', () => {
  it('any sequence of allocations (cached and not), uses on several streams through arrays, buffers, views and launches, frees, reallocations, synchronizes, queries, stream disposals and cache releases: every use is ordered after every earlier conflicting use of the same memory, and every block is freed once', () => {
    fc.assert(
      fc.property(operations(false), (ops) => {
        expect(runSequence(ops)).toEqual([]);
      }),
      { seed: 29, numRuns: 1000 },
    );
  });

  it('any such sequence with arrays lent, borrowed, returned, transferred and received between two threads: every use is ordered after every earlier conflicting use of the same memory, and every block is freed once', () => {
    fc.assert(
      fc.property(operations(true), (ops) => {
        expect(runSequence(ops)).toEqual([]);
      }),
      { seed: 47, numRuns: 1000 },
    );
  });
});
