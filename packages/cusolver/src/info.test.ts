import type { DeviceArray, Stream } from '@cuda-tasks/cudadrv';
import { beforeEach, describe, expect, it, vi } from 'vitest';

// Device memory replaced by host doubles that record what is allocated and freed.
const fake = vi.hoisted(() => {
  const events: string[] = [];
  const buffer = (name: string) => ({
    name,
    useOn: () => 0n,
    dispose: () => events.push(`free ${name}`),
  });
  return { events, buffer };
});

vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => ({
  ...(await importOriginal<typeof import('@cuda-tasks/cudadrv')>()),
  DeviceBuffer: {
    allocate: (bytes: number) => {
      fake.events.push(`allocate info (${bytes} bytes)`);
      return fake.buffer('info');
    },
  },
}));

import { NotPositiveDefiniteError, SingularMatrixError } from './errors.js';
import { checkInfo, solveIntoCopy } from './info.js';
import { GETRF, GETRS, POTRF } from './routines.js';

const stream = {} as Stream;
const events = () => fake.events.splice(0);

/** devInfo words on the device, as far as `checkInfo` can tell. */
function info(...words: number[]): DeviceArray<'int32'> {
  return {
    toHost: async () => Int32Array.from(words),
    dispose: () => fake.events.push('free devInfo'),
  } as unknown as DeviceArray<'int32'>;
}

beforeEach(() => {
  events();
});

describe('checkInfo', () => {
  it('resolves when every word is 0, and frees them', async () => {
    const solve = checkInfo(info(0, 0), stream, 'singular', GETRF.float64, GETRS.float64);
    await expect(solve).resolves.toBeUndefined();
    expect(events()).toEqual(['free devInfo']);
  });

  it("rejects for the first non-zero word, naming that word's routine", async () => {
    const solve = checkInfo(info(0, 2), stream, 'singular', GETRF.float32, GETRS.float32);
    await expect(solve).rejects.toBeInstanceOf(SingularMatrixError);
    await expect(solve).rejects.toMatchObject({ call: 'cusolverDnSgetrs', info: 2 });
    const both = checkInfo(info(3, 2), stream, 'singular', GETRF.float64, GETRS.float64);
    await expect(both).rejects.toMatchObject({ call: 'cusolverDnDgetrf', info: 3 });
    const potrf = checkInfo(info(4), stream, 'notPositiveDefinite', POTRF.float64);
    await expect(potrf).rejects.toBeInstanceOf(NotPositiveDefiniteError);
    expect(events()).toEqual(['free devInfo', 'free devInfo', 'free devInfo']);
  });
});

describe('solveIntoCopy', () => {
  const b = {
    copy: () => {
      fake.events.push('copy b');
      return fake.buffer('x');
    },
  } as unknown as DeviceArray<'float64'>;

  it('solves into a copy of b with a devInfo word, frees the word and returns the copy', () => {
    const x = solveIntoCopy(b, stream, (copy, word) => {
      fake.events.push(`solve into ${(copy as any).name} with ${(word as any).name}`);
    });
    expect((x as any).name).toBe('x');
    expect(events()).toEqual([
      'copy b',
      'allocate info (4 bytes)',
      'solve into x with info',
      'free info',
    ]);
  });

  it('frees the copy too when the solve throws', () => {
    expect(() =>
      solveIntoCopy(b, stream, () => {
        throw new Error('no');
      }),
    ).toThrow('no');
    expect(events()).toEqual(['copy b', 'allocate info (4 bytes)', 'free x', 'free info']);
  });
});
