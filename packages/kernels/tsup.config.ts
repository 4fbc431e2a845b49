import { packageConfig } from '../../tsup.config.base';

export default packageConfig({ index: 'src/index.ts' });
