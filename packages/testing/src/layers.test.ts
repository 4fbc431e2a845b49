import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  crossingImports,
  findCircle,
  importStatements,
  layerOf,
  packageName,
  readPackage,
  unlistedSiblingImports,
  upwardImports,
} from './layers.js';

describe('the layer rules', () => {
  it('tells value imports from type-only and dynamic ones', () => {
    const code = [
      "import { a, type B } from './a.js';",
      "import type { C } from './c.js';",
      "import { type D, type E } from './d.js';",
      "export { F } from './f.js';",
      "export type { G } from './g.js';",
      "import './side-effect.js';",
      "import koffi from 'koffi';",
      'import {\n  h,\n  type I,\n} from "./double-quotes.js";',
      "export * from './star.js';",
      "  const { x } = await import('@cuda-tasks/examples/kernels');",
    ].join('\n');
    expect(importStatements(code)).toEqual([
      { specifier: './a.js', typeOnly: false, dynamic: false },
      { specifier: './c.js', typeOnly: true, dynamic: false },
      { specifier: './d.js', typeOnly: true, dynamic: false },
      { specifier: './f.js', typeOnly: false, dynamic: false },
      { specifier: './g.js', typeOnly: true, dynamic: false },
      { specifier: './side-effect.js', typeOnly: false, dynamic: false },
      { specifier: 'koffi', typeOnly: false, dynamic: false },
      { specifier: './double-quotes.js', typeOnly: false, dynamic: false },
      { specifier: './star.js', typeOnly: false, dynamic: false },
      { specifier: '@cuda-tasks/examples/kernels', typeOnly: false, dynamic: true },
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

  it('places files and folders in layers and finds imports that go up', () => {
    const layers = [['ffi/', 'errors.ts'], ['handle.ts'], ['index.ts']];
    expect(layerOf('ffi/cublas.ts', layers)).toBe(0);
    expect(layerOf('errors.ts', layers)).toBe(0);
    expect(layerOf('index.ts', layers)).toBe(2);
    expect(layerOf('ffi.ts', layers)).toBe(-1);
    const graph = new Map([
      ['index.ts', ['handle.ts']],
      ['handle.ts', ['errors.ts']],
      ['ffi/cublas.ts', ['handle.ts', 'errors.ts']],
    ]);
    expect(upwardImports(graph, layers)).toEqual(['ffi/cublas.ts -> handle.ts']);
  });

  it('finds imports between folders kept apart', () => {
    const graph = new Map([
      ['seed/demo.ts', ['cli.ts', 'seed/scene.ts', 'service/stats.ts']],
      ['service/server.ts', ['cli.ts', 'service/stats.ts']],
      ['cli.ts', []],
    ]);
    expect(crossingImports(graph, ['seed/', 'service/'])).toEqual([
      'seed/demo.ts -> service/stats.ts',
    ]);
  });

  it('allows sibling imports by entry point and file', () => {
    const siblings = new Map([
      ['a.ts', ['@cuda-tasks/cudadrv', '@cuda-tasks/cudadrv/internal']],
      ['user/b.ts', ['@cuda-tasks/cudadrv/internal']],
      ['c.ts', ['@cuda-tasks/cudadrv/src/stream.ts']],
    ]);
    expect(
      unlistedSiblingImports(siblings, {
        '@cuda-tasks/cudadrv': '*',
        '@cuda-tasks/cudadrv/internal': ['a.ts'],
      }),
    ).toEqual([
      'user/b.ts -> @cuda-tasks/cudadrv/internal',
      'c.ts -> @cuda-tasks/cudadrv/src/stream.ts',
    ]);
    expect(
      unlistedSiblingImports(siblings, {
        '@cuda-tasks/cudadrv': '*',
        '@cuda-tasks/cudadrv/internal': ['a.ts', 'user/'],
      }),
    ).toEqual(['c.ts -> @cuda-tasks/cudadrv/src/stream.ts']);
    expect(packageName('@cuda-tasks/cudadrv/internal')).toBe('@cuda-tasks/cudadrv');
  });

  describe('reads a package from disk', () => {
    const source = mkdtempSync(join(tmpdir(), 'layers-'));
    afterAll(() => rmSync(source, { recursive: true, force: true }));
    mkdirSync(join(source, 'ffi'));
    writeFileSync(join(source, 'ffi', 'lib.ts'), "import { x } from '@cuda-tasks/cudadrv/ffi';\n");
    writeFileSync(
      join(source, 'index.ts'),
      "export { f } from './ffi/lib.js';\nimport type { T } from './types.js';\n",
    );
    writeFileSync(join(source, 'types.ts'), "import { f } from './ffi/lib.js';\n");
    writeFileSync(join(source, 'index.test.ts'), "import { f } from './index.js';\n");

    it('resolves relative imports to files and leaves tests out', () => {
      const read = readPackage(source);
      expect([...read.graph.keys()]).toEqual(['ffi/lib.ts', 'index.ts', 'types.ts']);
      expect(read.graph.get('index.ts')).toEqual(['ffi/lib.ts', 'types.ts']);
      expect(read.valueGraph.get('index.ts')).toEqual(['ffi/lib.ts']);
      expect(read.siblings.get('ffi/lib.ts')).toEqual(['@cuda-tasks/cudadrv/ffi']);
    });
  });
});
