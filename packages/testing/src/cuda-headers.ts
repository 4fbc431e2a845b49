import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The folder that holds `header` (e.g. `cublas_api.h`), or undefined where none does. Looks in
 * `$CUDA_TASKS_HEADERS`, then a `shared/cuda-headers` folder beside or above the repository
 * (the development machines keep the library headers there), then `$CUDA_HOME/include`,
 * `$CUDA_PATH/include` and `/usr/local/cuda/include`. Tests that compare our constants with the
 * headers run where one is found and are skipped elsewhere.
 */
export function findCudaHeader(header: string): string | undefined {
  for (const directory of headerDirectories()) {
    if (existsSync(join(directory, header))) return directory;
  }
  return undefined;
}

function headerDirectories(): string[] {
  const directories: string[] = [];
  if (process.env.CUDA_TASKS_HEADERS) directories.push(process.env.CUDA_TASKS_HEADERS);
  // Walk up from this file: <repo>/packages/testing/src -> <repo> -> its parent.
  let directory = dirname(fileURLToPath(import.meta.url));
  for (let level = 0; level < 6; level++) {
    directories.push(join(directory, 'shared', 'cuda-headers'));
    const parent = resolve(directory, '..');
    if (parent === directory) break;
    directory = parent;
  }
  for (const home of [process.env.CUDA_HOME, process.env.CUDA_PATH, '/usr/local/cuda']) {
    if (home) directories.push(join(home, 'include'));
  }
  return directories;
}
