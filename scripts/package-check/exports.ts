/**
 * What a packed library package must hold, checked from its manifest and the tarball's file
 * list: every `exports` target (each condition, nested ones too), `main` and `types`, the
 * license, readme and changelog, and no `workspace:` range left. The in-repo source condition
 * points at `src/`, which does not ship, and is the one target not looked for.
 */

/** The export condition that resolves to the TypeScript sources inside this repository. */
export const SOURCE_CONDITION = '@cuda-tasks/source';

/** The parts of a manifest the checks read. */
export interface PackedManifest {
  name: string;
  version?: string;
  exports?: unknown;
  main?: string;
  types?: string;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

/** One target of an `exports` map: the subpath, the conditions leading to it, the file. */
export interface ExportTarget {
  /** The subpath, e.g. `.` or `./ffi`. */
  subpath: string;
  /** The conditions from the subpath to the target, e.g. `['types']`; empty for a string. */
  conditions: string[];
  /** The target as written, e.g. `./dist/index.js`. */
  target: string;
}

/** Every target of an `exports` map (subpaths, nested conditions and fallback arrays). */
export function exportTargets(exportsMap: unknown): ExportTarget[] {
  const targets: ExportTarget[] = [];
  const visit = (subpath: string, conditions: string[], value: unknown): void => {
    if (typeof value === 'string') targets.push({ subpath, conditions, target: value });
    else if (Array.isArray(value)) for (const item of value) visit(subpath, conditions, item);
    else if (typeof value === 'object' && value !== null) {
      for (const [condition, nested] of Object.entries(value)) {
        visit(subpath, [...conditions, condition], nested);
      }
    }
  };
  if (typeof exportsMap === 'string' || Array.isArray(exportsMap)) visit('.', [], exportsMap);
  else if (typeof exportsMap === 'object' && exportsMap !== null) {
    const keys = Object.keys(exportsMap);
    if (keys.every((key) => key.startsWith('.'))) {
      for (const [subpath, value] of Object.entries(exportsMap)) visit(subpath, [], value);
    } else visit('.', [], exportsMap); // conditions only, for the package root
  }
  return targets;
}

/** The subpaths a consumer can import (`.`, `./ffi`, ...), without `./package.json`. */
export function importableSubpaths(exportsMap: unknown): string[] {
  const subpaths = new Set(exportTargets(exportsMap).map((target) => target.subpath));
  subpaths.delete('./package.json');
  return [...subpaths].filter((subpath) => !subpath.includes('*'));
}

/** The import specifier of a subpath: `@scope/name` for `.`, `@scope/name/ffi` for `./ffi`. */
export function specifierOf(name: string, subpath: string): string {
  return subpath === '.' ? name : `${name}${subpath.slice(1)}`;
}

const normalize = (path: string) => path.replace(/^\.\//, '');

/**
 * What is wrong with a packed package: `files` is the tarball's file list relative to the
 * package root (`dist/index.js`, `package.json`, ...). Empty when nothing is.
 */
export function packageProblems(
  manifest: PackedManifest,
  files: ReadonlySet<string>,
  options: { expectChangelog?: boolean } = {},
): string[] {
  const problems: string[] = [];
  const has = (path: string) => files.has(normalize(path));
  if (manifest.exports === undefined) problems.push('has no "exports" map');
  const targets = exportTargets(manifest.exports);
  for (const { subpath, conditions, target } of targets) {
    if (conditions.includes(SOURCE_CONDITION)) continue;
    const where = `exports["${subpath}"]${conditions.map((c) => `["${c}"]`).join('')}`;
    if (!target.startsWith('./')) problems.push(`${where} = ${target} does not start with ./`);
    else if (!has(target)) problems.push(`${where} = ${target} is not in the package`);
  }
  for (const subpath of new Set(targets.map((target) => target.subpath))) {
    if (subpath === './package.json') continue;
    const shipped = targets.filter(
      (target) => target.subpath === subpath && !target.conditions.includes(SOURCE_CONDITION),
    );
    if (!shipped.some((target) => target.conditions.includes('types'))) {
      problems.push(`exports["${subpath}"] has no "types" condition`);
    }
    if (!shipped.some((target) => /\.(m|c)?js$/.test(target.target))) {
      problems.push(`exports["${subpath}"] has no JavaScript target`);
    }
  }
  if (!targets.some((target) => target.subpath === './package.json')) {
    problems.push('exports has no "./package.json"');
  }
  for (const field of ['main', 'types'] as const) {
    const path = manifest[field];
    if (path !== undefined && !has(path))
      problems.push(`"${field}" = ${path} is not in the package`);
  }
  const required = ['package.json', 'LICENSE', 'README.md'];
  if (options.expectChangelog) required.push('CHANGELOG.md');
  for (const file of required) if (!has(file)) problems.push(`${file} is not in the package`);
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies'] as const) {
    for (const [dependency, range] of Object.entries(manifest[field] ?? {})) {
      if (range.startsWith('workspace:')) {
        problems.push(`${field}["${dependency}"] = ${range} was not replaced when packing`);
      }
    }
  }
  return problems;
}
