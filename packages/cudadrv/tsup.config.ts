import { packageConfig } from '../../tsup.config.base';

const entry = {
  index: 'src/index.ts',
  ffi: 'src/ffi/index.ts',
  internal: 'src/internal.ts',
};

// The issue engine's issuer threads run an entry of their own (issue-engine.ts starts
// dist/issuer-thread.js); it has no types to publish.
export default packageConfig(
  { ...entry, 'issuer-thread': 'src/stream/issuer-thread.ts' },
  { dts: { entry } },
);
