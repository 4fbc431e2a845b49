import { packageConfig } from '../../tsup.config.base';

export default packageConfig({
  index: 'src/index.ts',
  ffi: 'src/ffi/index.ts',
  internal: 'src/internal.ts',
});
