// Run in a child process by driver.gpu.test.ts: an out-of-bounds kernel poisons the CUDA
// context for the rest of the process, so it cannot share the test runner's process. With
// `--engine`, the issue engine launches the kernel and its issuer's query finds the fault.
import { readFileSync } from 'node:fs';
import {
  CudaError,
  currentStream,
  DeviceArray,
  issueEngineStatistics,
  launch,
  Module,
  startIssueEngine,
  stopIssueEngine,
  waitForStream,
} from '../src/index.js';

const engine = process.argv.includes('--engine');
// The issuer watches the stream until the fault surfaces, which can take longer than the
// default watch of 2 ms (after it, the wait would find the fault on this thread).
if (engine) startIssueEngine({ issuers: 2, watchMicroseconds: 10_000_000 });

const module = Module.fromPtx(
  readFileSync(new URL('./fixtures/kernels.ptx', import.meta.url), 'utf8'),
);
const kernel = module.kernel('write_out_of_bounds', ['int32*']);
const target = DeviceArray.zeros('int32', 1);
const describe = (error: unknown) =>
  CudaError.isInstance(error)
    ? { name: error.name, status: error.status, call: error.call, message: error.message }
    : { name: String((error as Error)?.name), message: String((error as Error)?.message) };
const report: Record<string, unknown> = {};
try {
  launch(kernel, { grid: 1, block: 1 }, target);
  await waitForStream(currentStream());
  report.first = { name: 'none', message: 'the kernel did not fail' };
} catch (error) {
  report.first = describe(error);
}
try {
  DeviceArray.zeros('float32', 16);
  await waitForStream(currentStream());
  report.later = { name: 'none', message: 'later call did not fail' };
} catch (error) {
  report.later = describe(error);
}
if (engine) {
  const { queries, queriesLeft, failure } = issueEngineStatistics();
  report.engine = { queries, queriesLeft, failure };
  try {
    await stopIssueEngine();
  } catch (error) {
    report.stop = describe(error);
  }
}
console.log(JSON.stringify(report));
