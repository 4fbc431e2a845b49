/**
 * Our side of the benchmark suite as a program of its own (src/run.ts starts it once per
 * round, like the C baseline): the driver and runtime benchmarks, then the libraries and the
 * seed workload, the expression kernels, then the 100 concurrent tasks (the order of bench.cu). Prints one JSON line per benchmark.
 */
import { runCore, runTasks100 } from './core.js';
import { runIpc } from './ipc.js';
import { runKernels } from './kernels.js';
import { runLibraries } from './libraries.js';

try {
  await runCore();
  await runLibraries();
  await runKernels();
  await runIpc();
  await runTasks100();
  process.exit(0);
} catch (error) {
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  console.error(message);
  const unavailable = error instanceof Error && error.name === 'CudaUnavailableError';
  if (!unavailable && error instanceof Error && error.stack) console.error(error.stack);
  process.exit(unavailable ? 3 : 1);
}
