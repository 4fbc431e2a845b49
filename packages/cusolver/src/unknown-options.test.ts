import { CudaArgumentError } from '@cuda-tasks/cudadrv';
import { failureOf, hostOnlyArray } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { cholesky, choleskySolve, eigh, lu, luSolve, qr, solve, svd } from './index.js';

// A misspelt option would be ignored, and the call would compute something else without a
// word: every routine refuses an option it does not take, before any native call (these
// arrays have no device memory), naming the near one (a case or one-letter slip).
const square = () => hostOnlyArray('float64', [4, 4]);
const vector = () => hostOnlyArray('float64', [4]);
const pivots = hostOnlyArray('int32', [4]);

/** The message of the CudaArgumentError a call throws or rejects with. */
async function refusal(call: () => unknown): Promise<string> {
  const error = await failureOf(call);
  expect(error).toBeInstanceOf(CudaArgumentError);
  return (error as Error).message;
}

describe('unknown options', () => {
  const cases: [string, (options: Record<string, unknown>) => unknown, string][] = [
    ['lu', (o) => lu(square(), o), 'stream, info'],
    ['solve', (o) => solve(square(), vector(), o), 'stream, info, overwriteA, overwriteB'],
    ['luSolve', (o) => luSolve({ lu: square(), pivots }, vector(), o), 'stream, transA, transpose'],
    ['cholesky', (o) => cholesky(square(), o), 'stream, upper, info'],
    ['choleskySolve', (o) => choleskySolve(square(), vector(), o as never), 'stream, upper'],
    ['qr', (o) => qr(square(), o), 'stream'],
    ['svd', (o) => svd(square(), o), 'stream, full'],
    ['eigh', (o) => eigh(square(), o), 'stream, upper'],
  ];
  it.each(cases)('%s refuses one, listing what it takes', async (name, call, takes) => {
    expect(await refusal(() => call({ strem: 1 }))).toBe(
      `${name}: unknown option "strem" (did you mean stream?); ${name} takes ${takes}`,
    );
    expect(await refusal(() => call({ Stream: undefined }))).toContain('(did you mean stream?)');
    expect(await refusal(() => call({ zzz: 1 }))).toBe(
      `${name}: unknown option "zzz"; ${name} takes ${takes}`,
    );
  });
});
