import { CudaArgumentError, DeviceArray, type DType } from '@cuda-tasks/cudadrv';
import { hostOnlyArray, STAND_IN_CONTEXT, streamDouble } from '@cuda-tasks/testing';
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';

// cuSOLVER, the handle cache, device buffers, the status read-back and the zeroing kernel
// replaced by test doubles: which fill mode (uplo) reaches cusolverDnDpotrf and
// cusolverDnDpotrs. The arrays have no device memory; their copies are more of the same.
const fake = vi.hoisted(() => {
  const calls: string[] = [];
  const api = new Proxy(
    {},
    {
      get: (_target, name: string) =>
        name.endsWith('_bufferSize')
          ? () => 0
          : (...args: unknown[]) => {
              calls.push(`${name}(${args.join(', ')})`);
              return 0;
            },
    },
  );
  const DeviceBuffer = {
    allocate: () => ({ useOn: () => 0n, dispose: () => undefined }),
  };
  return { api, calls, DeviceBuffer };
});

vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => ({
  ...(await importOriginal<typeof import('@cuda-tasks/cudadrv')>()),
  DeviceBuffer: fake.DeviceBuffer,
}));
vi.mock('./ffi/cusolver.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./ffi/cusolver.js')>()),
  cusolver: () => fake.api,
}));
vi.mock('./handle.js', () => ({ handles: { get: () => 7n } }));
vi.mock('./kernels.js', () => ({ zeroTriangle: () => undefined }));
vi.mock('./info.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./info.js')>()),
  checkInfo: async () => undefined,
}));

import { cholesky, choleskySolve } from './cholesky.js';

const stream = streamDouble({
  context: STAND_IN_CONTEXT,
  capture: null,
  capturing: false,
});
const options = { stream };
const like = <D extends DType>(array: DeviceArray<D>) => hostOnlyArray(array.dtype, array.shape);
const copy = vi.spyOn(DeviceArray.prototype, 'copy').mockImplementation(function (
  this: DeviceArray,
) {
  return like(this) as never;
});
const empty = vi
  .spyOn(DeviceArray, 'empty')
  .mockImplementation((dtype, shape) =>
    hostOnlyArray(dtype, typeof shape === 'number' ? [shape] : shape),
  );
/** The potrf/potrs calls since the last time, as `potrs uplo=N`. */
const uplos = () =>
  fake.calls.splice(0).map((call) => {
    const [, name, uplo] = /cusolverDnD(potr[fs])\(7, (\d)/.exec(call)!;
    return `${name} uplo=${uplo}`;
  });

afterAll(() => {
  copy.mockRestore();
  empty.mockRestore();
});
beforeEach(() => {
  fake.calls.length = 0;
});

describe('choleskySolve uses the triangle the factor holds (0 lower, 1 upper)', () => {
  const a = hostOnlyArray('float64', [4, 4]);
  const b = hostOnlyArray('float64', [4, 2]);

  it('a copy of an upper factorization is solved with the upper triangle', async () => {
    const factorization = await cholesky(a, { upper: true, ...options });
    expect(factorization.upper).toBe(true);
    choleskySolve(factorization, b, options);
    const copied = { ...factorization, factor: factorization.factor.copy() };
    choleskySolve(copied, b, options);
    // Rebuilt from its parts, as a user who saved them would.
    choleskySolve({ factor: like(factorization.factor), upper: true }, b, options);
    expect(uplos()).toEqual(['potrf uplo=1', 'potrs uplo=1', 'potrs uplo=1', 'potrs uplo=1']);
  });

  it('a lower factorization, and a bare array with its triangle stated', async () => {
    const factorization = await cholesky(a, options);
    expect(factorization.upper).toBe(false);
    choleskySolve(factorization, b, options);
    choleskySolve(factorization, b, { ...options, upper: false });
    choleskySolve(factorization.factor.copy(), b, { ...options, upper: true });
    choleskySolve(factorization.factor.copy(), b, { ...options, upper: false });
    expect(uplos()).toEqual([
      'potrf uplo=0',
      'potrs uplo=0',
      'potrs uplo=0',
      'potrs uplo=1',
      'potrs uplo=0',
    ]);
  });

  it('a bare array without { upper } is a CudaArgumentError, never a guess; nothing is issued', async () => {
    const { factor } = await cholesky(a, { upper: true, ...options });
    uplos();
    const solve = choleskySolve as (f: unknown, b: unknown, o?: unknown) => unknown;
    expect(() => solve(factor, b, options)).toThrow(CudaArgumentError);
    expect(() => solve(factor, b)).toThrow(
      /a bare factor array does not say which triangle holds the factor: pass \{ upper: true \}/,
    );
    expect(() => solve(factor, b, { ...options, upper: 'yes' })).toThrow(
      /option upper must be true or false/,
    );
    expect(() => solve({ factor, upper: 1 }, b, options)).toThrow(
      /factorization.upper must be a boolean/,
    );
    expect(() => solve({ factor, upper: true }, b, { ...options, upper: false })).toThrow(
      /option upper \(false\) contradicts the factorization, whose factor is upper/,
    );
    expect(() => solve(null, b, options)).toThrow(/\{ factor, upper \} that cholesky\(\) returns/);
    expect(uplos()).toEqual([]);
  });
});
