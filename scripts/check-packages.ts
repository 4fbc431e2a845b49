/**
 * `pnpm check:packages`: what a stranger installing from the registry gets, checked the way
 * they would get it. Builds every library package, packs each (the tarball that `pnpm publish`
 * would upload), and checks each tarball's contents against its `exports` map; then installs
 * the tarballs with npm into a scratch project in a temporary folder outside the workspace and
 * checks there that every entry and subpath loads with ESM `import` and CJS `require()`
 * (without touching the CUDA driver: every library path points nowhere), that a TypeScript
 * consumer compiles under `moduleResolution` `bundler` and `nodenext`, that every exported
 * class keeps its name once built, that publint and are-the-types-wrong find nothing, and that
 * the program of docs/getting-started.md type-checks and runs as written (printing the guide's
 * GPU output where a GPU answers, else its no-GPU output, with the documented exit code).
 * Exits non-zero on the first failing step.
 *
 * Flags: --keep (leave the scratch folder), --skip-build (pack what dist/ holds).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { probeGpu } from '../packages/testing/src/probe-gpu.js';
import { importableSubpaths, packageProblems, specifierOf } from './package-check/exports.js';
import { guideBlocks } from './package-check/guide.js';
import {
  buildAll,
  libraryPackages,
  type PackedLibrary,
  packLibraries,
} from './package-check/pack.js';

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

const libraries = libraryPackages(root);

const scratch = mkdtempSync(join(tmpdir(), 'cuda-tasks-package-check-'));
const tarballs = join(scratch, 'tarballs');
mkdirSync(tarballs);
console.log(`library packages: ${libraries.map((l) => l.manifest.name).join(', ')}`);
console.log(`scratch folder: ${scratch}`);

if (!flags['skip-build']) {
  step('build (turbo, no cache)');
  if (!buildAll(root)) {
    fail('the build (turbo run build) failed');
    finish();
  }
}

step('pack every library package and check what each tarball holds');
// The build just ran: packed without the prepack script's second build.
const { packed, failures: packFailures } = packLibraries(root, libraries, tarballs);
for (const failure of packFailures) fail(failure);
for (const { library, tarball, manifest, files } of packed satisfies PackedLibrary[]) {
  const problems = packageProblems(manifest, files, {
    expectChangelog: existsSync(join(library.directory, 'CHANGELOG.md')),
  });
  for (const problem of problems) fail(`${manifest.name}: ${problem}`);
  console.log(
    `  ${relative(tarballs, tarball)}: ${files.size} files${problems.length ? '' : ', exports complete'}`,
  );
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
import { inspect } from 'node:util';
const misnamed = [];
for (const specifier of specifiers) {
  const module = await import(specifier);
  const names = Object.keys(module);
  if (names.length === 0) throw new Error(specifier + ': import() gave no exports');
  // Every exported class keeps its name once bundled (error names print through it).
  let classes = 0;
  for (const [name, value] of Object.entries(module)) {
    if (typeof value !== 'function' || !Function.prototype.toString.call(value).startsWith('class')) continue;
    classes++;
    if (value.name !== name) misnamed.push(specifier + ' ' + name + ' is named ' + value.name);
  }
  console.log('  import ' + specifier + ': ' + names.length + ' exports, ' + classes + ' classes named right');
}
const { CudaUnavailableError, CudaArgumentError, Device } = await import('@cuda-tasks/cudadrv');
for (const [error, name] of [
  [new CudaUnavailableError('no driver', 'libcuda'), 'CudaUnavailableError'],
  [new CudaArgumentError('bad input'), 'CudaArgumentError'],
]) {
  const printed = inspect(error).split('\\n')[0];
  if (error.name !== name || error.constructor.name !== name || !printed.startsWith(name + ': ')) {
    misnamed.push(name + ': name ' + error.name + ', constructor ' + error.constructor.name + ', printed ' + printed);
  }
}
try { Device.get(0); } catch (error) {
  if (error.constructor.name !== error.name) misnamed.push('Device.get(0) threw a ' + error.constructor.name + ' named ' + error.name);
}
if (misnamed.length > 0) throw new Error('classes misnamed once built:\\n  ' + misnamed.join('\\n  '));
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

step('docs/getting-started.md: its program type-checks and runs as written');
checkGuide();

if (!flags.keep) rmSync(scratch, { recursive: true, force: true });
finish();

/**
 * Writes the guide's files into a folder of the scratch project (whose node_modules holds the
 * tarballs, TypeScript and @types/node), compiles them with its tsconfig (`npx tsc`), runs
 * `node main.js` as a user would (no library path overridden) and compares what it prints and
 * its exit code with the guide's GPU output where a GPU answers, else its no-GPU output.
 */
function checkGuide(): void {
  const guidePath = join(root, 'docs', 'getting-started.md');
  const { files, outputs } = guideBlocks(readFileSync(guidePath, 'utf8'));
  for (const name of ['main.ts', 'tsconfig.json']) {
    if (files[name] === undefined) fail(`${relative(root, guidePath)} has no file=${name} block`);
  }
  for (const kind of ['gpu', 'no-gpu']) {
    if (outputs[kind] === undefined)
      fail(`${relative(root, guidePath)} has no output=${kind} block`);
  }
  if (failures > 0) return;
  const folder = join(consumer, 'guide');
  mkdirSync(folder);
  for (const [name, content] of Object.entries(files)) writeFileSync(join(folder, name), content);
  if (!run(join(consumer, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json'], folder)) return;
  console.log("  tsc -p tsconfig.json (the guide's): no errors");
  const userEnv = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('CUDA_TASKS_')),
  );
  const result = spawnSync(process.execPath, ['main.js'], {
    cwd: folder,
    encoding: 'utf8',
    env: { ...userEnv, NODE_OPTIONS: '' },
    timeout: 120_000,
  });
  const printed = `${result.stdout}${result.stderr}`;
  const gpu = probeGpu();
  const driverMissing = !gpu.available && gpu.reason.startsWith('no CUDA driver');
  const kind = gpu.available ? 'gpu' : 'no-gpu';
  const expected = outputs[kind]!;
  // Where a driver loads but no GPU answers, the reason differs: only its start is known.
  const matches =
    gpu.available || driverMissing
      ? printed === expected.text
      : printed.startsWith(expected.text.slice(0, expected.text.indexOf(':') + 1));
  if (!matches || result.status !== expected.exitCode) {
    fail(
      `node main.js (the guide's program, ${kind}) exited ${result.status ?? result.signal} and printed:\n${printed}\nthe guide says (exit ${expected.exitCode}):\n${expected.text}`,
    );
    return;
  }
  console.log(
    `  node main.js: printed the guide's ${kind} output and exited ${result.status}, as documented`,
  );
}
