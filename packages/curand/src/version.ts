import { check } from './errors.js';
import { curand } from './ffi/curand.js';

/**
 * The loaded libcurand's version, in CUDART_VERSION format (e.g. 10400 for cuRAND 10.4.0:
 * major * 1000 + minor * 100 + patch).
 */
export function version(): number {
  const version = [0];
  check(curand().curandGetVersion(version), 'curandGetVersion');
  return version[0]!;
}
