import { describe, expect, it } from 'vitest';
import {
  exportTargets,
  importableSubpaths,
  type PackedManifest,
  packageProblems,
  specifierOf,
} from '../scripts/package-check/exports.js';

// The core of `pnpm check:packages`: a packed package against its exports map. A broken map
// must fail it (the CI step runs this check on every real tarball).

const manifest: PackedManifest = {
  name: '@cuda-tasks/example',
  main: './dist/index.js',
  types: './dist/index.d.ts',
  exports: {
    '.': {
      '@cuda-tasks/source': './src/index.ts',
      types: './dist/index.d.ts',
      default: './dist/index.js',
    },
    './ffi': {
      '@cuda-tasks/source': './src/ffi/index.ts',
      types: './dist/ffi.d.ts',
      default: './dist/ffi.js',
    },
    './package.json': './package.json',
  },
  peerDependencies: { '@cuda-tasks/cudadrv': '^0.1.0-0' },
};
const shipped = new Set([
  'package.json',
  'LICENSE',
  'README.md',
  'CHANGELOG.md',
  'dist/index.js',
  'dist/index.d.ts',
  'dist/ffi.js',
  'dist/ffi.d.ts',
]);
const without = (file: string) => new Set([...shipped].filter((path) => path !== file));

describe('packageProblems', () => {
  it('finds nothing wrong with a complete package (the source condition is not looked for)', () => {
    expect(packageProblems(manifest, shipped, { expectChangelog: true })).toEqual([]);
  });

  it('fails on an exports target missing from the tarball', () => {
    expect(packageProblems(manifest, without('dist/ffi.js'))).toEqual([
      'exports["./ffi"]["default"] = ./dist/ffi.js is not in the package',
    ]);
    expect(packageProblems(manifest, without('dist/index.d.ts'))).toEqual([
      'exports["."]["types"] = ./dist/index.d.ts is not in the package',
      '"types" = ./dist/index.d.ts is not in the package',
    ]);
  });

  it('fails on a map that points at the wrong file', () => {
    const broken = structuredClone(manifest);
    (broken.exports as Record<string, Record<string, string>>)['./ffi']!.default = './dist/ffi.mjs';
    expect(packageProblems(broken, shipped)).toEqual([
      'exports["./ffi"]["default"] = ./dist/ffi.mjs is not in the package',
    ]);
  });

  it('fails on a subpath without types, without JavaScript, and without ./package.json', () => {
    const broken = structuredClone(manifest) as PackedManifest & { exports: any };
    broken.exports['./ffi'] = { default: './dist/ffi.js' };
    broken.exports['./types-only'] = { types: './dist/ffi.d.ts' };
    delete broken.exports['./package.json'];
    expect(packageProblems(broken, shipped)).toEqual([
      'exports["./ffi"] has no "types" condition',
      'exports["./types-only"] has no JavaScript target',
      'exports has no "./package.json"',
    ]);
  });

  it('fails without the license, the readme or (when there is one) the changelog', () => {
    expect(packageProblems(manifest, without('LICENSE'))).toEqual([
      'LICENSE is not in the package',
    ]);
    expect(packageProblems(manifest, without('CHANGELOG.md'), { expectChangelog: true })).toEqual([
      'CHANGELOG.md is not in the package',
    ]);
  });

  it('fails on a workspace: range left in the packed manifest', () => {
    const broken = { ...manifest, peerDependencies: { '@cuda-tasks/cudadrv': 'workspace:^' } };
    expect(packageProblems(broken, shipped)).toEqual([
      'peerDependencies["@cuda-tasks/cudadrv"] = workspace:^ was not replaced when packing',
    ]);
  });
});

describe('exports map helpers', () => {
  it('lists every target with its conditions, and the importable subpaths', () => {
    expect(exportTargets({ '.': { import: { types: './a.d.ts', default: './a.js' } } })).toEqual([
      { subpath: '.', conditions: ['import', 'types'], target: './a.d.ts' },
      { subpath: '.', conditions: ['import', 'default'], target: './a.js' },
    ]);
    expect(exportTargets('./index.js')).toEqual([
      { subpath: '.', conditions: [], target: './index.js' },
    ]);
    expect(importableSubpaths(manifest.exports)).toEqual(['.', './ffi']);
    expect(specifierOf('@cuda-tasks/cublas', './ffi')).toBe('@cuda-tasks/cublas/ffi');
    expect(specifierOf('@cuda-tasks/cublas', '.')).toBe('@cuda-tasks/cublas');
  });
});
