import { CudaArgumentError, CudaError, type DeviceArray, DisposedError } from '@cuda-tasks/cudadrv';
import { IssueEnvelope } from '@cuda-tasks/task-runtime';
import { hostOnlyArray, standInStream, thrown } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import {
  CufftError,
  check,
  destroyIdlePlans,
  fft,
  ifft,
  libcufftSpec,
  planStatistics,
  rfft,
  scaleComplex,
  statusName,
} from './index.js';
import { planKey, transformPlans } from './plans.js';
import { assertComplexArray, fftLayout, rfftLayout } from './validate.js';

/** An array description; no device memory behind it (the checks never touch any). */
function fake(
  shape: number[],
  overrides: Partial<{
    dtype: string;
    offset: number;
    contiguous: boolean;
    disposed: boolean;
  }> = {},
): DeviceArray<'float32'> {
  const length = shape.reduce((product, dimension) => product * dimension, 1);
  return {
    dtype: 'float32',
    shape,
    strides: shape.map((_, i) => shape.slice(0, i).reduce((product, d) => product * d, 1)),
    length,
    offset: 0,
    buffer: { byteLength: 4 * length },
    contiguous: true,
    disposed: false,
    ...overrides,
  } as unknown as DeviceArray<'float32'>;
}

function argumentError(fn: () => unknown): Error {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(CudaArgumentError);
    return error as Error;
  }
  throw new Error('expected a CudaArgumentError');
}

describe('fftLayout', () => {
  it('reads n from a 1-D interleaved array', () => {
    expect(fftLayout(fake([512]))).toEqual({ n: 256, batch: 1 });
  });

  it('takes one transform per column of a 2-D array, or the batch it is given', () => {
    expect(fftLayout(fake([2000, 4]))).toEqual({ n: 1000, batch: 4 });
    expect(fftLayout(fake([2048]), { batch: 4 })).toEqual({ n: 256, batch: 4 });
  });

  it.each([
    [fake([512], { dtype: 'float64' }), {}, 'fft: x must be float32, got float64'],
    [
      fake([511]),
      {},
      'fft: x must hold interleaved complex numbers (re, im, ...): its length 511 is odd',
    ],
    [
      fake([512], { offset: 3 }),
      {},
      'fft: x must start on a complex element (an even float offset), got offset 3',
    ],
    [
      fake([512], { contiguous: false }),
      {},
      'fft: x must be contiguous (copy a strided view with .copy() first)',
    ],
    [fake([0]), {}, 'fft: x is empty'],
    [fake([512]), { batch: 0 }, 'fft: batch must be a positive integer, got 0'],
    [fake([512]), { batch: 1.5 }, 'fft: batch must be a positive integer, got 1.5'],
    [fake([512]), { batch: 3 }, 'fft: x holds 256 complex numbers, not a multiple of batch = 3'],
  ])('refuses %j %j', (x, options, message) => {
    expect(argumentError(() => fftLayout(x, options)).message).toBe(message);
  });

  it('refuses what is not an array, and a disposed array with DisposedError', () => {
    expect(argumentError(() => fftLayout(new Float32Array(4))).message).toBe(
      'fft: x must be a DeviceArray, got Float32Array',
    );
    expect(argumentError(() => fftLayout(null)).message).toBe(
      'fft: x must be a DeviceArray, got null',
    );
    expect(() => fftLayout(fake([4], { disposed: true }))).toThrow(DisposedError);
  });
});

describe('rfftLayout', () => {
  it('gives n / 2 + 1 complex outputs per transform', () => {
    expect(rfftLayout(fake([256]))).toEqual({ n: 256, batch: 1, outputLength: 258 });
    expect(rfftLayout(fake([255]))).toEqual({ n: 255, batch: 1, outputLength: 256 });
    expect(rfftLayout(fake([100, 3]))).toEqual({ n: 100, batch: 3, outputLength: 306 });
  });

  it('accepts any offset and length, but not other dtypes', () => {
    expect(rfftLayout(fake([7], { offset: 1 })).n).toBe(7);
    expect(argumentError(() => rfftLayout(fake([8], { dtype: 'int32' }))).message).toBe(
      'rfft: x must be float32, got int32',
    );
  });
});

describe('the public functions check before any native call', () => {
  it('fft, ifft and rfft refuse bad input and bad options with CudaArgumentError', () => {
    expect(argumentError(() => fft(fake([6], { dtype: 'float64' }))).message).toBe(
      'fft: x must be float32, got float64',
    );
    expect(argumentError(() => fft(fake([6]), { inverse: 'yes' as any })).message).toBe(
      'fft: option inverse must be true or false, got "yes"',
    );
    expect(argumentError(() => fft(fake([6]), { normalize: 1 as any })).message).toBe(
      'fft: option normalize must be true or false, got 1',
    );
    expect(argumentError(() => ifft(fake([5]))).message).toMatch(/length 5 is odd/);
    expect(argumentError(() => rfft(fake([6]), { batch: 4 })).message).toBe(
      'rfft: x holds 6 numbers, not a multiple of batch = 4',
    );
  });

  it("reads its options with cudadrv's option checks: an object, a Stream", () => {
    expect(argumentError(() => fft(fake([6]), null as any)).message).toBe(
      'fft: options must be an object, got null',
    );
    expect(argumentError(() => rfft(fake([6]), 'r2c' as any)).message).toBe(
      'rfft: options must be an object, got "r2c"',
    );
    expect(argumentError(() => fft(fake([6]), { stream: 0n as any })).message).toBe(
      'fft: option stream must be a Stream, got 0n',
    );
    expect(argumentError(() => rfft(fake([6]), { stream: null as any })).message).toBe(
      'rfft: option stream must be a Stream, got null',
    );
    expect(argumentError(() => scaleComplex(fake([4]), 2, { stream: 1 as any })).message).toBe(
      'scaleComplex: option stream must be a Stream, got 1',
    );
  });

  it('scaleComplex refuses a non-finite factor and non-complex arrays', () => {
    expect(argumentError(() => scaleComplex(fake([4]), Number.NaN)).message).toBe(
      'scaleComplex: factor must be a finite number, got NaN',
    );
    expect(() => assertComplexArray(fake([3]), 'scaleComplex', 'x')).toThrow(/length 3 is odd/);
  });
});

describe('errors and loading', () => {
  it('names cuFFT statuses and throws CufftError, a CudaError', () => {
    expect(statusName(8)).toBe('CUFFT_INVALID_SIZE');
    expect(statusName(99)).toBe('CUFFT_STATUS_99');
    expect(() => check(0, 'cufftDestroy')).not.toThrow();
    try {
      check(8, 'cufftMakePlan1d');
      throw new Error('expected a throw');
    } catch (error) {
      expect(CufftError.isInstance(error)).toBe(true);
      expect(CudaError.isInstance(error)).toBe(true);
      expect((error as CufftError).message).toBe(
        'cufftMakePlan1d failed: CUFFT_INVALID_SIZE (8): the transform size is not supported',
      );
    }
  });

  it('looks for libcufft.so.12 (CUDA 13) first, then .11 (CUDA 12), with an override', () => {
    expect(libcufftSpec.candidates.slice(0, 2)).toEqual(['libcufft.so.12', 'libcufft.so.11']);
    expect(libcufftSpec.environmentVariable).toBe('CUDA_TASKS_LIBCUFFT');
  });

  it('issues through one IssueEnvelope per transform, over its plan cache, checking as CufftError', () => {
    const { cache, envelope } = transformPlans('c2c', 4321, 3);
    expect(envelope).toBeInstanceOf(IssueEnvelope);
    expect(envelope.handles).toBe(cache);
    expect(transformPlans('c2c', 4321, 3).envelope).toBe(envelope);
    expect(() => envelope.check(0, 'cufftExecC2C')).not.toThrow();
    // Step 5 with nothing traced (token -1): the status check throws the library's error.
    expect(() => envelope.end(-1, 8, 'cufftExecC2C')).toThrow(
      'cufftExecC2C failed: CUFFT_INVALID_SIZE (8): the transform size is not supported',
    );
    expect(CufftError.isInstance(thrown(() => envelope.check(8, 'cufftExecR2C')))).toBe(true);
    // No plan was made: the emptied cache is disposed and forgotten.
    expect(destroyIdlePlans()).toBe(0);
    expect(planStatistics('c2c', 4321, 3)[0]!.created).toBe(0);
  });

  it('reports zero plans for a transform never used', () => {
    expect(planKey('c2c', 256, 4)).toBe('c2c:256x4');
    expect(planStatistics('c2c', 12345)).toEqual([
      { key: 'c2c:12345x1', created: 0, destroyed: 0, idle: 0, leased: 0, shared: 0 },
    ]);
  });
});

describe('an array of another context than the stream', () => {
  it('is refused by fft, rfft and scaleComplex before anything native, naming both contexts', () => {
    const stream = standInStream();
    const device1 = { device: { ordinal: 1 }, toString: () => 'Context(device 1)' };
    const foreign = () =>
      hostOnlyArray('float32', [8], { byteLength: 32, context: device1 }) as DeviceArray<'float32'>;
    expect(argumentError(() => fft(foreign(), { stream })).message).toMatch(
      /^fft: x lives in Context\(device 1\), but .* belongs to Context\(device 0\)/,
    );
    expect(argumentError(() => rfft(foreign(), { stream })).message).toMatch(/^rfft: x lives in/);
    expect(argumentError(() => scaleComplex(foreign(), 2, { stream })).message).toMatch(
      /^scaleComplex: x lives in/,
    );
  });
});
