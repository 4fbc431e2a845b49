import type { Stream } from '@cuda-tasks/cudadrv';

/**
 * The value of the `x-cuda-stream` header for `stream`: its name (spaces replaced by `-`, other
 * characters outside printable ASCII by `?`; `unnamed` without one), a space, and its handle.
 * @example streamLabel(stream); // 'task-stream-3 0x5581c0a3e2f0'
 */
export function streamLabel(stream: Pick<Stream, 'name' | 'handle'>): string {
  const name = (stream.name ?? 'unnamed').replace(/ /g, '-').replace(/[^\x21-\x7e]/g, '?');
  return `${name || 'unnamed'} 0x${stream.handle.toString(16)}`;
}
