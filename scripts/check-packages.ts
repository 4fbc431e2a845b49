/**
 * `pnpm check:packages`: what a stranger installing from the registry gets, checked the way
 * they would get it. Builds every library package, packs each (the tarball that `pnpm publish`
 * would upload), and checks each tarball's contents against its `exports` map; then installs
 * the tarballs with npm into a scratch project in a temporary folder outside the workspace and
 * checks there that every entry and subpath loads with ESM `import` and CJS `require()`
 * (without touching the CUDA driver: every library path points nowhere), that a TypeScript
 * consumer compiles under `moduleResolution` `bundler` and `nodenext`, and that publint and
 * are-the-types-wrong find nothing. Exits non-zero on the first failing step.
 *
 * Flags: --keep (leave the scratch folder), --skip-build (pack what dist/ holds).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  importableSubpaths,
  type PackedManifest,
  packageProblems,
  specifierOf,
} from './package-check/exports.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const bin = (name: string) => join(root, 'node_modules', '.bin', name);
const { values: flags } = parseArgs({
  options: { keep: { type: 'boolean' }, 'skip-build': { type: 'boolean' } },
  strict: true,
});

/** Every library path pointed nowhere: a package that loads a library at import fails. */
const NO_NATIVE_LIBRARIES = Object.fromEntries(
  ['CUDA', 'NVRTC', 'CUBLAS', 'CUBLASLT', 'CURAND', 'CUSOLVER', 'NVTX'].map((library) => [
    `CUDA_TASKS_LIB${library}`,
    `/nonexistent/lib${library.toLowerCase()}.so`,
  ]),
);

let failures = 0;
const started = performance.now();

function step(title: string): void {
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.log(`\n[check:packages ${seconds} s] ${title}`);
}

function fail(message: string): void {
  failures++;
  console.error(`  FAIL ${message}`);
}

function run(command: string, args: readonly string[], cwd: string, env = process.env): boolean {
  const result = spawnSync(command, args, { cwd, stdio: 'inherit', env });
  if (result.status !== 0) {
    fail(`${command} ${args.join(' ')} exited with ${result.status ?? result.signal}`);
    return false;
  }
  return true;
}

function finish(): never {
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  if (failures > 0) {
    console.error(`\ncheck:packages: ${failures} problem(s) (${seconds} s)`);
    process.exit(1);
  }
  console.log(
    `\ncheck:packages: every package packs, installs, loads and type-checks (${seconds} s)`,
  );
  process.exit(0);
}

interface Library {
  directory: string;
  manifest: PackedManifest & { private?: boolean; devDependencies?: Record<string, string> };
}

const libraries: Library[] = readdirSync(join(root, 'packages'))
  .map((name) => join(root, 'packages', name))
  .filter((directory) => existsSync(join(directory, 'package.json')))
  .map((directory) => ({
    directory,
    manifest: JSON.parse(readFileSync(join(directory, 'package.json'), 'utf8')),
  }))
  .filter((library) => !library.manifest.private);

const scratch = mkdtempSync(join(tmpdir(), 'cuda-tasks-package-check-'));
const tarballs = join(scratch, 'tarballs');
mkdirSync(tarballs);
console.log(`library packages: ${libraries.map((l) => l.manifest.name).join(', ')}`);
console.log(`scratch folder: ${scratch}`);

if (!flags['skip-build']) {
  step('build (turbo, no cache)');
  if (!run('pnpm', ['exec', 'turbo', 'run', 'build', '--force', '--output-logs=errors-only'], root))
    finish();
}

step('pack every library package and check what each tarball holds');
const packed: { library: Library; tarball: string; manifest: PackedManifest }[] = [];
for (const library of libraries) {
  const before = new Set(readdirSync(tarballs));
  // The build just ran: pack without the prepack script's second build.
  const result = spawnSync('pnpm', ['pack', '--ignore-scripts', '--pack-destination', tarballs], {
    cwd: library.directory,
    encoding: 'utf8',
  });
  const tarball = readdirSync(tarballs).find((file) => !before.has(file));
  if (result.status !== 0 || tarball === undefined) {
    fail(`pnpm pack in ${relative(root, library.directory)}: ${result.stderr}`);
    continue;
  }
  const path = join(tarballs, tarball);
  const files = new Set(
    execFileSync('tar', ['-tzf', path], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map((file) => file.replace(/^package\//, '')),
  );
  const manifest = JSON.parse(
    execFileSync('tar', ['-xzOf', path, 'package/package.json'], { encoding: 'utf8' }),
  ) as PackedManifest;
  const problems = packageProblems(manifest, files, {
    expectChangelog: existsSync(join(library.directory, 'CHANGELOG.md')),
  });
  for (const problem of problems) fail(`${manifest.name}: ${problem}`);
  console.log(`  ${tarball}: ${files.size} files${problems.length ? '' : ', exports complete'}`);
  packed.push({ library, tarball: path, manifest });
}
if (failures > 0) finish();

step('publint and are-the-types-wrong on every tarball');
for (const { tarball } of packed) {
  run(bin('publint'), ['run', tarball, '--strict'], root);
  // ESM only: require() of ESM works on Node >= 20.19, which the packages' engines demand.
  const attw = [tarball, '--profile', 'esm-only', '--no-emoji', '--no-color'];
  const quiet = spawnSync(bin('attw'), [...attw, '--quiet'], { cwd: root });
  if (quiet.status === 0) console.log(`  attw ${relative(tarballs, tarball)}: no problems`);
  else run(bin('attw'), attw, root); // again, loud, to show the problems
}

step('install the tarballs with npm into a scratch project outside the workspace');
const consumer = join(scratch, 'consumer');
mkdirSync(consumer);
const rootManifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  devDependencies: Record<string, string>;
};
writeFileSync(
  join(consumer, 'package.json'),
  `${JSON.stringify({ name: 'consumer', private: true, type: 'module' }, null, 2)}\n`,
);
if (
  !run(
    'npm',
    [
      'install',
      '--no-audit',
      '--no-fund',
      '--loglevel=error',
      ...packed.map((p) => p.tarball),
      `typescript@${rootManifest.devDependencies.typescript}`,
      `@types/node@${rootManifest.devDependencies['@types/node']}`,
    ],
    consumer,
  )
) {
  finish();
}

const specifiers = packed.flatMap(({ manifest }) =>
  importableSubpaths(manifest.exports).map((subpath) => specifierOf(manifest.name, subpath)),
);

step(`ESM import and CJS require() of every entry (${specifiers.length}), no driver touched`);
writeFileSync(
  join(consumer, 'load-esm.mjs'),
  `const specifiers = ${JSON.stringify(specifiers)};
for (const specifier of specifiers) {
  const module = await import(specifier);
  const names = Object.keys(module);
  if (names.length === 0) throw new Error(specifier + ': import() gave no exports');
  console.log('  import ' + specifier + ': ' + names.length + ' exports');
}
`,
);
writeFileSync(
  join(consumer, 'load-cjs.cjs'),
  `const specifiers = ${JSON.stringify(specifiers)};
for (const specifier of specifiers) {
  const module = require(specifier);
  const names = Object.keys(module);
  if (names.length === 0) throw new Error(specifier + ': require() gave no exports');
  console.log('  require ' + specifier + ': ' + names.length + ' exports');
}
for (const name of ${JSON.stringify(packed.map((p) => p.manifest.name))}) {
  require(name + '/package.json');
}
`,
);
const runtimeEnv = { ...process.env, ...NO_NATIVE_LIBRARIES, NODE_OPTIONS: '' };
run(process.execPath, ['load-esm.mjs'], consumer, runtimeEnv);
run(process.execPath, ['load-cjs.cjs'], consumer, runtimeEnv);

step('a TypeScript consumer compiles under moduleResolution bundler and nodenext');
const imports = specifiers.map((specifier, i) => `import * as entry${i} from '${specifier}';`);
writeFileSync(
  join(consumer, 'consumer.ts'),
  `${imports.join('\n')}
import type { DType } from '@cuda-tasks/cudadrv';

// Each entry resolves to typed declarations (an untyped module would be an error under strict).
type Typed<T> = keyof T extends never ? 'untyped' : 'typed';
${specifiers.map((_, i) => `export const typed${i}: Typed<typeof entry${i}> = 'typed';`).join('\n')}
export const dtype: DType = 'float32';
`,
);
const compilerOptions = {
  target: 'ES2022',
  lib: ['ES2022', 'ESNext.Disposable'],
  types: ['node'],
  strict: true,
  noEmit: true,
  skipLibCheck: false,
};
for (const [name, options] of [
  ['bundler', { module: 'preserve', moduleResolution: 'bundler' }],
  ['nodenext', { module: 'nodenext', moduleResolution: 'nodenext' }],
] as const) {
  const config = `tsconfig.${name}.json`;
  writeFileSync(
    join(consumer, config),
    `${JSON.stringify({ compilerOptions: { ...compilerOptions, ...options }, files: ['consumer.ts'] }, null, 2)}\n`,
  );
  if (run(join(consumer, 'node_modules', '.bin', 'tsc'), ['-p', config], consumer)) {
    console.log(`  tsc -p ${config}: no errors`);
  }
}

if (!flags.keep) rmSync(scratch, { recursive: true, force: true });
finish();
