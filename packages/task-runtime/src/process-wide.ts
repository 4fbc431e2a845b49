/**
 * Process-wide state that must stay single when two copies of this package load (a bundled
 * copy beside an installed one, two versions under two dependents): task ids, the stream
 * pools, the trace recorder's slot, the async-local storage. Each piece lives on `globalThis`
 * under a `Symbol.for` key with the version of its shape: a second copy of the same shape
 * shares it; a copy with another shape refuses to load, naming both, instead of running with
 * two pools and two task trees that do not know of each other.
 *
 * (cudadrv's `./internal` subpath is to get the same helper; until it does, it lives here.)
 */

/** What is stored under a key: the shape's version beside the value. */
interface Slot<T> {
  readonly version: number;
  readonly value: T;
}

/**
 * The process's single `T` for `name` (created by `create` on first use), shared by every
 * loaded copy whose `version` of that state's shape is the same. Throws an Error naming both
 * versions when another copy stored an incompatible one.
 */
export function processWide<T>(name: string, version: number, create: () => T): T {
  const key = Symbol.for(`@cuda-tasks/task-runtime/${name}`);
  const holder = globalThis as unknown as Record<symbol, Slot<T> | undefined>;
  const existing = holder[key];
  if (existing === undefined) {
    const slot: Slot<T> = { version, value: create() };
    Object.defineProperty(holder, key, { value: slot, enumerable: false, configurable: false });
    return slot.value;
  }
  if (typeof existing !== 'object' || existing === null || existing.version !== version) {
    const found =
      typeof existing === 'object' && existing !== null && typeof existing.version === 'number'
        ? `version ${existing.version}`
        : 'an unversioned older copy';
    throw new Error(
      `@cuda-tasks/task-runtime: two incompatible copies are loaded in this process: the ${name} ` +
        `state of one has shape version ${version}, the other's is ${found}. Tasks, streams ` +
        `and library handles cannot be shared between them; make every package resolve one ` +
        `copy of @cuda-tasks/task-runtime (e.g. \`pnpm dedupe\` / \`npm dedupe\`).`,
    );
  }
  return existing.value;
}
