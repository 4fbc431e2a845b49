import type { Context, Stream } from '@cuda-tasks/cudadrv';
import { describe, expect, it, vi } from 'vitest';

// cuRAND and the driver's events replaced by test doubles: which curandSetStream calls and
// which GPU-side waits a generator makes as it moves between streams.
const fake = vi.hoisted(() => {
  const calls: string[] = [];
  class FakeEvent {
    static created = 0;
    readonly id = ++FakeEvent.created;
    static create() {
      return new FakeEvent();
    }
    record(stream: { name: string }) {
      calls.push(`record ${stream.name}`);
    }
  }
  class FakeStream {
    disposed = false;
    /** The use clock's tick through which its work is known complete (as the real Stream keeps it). */
    completedThrough = 0;
    constructor(readonly name: string) {}
    hasCompleted(stamp: number) {
      return stamp <= this.completedThrough;
    }
    get handle() {
      return this.name;
    }
    assertUsable() {}
    waitEvent() {
      calls.push(`${this.name} waits for the handoff`);
    }
    waitFor(other: FakeStream) {
      calls.push(`${this.name} waits for ${other.name}`);
    }
  }
  let next = 1n;
  const api = {
    curandCreateGenerator(out: bigint[]) {
      out[0] = next++;
      return 0;
    },
    curandSetPseudoRandomGeneratorSeed: () => 0,
    curandSetGeneratorOffset: () => 0,
    curandSetStream(_handle: bigint, stream: string) {
      calls.push(`setStream ${stream}`);
      return 0;
    },
    curandDestroyGenerator: () => 0,
    curandGenerateSeeds(handle: bigint) {
      calls.push(`generateSeeds ${handle}`);
      return 0;
    },
  };
  return { calls, api, FakeEvent, FakeStream };
});

vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => ({
  ...(await importOriginal<typeof import('@cuda-tasks/cudadrv')>()),
  Event: fake.FakeEvent,
}));
vi.mock('./ffi/curand.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./ffi/curand.js')>()),
  curand: () => fake.api,
}));

import { GeneratorCore } from './core.js';

const context = { makeCurrent() {} } as unknown as Context;
const stream = (name: string) => new fake.FakeStream(name) as unknown as Stream;
const calls = () => fake.calls.splice(0);

describe('a cuRAND generator moving between streams', () => {
  it('taken up again on the stream it was released from: no wait and no curandSetStream', () => {
    const core = GeneratorCore.create(context, 'curand-philox', 1n, 0n, undefined);
    const a = stream('a');
    core.bind(a);
    core.used(); // a generation
    expect(calls()).toEqual(['setStream a']);
    core.release(a);
    expect(calls()).toEqual(['record a']);
    core.bind(a);
    expect(calls()).toEqual([]);
    expect(core.stream).toBe(a);
  });

  it('released and taken up on another stream: that stream waits for the handoff, then curandSetStream', () => {
    const core = GeneratorCore.create(context, 'curand-philox', 1n, 0n, undefined);
    const a = stream('a');
    const b = stream('b');
    core.bind(a);
    core.used();
    core.release(a);
    calls();
    core.bind(b);
    expect(calls()).toEqual(['b waits for the handoff', 'setStream b']);
    // Back to a while bound to b: a waits for b's work, and cuRAND gets a again.
    core.bind(a);
    expect(calls()).toEqual(['a waits for b', 'setStream a']);
  });

  it('moved from a stream known complete past its last generation: no event, no wait, only curandSetStream', () => {
    const core = GeneratorCore.create(context, 'curand-philox', 1n, 0n, undefined);
    const a = stream('a');
    const b = stream('b');
    core.bind(a);
    core.used();
    core.release(a);
    expect(calls()).toEqual(['setStream a', 'record a']);
    core.bind(b);
    core.used();
    (b as unknown as { completedThrough: number }).completedThrough = Number.MAX_SAFE_INTEGER;
    core.release(b); // the task awaited b: nothing to hand off
    core.bind(a);
    expect(calls()).toEqual(['b waits for the handoff', 'setStream b', 'setStream a']);
    // Once its raw handle is out, calls on it are not declared: every move is ordered again.
    core.used();
    (a as unknown as { completedThrough: number }).completedThrough = Number.MAX_SAFE_INTEGER;
    core.handleGivenOut();
    core.bind(b);
    expect(calls()).toEqual(['b waits for a', 'setStream b']);
  });
});

describe("a generator's starting state", () => {
  it('is pending after creation, a new seed and a new offset; prepareState sets it up once', () => {
    const core = GeneratorCore.create(context, 'curand-philox', 1n, 0n, undefined);
    calls();
    expect(core.statePending).toBe(true);
    core.prepareState();
    expect(calls()).toEqual([`generateSeeds ${core.handle}`]);
    expect(core.statePending).toBe(false);
    core.prepareState();
    expect(calls()).toEqual([]);
    core.setSeed(9n);
    expect(core.statePending).toBe(true);
    core.prepareState();
    core.setOffset(100n);
    expect(core.statePending).toBe(true);
    core.prepareState();
    expect(calls()).toEqual([`generateSeeds ${core.handle}`, `generateSeeds ${core.handle}`]);
  });
});
