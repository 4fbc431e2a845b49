import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// docs/conventions.md holds one name per idea of the public API; this test holds the packages
// to it. It reads the public entry (".") of every published package with the compiler, as a
// user's editor does, and the vocabulary table of the page, and fails on a second name for one
// idea: a second type alias for the same union, a transpose option spelled otherwise than
// transA / transB, a `priority` option that does not take the names, one name exported by two
// packages for two different things (unless the table says it is one per library), a deprecated
// name that does not point to its replacement, and a bare TypeError / RangeError thrown by a
// published package outside the page's list of settings still to be aligned.

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const packagesDir = join(root, 'packages');
const page = readFileSync(join(root, 'docs/conventions.md'), 'utf8');

interface PublishedPackage {
  /** The folder under packages/ (cudadrv, cublas, ...). */
  folder: string;
  /** The public entry's source file. */
  entry: string;
}

function publishedPackages(): PublishedPackage[] {
  const result: PublishedPackage[] = [];
  for (const folder of readdirSync(packagesDir).sort()) {
    const manifestPath = join(packagesDir, folder, 'package.json');
    if (!existsSync(manifestPath)) continue;
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as {
      private?: boolean;
      exports?: Record<string, unknown>;
    };
    if (manifest.private === true) continue;
    const main = manifest.exports?.['.'] as Record<string, unknown> | undefined;
    const source = main?.['@cuda-tasks/source'];
    if (typeof source === 'string')
      result.push({ folder, entry: join(packagesDir, folder, source) });
  }
  return result;
}

/** One public export: its package, name, the declaration it resolves to, and its symbol. */
interface PublicExport {
  folder: string;
  name: string;
  symbol: ts.Symbol;
  declaration: ts.Declaration;
  /** The text of its @deprecated tag, or undefined when it has none. */
  deprecated: string | undefined;
}

const packages = publishedPackages();
const program = ts.createProgram(
  packages.map((p) => p.entry),
  {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    customConditions: ['@cuda-tasks/source'],
    strict: true,
    noEmit: true,
    skipLibCheck: true,
  },
);
const checker = program.getTypeChecker();

function deprecationOf(symbol: ts.Symbol): string | undefined {
  for (const tag of symbol.getJsDocTags(checker)) {
    if (tag.name === 'deprecated') return ts.displayPartsToString(tag.text ?? []).trim() || '-';
  }
  return undefined;
}

function publicExports(): PublicExport[] {
  const result: PublicExport[] = [];
  for (const { folder, entry } of packages) {
    const source = program.getSourceFile(entry);
    const module = source && checker.getSymbolAtLocation(source);
    if (module === undefined) throw new Error(`no module for ${entry}`);
    for (const exported of checker.getExportsOfModule(module)) {
      const symbol =
        exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const declaration = symbol.declarations?.[0];
      if (
        declaration === undefined ||
        declaration.getSourceFile().fileName.includes('node_modules')
      )
        continue;
      result.push({
        folder,
        name: exported.name,
        symbol,
        declaration,
        deprecated: deprecationOf(symbol),
      });
    }
  }
  return result;
}

const exports = publicExports();
const where = (e: PublicExport) => `${e.folder}: ${e.name}`;

/** The cells of the page's vocabulary table, one row per idea. */
interface VocabularyRow {
  idea: string;
  kind: string;
  names: string[];
  exportedBy: string[];
  deprecated: { name: string; folder: string }[];
}

function vocabulary(): VocabularyRow[] {
  const start = page.indexOf('<!-- vocabulary -->');
  const end = page.indexOf('<!-- /vocabulary -->');
  if (start < 0 || end < 0) throw new Error('docs/conventions.md: no <!-- vocabulary --> table');
  const rows = page
    .slice(start, end)
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .slice(2);
  const spans = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
  return rows.map((line) => {
    const cells = line
      .split(/(?<!\\)\|/)
      .slice(1, -1)
      .map((cell) => cell.replaceAll('\\|', '|').trim());
    const [idea, kind, names, exportedBy, deprecated] = cells as [
      string,
      string,
      string,
      string,
      string,
    ];
    return {
      idea,
      kind,
      names: spans(names),
      exportedBy: [
        ...exportedBy.matchAll(/\b(cudadrv|task-runtime|cublas|curand|cusolver|kernels)\b/g),
      ].map((m) => m[1]!),
      deprecated: [...deprecated.matchAll(/`([^`]+)`\s*\(([\w-]+)/g)].map((m) => ({
        name: m[1]!,
        folder: m[2]!,
      })),
    };
  });
}

const table = vocabulary();

describe('docs/conventions.md: one name per idea', () => {
  it('reads the public API and the table (a broken resolution would find nothing)', () => {
    expect(packages.map((p) => p.folder)).toEqual(
      expect.arrayContaining([
        'cudadrv',
        'task-runtime',
        'cublas',
        'curand',
        'cusolver',
        'kernels',
      ]),
    );
    expect(exports.length).toBeGreaterThan(200);
    expect(table.length).toBeGreaterThanOrEqual(8);
  });

  it('has one type alias per union of names: the others are deprecated and point to it', () => {
    const groups = new Map<string, PublicExport[]>();
    for (const e of exports) {
      if (!(e.symbol.flags & ts.SymbolFlags.TypeAlias)) continue;
      const key = literalUnionKey(checker.getDeclaredTypeOfSymbol(e.symbol));
      if (key !== undefined) groups.set(key, [...(groups.get(key) ?? []), e]);
    }
    const problems: string[] = [];
    const typeRows = new Set(table.filter((r) => r.kind === 'type').flatMap((r) => r.names));
    for (const [key, list] of groups) {
      const declarations = new Map<ts.Declaration, PublicExport>();
      for (const e of list)
        if (!declarations.has(e.declaration)) declarations.set(e.declaration, e);
      if (declarations.size < 2) continue;
      const current = [...declarations.values()].filter((e) => e.deprecated === undefined);
      if (current.length !== 1) {
        problems.push(`${key}: ${current.length} current names (${current.map(where).join(', ')})`);
        continue;
      }
      const name = current[0]!.name;
      if (!typeRows.has(name)) problems.push(`${key}: ${name} is not in the vocabulary table`);
      for (const e of declarations.values()) {
        if (e.deprecated !== undefined && !e.deprecated.includes(name)) {
          problems.push(`${where(e)}: its @deprecated does not name ${name}`);
        }
      }
    }
    expect(problems).toEqual([]);
    // The union the issue found under three names has one now.
    expect(groups.get("'float32'|'float64'")?.some((e) => e.name === 'FloatDType')).toBe(true);
  });

  it('exports each name of the table from the packages it lists, as one thing', () => {
    const problems: string[] = [];
    for (const row of table) {
      if (row.kind !== 'type' && row.kind !== 'function') continue;
      for (const name of row.names) {
        const found = exports.filter((e) => e.name === name && row.exportedBy.includes(e.folder));
        const folders = [...new Set(found.map((e) => e.folder))].sort();
        if (folders.join() !== [...row.exportedBy].sort().join()) {
          problems.push(
            `${name}: exported by ${folders.join(', ')}; the table says ${row.exportedBy.join(', ')}`,
          );
        }
        if (new Set(found.map((e) => e.declaration)).size > 1) {
          problems.push(`${name}: ${found.map(where).join(', ')} are different things`);
        }
        for (const e of found) {
          if (e.deprecated !== undefined) problems.push(`${where(e)} is deprecated`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('exports a name from two packages only as the same thing, or as one per library', () => {
    const perLibrary = new Set(
      table.filter((r) => r.kind === 'one per library').flatMap((r) => r.names),
    );
    const byName = new Map<string, PublicExport[]>();
    for (const e of exports) byName.set(e.name, [...(byName.get(e.name) ?? []), e]);
    const problems: string[] = [];
    for (const [name, list] of byName) {
      if (new Set(list.map((e) => e.declaration)).size > 1 && !perLibrary.has(name)) {
        problems.push(`${name}: ${list.map(where).join(', ')}`);
      }
    }
    expect(problems).toEqual([]);
    // setDefaultDevice: cudadrv's function, re-exported by the task runtime.
    const setters = exports.filter((e) => e.name === 'setDefaultDevice');
    expect(setters.map((e) => e.folder).sort()).toEqual(['cudadrv', 'task-runtime']);
    expect(new Set(setters.map((e) => e.declaration)).size).toBe(1);
  });

  it('keeps each deprecated name of the table, marked @deprecated and naming its replacement', () => {
    const problems: string[] = [];
    for (const row of table) {
      for (const { name, folder } of row.deprecated) {
        const found =
          row.kind === 'option'
            ? optionProperties(folder).filter((p) => p.name === name)
            : exports
                .filter((e) => e.name === name && e.folder === folder)
                .map((e) => ({ name: e.name, owner: '', deprecated: e.deprecated }));
        if (found.length === 0) problems.push(`${folder}: ${name} is gone (the table keeps it)`);
        for (const item of found) {
          if (item.deprecated === undefined) {
            problems.push(`${folder}: ${item.owner}${name} is not @deprecated`);
          } else if (!row.names.some((replacement) => item.deprecated!.includes(replacement))) {
            problems.push(
              `${folder}: ${item.owner}${name}'s @deprecated names none of ${row.names.join(', ')}`,
            );
          }
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('spells transpose options transA / transB (others only as deprecated spellings)', () => {
    const row = table.find((r) => r.kind === 'option' && r.names.includes('transA'));
    expect(row?.names).toEqual(['transA', 'transB']);
    const problems: string[] = [];
    let seen = 0;
    for (const { folder } of packages) {
      for (const property of optionProperties(folder)) {
        if (!/^trans/i.test(property.name)) continue;
        seen++;
        if (row!.names.includes(property.name)) continue;
        const listed = row!.deprecated.some((d) => d.name === property.name && d.folder === folder);
        if (property.deprecated === undefined || !listed) {
          problems.push(`${folder}: ${property.owner}${property.name}`);
        }
      }
    }
    expect(problems).toEqual([]);
    expect(seen).toBeGreaterThan(5);
  });

  it("takes the priority names wherever an option is called priority ('high' | 'normal' | 'low')", () => {
    const problems: string[] = [];
    const owners: string[] = [];
    for (const { folder } of packages) {
      for (const property of optionProperties(folder)) {
        if (property.name !== 'priority') continue;
        owners.push(`${folder}: ${property.owner}`);
        for (const name of ['high', 'normal', 'low']) {
          if (!checker.isTypeAssignableTo(checker.getStringLiteralType(name), property.type)) {
            problems.push(`${folder}: ${property.owner}priority does not take '${name}'`);
          }
        }
      }
    }
    expect(problems).toEqual([]);
    expect(owners).toEqual(
      expect.arrayContaining(['cudadrv: StreamOptions.', 'task-runtime: TaskOptions.']),
    );
  });

  it('labels errors with the call: `call` on every error class, no second field for it', () => {
    const row = table.find((r) => r.kind === 'field');
    expect(row?.names).toEqual(['call']);
    const problems: string[] = [];
    let errors = 0;
    for (const e of exports) {
      if (!(e.symbol.flags & ts.SymbolFlags.Class)) continue;
      const instance = checker.getDeclaredTypeOfSymbol(e.symbol);
      const names = new Set(instance.getProperties().map((p) => p.name));
      if (!names.has('message') || !names.has('status')) continue; // errors with a status
      errors++;
      if (!names.has('call')) problems.push(`${where(e)} has no call`);
      for (const other of ['operation', 'what', 'label', 'routine']) {
        if (names.has(other)) problems.push(`${where(e)}.${other}`);
      }
    }
    expect(problems).toEqual([]);
    expect(errors).toBeGreaterThanOrEqual(4); // CudaError and the three libraries' errors
  });

  it('throws CudaArgumentError for bad arguments and settings: a bare TypeError or RangeError only where the page lists it as still to be aligned', () => {
    const listed = new Set(
      [...section('to-align').matchAll(/^- `([\w-]+): ([\w.]+)`/gm)].map((m) => `${m[1]}: ${m[2]}`),
    );
    const found = new Set(bareErrorThrows());
    expect([...found].filter((site) => !listed.has(site))).toEqual([]);
    expect([...listed].filter((site) => !found.has(site))).toEqual([]);
  });
});

/** The sorted member literals of a union of string literals, joined: undefined for anything else. */
function literalUnionKey(type: ts.Type): string | undefined {
  if (!type.isUnion() || !type.types.every((t) => t.isStringLiteral())) return undefined;
  return type.types
    .map((t) => `'${(t as ts.StringLiteralType).value}'`)
    .sort()
    .join('|');
}

interface OptionProperty {
  name: string;
  /** `Interface.` (for messages). */
  owner: string;
  type: ts.Type;
  deprecated: string | undefined;
}

/** Every property (own and inherited) of every interface a package's entry exports. */
function optionProperties(folder: string): OptionProperty[] {
  const result: OptionProperty[] = [];
  for (const e of exports) {
    if (e.folder !== folder || !(e.symbol.flags & ts.SymbolFlags.Interface)) continue;
    const type = checker.getDeclaredTypeOfSymbol(e.symbol);
    for (const property of type.getProperties()) {
      const declaration = property.valueDeclaration ?? property.declarations?.[0];
      if (
        declaration === undefined ||
        declaration.getSourceFile().fileName.includes('node_modules')
      )
        continue;
      result.push({
        name: property.name,
        owner: `${e.name}.`,
        type: checker.getNonNullableType(checker.getTypeOfSymbolAtLocation(property, declaration)),
        deprecated: deprecationOf(property),
      });
    }
  }
  return result;
}

/** The text between `<!-- name -->` and `<!-- /name -->` on the page. */
function section(name: string): string {
  const start = page.indexOf(`<!-- ${name} -->`);
  const end = page.indexOf(`<!-- /${name} -->`);
  if (start < 0 || end < start) throw new Error(`docs/conventions.md: no <!-- ${name} --> section`);
  return page.slice(start, end);
}

/**
 * `package: function` for each `new TypeError(...)` / `new RangeError(...)` in the non-test
 * sources of the published packages (`Class.method` inside a class; `Class.constructor`).
 */
function bareErrorThrows(): string[] {
  const sites: string[] = [];
  for (const { folder } of packages) {
    for (const path of sourceFiles(join(packagesDir, folder, 'src'))) {
      const text = readFileSync(path, 'utf8');
      if (!/new (TypeError|RangeError)\b/.test(text)) continue;
      const source = ts.createSourceFile(path, text, ts.ScriptTarget.ES2022, true);
      const visit = (node: ts.Node) => {
        if (
          ts.isNewExpression(node) &&
          ts.isIdentifier(node.expression) &&
          (node.expression.text === 'TypeError' || node.expression.text === 'RangeError')
        ) {
          sites.push(`${folder}: ${enclosingName(node)}`);
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
  }
  return sites;
}

function enclosingName(node: ts.Node): string {
  for (let at: ts.Node | undefined = node.parent; at !== undefined; at = at.parent) {
    if ((ts.isFunctionDeclaration(at) || ts.isMethodDeclaration(at)) && at.name !== undefined) {
      const owner = ts.isClassLike(at.parent) ? `${at.parent.name?.getText() ?? 'class'}.` : '';
      return `${owner}${at.name.getText()}`;
    }
    if (ts.isConstructorDeclaration(at))
      return `${at.parent.name?.getText() ?? 'class'}.constructor`;
  }
  return relative(packagesDir, node.getSourceFile().fileName);
}

function sourceFiles(folder: string): string[] {
  if (!existsSync(folder)) return [];
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') &&
      !entry.name.endsWith('.test.ts') &&
      !entry.name.endsWith('.d.ts')
      ? [path]
      : [];
  });
}
