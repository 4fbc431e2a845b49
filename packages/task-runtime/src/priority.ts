import {
  type Context,
  streamPriority as priorityIn,
  type StreamPriority,
} from '@cuda-tasks/cudadrv';

/**
 * How urgent a task's GPU work is: its streams come from the pool of that priority (CUDA
 * stream priorities: 'high' is the device's greatest, 'normal' the default, 'low' the least).
 * @deprecated The same type as `StreamPriority` (of `@cuda-tasks/cudadrv`, re-exported here),
 * the one name for it; this alias goes in the next minor release.
 */
export type TaskPriority = StreamPriority;

/** The task priorities, from the most urgent. */
export const TASK_PRIORITIES: readonly StreamPriority[] = ['high', 'normal', 'low'];

/**
 * The CUDA stream priority a task of `priority` gets in `context` (lower numbers run first):
 * 'high' is the context's greatest priority, 'low' its least, 'normal' the default (0, within
 * the range). On a device with a single priority level they are all the same number, so the
 * tasks share one pool and the option changes nothing. The range is asked of the driver once
 * per context.
 */
export function streamPriority(context: Context, priority: StreamPriority): number {
  return priorityIn(priority, context);
}

/**
 * How a stream priority of `context` reads beside the default one: 'high' above it, 'low'
 * below it, undefined for the default itself (what traces show on a stream's track).
 */
export function priorityLabel(context: Context, priority: number): 'high' | 'low' | undefined {
  const normal = streamPriority(context, 'normal');
  if (priority === normal) return undefined;
  return priority < normal ? 'high' : 'low';
}
