import type { Stream } from '@cuda-tasks/cudadrv';
import { describe, expect, it } from 'vitest';
import { standInStream } from './recording-operand.js';
import { failureOf } from './thrown.js';

/** One library entry, called with `{}` (the task's stream) or with an explicit `{ stream }`. */
export type CancellableEntry = (options: { stream?: Stream }) => unknown;

/**
 * The task runtime's `task`, passed in by the caller (this package does not depend on the
 * runtime, whose own tests use it).
 */
export type TaskWithSignal = (
  fn: () => Promise<unknown>,
  options: { signal: AbortSignal },
) => Promise<unknown>;

/**
 * The suite every library runs for cancellation: in a task whose signal has aborted, each
 * entry (on the task's stream and on an explicit one) throws the signal's reason, and nothing
 * reached the native side (`nativeCalls()`: the native recorder's calls, which the test file
 * installs with `vi.mock`).
 * @example
 * describeCancelledEntries('cuBLAS entries', { gemm: (o) => gemm(a, b, c, o) }, {
 *   task,
 *   nativeCalls: () => native.calls,
 * });
 */
export function describeCancelledEntries(
  what: string,
  entries: Record<string, CancellableEntry>,
  runtime: { task: TaskWithSignal; nativeCalls: () => readonly unknown[] },
): void {
  describe(`in a cancelled task, ${what} throw the reason before any native call`, () => {
    for (const [name, entry] of Object.entries(entries)) {
      it(name, async () => {
        for (const options of [{}, { stream: standInStream() }]) {
          const controller = new AbortController();
          const reason = new Error(`cancelled before ${name}`);
          const error = await runtime.task(
            () => {
              controller.abort(reason);
              return failureOf(() => entry(options));
            },
            { signal: controller.signal },
          );
          expect(error).toBe(reason);
        }
        expect(runtime.nativeCalls()).toEqual([]);
      });
    }
  });
}
