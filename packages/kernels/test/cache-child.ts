/**
 * A second process for the on-disk cache test: runs one element-wise kernel with the cache in
 * the folder given, and prints the result's first values and the cache's counters as JSON.
 *
 * Usage: tsx --conditions=@cuda-tasks/source test/cache-child.ts FOLDER BODY
 */
import { DeviceArray } from '@cuda-tasks/cudadrv';
import { elementwise, kernelCacheStatistics, setKernelCacheDirectory } from '../src/index.js';

const [folder, body] = process.argv.slice(2);
setKernelCacheDirectory(folder!);
const kernel = elementwise('x: float32 -> y: float32', body!);
const x = DeviceArray.fromHost(new Float32Array([1, 2, 3, 4]));
const y = kernel(x);
const values = Array.from((await y.toHost()) as Float32Array);
console.log(JSON.stringify({ values, statistics: kernelCacheStatistics() }));
process.exit(0);
