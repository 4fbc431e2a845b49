import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// Every export of every package entry point (the `exports` map's source files, and the user
// library in examples) carries TSDoc,
// and so does every public member of the classes and interfaces it exports: the compiler's
// own view of the documentation comments, as an editor shows them. The examples package has no
// entry point of its own: there, and in the benchmarks, every non-test module under src/ is
// checked alike.

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const packagesDir = join(root, 'packages');

function entryPoints(): string[] {
  const entries: string[] = [];
  for (const name of readdirSync(packagesDir)) {
    const manifest = join(packagesDir, name, 'package.json');
    if (!existsSync(manifest)) continue;
    const exportsMap = (JSON.parse(readFileSync(manifest, 'utf8')) as { exports?: unknown })
      .exports;
    if (exportsMap === undefined || typeof exportsMap !== 'object' || exportsMap === null) continue;
    for (const target of Object.values(exportsMap as Record<string, unknown>)) {
      const source = (target as Record<string, unknown> | string)['@cuda-tasks/source' as never];
      if (typeof source === 'string') entries.push(join(packagesDir, name, source));
    }
  }
  // The user library inside examples is a package in all but its manifest.
  entries.push(join(packagesDir, 'examples/src/user-library/index.ts'));
  return entries.sort();
}

/** Every non-test TypeScript module under packages/examples/src and benchmarks/src. */
function exampleModules(): string[] {
  const modules: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules') walk(path);
      } else if (
        entry.name.endsWith('.ts') &&
        !entry.name.endsWith('.test.ts') &&
        !entry.name.endsWith('.d.ts')
      ) {
        modules.push(path);
      }
    }
  };
  for (const folder of ['packages/examples/src', 'benchmarks/src']) walk(join(root, folder));
  return modules.sort();
}

function undocumented(entries: readonly string[]): {
  exports: string[];
  members: string[];
  counted: number;
} {
  const program = ts.createProgram(entries, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    customConditions: ['@cuda-tasks/source'],
    noEmit: true,
    skipLibCheck: true,
  });
  const checker = program.getTypeChecker();
  const doc = (symbol: ts.Symbol) =>
    ts.displayPartsToString(symbol.getDocumentationComment(checker)).trim();
  const ours = (declaration: ts.Declaration | undefined) =>
    declaration !== undefined && !declaration.getSourceFile().fileName.includes('node_modules');
  const missingExports: string[] = [];
  const missingMembers: string[] = [];
  let counted = 0;
  for (const entry of entries) {
    const source = program.getSourceFile(entry);
    if (source === undefined) throw new Error(`no source file for ${entry}`);
    const module = checker.getSymbolAtLocation(source);
    // A script without imports or exports (no module symbol) exports nothing.
    if (module === undefined) continue;
    const where = relative(packagesDir, entry);
    for (const exported of checker.getExportsOfModule(module)) {
      const target =
        exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      if (!ours(target.declarations?.[0])) continue;
      counted++;
      if (doc(target) === '') missingExports.push(`${where}: ${exported.name}`);
      if (!(target.flags & (ts.SymbolFlags.Class | ts.SymbolFlags.Interface))) continue;
      const members = [...(target.members?.values() ?? []), ...(target.exports?.values() ?? [])];
      for (const member of members) {
        const declaration = member.declarations?.[0];
        if (!ours(declaration) || member.flags & ts.SymbolFlags.TypeParameter) continue;
        const modifiers = ts.getCombinedModifierFlags(declaration!);
        if (modifiers & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) continue;
        if (member.name.startsWith('#') || member.name === 'prototype') continue;
        if (member.name === '__constructor') continue;
        if (ts.getJSDocTags(declaration!).some((tag) => tag.tagName.text === 'internal')) continue;
        counted++;
        if (doc(member) === '') missingMembers.push(`${where}: ${exported.name}.${member.name}`);
      }
    }
  }
  return { exports: missingExports, members: missingMembers, counted };
}

describe('TSDoc', () => {
  it('documents every export of every entry point, and the public members of its classes and interfaces', () => {
    const { exports, members, counted } = undocumented(entryPoints());
    // The check itself found the packages' API (a broken resolution would count nothing).
    expect(counted).toBeGreaterThan(400);
    expect(exports).toEqual([]);
    expect(members).toEqual([]);
  }, 60_000);

  it('documents every export of every non-test module of the examples and the benchmarks, and the public members of its classes and interfaces', () => {
    const modules = exampleModules();
    // The walk found the examples' modules (seed, service, trace, user library, bench).
    for (const expected of [
      'packages/examples/src/seed/seed.ts',
      'packages/examples/src/service/load.ts',
      'benchmarks/src/harness.ts',
      'benchmarks/src/run.ts',
    ]) {
      expect(modules.map((path) => relative(root, path))).toContain(expected);
    }
    expect(modules.some((path) => path.endsWith('.test.ts'))).toBe(false);
    const { exports, members, counted } = undocumented(modules);
    expect(counted).toBeGreaterThan(150);
    expect(exports).toEqual([]);
    expect(members).toEqual([]);
  }, 60_000);
});
