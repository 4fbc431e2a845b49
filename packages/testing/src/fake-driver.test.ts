import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { assertOptions } from '@cuda-tasks/cudadrv';
import { ffiValue } from '@cuda-tasks/cudadrv/internal';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createFakeDriver } from './fake-driver.js';

const packages = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * The value names a file imports by name from `@cuda-tasks/cudadrv` or `/internal`, and the
 * files it imports names from. Re-exports and bare imports are not followed: an entry that
 * re-exports everything reaches modules whose cudadrv names the tests never touch (a mocked
 * module fails only when a missing name is read).
 */
function importsOf(code: string): { names: string[]; relative: string[] } {
  const names: string[] = [];
  const relative: string[] = [];
  for (const match of code.matchAll(/import\s+(type\s+)?\{([^}]*)\}\s+from\s+'([^']+)'/g)) {
    const [, typeOnly, list = '', target = ''] = match;
    if (typeOnly !== undefined) continue;
    if (target.startsWith('.')) {
      relative.push(target);
      continue;
    }
    if (target !== '@cuda-tasks/cudadrv' && target !== '@cuda-tasks/cudadrv/internal') continue;
    for (const entry of list.split(',')) {
      const name = entry.trim();
      if (name === '' || name.startsWith('type ')) continue;
      names.push(name.split(/\s+as\s+/)[0]!);
    }
  }
  return { names, relative };
}

/** The cudadrv value names reachable from `test` through its relative (non-type) imports. */
function reachableNames(test: string): Set<string> {
  const names = new Set<string>();
  const seen = new Set<string>();
  const visit = (file: string, isTest: boolean) => {
    if (seen.has(file)) return;
    seen.add(file);
    const { names: own, relative } = importsOf(readFileSync(file, 'utf8'));
    if (!isTest) for (const name of own) names.add(name);
    for (const specifier of relative) {
      const target = resolve(dirname(file), specifier.replace(/\.js$/, '.ts'));
      if (target.startsWith(packages) && !target.includes('/testing/')) visit(target, false);
    }
  };
  visit(test, true);
  return names;
}

describe('the driver double', () => {
  it('has every cudadrv value that the code under its tests imports (or the test supplies it)', () => {
    const fake = createFakeDriver();
    const tests = readdirSync(packages).flatMap((name) => {
      const source = join(packages, name, 'src');
      let files: string[];
      try {
        files = readdirSync(source);
      } catch {
        return [];
      }
      return files
        .filter((file) => file.endsWith('.test.ts') && !file.endsWith('.gpu.test.ts'))
        .map((file) => join(source, file))
        .filter((file) => readFileSync(file, 'utf8').includes('createFakeDriver('))
        .filter((file) => !file.includes('/testing/'));
    });
    expect(tests.length).toBeGreaterThan(5);
    const missing: string[] = [];
    for (const test of tests) {
      const text = readFileSync(test, 'utf8');
      for (const name of reachableNames(test)) {
        // A test that mocks a name itself (the real error classes, a scripted observer) names it.
        if (!(name in fake.module) && !new RegExp(`\\b${name}\\b`).test(text)) {
          missing.push(`${test.slice(packages.length + 1)}: ${name}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });

  it('assertOptions accepts and rejects what the real one does, with its message', () => {
    const { module, CudaArgumentError } = createFakeDriver();
    const names = ['stream', 'upper', 'transA', 'transa', 'info', 'alpha', 'Stream', 'uper'];
    const options = fc.oneof(
      fc.dictionary(fc.constantFrom(...names), fc.constantFrom(undefined, 1, true)),
      fc.constantFrom(undefined, null, 'upper', 3, true),
    );
    const known = fc.option(fc.subarray(names.slice(0, 6), { minLength: 1 }), { nil: undefined });
    let rejected = 0;
    fc.assert(
      fc.property(options, known, (value, list) => {
        let expected: string | undefined;
        try {
          assertOptions('call', value, list);
        } catch (error) {
          expected = (error as Error).message;
        }
        if (expected === undefined) {
          expect(() => module.assertOptions('call', value, list)).not.toThrow();
        } else {
          rejected++;
          expect(() => module.assertOptions('call', value, list)).toThrow(CudaArgumentError);
          expect(() => module.assertOptions('call', value, list)).toThrow(expected);
        }
      }),
      { numRuns: 300 },
    );
    expect(rejected).toBeGreaterThan(30);
    expect(() => module.assertOptions('lu', { uper: true }, ['stream', 'upper'])).toThrow(
      'lu: unknown option "uper" (did you mean upper?); lu takes stream, upper',
    );
  });

  it('ffiValue converts handles as the real one does', () => {
    const { module } = createFakeDriver();
    for (const handle of [0n, 1n, 0x7f12_3456_7000n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 64n - 1n]) {
      expect(module.ffiValue(handle)).toBe(ffiValue(handle));
    }
  });

  it('reports no operation to an observer (none is ever installed)', () => {
    const { module, devices } = createFakeDriver();
    expect(module.beginOperation('gemm', devices[0]!.context.defaultStream)).toBe(-1);
    expect(() => module.endOperation(-1)).not.toThrow();
  });
});
