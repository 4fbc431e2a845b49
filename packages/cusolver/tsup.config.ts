import { packageConfig } from '../../tsup.config.base';

const entry = { index: 'src/index.ts', ffi: 'src/ffi/index.ts' };

// The issue worker's thread is an entry of its own (issue-worker.ts starts
// dist/issue-worker-thread.js in a worker thread); it has no types to publish.
export default packageConfig(
  { ...entry, 'issue-worker-thread': 'src/issue-worker-thread.ts' },
  { dts: { entry } },
);
