import { readFileSync } from 'node:fs';
import { findCudaHeader } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { BITS, type Generation, LOG_NORMAL, NORMAL, POISSON, UNIFORM } from './routines.js';
import { FLOATING_DTYPES, UINT32_DTYPES } from './validation.js';

const GENERATIONS: Record<string, Generation> = { UNIFORM, NORMAL, LOG_NORMAL, POISSON, BITS };

describe('the generation table', () => {
  it('records the operation names traces have always shown', () => {
    expect(Object.values(GENERATIONS).map((generation) => generation.operation)).toEqual([
      'curand.uniform',
      'curand.normal',
      'curand.logNormal',
      'curand.poisson',
      'curand.generate',
    ]);
  });

  it('fills float32 and float64 with the continuous distributions, uint32 with the others', () => {
    for (const generation of [UNIFORM, NORMAL, LOG_NORMAL]) {
      expect(generation.dtypes).toEqual(FLOATING_DTYPES);
    }
    expect(POISSON.dtypes).toEqual(UINT32_DTYPES);
    expect(BITS.dtypes).toEqual(UINT32_DTYPES);
  });

  it('asks for an even count exactly for normal and log-normal (Box-Muller)', () => {
    expect(Object.values(GENERATIONS).map((generation) => generation.pairs)).toEqual([
      false,
      true,
      true,
      false,
      false,
    ]);
  });
});

const headerDirectory = findCudaHeader('curand.h');

describe.runIf(headerDirectory !== undefined)('the generation table against curand.h', () => {
  const C_TYPES: Record<string, string> = {
    float32: 'float',
    float64: 'double',
    uint32: 'unsigned int',
  };

  it('writes each dtype through its C type and passes the parameters the prototype takes', () => {
    const header = readFileSync(`${headerDirectory}/curand.h`, 'utf8');
    for (const [name, generation] of Object.entries(GENERATIONS)) {
      for (const [dtype, symbol] of Object.entries(generation.routines)) {
        const match = new RegExp(`\\b${symbol}\\s*\\(([^)]*)\\)`).exec(header);
        expect(match, `${name} ${symbol}`).not.toBeNull();
        const parameters = match![1]!.split(',').map((parameter) => parameter.trim());
        // (generator, outputPtr, count, ...the distribution's parameters)
        expect(parameters[1], symbol).toMatch(new RegExp(`^${C_TYPES[dtype]} \\*outputPtr$`));
        expect(parameters.length - 3, symbol).toBe(generation.parameters);
      }
    }
  });
});
