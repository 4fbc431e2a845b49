/**
 * `pnpm pack:all`: builds every library package and packs each into one folder (default
 * `packed/` at the repository root), the way to install cuda-tasks before it is on the npm
 * registry. Prints the command that installs the tarballs into a project: all of them in one
 * `npm install`, so that the peer dependencies (`@cuda-tasks/cudadrv`,
 * `@cuda-tasks/task-runtime`) come from the same folder.
 *
 * Flags: --out DIR (where the tarballs go), --skip-build (pack what dist/ holds).
 */
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { buildAll, libraryPackages, packLibraries } from './package-check/pack.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: flags } = parseArgs({
  options: { out: { type: 'string' }, 'skip-build': { type: 'boolean' } },
  strict: true,
});
const destination = resolve(flags.out ?? join(root, 'packed'));

const libraries = libraryPackages(root);
if (!flags['skip-build']) {
  console.log('building every package (turbo, no cache)...');
  if (!buildAll(root)) {
    console.error('pack:all: the build failed');
    process.exit(1);
  }
}
mkdirSync(destination, { recursive: true });
// A tarball left from an earlier run would hide this run's one of the same name.
for (const file of readdirSync(destination)) {
  if (/^cuda-tasks-.*\.tgz$/.test(file)) rmSync(join(destination, file));
}
const { packed, failures } = packLibraries(root, libraries, destination);
for (const failure of failures) console.error(`  FAIL ${failure}`);
if (failures.length > 0) process.exit(1);

console.log(`\n${packed.length} packages packed into ${destination}:`);
for (const { manifest, tarball } of packed) {
  console.log(`  ${manifest.name}@${manifest.version}  ${tarball.slice(destination.length + 1)}`);
}
console.log(
  `\nInstall them into your project, all in one command (the libraries' peers come along):\n\n  npm install ${destination}/*.tgz\n`,
);
