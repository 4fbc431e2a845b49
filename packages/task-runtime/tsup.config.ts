import { packageConfig } from '../../tsup.config.base';

const entry = { index: 'src/index.ts' };

// A WorkerPool's worker thread runs an entry of its own (worker-pool.ts starts
// dist/worker-entry.js); it has no types to publish.
export default packageConfig(
  { ...entry, 'worker-entry': 'src/worker-entry.ts' },
  { dts: { entry } },
);
