import { describe, expect, it } from 'vitest';
import { benchCommandLine, parseBenchArguments } from '../src/run.js';

describe('pnpm bench command line', () => {
  it('refuses a misspelt flag and lists the valid ones', () => {
    let message = '';
    try {
      parseBenchArguments(['--skip-pyhton']);
    } catch (error) {
      expect((error as Error).name).toBe('CommandLineError');
      message = (error as Error).message;
    }
    expect(message).toMatch(/^unknown option --skip-pyhton \(did you mean --skip-python\?\); /);
    for (const name of Object.keys(benchCommandLine.options))
      expect(message).toContain(`--${name}`);
  });

  it('reads its flags', () => {
    const parsed = parseBenchArguments(['--rounds', '5', '--skip-c', '--peers', 'cupy,torch']);
    expect(parsed).toMatchObject({
      rounds: 5,
      skipC: true,
      skipPython: false,
      peers: ['cupy', 'torch'],
    });
    expect(parseBenchArguments([]).rounds).toBe(3);
    expect(() => parseBenchArguments(['--rounds', '0'])).toThrow(
      '--rounds needs a positive integer, got 0',
    );
  });

  it('--only kernels: the kernels rows alone (no C, no same-process part, no scaling)', () => {
    expect(parseBenchArguments(['--only', 'kernels', '--rounds', '2'])).toMatchObject({
      only: 'kernels',
      rounds: 2,
      skipC: true,
      skipPaired: true,
      skipScaling: true,
      skipPython: false,
      skipOurs: false,
    });
    expect(parseBenchArguments(['--only', 'scaling'])).toMatchObject({
      only: 'scaling',
      skipC: false,
    });
    expect(() => parseBenchArguments(['--only', 'sum'])).toThrow(
      '--only takes scaling or kernels, got sum',
    );
  });
});
