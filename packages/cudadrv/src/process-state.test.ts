import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  compatibleVersion,
  cudadrvCopy,
  cudadrvState,
  packageOf,
  processState,
  registerCopy,
} from './process-state.js';

// Two loaded copies of a package share its process-wide state when their versions are
// compatible, and the second refuses to load when they are not. Each test uses a package name
// of its own: the registry of loaded copies is process-wide too.

describe('compatibleVersion', () => {
  it('is what a caret range treats as compatible', () => {
    expect(compatibleVersion('2.3.4')).toBe('2');
    expect(compatibleVersion('0.1.3')).toBe('0.1');
    expect(compatibleVersion('0.1.0-0')).toBe('0.1');
    expect(compatibleVersion('0.0.7')).toBe('0.0.7');
    expect(compatibleVersion('1.0.0-rc.1')).toBe('1');
  });
});

describe('processState', () => {
  it('gives compatible copies one value, created once', () => {
    let created = 0;
    const first = { name: '@test/shared', version: '0.2.1', directory: '/app/node_modules/a' };
    const second = { name: '@test/shared', version: '0.2.5', directory: '/app/node_modules/b' };
    const a = processState(first, 'pool', () => ({ id: ++created }));
    const b = processState(second, 'pool', () => ({ id: ++created }));
    expect(b).toBe(a);
    expect(created).toBe(1);
    // Other state of the same package is another value.
    expect(processState(first, 'other', () => ({ id: ++created }))).not.toBe(a);
  });

  it('refuses a second copy of another compatible version, naming both versions and folders', () => {
    const first = { name: '@test/clash', version: '0.1.0', directory: '/app/node_modules/old' };
    const second = { name: '@test/clash', version: '0.2.0', directory: '/app/vendor/new' };
    processState(first, 'pool', () => ({}));
    expect(() => processState(second, 'pool', () => ({}))).toThrow(
      '@test/clash: two incompatible copies are loaded in this process: 0.1.0 from /app/node_modules/old and 0.2.0 from /app/vendor/new.',
    );
    expect(() => registerCopy({ ...second, version: '1.0.0' })).toThrow(
      /0\.1\.0 from .* 1\.0\.0 from/,
    );
  });

  it('keys the state by package, compatible version and name under Symbol.for', () => {
    const copy = { name: '@test/keys', version: '3.1.0', directory: '/x' };
    const value = processState(copy, 'slot', () => ({ answer: 42 }));
    expect((globalThis as any)[Symbol.for('@test/keys@3/slot')]).toBe(value);
  });
});

describe("cudadrv's own copy", () => {
  it('is read from its package.json', () => {
    const manifest = JSON.parse(
      readFileSync(new URL('../package.json', import.meta.url), 'utf8'),
    ) as { name: string; version: string };
    expect(cudadrvCopy.name).toBe('@cuda-tasks/cudadrv');
    expect(cudadrvCopy.version).toBe(manifest.version);
    expect(packageOf(import.meta.url, '@cuda-tasks/cudadrv')).toEqual(cudadrvCopy);
    const key = Symbol.for(`@cuda-tasks/cudadrv@${compatibleVersion(manifest.version)}/observer`);
    const slot = cudadrvState('observer', () => ({ observer: null }));
    expect((globalThis as any)[key]).toBe(slot);
  });

  it('falls back to the bundled version where no package.json names it', () => {
    const copy = packageOf(import.meta.url, '@test/not-installed');
    expect(copy.version).toBe('0.0.0-bundled');
    expect(copy.name).toBe('@test/not-installed');
  });
});
