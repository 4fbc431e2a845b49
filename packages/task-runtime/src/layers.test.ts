import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeLayers } from '@cuda-tasks/testing';

/**
 * The runtime reads bottom-up: the process-wide registry, the priorities, the stream binding,
 * NVTX, the cleanup report and a handle's graph-owned workspaces; the compile cache's disk
 * part, then the compile cache (the kit's NVRTC cache); a handle's workspaces, the
 * handles of a context and their bounds; a cache's options, a handle's record and the view
 * `bind()` hands out, a context's shared handle; a cache's counters and its trims; the stream
 * pools; a cache's listeners (on the pools among others) and the task-local state; what works
 * on that state (traces, graph capture, the library kit's HandleCache); `task()` itself and
 * the kit's issue envelope; worker tasks (the pool on the caller's side, the jobs on a
 * worker's, and what they exchange, at the bottom); the entry, and the worker threads' entry.
 * It builds on cudadrv's public API and, as the layer the libraries stand on, on its
 * `./internal` (the provider slot, the observer, process state).
 */
describeLayers({
  name: '@cuda-tasks/task-runtime',
  source: dirname(fileURLToPath(import.meta.url)),
  layers: [
    [
      'process-wide.ts',
      'priority.ts',
      'stream-binding.ts',
      'nvtx.ts',
      'cleanup.ts',
      'capture-workspaces.ts',
      'worker-protocol.ts',
      'worker-ring.ts',
    ],
    ['disk-cache.ts'],
    ['compile-cache.ts'],
    ['handle-workspaces.ts', 'handle-leases.ts'],
    ['handle-options.ts', 'handle-record.ts', 'handle-shared.ts'],
    ['handle-statistics.ts', 'handle-trim.ts'],
    ['pool.ts'],
    ['handle-listeners.ts', 'state.ts'],
    ['trace.ts', 'graphs.ts', 'handle-cache.ts'],
    ['task.ts', 'issue-envelope.ts'],
    ['worker-pool.ts', 'worker-jobs.ts'],
    ['index.ts', 'worker-entry.ts'],
  ],
  knownEdges: [
    'state.ts -> priority.ts',
    'task.ts -> handle-cache.ts',
    'pool.ts -> process-wide.ts',
  ],
  siblings: {
    '@cuda-tasks/cudadrv': '*',
    '@cuda-tasks/cudadrv/ffi': ['nvtx.ts', 'compile-cache.ts'],
    '@cuda-tasks/cudadrv/internal': '*',
  },
});
