import type { Context } from '../context/device.js';
import { CudaArgumentError } from '../errors.js';

/**
 * A stream priority by name: 'high' is the context's greatest priority, 'low' its least,
 * 'normal' the default (0, within the range). Tasks take the same names
 * (`task(fn, { priority })` of `@cuda-tasks/task-runtime`).
 */
export type StreamPriority = 'high' | 'normal' | 'low';

/**
 * The CUDA stream priority (lower numbers run first) that `priority` stands for in `context`:
 * a name is looked up in the context's range (asked of the driver once per context), a number
 * is passed through. On a device with a single priority level every name is the same number.
 * Anything else is a `CudaArgumentError`.
 * @example Stream.create({ priority: streamPriority('high') }); // the same as { priority: 'high' }
 */
export function streamPriority(priority: StreamPriority | number, context: Context): number {
  if (typeof priority === 'number') {
    if (!Number.isSafeInteger(priority)) {
      throw new CudaArgumentError(
        `stream priority: expected an integer or 'high', 'normal' or 'low', got ${priority}`,
      );
    }
    return priority;
  }
  if (priority !== 'high' && priority !== 'normal' && priority !== 'low') {
    throw new CudaArgumentError(
      `stream priority: expected 'high', 'normal', 'low' or an integer, got ${typeof priority === 'string' ? JSON.stringify(priority) : String(priority)}`,
    );
  }
  const { least, greatest } = context.streamPriorityRange();
  if (priority === 'high') return greatest;
  if (priority === 'low') return least;
  return Math.min(least, Math.max(greatest, 0));
}
