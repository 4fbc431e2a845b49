import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import getReleasePlan from '@changesets/get-release-plan';
import { describe, expect, it } from 'vitest';

// What a stranger installing from the registry gets: a license, where the code lives, a build
// before every pack, one copy of the driver and runtime layers (peer dependencies), and a
// release plan that moves the five library packages together without an accidental major.

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  description?: string;
  keywords?: string[];
  homepage?: string;
  bugs?: { url?: string };
  repository?: { type?: string; url?: string; directory?: string };
  license?: string;
  files?: string[];
  scripts?: Record<string, string>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

function readManifest(directory: string): Manifest {
  return JSON.parse(readFileSync(join(root, directory, 'package.json'), 'utf8')) as Manifest;
}

const workspaceDirectories = [
  ...readdirSync(join(root, 'packages'))
    .map((name) => `packages/${name}`)
    .filter((directory) => existsSync(join(root, directory, 'package.json'))),
  'benchmarks',
];
const publishable = workspaceDirectories.filter((directory) => !readManifest(directory).private);
const layers = ['@cuda-tasks/cudadrv', '@cuda-tasks/task-runtime'];

describe('package manifests', () => {
  it('finds the five library packages to publish', () => {
    expect(publishable.map((directory) => readManifest(directory).name)).toEqual(
      expect.arrayContaining([
        '@cuda-tasks/cudadrv',
        '@cuda-tasks/task-runtime',
        '@cuda-tasks/cublas',
        '@cuda-tasks/curand',
        '@cuda-tasks/cusolver',
      ]),
    );
  });

  it.each(['.', ...workspaceDirectories])('%s says what it is and where it lives', (directory) => {
    const manifest = readManifest(directory);
    expect(manifest.license).toBe('MIT');
    expect(manifest.description?.length ?? 0).toBeGreaterThan(20);
    expect(manifest.keywords?.length ?? 0).toBeGreaterThan(1);
    expect(manifest.bugs?.url).toMatch(/^https:\/\/.+\/issues$/);
    expect(manifest.repository?.url).toMatch(/^git\+https:\/\/.+\.git$/);
    if (directory === '.') {
      expect(manifest.repository?.directory).toBeUndefined();
    } else {
      expect(manifest.repository?.directory).toBe(directory);
      expect(manifest.homepage).toContain(`/tree/main/${directory}#readme`);
    }
    for (const dependencies of [manifest.dependencies, manifest.devDependencies]) {
      if (dependencies?.koffi !== undefined) expect(dependencies.koffi).toBe('^3.3.4');
    }
  });

  it.each(publishable)('%s ships its license, changelog and a fresh build', (directory) => {
    const manifest = readManifest(directory);
    expect(readFileSync(join(root, directory, 'LICENSE'), 'utf8')).toBe(
      readFileSync(join(root, 'LICENSE'), 'utf8'),
    );
    expect(manifest.files).toEqual(
      expect.arrayContaining(['dist', 'README.md', 'CHANGELOG.md', 'LICENSE']),
    );
    expect(manifest.scripts?.prepack).toBe(manifest.scripts?.build);
    expect(manifest.scripts?.build).toBe('tsup');
  });

  it.each(publishable)('%s takes the layers below it as peer dependencies', (directory) => {
    const manifest = readManifest(directory);
    for (const layer of layers) {
      expect(manifest.dependencies?.[layer]).toBeUndefined();
      if (manifest.peerDependencies?.[layer] !== undefined) {
        expect(manifest.peerDependencies[layer]).toBe('workspace:^');
        expect(manifest.devDependencies?.[layer]).toBe('workspace:^');
      }
    }
    if (manifest.name !== '@cuda-tasks/cudadrv') {
      expect(manifest.peerDependencies?.['@cuda-tasks/cudadrv']).toBe('workspace:^');
    }
  });
});

describe('release plan', () => {
  const order = ['none', 'patch', 'minor', 'major'];

  it('bumps the library packages together, by no more than the changesets ask', async () => {
    const plan = await getReleasePlan(root);
    const asked = plan.changesets.flatMap((changeset) => changeset.releases.map((r) => r.type));
    const highest = asked.reduce((a, b) => (order.indexOf(b) > order.indexOf(a) ? b : a), 'none');
    const libraries = plan.releases.filter((release) =>
      publishable.some((directory) => readManifest(directory).name === release.name),
    );
    if (highest === 'none') {
      expect(libraries.filter((release) => release.type !== 'none')).toEqual([]);
      return;
    }
    // A peer dependency leaving its range makes changesets plan a major for its dependents;
    // in 0.x that would publish 1.0.0. Before a breaking 0.x release, set the five versions to
    // the next minor's pre-release (`0.N.0-0`) so that the peers' `^` range still holds it.
    expect(libraries.map((release) => release.type)).toEqual(libraries.map(() => highest));
    expect(new Set(libraries.map((release) => release.newVersion)).size).toBe(1);
    expect(libraries).toHaveLength(publishable.length);
  });
});
