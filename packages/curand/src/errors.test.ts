import { CudaError } from '@cuda-tasks/cudadrv';
import { describe, expect, it } from 'vitest';
import { CurandError, check, curandError, statusName } from './errors.js';
import { curandStatus } from './ffi/curand.js';

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
