import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * What the packages' layer tests share: the import statements of a package's `src/`, read as
 * text, and the rules a package's files follow. A package reads bottom-up: its files sit in
 * layers, a file imports only from its own layer or below, and the imports form no circle.
 * Imports of the other packages (`@cuda-tasks/...`) go through a table of what each entry
 * point may be imported by, so that `@cuda-tasks/cudadrv/internal` is reached only where the
 * table says.
 */

/** The `.ts` files under `folder` (paths relative to it, with `/`), tests left out. */
export function sourceFiles(folder: string): string[] {
  const walk = (directory: string): string[] =>
    readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
      const path = join(directory, entry.name);
      if (entry.isDirectory()) return walk(path);
      return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [path] : [];
    });
  return walk(folder)
    .map((path) => relative(folder, path).split('\\').join('/'))
    .sort();
}

/** A static import or re-export statement, or a dynamic `import('...')` of a literal. */
const STATEMENT =
  /^(import|export)\s+(type\s+)?([^;]*?)\s*from\s+['"]([^'"]+)['"]|^import\s+['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm;

/** One import of a file. */
export interface ImportStatement {
  /** The module specifier as written (`./stream.js`, `@cuda-tasks/cudadrv/internal`). */
  readonly specifier: string;
  /** True when it brings in no value (`import type`, or every name it lists marked `type`). */
  readonly typeOnly: boolean;
  /** True for `import('...')`, which loads the module when it runs, not when its importer loads. */
  readonly dynamic: boolean;
}

/** The imports and re-exports of `code`, in order. */
export function importStatements(code: string): ImportStatement[] {
  const statements: ImportStatement[] = [];
  for (const match of code.matchAll(STATEMENT)) {
    if (match[6] !== undefined) {
      statements.push({ specifier: match[6], typeOnly: false, dynamic: true });
      continue;
    }
    const specifier = match[4] ?? match[5]!;
    let typeOnly = match[2] !== undefined;
    const names = /^\{([^}]*)\}$/.exec(match[3]?.trim() ?? '')?.[1];
    if (!typeOnly && names !== undefined) {
      const listed = names
        .split(',')
        .map((name) => name.trim())
        .filter((name) => name.length > 0);
      typeOnly = listed.length > 0 && listed.every((name) => name.startsWith('type '));
    }
    statements.push({ specifier, typeOnly, dynamic: false });
  }
  return statements;
}

/** A package's `src/` read once. */
export interface PackageImports {
  /** Each source file (relative to `src/`) and the source files it imports statically. */
  readonly graph: Map<string, string[]>;
  /** The same with type-only imports left out: what orders the loading of the modules. */
  readonly valueGraph: Map<string, string[]>;
  /** Each source file and the `@cuda-tasks/...` specifiers it imports (types, dynamic included). */
  readonly siblings: Map<string, string[]>;
}

/** Reads every source file under `source` (a package's `src/` folder). */
export function readPackage(source: string): PackageImports {
  const graph = new Map<string, string[]>();
  const valueGraph = new Map<string, string[]>();
  const siblings = new Map<string, string[]>();
  for (const file of sourceFiles(source)) {
    const statements = importStatements(readFileSync(join(source, file), 'utf8'));
    const local = statements.filter((s) => s.specifier.startsWith('.') && !s.dynamic);
    const target = (specifier: string) =>
      relative(source, resolve(dirname(join(source, file)), specifier))
        .split('\\')
        .join('/')
        .replace(/\.js$/, '.ts');
    graph.set(file, [...new Set(local.map((s) => target(s.specifier)))]);
    valueGraph.set(file, [
      ...new Set(local.filter((s) => !s.typeOnly).map((s) => target(s.specifier))),
    ]);
    const packages = statements.filter((s) => s.specifier.startsWith('@cuda-tasks/'));
    siblings.set(file, [...new Set(packages.map((s) => s.specifier))]);
  }
  return { graph, valueGraph, siblings };
}

/** One circle of `graph` as [a, b, ..., a], or undefined when there is none. */
export function findCircle(graph: ReadonlyMap<string, readonly string[]>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (node: string): string[] | undefined => {
    if (state.get(node) === 'done') return undefined;
    if (state.get(node) === 'open') return [...path.slice(path.indexOf(node)), node];
    state.set(node, 'open');
    path.push(node);
    for (const next of graph.get(node) ?? []) {
      const circle = visit(next);
      if (circle !== undefined) return circle;
    }
    path.pop();
    state.set(node, 'done');
    return undefined;
  };
  for (const node of graph.keys()) {
    const circle = visit(node);
    if (circle !== undefined) return circle;
  }
  return undefined;
}

/** True when `file` is `path`, or lies in it where `path` names a folder (ends in `/`). */
function matches(file: string, path: string): boolean {
  return path.endsWith('/') ? file.startsWith(path) : file === path;
}

/**
 * The layer of `file` in `layers` (bottom first, each a list of files and folders ending in
 * `/`), or -1 where none holds it.
 */
export function layerOf(file: string, layers: readonly (readonly string[])[]): number {
  return layers.findIndex((layer) => layer.some((path) => matches(file, path)));
}

/** Every edge of `graph` as `from -> to` where `to` lies in a higher layer than `from`. */
export function upwardImports(
  graph: ReadonlyMap<string, readonly string[]>,
  layers: readonly (readonly string[])[],
): string[] {
  const upward: string[] = [];
  for (const [from, targets] of graph) {
    for (const to of targets) {
      if (layerOf(to, layers) > layerOf(from, layers)) upward.push(`${from} -> ${to}`);
    }
  }
  return upward;
}

/** Every edge of `graph` as `from -> to` where `to` lies in one of `apart` and `from` does not. */
export function crossingImports(
  graph: ReadonlyMap<string, readonly string[]>,
  apart: readonly string[],
): string[] {
  const folderOf = (file: string) => apart.find((folder) => file.startsWith(folder));
  const crossing: string[] = [];
  for (const [from, targets] of graph) {
    for (const to of targets) {
      const folder = folderOf(to);
      if (folder !== undefined && folder !== folderOf(from)) crossing.push(`${from} -> ${to}`);
    }
  }
  return crossing;
}

/**
 * What a package may import from the others: each `@cuda-tasks/...` specifier (an entry point
 * as its `exports` name it) with the files that may import it, `'*'` for all of them.
 */
export type SiblingTable = Readonly<Record<string, '*' | readonly string[]>>;

/** Every import of `siblings` as `file -> specifier` that `table` does not allow. */
export function unlistedSiblingImports(
  siblings: ReadonlyMap<string, readonly string[]>,
  table: SiblingTable,
): string[] {
  const unlisted: string[] = [];
  for (const [file, specifiers] of siblings) {
    for (const specifier of specifiers) {
      const allowed = table[specifier];
      const permitted = allowed === '*' || (allowed?.some((path) => matches(file, path)) ?? false);
      if (!permitted) unlisted.push(`${file} -> ${specifier}`);
    }
  }
  return unlisted;
}

/** The package name of a specifier: `@cuda-tasks/cudadrv/internal` -> `@cuda-tasks/cudadrv`. */
export function packageName(specifier: string): string {
  return specifier.split('/').slice(0, 2).join('/');
}

/** The rules one package's files follow. */
export interface LayerRules {
  /** The package's name, for the test titles. */
  readonly name: string;
  /** Its `src/` folder (its `package.json` lies one folder up). */
  readonly source: string;
  /**
   * The layers, bottom first: each a list of files and folders (ending in `/`) relative to
   * `src/`. Every source file must lie in exactly one.
   */
  readonly layers: readonly (readonly string[])[];
  /**
   * Folders of one layer that import nothing of each other (the examples, each on its own);
   * each may still import the layers below.
   */
  readonly apart?: readonly string[];
  /** Imports that exist (`from -> to`), so that a parser that finds nothing cannot pass. */
  readonly knownEdges: readonly string[];
  /** What the package may import from the other packages. */
  readonly siblings: SiblingTable;
  /**
   * Imports that break a rule today (`from -> to` or `file -> @cuda-tasks/...`), each with the
   * issue that removes it. One that is gone fails the test, so that the list stays true.
   */
  readonly exceptions?: Readonly<Record<string, string>>;
}

/**
 * The layer suite of one package: every file has a layer, no import circle (type-only imports
 * included), no import up the layers (type-only ones included), sibling imports only as the
 * table allows, every sibling package declared in `package.json`, and each listed exception
 * still present.
 */
export function describeLayers(rules: LayerRules): void {
  const exceptions = new Set(Object.keys(rules.exceptions ?? {}));
  const unexcused = (found: readonly string[]) => found.filter((edge) => !exceptions.has(edge));
  const withoutExceptions = (graph: ReadonlyMap<string, readonly string[]>) =>
    new Map(
      [...graph].map(([from, targets]) => [
        from,
        targets.filter((to) => !exceptions.has(`${from} -> ${to}`)),
      ]),
    );

  describe(`import layering of ${rules.name}`, () => {
    const { graph, siblings } = readPackage(rules.source);
    const upward = () => upwardImports(graph, rules.layers);
    const unlisted = () => unlistedSiblingImports(siblings, rules.siblings);
    const apartImports = () => crossingImports(graph, rules.apart ?? []);

    it('sees every source file and its imports', () => {
      const edges = [...graph].flatMap(([from, targets]) =>
        targets.map((to) => `${from} -> ${to}`),
      );
      expect(edges).toEqual(expect.arrayContaining([...rules.knownEdges]));
      expect(rules.knownEdges.length).toBeGreaterThan(0);
    });

    it('gives every source file one layer', () => {
      const placeless = [...graph.keys()].filter((file) => layerOf(file, rules.layers) < 0);
      expect(placeless, 'files to place in the layer list').toEqual([]);
      const twice = [...graph.keys()].filter(
        (file) =>
          rules.layers.filter((layer) => layer.some((path) => matches(file, path))).length > 1,
      );
      expect(twice, 'files in two layers').toEqual([]);
    });

    it('has no import circle, type-only imports included', () => {
      expect(findCircle(withoutExceptions(graph))).toBeUndefined();
    });

    it('imports only from its own layer or below, type-only imports included', () => {
      expect(unexcused(upward())).toEqual([]);
      expect(unexcused(apartImports()), 'imports between folders kept apart').toEqual([]);
    });

    it('imports from the other packages only what its table allows', () => {
      expect(unexcused(unlisted())).toEqual([]);
    });

    it('declares every package it imports in package.json', () => {
      const manifest = JSON.parse(
        readFileSync(join(rules.source, '..', 'package.json'), 'utf8'),
      ) as { dependencies?: object; peerDependencies?: object };
      const declared = new Set([
        ...Object.keys(manifest.dependencies ?? {}),
        ...Object.keys(manifest.peerDependencies ?? {}),
      ]);
      const imported = new Set([...siblings.values()].flat().map(packageName));
      expect([...imported].filter((name) => !declared.has(name))).toEqual([]);
    });

    it('still has every exception it lists', () => {
      const present = new Set([...upward(), ...apartImports(), ...unlisted()]);
      const circle = findCircle(graph);
      if (circle !== undefined) {
        for (let i = 0; i + 1 < circle.length; i++) present.add(`${circle[i]} -> ${circle[i + 1]}`);
      }
      const gone = [...exceptions].filter((edge) => !present.has(edge));
      expect(gone, 'exceptions to remove from the list').toEqual([]);
    });
  });
}
