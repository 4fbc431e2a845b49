import { packageConfig } from '../../tsup.config.base';

const entry = { index: 'src/index.ts', ffi: 'src/ffi/index.ts' };

// The issue worker's job module is an entry of its own (issue-worker.ts has the task runtime's
// WorkerPool run dist/issue-jobs.js in a worker thread); it has no types to publish.
export default packageConfig({ ...entry, 'issue-jobs': 'src/issue-jobs.ts' }, { dts: { entry } });
