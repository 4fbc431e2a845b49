import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The package reads bottom-up: the files at the root of src/ (errors, the driver loader, dtypes,
 * the use clock) and ffi/, then context/, stream/, memory/, kernel/, graph/, then the entries. A file
 * imports values only from its own layer or below, and the value imports form no circle.
 * Type-only imports are erased at compile time and order nothing when the modules load, so
 * they may point anywhere (a Context names its default Stream, a Stream its Context).
 */
const source = dirname(fileURLToPath(import.meta.url));

const LAYERS = ['', 'ffi', 'context', 'stream', 'memory', 'kernel', 'graph'];
const ENTRIES = new Set(['index.ts', 'internal.ts']);

function layerOf(file: string): number {
  if (ENTRIES.has(file)) return LAYERS.length;
  const folder = file.includes('/') ? file.slice(0, file.indexOf('/')) : '';
  const layer = LAYERS.indexOf(folder);
  if (layer < 0) throw new Error(`${file}: folder ${folder}/ has no place in LAYERS`);
  // ffi/ sits beside the root files (its loader reports CudaUnavailableError from errors.ts).
  return folder === 'ffi' ? 0 : layer;
}

function sourceFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

/** An import or re-export statement: its specifier, and whether it brings in any value. */
const STATEMENT =
  /^(import|export)\s+(type\s+)?([^;]*?)\s*from\s+['"]([^'"]+)['"]|^import\s+['"]([^'"]+)['"]/gm;

/** The relative value imports of `code` (type-only ones left out). */
function valueImports(code: string): string[] {
  const specifiers: string[] = [];
  for (const match of code.matchAll(STATEMENT)) {
    const specifier = match[4] ?? match[5]!;
    if (!specifier.startsWith('.')) continue;
    if (match[2] !== undefined) continue; // `import type` / `export type`
    const names = /^\{([^}]*)\}$/.exec(match[3]?.trim() ?? '')?.[1];
    if (names !== undefined) {
      const listed = names
        .split(',')
        .map((name) => name.trim())
        .filter((name) => name.length > 0);
      if (listed.length > 0 && listed.every((name) => name.startsWith('type '))) continue;
    }
    specifiers.push(specifier);
  }
  return specifiers;
}

function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const path of sourceFiles(source)) {
    const from = relative(source, path);
    const targets = valueImports(readFileSync(path, 'utf8')).map((specifier) =>
      relative(source, resolve(dirname(path), specifier)).replace(/\.js$/, '.ts'),
    );
    graph.set(from, targets);
  }
  return graph;
}

/** One circle of `graph` as [a, b, ..., a], or undefined when there is none. */
function findCircle(graph: Map<string, string[]>): string[] | undefined {
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

describe('import layering of @cuda-tasks/cudadrv', () => {
  const graph = importGraph();

  it('sees every source file and its imports', () => {
    // Known edges, so that a parser that silently finds nothing cannot pass the checks below.
    expect(graph.get('stream/stream.ts')).toContain('context/device.ts');
    expect(graph.get('kernel/module.ts')).toContain('kernel/kernel.ts');
    expect(graph.get('index.ts')?.length).toBeGreaterThan(10);
  });

  it('has no import circle', () => {
    expect(findCircle(graph)).toBeUndefined();
  });

  it('imports values only from the same layer or below', () => {
    const upward: string[] = [];
    for (const [from, targets] of graph) {
      for (const to of targets) {
        if (layerOf(to) > layerOf(from)) upward.push(`${from} -> ${to}`);
      }
    }
    expect(upward).toEqual([]);
  });

  it('tells value imports from type-only ones', () => {
    const code = [
      "import { a, type B } from './a.js';",
      "import type { C } from './c.js';",
      "import { type D, type E } from './d.js';",
      "export { F } from './f.js';",
      "export type { G } from './g.js';",
      "import './side-effect.js';",
      "import { koffi } from 'koffi';",
      'import {\n  h,\n  type I,\n} from "./double-quotes.js";',
      "export * from './star.js';",
    ].join('\n');
    expect(valueImports(code)).toEqual([
      './a.js',
      './f.js',
      './side-effect.js',
      './double-quotes.js',
      './star.js',
    ]);
  });

  it('finds a circle where there is one', () => {
    const circular = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ]);
    expect(findCircle(circular)).toEqual(['a.ts', 'b.ts', 'c.ts', 'a.ts']);
    expect(findCircle(new Map([['a.ts', ['b.ts']]]))).toBeUndefined();
  });
});
