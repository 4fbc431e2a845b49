import { describe, expect, it } from 'vitest';
import { benchCommandLine, parseBenchArguments } from '../src/run.js';
import { SCALING_DEFAULTS } from '../src/scaling-config.js';

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

  it('--scaling: the scaling settings over the defaults; a bad one is refused before anything runs', () => {
    expect(parseBenchArguments([]).scaling).toEqual(SCALING_DEFAULTS);
    const parsed = parseBenchArguments([
      '--only',
      'scaling',
      '--scaling',
      ' ks=16,32,64  shapes=mixed workers=16 ',
    ]);
    expect(parsed.scaling).toEqual({
      ...SCALING_DEFAULTS,
      ks: [16, 32, 64],
      shapes: ['mixed'],
      workers: 16,
    });
    // The defaults are not changed by a run that changed its own settings.
    expect(SCALING_DEFAULTS.ks).toEqual([1, 2, 4, 8, 16, 32, 64]);
    expect(SCALING_DEFAULTS.workers).toBe(8);
    const refused = (settings: string) => {
      try {
        parseBenchArguments(['--scaling', settings]);
      } catch (error) {
        return `${(error as Error).name}: ${(error as Error).message.split('\n')[0]}`;
      }
      return 'accepted';
    };
    expect(refused('workers=0')).toBe(
      "CommandLineError: --scaling: workers must be an integer >= 1, got '0'",
    );
    expect(refused('ks=4,x')).toBe(
      "CommandLineError: --scaling: ks must be an integer >= 1, got 'x'",
    );
    expect(refused('shapes=big')).toBe(
      "CommandLineError: --scaling: unknown shape 'big' (latency, mixed, control)",
    );
    expect(refused('wokers=16')).toBe("CommandLineError: --scaling: unknown setting 'wokers'");
    expect(refused('16')).toBe("CommandLineError: --scaling: expected key=value, got '16'");
  });
});
