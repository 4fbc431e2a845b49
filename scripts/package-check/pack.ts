/**
 * Builds and packs the library packages (the tarballs `pnpm publish` would upload): what
 * `pnpm pack:all` hands to users and `pnpm check:packages` installs and checks.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { PackedManifest } from './exports.js';

/** A library package of the workspace (one not marked private). */
export interface Library {
  /** Its folder. */
  directory: string;
  /** Its package.json. */
  manifest: PackedManifest & { private?: boolean; devDependencies?: Record<string, string> };
}

/** A packed library: the tarball, the manifest inside it and its file list (without `package/`). */
export interface PackedLibrary {
  /** The package it was packed from. */
  library: Library;
  /** The tarball's path. */
  tarball: string;
  /** The package.json inside the tarball. */
  manifest: PackedManifest;
  /** Every file in the tarball, relative to the package folder. */
  files: Set<string>;
}

/** Every library package under `root/packages`, in folder order. */
export function libraryPackages(root: string): Library[] {
  return readdirSync(join(root, 'packages'))
    .map((name) => join(root, 'packages', name))
    .filter((directory) => existsSync(join(directory, 'package.json')))
    .map((directory) => ({
      directory,
      manifest: JSON.parse(readFileSync(join(directory, 'package.json'), 'utf8')),
    }))
    .filter((library) => !library.manifest.private);
}

/** Builds every package fresh (turbo, no cache); false when the build failed. */
export function buildAll(root: string): boolean {
  const result = spawnSync(
    'pnpm',
    ['exec', 'turbo', 'run', 'build', '--force', '--output-logs=errors-only'],
    { cwd: root, stdio: 'inherit' },
  );
  return result.status === 0;
}

/**
 * Packs each library (already built: the prepack build is skipped) into `destination`, which
 * must exist. Returns what was packed and, for each package that could not be, why.
 */
export function packLibraries(
  root: string,
  libraries: readonly Library[],
  destination: string,
): { packed: PackedLibrary[]; failures: string[] } {
  const packed: PackedLibrary[] = [];
  const failures: string[] = [];
  for (const library of libraries) {
    const before = new Set(readdirSync(destination));
    const result = spawnSync(
      'pnpm',
      ['pack', '--ignore-scripts', '--pack-destination', destination],
      { cwd: library.directory, encoding: 'utf8' },
    );
    const tarball = readdirSync(destination).find((file) => !before.has(file));
    if (result.status !== 0 || tarball === undefined) {
      failures.push(`pnpm pack in ${relative(root, library.directory)}: ${result.stderr}`);
      continue;
    }
    const path = join(destination, tarball);
    const files = new Set(
      execFileSync('tar', ['-tzf', path], { encoding: 'utf8' })
        .split('\n')
        .filter(Boolean)
        .map((file) => file.replace(/^package\//, '')),
    );
    const manifest = JSON.parse(
      execFileSync('tar', ['-xzOf', path, 'package/package.json'], { encoding: 'utf8' }),
    ) as PackedManifest;
    packed.push({ library, tarball: path, manifest, files });
  }
  return { packed, failures };
}
