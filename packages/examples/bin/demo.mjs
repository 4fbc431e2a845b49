#!/usr/bin/env node
// `pnpm demo` from the root runs this bin (the root has no "demo" script on purpose): pnpm runs
// a bin without its lifecycle error lines, so where there is no GPU the demo's own message is
// the last thing printed, and the exit status is still the demo's.
import { spawnSync } from 'node:child_process';

const script = new URL('../src/seed/demo.ts', import.meta.url);
const result = spawnSync(
  process.execPath,
  [
    '--conditions=@cuda-tasks/source',
    '--import',
    import.meta.resolve('tsx'),
    script.pathname,
    ...process.argv.slice(2),
  ],
  { stdio: 'inherit' },
);
if (result.signal) process.kill(process.pid, result.signal);
process.exit(result.status ?? 1);
