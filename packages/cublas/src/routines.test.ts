import { readFileSync } from 'node:fs';
import { findCudaHeader } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import {
  ASUM,
  AXPY,
  DOT,
  GEMM,
  GEMM_EX,
  GEMM_STRIDED_BATCHED,
  GEMV,
  IAMAX,
  NRM2,
  type RoutineFamily,
  SCAL,
} from './routines.js';

const FAMILIES: Record<string, RoutineFamily> = {
  AXPY,
  SCAL,
  DOT,
  NRM2,
  ASUM,
  IAMAX,
  GEMV,
  GEMM,
  GEMM_STRIDED_BATCHED,
};

describe('the routine tables', () => {
  it('record the operation names traces have always shown', () => {
    const operations = Object.values(FAMILIES).flatMap((family) => [
      family.float32.operation,
      family.float64.operation,
    ]);
    expect(operations).toEqual([
      'cublas.saxpy',
      'cublas.daxpy',
      'cublas.sscal',
      'cublas.dscal',
      'cublas.sdot',
      'cublas.ddot',
      'cublas.snrm2',
      'cublas.dnrm2',
      'cublas.sasum',
      'cublas.dasum',
      'cublas.isamax',
      'cublas.idamax',
      'cublas.sgemv',
      'cublas.dgemv',
      'cublas.sgemm',
      'cublas.dgemm',
      'cublas.sgemmStridedBatched',
      'cublas.dgemmStridedBatched',
    ]);
    expect(GEMM_EX.operation).toBe('cublas.gemmEx');
  });

  it('pass scalars in the precision of the operands (gemmEx: float, its compute type 32F)', () => {
    for (const family of Object.values(FAMILIES)) {
      expect(family.float32.scalar).toBe('float32');
      expect(family.float64.scalar).toBe('float64');
    }
    expect(GEMM_EX.scalar).toBe('float32');
  });
});

const headerDirectory = findCudaHeader('cublas_api.h');

describe.runIf(headerDirectory !== undefined)('the routine tables against cublas_api.h', () => {
  const source = () => readFileSync(`${headerDirectory}/cublas_api.h`, 'utf8');

  /** The parameter list of `symbol`'s prototype, white space folded. */
  function parameters(header: string, symbol: string): string {
    const match = new RegExp(`\\b${symbol}\\s*\\(([^)]*)\\)`).exec(header);
    if (match === null) throw new Error(`${symbol} is not declared`);
    return match[1]!.replace(/\s+/g, ' ');
  }

  it('give float32 arrays to float routines and float64 arrays to double routines', () => {
    const header = source();
    for (const [name, family] of Object.entries(FAMILIES)) {
      const single = parameters(header, family.float32.symbol);
      const double = parameters(header, family.float64.symbol);
      expect(single, name).toMatch(/\bfloat\*/);
      expect(single, name).not.toMatch(/\bdouble\b/);
      expect(double, name).toMatch(/\bdouble\*/);
      expect(double, name).not.toMatch(/\bfloat\b/);
    }
  });

  it('declare gemmEx with the operands typed by cudaDataType arguments', () => {
    expect(parameters(source(), GEMM_EX.symbol)).toMatch(/cudaDataType Atype/);
  });
});
