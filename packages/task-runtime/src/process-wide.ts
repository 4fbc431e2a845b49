/**
 * Process-wide state that must stay single when two copies of this package load (a bundled
 * copy beside an installed one, two installs under two dependents): task ids, the stream
 * pools, the handle caches' registry, the trace recorder's slot, the async-local storage. It
 * goes through cudadrv's `processState`: each piece lives on `globalThis` under a
 * `Symbol.for` key carrying this package's name and compatible version, so copies that may
 * share it do, and a copy of an incompatible version refuses to load, naming both.
 */
import { packageOf, processState } from '@cuda-tasks/cudadrv/internal';

/** This package as a loaded copy (its name, version and folder). */
const owner = packageOf(import.meta.url, '@cuda-tasks/task-runtime');

/**
 * The process's single value of `name` for this package (created by `create` on first use),
 * shared by every loaded copy of a compatible version. Module level only, never on hot paths.
 */
export function processWide<T>(name: string, create: () => T): T {
  return processState(owner, name, create);
}
