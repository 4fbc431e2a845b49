import { readFileSync } from 'node:fs';
import { CudaError } from '@cuda-tasks/cudadrv';
import { findCudaHeader } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import {
  CusolverError,
  check,
  cusolverError,
  infoError,
  NotPositiveDefiniteError,
  SingularMatrixError,
  statusMessage,
  statusName,
} from './errors.js';
import { cusolverStatus } from './ffi/cusolver.js';

describe('cuSOLVER status mapping', () => {
  it('check passes CUSOLVER_STATUS_SUCCESS and throws CusolverError otherwise', () => {
    expect(() => check(0, 'cusolverDnCreate')).not.toThrow();
    try {
      check(7, 'cusolverDnDgetrf');
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(CusolverError);
      expect(error).toBeInstanceOf(CudaError);
      const e = error as CusolverError;
      expect(e.code).toBe(7);
      expect(e.status).toBe('CUSOLVER_STATUS_INTERNAL_ERROR');
      expect(e.call).toBe('cusolverDnDgetrf');
      expect(e.info).toBeUndefined();
      expect(e.message).toMatch(/^cusolverDnDgetrf failed: CUSOLVER_STATUS_INTERNAL_ERROR \(7\)/);
      expect(CudaError.isInstance(e)).toBe(true);
      expect(CusolverError.isInstance(e)).toBe(true);
    }
  });

  it('names every status and tolerates unknown ones', () => {
    expect(statusName(3)).toBe('CUSOLVER_STATUS_INVALID_VALUE');
    expect(statusName(31)).toBe('CUSOLVER_STATUS_INVALID_WORKSPACE');
    expect(statusName(999)).toBe('CUSOLVER_STATUS_999');
    expect(cusolverError(999, 'x').message).toMatch(/unknown cuSOLVER status/);
  });

  const headerDirectory = findCudaHeader('cusolver_common.h');
  const header = `${headerDirectory}/cusolver_common.h`;
  it.runIf(headerDirectory !== undefined)('matches cusolverStatus_t in cusolver_common.h', () => {
    const text = readFileSync(header, 'utf8');
    const body = text.slice(
      text.indexOf('CUSOLVER_STATUS_SUCCESS'),
      text.indexOf('} cusolverStatus_t'),
    );
    const fromHeader: Record<number, string> = {};
    for (const match of body.matchAll(/(CUSOLVER_STATUS_\w+)\s*=\s*(\d+)/g)) {
      fromHeader[Number(match[2])] = match[1]!;
    }
    expect(Object.keys(fromHeader).length).toBeGreaterThan(20);
    expect({ ...cusolverStatus }).toEqual(fromHeader);
  });
});

describe('the error module', () => {
  it('names every status of the table and throws CusolverError, not a subclass, for it', () => {
    for (const [code, name] of Object.entries(cusolverStatus).map(
      ([c, n]) => [Number(c), n] as const,
    )) {
      if (code === 0) continue;
      expect(statusName(code)).toBe(name);
      const error = cusolverError(code, 'cusolverDnCall');
      expect(error.constructor).toBe(CusolverError);
      expect(error.message).toBe(
        `cusolverDnCall failed: ${name} (${code}): ${statusMessage(code)}`,
      );
    }
    expect(statusMessage(3)).toBe('an unsupported value or parameter was passed to the function');
    expect(statusMessage(12)).toBe('unknown cuSOLVER status');
  });
});

describe('devInfo mapping', () => {
  it('getrf info > 0 is a SingularMatrixError with info', () => {
    const error = infoError('cusolverDnSgetrf', 4, 'singular');
    expect(error).toBeInstanceOf(SingularMatrixError);
    expect(error).toBeInstanceOf(CusolverError);
    expect(error).toBeInstanceOf(CudaError);
    expect(error.info).toBe(4);
    expect(error.code).toBe(4);
    expect(error.status).toBe('SINGULAR_MATRIX');
    expect(error.name).toBe('SingularMatrixError');
    expect(error.message).toMatch(/U\(4,4\) is exactly zero/);
    expect(SingularMatrixError.isInstance(error)).toBe(true);
    expect(NotPositiveDefiniteError.isInstance(error)).toBe(false);
  });

  it('potrf info > 0 is a NotPositiveDefiniteError with info', () => {
    const error = infoError('cusolverDnDpotrf', 6, 'notPositiveDefinite');
    expect(error).toBeInstanceOf(NotPositiveDefiniteError);
    expect(error).toBeInstanceOf(CusolverError);
    expect(error.info).toBe(6);
    expect(error.message).toMatch(/leading minor of order 6 is not positive definite/);
    expect(NotPositiveDefiniteError.isInstance(error)).toBe(true);
  });

  it('gesvd/syevd info > 0 is a CusolverError NO_CONVERGENCE', () => {
    const error = infoError('cusolverDnDgesvd', 2, 'noConvergence');
    expect(error.constructor).toBe(CusolverError);
    expect(error.status).toBe('NO_CONVERGENCE');
    expect(error.info).toBe(2);
    expect(error.message).toMatch(/did not converge/);
  });

  it('info < 0 names the illegal parameter, whatever the routine', () => {
    for (const condition of ['singular', 'notPositiveDefinite', 'noConvergence'] as const) {
      const error = infoError('cusolverDnSgetrs', -5, condition);
      expect(error.constructor).toBe(CusolverError);
      expect(error.status).toBe('INVALID_PARAMETER');
      expect(error.info).toBe(-5);
      expect(error.message).toMatch(/parameter 5 had an illegal value/);
    }
  });
});
