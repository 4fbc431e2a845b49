import { CaptureError, CudaArgumentError } from '@cuda-tasks/cudadrv';
import { hostOnlyArray, STAND_IN_CONTEXT, streamDouble } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { cholesky } from './cholesky.js';
import { eigh } from './eigh.js';
import { lu, solve } from './lu.js';
import { svd } from './svd.js';

// Inside a graph capture the host cannot read a routine's status back: without `{ info }`
// the routines that would, refuse before anything is issued. The arrays here have no device
// memory, so any native call would fail with another error than the one asserted.
const capturing = streamDouble({
  capturing: true,
  context: STAND_IN_CONTEXT,
  toString: () => 'Stream(capturing)',
});

/** The error `start()` rejects with; fails the test when it resolves. */
async function rejection(start: () => Promise<unknown>): Promise<unknown> {
  return start().then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

describe('status-reporting solvers on a capturing stream', () => {
  const a = hostOnlyArray('float64', [4, 4]);
  const b = hostOnlyArray('float64', [4]);

  it('lu, solve and cholesky without { info } give a CaptureError naming the routines', async () => {
    const cases: [() => Promise<unknown>, string][] = [
      [() => lu(a, { stream: capturing }), 'cusolverDnDgetrf'],
      [() => solve(a, b, { stream: capturing }), 'cusolverDnDgetrf and cusolverDnDgetrs'],
      [() => cholesky(a, { stream: capturing }), 'cusolverDnDpotrf'],
    ];
    for (const [start, symbols] of cases) {
      const error = await rejection(start);
      expect(CaptureError.isInstance(error), symbols).toBe(true);
      expect((error as CaptureError).call).toBe(symbols);
      expect((error as Error).message).toMatch(/reads its status \(devInfo\) back/);
      expect((error as Error).message).toMatch(/pass \{ info \}/);
    }
  });

  it('eigh and svd are refused inside a capture', async () => {
    for (const [start, symbol] of [
      [() => eigh(a, { stream: capturing }), 'cusolverDnDsyevd'],
      [() => svd(a, { stream: capturing }), 'cusolverDnDgesvd'],
    ] as const) {
      const error = await rejection(start);
      expect(CaptureError.isInstance(error), symbol).toBe(true);
      expect((error as CaptureError).call).toBe(symbol);
      expect((error as Error).message).toMatch(/outside the capture/);
    }
  });

  it('checks { info }: a contiguous int32 array with a word per routine', async () => {
    for (const info of [
      hostOnlyArray('float32', [2]),
      hostOnlyArray('int32', [1]), // solve needs two words
      hostOnlyArray('int32', [4, 2]).block(0, 0, 2, 2), // not contiguous
      new Int32Array(2),
    ]) {
      const error = await rejection(() => solve(a, b, { stream: capturing, info: info as never }));
      expect(error).toBeInstanceOf(CudaArgumentError);
      expect((error as Error).message).toMatch(/options\.info must be a contiguous int32/);
    }
  });
});
