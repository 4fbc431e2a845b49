/**
 * Process-wide state that must stay single when two copies of a package load (a bundled copy
 * beside an installed one, two installs under two dependents): the current-stream provider,
 * the context registry, the waiter, the operation observer, the block caches. Each piece lives
 * on `globalThis` under a `Symbol.for` key that carries the package's name and compatible
 * version (the major, or `0.minor` before 1.0), so copies that may share it do. A copy whose
 * compatible version differs would run with its own provider and caches beside the first:
 * instead it refuses to load, naming both versions and where each was loaded from.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** A loaded copy of a package: its name, version and folder. */
export interface PackageCopy {
  /** The package's name, e.g. `@cuda-tasks/cudadrv`. */
  readonly name: string;
  /** Its version, e.g. `0.1.0`. */
  readonly version: string;
  /** The folder it was loaded from. */
  readonly directory: string;
}

/**
 * The version part that copies must share to share state: the major from 1.0 on, `0.minor`
 * before (what a `^` range treats as compatible).
 * @example compatibleVersion('0.1.3'); // '0.1'
 */
export function compatibleVersion(version: string): string {
  const [major = '0', minor = '0', patch = '0'] = version.split(/[.+-]/);
  if (major !== '0') return major;
  if (minor !== '0') return `0.${minor}`;
  return `0.0.${patch}`;
}

/**
 * The package a module belongs to: the nearest `package.json` named `name` above `moduleUrl`
 * (the same from `src/` in the repository and from `dist/` once built). Where there is none (a
 * copy bundled into an application), the module's folder with the version `0.0.0-bundled`.
 * @example packageOf(import.meta.url, '@cuda-tasks/cudadrv').version; // '0.1.0'
 */
export function packageOf(moduleUrl: string, name: string): PackageCopy {
  const start = dirname(fileURLToPath(moduleUrl));
  let directory = start;
  for (;;) {
    const manifest = join(directory, 'package.json');
    if (existsSync(manifest)) {
      const found = JSON.parse(readFileSync(manifest, 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (found.name === name && typeof found.version === 'string') {
        return { name, version: found.version, directory };
      }
    }
    const parent = dirname(directory);
    if (parent === directory) return { name, version: '0.0.0-bundled', directory: start };
    directory = parent;
  }
}

const COPIES_KEY = Symbol.for('@cuda-tasks/loaded-copies');

/** Every copy of every package that keeps process-wide state, by package name. */
function loadedCopies(): Map<string, PackageCopy[]> {
  const holder = globalThis as unknown as Record<symbol, Map<string, PackageCopy[]> | undefined>;
  let copies = holder[COPIES_KEY];
  if (copies === undefined) {
    copies = new Map();
    Object.defineProperty(holder, COPIES_KEY, { value: copies });
  }
  return copies;
}

/**
 * Records `copy` as loaded; throws when a copy of the same package with another compatible
 * version is loaded already, naming both versions and folders.
 */
export function registerCopy(copy: PackageCopy): void {
  const copies = loadedCopies();
  const known = copies.get(copy.name) ?? [];
  if (known.some((other) => other.directory === copy.directory)) return;
  const conflict = known.find(
    (other) => compatibleVersion(other.version) !== compatibleVersion(copy.version),
  );
  if (conflict !== undefined) {
    throw new Error(
      `${copy.name}: two incompatible copies are loaded in this process: ${conflict.version} ` +
        `from ${conflict.directory} and ${copy.version} from ${copy.directory}. They would ` +
        `keep separate process-wide state (streams, contexts, caches) that must be single; make ` +
        `every package resolve one copy (check \`npm ls ${copy.name}\`, then \`npm dedupe\` or ` +
        `align the versions).`,
    );
  }
  copies.set(copy.name, [...known, copy]);
}

/**
 * The process's single value of `name` for `owner`'s package, created by `create` on first
 * use and shared by every loaded copy with the same compatible version. Registers the copy
 * first, so an incompatible copy fails here with an error naming both (see `registerCopy`).
 * Call it at module level, once per piece of state: it is not for hot paths.
 * @example
 * const owner = packageOf(import.meta.url, '@my/package');
 * const state = processState(owner, 'pools', () => ({ pools: new Map() }));
 */
export function processState<T>(owner: PackageCopy, name: string, create: () => T): T {
  registerCopy(owner);
  const key = Symbol.for(`${owner.name}@${compatibleVersion(owner.version)}/${name}`);
  const holder = globalThis as unknown as Record<symbol, T | undefined>;
  let value = holder[key];
  if (value === undefined) {
    value = create();
    Object.defineProperty(holder, key, { value, configurable: false, enumerable: false });
  }
  return value;
}

/** This package (cudadrv) as a loaded copy. */
export const cudadrvCopy: PackageCopy = packageOf(import.meta.url, '@cuda-tasks/cudadrv');

/** `processState` for cudadrv's own state. */
export function cudadrvState<T>(name: string, create: () => T): T {
  return processState(cudadrvCopy, name, create);
}
