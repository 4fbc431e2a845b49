/**
 * The on-disk kernel cache: one file per compiled source and architecture, named by a SHA-256
 * of what determines the binary (NVRTC's version, the architecture, the options, the source).
 * A file holds the cubin followed by the SHA-256 of the cubin, so a truncated or damaged file
 * is seen as a miss, never handed to the driver. Writes go to a temporary file renamed into
 * place, so concurrent processes never read half a file. Every failure is a miss: the cache
 * only ever saves time.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** The environment variable naming the cache folder (`0`, `off`, `false` or `none`: no disk cache). */
export const CACHE_ENVIRONMENT_VARIABLE = 'CUDA_TASKS_KERNEL_CACHE';

const DISABLED = new Set(['', '0', 'off', 'false', 'none']);

/**
 * The folder the environment asks for: `CUDA_TASKS_KERNEL_CACHE` (null when it turns the cache
 * off), else `$XDG_CACHE_HOME/cuda-tasks/kernels`, else `~/.cache/cuda-tasks/kernels`.
 */
export function defaultCacheDirectory(environment: NodeJS.ProcessEnv = process.env): string | null {
  const configured = environment[CACHE_ENVIRONMENT_VARIABLE];
  if (configured !== undefined) {
    return DISABLED.has(configured.trim().toLowerCase()) ? null : configured;
  }
  const base = environment.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(base, 'cuda-tasks', 'kernels');
}

/** The cache file name for a key (what determines the binary). */
export function cacheFileName(key: string): string {
  return `${createHash('sha256').update(key).digest('hex').slice(0, 40)}.cubin`;
}

const DIGEST_BYTES = 32;

/** The cubin stored under `key` in `directory`, or undefined (absent, unreadable or damaged). */
export function readCached(directory: string, key: string): Uint8Array | undefined {
  let file: Buffer;
  try {
    file = readFileSync(join(directory, cacheFileName(key)));
  } catch {
    return undefined;
  }
  if (file.length <= DIGEST_BYTES) return undefined;
  const cubin = file.subarray(0, file.length - DIGEST_BYTES);
  const digest = createHash('sha256').update(cubin).digest();
  if (!digest.equals(file.subarray(file.length - DIGEST_BYTES))) return undefined;
  return new Uint8Array(cubin);
}

/** Stores `cubin` under `key`; returns false (and leaves no partial file) when it cannot. */
export function writeCached(directory: string, key: string, cubin: Uint8Array): boolean {
  const path = join(directory, cacheFileName(key));
  const temporary = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    mkdirSync(directory, { recursive: true });
    const digest = createHash('sha256').update(cubin).digest();
    writeFileSync(temporary, Buffer.concat([cubin, digest]));
    renameSync(temporary, path);
    return true;
  } catch {
    try {
      rmSync(temporary, { force: true });
    } catch {
      // Nothing was written, or the folder is gone.
    }
    return false;
  }
}

/** Removes the file stored under `key` (a cubin the driver refused). */
export function removeCached(directory: string, key: string): void {
  try {
    rmSync(join(directory, cacheFileName(key)), { force: true });
  } catch {
    // A read-only cache: the next process will find the file damaged too, and compile.
  }
}
