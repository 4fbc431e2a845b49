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
});
