import { processWide } from './process-wide.js';

/** Which task a cleanup error came from (as `currentTask()` describes it). */
export interface CleanupTaskInfo {
  /** The task's id. */
  readonly id: number;
  /** The task's name, if it was given one. */
  readonly name: string | undefined;
}

/** Receives an error thrown while a task's resources were given back. */
export type CleanupErrorListener = (error: unknown, task: CleanupTaskInfo | undefined) => void;

const listeners = processWide('cleanup-listeners', () => new Set<CleanupErrorListener>());

/**
 * Registers a listener for errors thrown while the runtime gives resources back: a task's
 * library handles and streams when it settles (a destroy after a sticky CUDA error, a
 * throwing `onStreamReleased` callback), or handles unbound from a disposed stream. Such an
 * error never changes the task's outcome: `task()` resolves with `fn`'s value or rejects with
 * `fn`'s error, and every other resource is still given back. Without any listener, each
 * error becomes a process warning (`process.emitWarning`, type `CudaTasksCleanupWarning`).
 * Returns a function that unregisters the listener.
 * @example
 * onCleanupError((error, task) => log.error({ error, task: task?.name }, 'GPU cleanup failed'));
 */
export function onCleanupError(listener: CleanupErrorListener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** @internal Reports a cleanup error to the listeners, or as a process warning. */
export function reportCleanupError(error: unknown, task: CleanupTaskInfo | undefined): void {
  if (error instanceof AggregateError) {
    for (const inner of error.errors) reportCleanupError(inner, task);
    return;
  }
  let delivered = false;
  for (const listener of listeners) {
    try {
      listener(error, task);
      delivered = true;
    } catch (listenerError) {
      warn(listenerError, task, 'an onCleanupError listener threw');
    }
  }
  if (!delivered) warn(error, task, 'giving back its resources failed');
}

function warn(error: unknown, task: CleanupTaskInfo | undefined, what: string): void {
  const who =
    task === undefined
      ? 'cuda-tasks'
      : `task #${task.id}${task.name === undefined ? '' : ` "${task.name}"`}`;
  const message = error instanceof Error ? error.message : String(error);
  process.emitWarning(`${who}: ${what}: ${message}`, {
    type: 'CudaTasksCleanupWarning',
    detail: error instanceof Error ? error.stack : undefined,
  });
}
