// An issuer thread's entry when the package runs from its TypeScript source (vitest, tsx, with
// the `@cuda-tasks/source` condition): registers tsx's loader in this thread, then runs the
// thread module. The built package starts dist/issuer-thread.js instead.
import { register } from 'tsx/esm/api';

register();
await import('./issuer-thread.ts');
