import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// Process-wide state goes through cudadrv's `processState`, which keys each piece by package
// name and compatible version and refuses an incompatible second copy. A module that keeps
// its own slot on `globalThis` hand-versions its key and shares state with any copy, so no
// source file of a package or of the benchmarks touches `globalThis` slots itself.

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Files that may hold `globalThis` slots, each with the reason. */
const ALLOWED: Readonly<Record<string, string>> = {
  'packages/cudadrv/src/process-state.ts': 'the registry itself',
  'packages/testing/src/fake-driver.ts': "the test double of cudadrv's processState",
};

/** Indexing `globalThis` (also through a cast), aliasing it, or defining on it. */
const SLOT_ACCESS = [
  /\bglobalThis\s*\[/,
  /\(\s*globalThis\s+as\s+[^)]*\)\s*\[/,
  /=\s*globalThis\s+as\b/,
  /\b(?:Object|Reflect)\.\w+\(\s*globalThis\b/,
];

function withoutComments(code: string): string {
  return code.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
}

function sourceFiles(folder: string): string[] {
  if (!existsSync(folder)) return [];
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sourceFiles(path);
    const name = entry.name;
    return name.endsWith('.ts') && !name.endsWith('.test.ts') && !name.endsWith('.d.ts')
      ? [path]
      : [];
  });
}

function slotFiles(): string[] {
  const folders = [
    ...readdirSync(join(root, 'packages')).map((name) => join(root, 'packages', name, 'src')),
    join(root, 'benchmarks', 'src'),
  ];
  return folders
    .flatMap(sourceFiles)
    .filter((path) => {
      const code = withoutComments(readFileSync(path, 'utf8'));
      return SLOT_ACCESS.some((pattern) => pattern.test(code));
    })
    .map((path) => relative(root, path))
    .sort();
}

describe('process-wide state', () => {
  it('the detector sees the ways a slot is written, and not comments', () => {
    const slot = (code: string) => SLOT_ACCESS.some((p) => p.test(withoutComments(code)));
    expect(slot('const s = ((globalThis as any)[KEY] ??= new Map());')).toBe(true);
    expect(slot("globalThis[Symbol.for('x')] = 1;")).toBe(true);
    expect(slot('const holder = globalThis as unknown as Record<symbol, T>;')).toBe(true);
    expect(slot('Object.defineProperty(globalThis, key, { value });')).toBe(true);
    expect(slot('// kept on globalThis[key] by processState')).toBe(false);
    expect(slot('/** lives on `(globalThis as any)[KEY]` */ const a = 1;')).toBe(false);
    expect(slot('const run = globalThis.eval;')).toBe(false);
  });

  it('no package keeps a globalThis slot of its own: processState (cudadrv) holds them all', () => {
    const unexpected = slotFiles().filter((file) => !(file in ALLOWED));
    expect(
      unexpected,
      'use processState(packageOf(import.meta.url, name), key, create) from @cuda-tasks/cudadrv',
    ).toEqual([]);
  });

  it('every allowed file still holds a slot (remove an entry once its slot has moved)', () => {
    const found = new Set(slotFiles());
    expect(Object.keys(ALLOWED).filter((file) => !found.has(file))).toEqual([]);
  });
});
