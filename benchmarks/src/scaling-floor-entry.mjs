// A worker floor thread's entry (see scaling-floor.ts): registers tsx's loader in this thread,
// so that the worker module (TypeScript, run from the packages' source) loads, then runs it.
import { register } from 'tsx/esm/api';

register();
await import('./scaling-floor-worker.ts');
