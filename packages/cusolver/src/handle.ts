import { packageOf, processState, resolveStream, type Stream } from '@cuda-tasks/cudadrv';
import { HandleCache } from '@cuda-tasks/task-runtime';
import { check } from './errors.js';
import { cusolver } from './ffi/cusolver.js';

/**
 * What is specific to cuSOLVER; the task runtime's HandleCache does the rest (a lease per task
 * and context, at most 16 handles per context with tasks beyond sharing them, binding,
 * hand-offs). `ordered`: a cusolverDn handle keeps internal device buffers its routines share,
 * so work moved to another stream waits for its work on the previous one.
 */
function createCache(): HandleCache<bigint> {
  return new HandleCache<bigint>({
    name: 'cusolver',
    create() {
      const out: (bigint | null)[] = [null];
      check(cusolver().cusolverDnCreate(out), 'cusolverDnCreate');
      return out[0] as bigint;
    },
    destroy(handle) {
      check(cusolver().cusolverDnDestroy(handle), 'cusolverDnDestroy');
    },
    setStream(handle, stream) {
      check(cusolver().cusolverDnSetStream(handle, stream.handle), 'cusolverDnSetStream');
    },
    ordered: true,
  });
}

/**
 * The cusolverDn handles of this process, one lease per task and context (process-wide state,
 * so that two loaded copies of this package share them).
 */
export const handles: HandleCache<bigint> = processState(
  packageOf(import.meta.url, '@cuda-tasks/cusolver'),
  'handles',
  createCache,
);

/**
 * The current task's cusolverDn handle for the stream's context, bound to `stream` (default:
 * the current stream). The handle follows the task: when the task (or a `withStream` scope)
 * switches streams, the next call rebinds it with cusolverDnSetStream. Use it to call
 * routines from `@cuda-tasks/cusolver/ffi` that the typed API does not wrap.
 * @example
 * import { cusolver } from '@cuda-tasks/cusolver/ffi';
 * const stream: (bigint | null)[] = [null];
 * cusolver().cusolverDnGetStream(handle(), stream); // the current task's stream
 */
export function handle(stream?: Stream): bigint {
  return handles.get(resolveStream(stream));
}

/**
 * The cuSOLVER version as major * 1000 + minor * 100 + patch (e.g. 12004 for 12.0.4), from
 * cusolverGetVersion.
 */
export function version(): number {
  const out = [0];
  check(cusolver().cusolverGetVersion(out), 'cusolverGetVersion');
  return out[0]!;
}
