// A WorkerPool worker's entry when the package runs from its TypeScript source (vitest, tsx,
// with the `@cuda-tasks/source` condition): registers tsx's loader in this thread (so that the
// job module may be TypeScript too), then runs the worker module. The built package starts
// dist/worker-entry.js instead.
import { register } from 'tsx/esm/api';

register();
await import('./worker-entry.ts');
