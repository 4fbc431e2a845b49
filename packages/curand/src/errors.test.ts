import { CudaError } from '@cuda-tasks/cudadrv';
import { describe, expect, it, vi } from 'vitest';
import { CurandError, check, curandError, statusName } from './errors.js';
import { curandStatus, curandStatusDescriptions } from './ffi/curand.js';

describe('cuRAND statuses', () => {
  it('names every status of curand.h', () => {
    const expected: [number, string][] = [
      [0, 'CURAND_STATUS_SUCCESS'],
      [100, 'CURAND_STATUS_VERSION_MISMATCH'],
      [101, 'CURAND_STATUS_NOT_INITIALIZED'],
      [102, 'CURAND_STATUS_ALLOCATION_FAILED'],
      [103, 'CURAND_STATUS_TYPE_ERROR'],
      [104, 'CURAND_STATUS_OUT_OF_RANGE'],
      [105, 'CURAND_STATUS_LENGTH_NOT_MULTIPLE'],
      [106, 'CURAND_STATUS_DOUBLE_PRECISION_REQUIRED'],
      [201, 'CURAND_STATUS_LAUNCH_FAILURE'],
      [202, 'CURAND_STATUS_PREEXISTING_FAILURE'],
      [203, 'CURAND_STATUS_INITIALIZATION_FAILED'],
      [204, 'CURAND_STATUS_ARCH_MISMATCH'],
      [999, 'CURAND_STATUS_INTERNAL_ERROR'],
    ];
    for (const [code, name] of expected) expect(statusName(code)).toBe(name);
    expect(Object.keys(curandStatus)).toHaveLength(expected.length);
    expect(statusName(12345)).toBe('CURAND_STATUS_UNKNOWN_12345');
  });

  it('check passes success and throws a CurandError naming the call otherwise', () => {
    expect(() => check(0, 'curandGenerateUniform')).not.toThrow();
    let error: unknown;
    try {
      check(105, 'curandGenerateNormal');
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(CurandError);
    expect(error).toBeInstanceOf(CudaError);
    const curand = error as CurandError;
    expect(curand.name).toBe('CurandError');
    expect(curand.code).toBe(105);
    expect(curand.status).toBe('CURAND_STATUS_LENGTH_NOT_MULTIPLE');
    expect(curand.call).toBe('curandGenerateNormal');
    expect(curand.message).toMatch(
      /curandGenerateNormal failed: CURAND_STATUS_LENGTH_NOT_MULTIPLE \(105\)/,
    );
    expect(CurandError.isInstance(curand)).toBe(true);
    expect(CudaError.isInstance(curand)).toBe(true);
    expect(CurandError.isInstance(new CudaError(1, 'X', 'y', 'z'))).toBe(false);
  });

  it('explains a pre-existing failure as an earlier CUDA error', () => {
    expect(curandError(202, 'curandGenerate').message).toMatch(/earlier asynchronous CUDA error/);
    expect(curandError(7777, 'curandGenerate').message).toMatch(/unknown cuRAND status/);
  });
});

describe('the error module', () => {
  it("each message is curand.h's description, with the cause for a launch or earlier failure", () => {
    for (const [name, code] of Object.entries(curandStatus)) {
      const description = curandStatusDescriptions[code]!;
      const message = curandError(code, 'curandCall').message;
      expect(message.startsWith(`curandCall failed: ${name} (${code}): ${description}`)).toBe(true);
      const cause = message.slice(`curandCall failed: ${name} (${code}): ${description}`.length);
      if (name === 'CURAND_STATUS_LAUNCH_FAILURE') {
        expect(cause).toBe(': the generator kernel could not be launched on the stream');
      } else if (name === 'CURAND_STATUS_PREEXISTING_FAILURE') {
        expect(cause).toMatch(
          /^: an earlier asynchronous CUDA error .* the failure is not cuRAND's$/,
        );
      } else {
        expect(cause).toBe('');
      }
    }
  });

  it('CurandError of a second loaded copy of this package is recognized both ways', async () => {
    vi.resetModules();
    const second = await import('./errors.js');
    expect(second.CurandError).not.toBe(CurandError);
    const theirs = second.curandError(105, 'curandGenerateNormal');
    expect(theirs).not.toBeInstanceOf(CurandError);
    expect(CurandError.isInstance(theirs)).toBe(true);
    expect(second.CurandError.isInstance(curandError(105, 'x'))).toBe(true);
    expect(CudaError.isInstance(theirs)).toBe(true);
  });
});
