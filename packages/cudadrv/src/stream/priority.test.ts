import { thrown } from '@cuda-tasks/testing';
import { beforeEach, describe, expect, it, vi } from 'vitest';

// Stream.create({ priority }) takes the task names ('high', 'normal', 'low') as well as
// numbers, against a driver that records the priority each stream is created with and a
// context whose priority range is set by the test.
const fake = vi.hoisted(() => {
  const state = {
    created: [] as number[],
    calls: [] as string[],
    range: { least: 0, greatest: -5 },
    nextHandle: 100,
  };
  const api = new Proxy(
    {},
    {
      get(_target, name: string) {
        return (...args: unknown[]) => {
          state.calls.push(name);
          if (name === 'cuStreamCreateWithPriority') {
            (args[0] as (bigint | null)[])[0] = BigInt(state.nextHandle++);
            state.created.push(args[2] as number);
          }
          if (name === 'cuCtxGetStreamPriorityRange') {
            (args[0] as number[])[0] = state.range.least;
            (args[1] as number[])[0] = state.range.greatest;
          }
          return 0;
        };
      },
    },
  );
  return { state, api };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  return { ...original, driver: () => fake.api, check: () => undefined };
});

import { Context, type Device } from '../context/device.js';
import { CudaArgumentError } from '../errors.js';
import { streamPriority } from './priority.js';
import { Stream } from './stream.js';

/** A context of its own per test: the range is asked of the driver once per context. */
function newContext(range: { least: number; greatest: number }): Context {
  fake.state.range = range;
  return new Context({ ordinal: 0 } as unknown as Device, 77n);
}

/** The reference: CUDA's rule (lower runs first) written out for a range. */
function expected(name: 'high' | 'normal' | 'low', least: number, greatest: number): number {
  if (name === 'high') return greatest;
  if (name === 'low') return least;
  return Math.min(least, Math.max(greatest, 0));
}

beforeEach(() => {
  fake.state.created.length = 0;
  fake.state.calls.length = 0;
});

describe('Stream.create priority names', () => {
  it.each([
    { least: 0, greatest: -5 },
    { least: 3, greatest: 1 },
    { least: 0, greatest: 0 },
  ])('maps high / normal / low into the range %o', (range) => {
    const context = newContext(range);
    for (const name of ['high', 'normal', 'low'] as const) {
      Stream.create({ context, priority: name }).dispose();
      expect(fake.state.created.at(-1)).toBe(expected(name, range.least, range.greatest));
      expect(streamPriority(name, context)).toBe(expected(name, range.least, range.greatest));
    }
  });

  it('passes a number through unchanged', () => {
    const context = newContext({ least: 0, greatest: -5 });
    Stream.create({ context, priority: -3 }).dispose();
    Stream.create({ context }).dispose();
    expect(fake.state.created).toEqual([-3, 0]);
  });

  it.each(['urgent', 'HIGH', 1.5, Number.NaN, null, {}])(
    'refuses %o with a CudaArgumentError before any native call',
    (priority) => {
      const context = newContext({ least: 0, greatest: -5 });
      const error = thrown(() => Stream.create({ context, priority: priority as never }));
      expect(error).toBeInstanceOf(CudaArgumentError);
      expect((error as Error).message).toMatch(/priority/);
      expect(fake.state.calls).toEqual([]);
    },
  );
});
