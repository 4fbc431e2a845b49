/**
 * The on-disk part of the kit's NVRTC compile cache (compile-cache.ts, decision 0040). Entry
 * names can be computed by anyone (a hash of NVRTC's version, the architecture and a source
 * that is the same in every installation), so an entry is loaded only when nobody but this
 * user (or root) could have put it there (decision 0033):
 *
 * - the cache folder (symbolic links resolved) belongs to this user and neither its group nor
 *   others can write it;
 * - every folder a name of its path is looked up in, from `/` down (those of the links followed
 *   too), belongs to this user or root, and if its group or others can write it, it has the
 *   sticky bit; a link followed belongs to this user or root: nobody else could have changed
 *   where the path leads;
 * - each operation opens the folder once (`O_DIRECTORY | O_NOFOLLOW`), judges that descriptor,
 *   and on Linux reaches entries through it (`/proc/self/fd/<descriptor>/<name>`), so that a
 *   folder of the path swapped after the judgement changes nothing; elsewhere the folder's path
 *   is looked at again after each use and must still name the judged folder;
 * - the entry is a regular file, not a symbolic link, belongs to this user, cannot be written by
 *   its group or others, and is at most {@link MAX_ENTRY_BYTES}; it is opened with
 *   `O_NOFOLLOW | O_NONBLOCK` and these checks are made on the opened descriptor;
 * - its header (magic, format version, SHA-256 of the key, payload length, SHA-256 of the
 *   payload) matches the key asked for and the bytes that follow.
 *
 * Anything else is refused with a warning (once per reason per process) and the kernel is
 * compiled instead. The cache creates its folders 0700 and its entries 0600 whatever the umask,
 * writing a temporary file (`O_EXCL`) renamed into place. Every failure is a miss: the cache
 * only ever saves time. Where the platform has no user ids (Windows), the owner and mode rules
 * are skipped.
 */
import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  existsSync,
  fchmodSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readlinkSync,
  readSync,
  realpathSync,
  renameSync,
  type Stats,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { processWide } from './process-wide.js';

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

/** The largest entry read or written: generated kernels' cubins are tens of kilobytes. */
export const MAX_ENTRY_BYTES = 64 * 1024 * 1024;

const ENTRY_PREFIX = 'cuda-tasks-';
const ENTRY_SUFFIX = '.kernel';
const ENTRY_NAME = /^cuda-tasks-[0-9a-f]{64}\.kernel$/;
const TEMPORARY_NAME = /^\.cuda-tasks-[0-9a-f]{64}\.kernel\.[0-9a-f]{16}\.tmp$/;

/** The entry's file name for a key: a fixed prefix, the key's SHA-256 in hex, `.kernel`. */
export function cacheFileName(key: string): string {
  return `${ENTRY_PREFIX}${keyDigest(key).toString('hex')}${ENTRY_SUFFIX}`;
}

/** Whether `name` is one of this cache's entries or its unfinished temporary files. */
export function isCacheFileName(name: string): boolean {
  return ENTRY_NAME.test(name) || TEMPORARY_NAME.test(name);
}

function keyDigest(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

// The header: magic, format version, header length, SHA-256 of the key, payload length,
// SHA-256 of the payload; all integers little-endian.
const MAGIC = Buffer.from('CTKERNEL', 'latin1');
const FORMAT_VERSION = 1;
const HEADER_BYTES = 8 + 4 + 4 + 32 + 8 + 32;

function header(key: string, payload: Uint8Array): Buffer {
  const bytes = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(bytes, 0);
  bytes.writeUInt32LE(FORMAT_VERSION, 8);
  bytes.writeUInt32LE(HEADER_BYTES, 12);
  keyDigest(key).copy(bytes, 16);
  bytes.writeBigUInt64LE(BigInt(payload.length), 48);
  createHash('sha256').update(payload).digest().copy(bytes, 56);
  return bytes;
}

/**
 * Why the cache did not load an entry (or use a folder). Each reason is one warning code:
 * `CUDA_TASKS_KERNEL_CACHE_` followed by the reason in capitals, `-` as `_`.
 */
export type KernelCacheRefusal =
  | 'folder-not-a-folder'
  | 'folder-owner'
  | 'folder-writable'
  | 'folder-replaced'
  | 'parent-owner'
  | 'parent-writable'
  | 'link-owner'
  | 'entry-symlink'
  | 'entry-not-regular'
  | 'entry-owner'
  | 'entry-writable'
  | 'entry-too-large'
  | 'entry-damaged'
  | 'entry-unreadable';

/** What a read of the cache found: the cubin, nothing, or an entry or folder it refused. */
export interface CacheReadResult {
  /** The cubin, when a trusted, intact entry was found. */
  readonly cubin?: Uint8Array;
  /** Why the entry or its folder was refused (a warning has been emitted). */
  readonly refused?: KernelCacheRefusal;
}

const MISS: CacheReadResult = Object.freeze({});

class Refused extends Error {
  constructor(
    readonly reason: KernelCacheRefusal,
    readonly path: string,
    readonly why: string,
    readonly remedy: string,
  ) {
    super(why);
  }
}

// Process-wide: each reason is warned about once, also across loaded copies of this package.
const warned: Set<KernelCacheRefusal> = processWide(
  'compile-cache-warnings',
  () => new Set<KernelCacheRefusal>(),
);

function warnOnce(refusal: Refused): void {
  if (warned.has(refusal.reason)) return;
  warned.add(refusal.reason);
  process.emitWarning(
    `cuda-tasks kernel cache: refused ${refusal.path}: ${refusal.why}; compiling the kernel ` +
      'instead (this warning is shown once per reason).',
    {
      type: 'KernelCacheWarning',
      code: `CUDA_TASKS_KERNEL_CACHE_${refusal.reason.toUpperCase().replaceAll('-', '_')}`,
      detail: refusal.remedy,
    },
  );
}

/** @internal Forgets which warnings were emitted, so that each is emitted again (tests). */
export function resetKernelCacheWarnings(): void {
  warned.clear();
}

const userId: number | undefined = process.geteuid?.();
const O_NOFOLLOW = constants.O_NOFOLLOW ?? 0;
const O_NONBLOCK = constants.O_NONBLOCK ?? 0;
const O_DIRECTORY = constants.O_DIRECTORY ?? 0;
const FOLDER_FLAGS = constants.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK;
// Windows cannot open a folder, and has no owners or modes to judge on one.
const FOLDER_DESCRIPTORS = process.platform !== 'win32';
let procDescriptors: boolean | undefined;
/** Whether a path can go through an open folder descriptor (`/proc/self/fd/<n>/<name>`). */
const throughDescriptor = () =>
  (procDescriptors ??= process.platform === 'linux' && existsSync('/proc/self/fd'));
const GROUP_OR_OTHERS_WRITE = 0o022;
const STICKY = 0o1000;

const octal = (mode: number) => (mode & 0o7777).toString(8).padStart(3, '0');

/**
 * The cache folder as one operation uses it: `real` names it in messages, `base` is the path
 * its entries are reached through, `descriptor` (closed by {@link closeFolder}) keeps it open.
 */
interface Folder {
  readonly real: string;
  readonly base: string;
  readonly descriptor: number | undefined;
  readonly judged: Stats | undefined;
}

/**
 * Opens the cache folder and judges it on its descriptor; throws Refused, or the filesystem's
 * error (ENOENT: no cache yet). The caller closes it with {@link closeFolder}.
 */
function openFolder(directory: string): Folder {
  const walked = userId === undefined ? undefined : resolveJudged(directory);
  const real = walked?.real ?? realpathSync(directory);
  if (!FOLDER_DESCRIPTORS) {
    if (!statSync(real).isDirectory()) throw notAFolder(real);
    return { real, base: real, descriptor: undefined, judged: undefined };
  }
  let descriptor: number;
  try {
    descriptor = openSync(real, FOLDER_FLAGS);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') throw notAFolder(real);
    throw error;
  }
  try {
    const folder = fstatSync(descriptor);
    if (!folder.isDirectory()) throw notAFolder(real);
    if (walked !== undefined) {
      if (folder.dev !== walked.stats.dev || folder.ino !== walked.stats.ino) throw replaced(real);
      judgeFolder(real, folder);
    }
    const base = throughDescriptor() ? `/proc/self/fd/${descriptor}` : real;
    return { real, base, descriptor, judged: folder };
  } catch (error) {
    closeSync(descriptor);
    throw error;
  }
}

function closeFolder(folder: Folder): void {
  if (folder.descriptor !== undefined) closeSync(folder.descriptor);
}

/**
 * Where entries are not reached through the descriptor: throws Refused unless the folder's
 * path still names the folder that was judged (called after each open, create or rename).
 */
function checkStillThere(folder: Folder): void {
  if (folder.judged === undefined || folder.base !== folder.real) return;
  let now: Stats | undefined;
  try {
    now = lstatSync(folder.real);
  } catch {
    now = undefined;
  }
  if (now === undefined || now.dev !== folder.judged.dev || now.ino !== folder.judged.ino) {
    throw replaced(folder.real);
  }
}

function replaced(real: string): Refused {
  return new Refused(
    'folder-replaced',
    real,
    'the folder was replaced while the cache used it',
    'Another user could be moving folders of its path. Use a folder inside one of your own.',
  );
}

/** More links than this in one path is a loop (Linux's own bound). */
const MAX_LINKS = 40;

/**
 * Resolves `directory` as `realpath` does, one name at a time from `/`, judging each folder a
 * name is looked up in ({@link judgeHolder}) and each link followed (this user's or root's):
 * only then could nobody else have changed where the path leads, before the check or after it.
 * Returns the real path and the `lstat` of the folder it names; throws Refused, or the
 * filesystem's error (ENOENT: no cache yet).
 */
function resolveJudged(directory: string): { real: string; stats: Stats } {
  const names = resolve(directory).split('/').reverse();
  let current = '/';
  let stats = lstatSync(current);
  let links = 0;
  while (names.length > 0) {
    const name = names.pop()!;
    if (name === '' || name === '.') continue;
    if (name === '..') {
      // Every folder above `current` was judged on the way down to it.
      current = dirname(current);
      stats = lstatSync(current);
      continue;
    }
    judgeHolder(current, stats);
    const next = current === '/' ? `/${name}` : `${current}/${name}`;
    const named = lstatSync(next);
    if (!named.isSymbolicLink()) {
      current = next;
      stats = named;
      continue;
    }
    if (named.uid !== userId && named.uid !== 0) {
      throw new Refused(
        'link-owner',
        next,
        `a symbolic link on the cache folder's path belongs to uid ${named.uid}, neither this ` +
          `user (uid ${userId}) nor root`,
        'Its owner could change where the path leads. Use a path of your own links only.',
      );
    }
    if (++links > MAX_LINKS) {
      throw Object.assign(new Error(`too many symbolic links resolving ${directory}`), {
        code: 'ELOOP',
      });
    }
    const target = readlinkSync(next);
    names.push(...target.split('/').reverse());
    if (target.startsWith('/')) {
      current = '/';
      stats = lstatSync(current);
    }
  }
  return { real: current, stats };
}

/**
 * A folder that a name of the cache folder's path is looked up in: it belongs to this user or
 * root and, if its group or others can write it, has the sticky bit; otherwise its owner, or
 * anyone, could put another folder or a link at that name.
 */
function judgeHolder(path: string, folder: Stats): void {
  if (folder.uid !== userId && folder.uid !== 0) {
    throw new Refused(
      'parent-owner',
      path,
      `a folder on the cache folder's path belongs to uid ${folder.uid}, neither this user ` +
        `(uid ${userId}) nor root`,
      'Its owner could replace the cache folder. Use a folder inside one of your own.',
    );
  }
  if ((folder.mode & GROUP_OR_OTHERS_WRITE) !== 0 && (folder.mode & STICKY) === 0) {
    throw new Refused(
      'parent-writable',
      path,
      `its group or others can write this folder on the cache folder's path and it has no ` +
        `sticky bit (mode ${octal(folder.mode)})`,
      `Others could replace the cache folder. Run: chmod go-w '${path}' (or +t).`,
    );
  }
}

function notAFolder(real: string): Refused {
  return new Refused('folder-not-a-folder', real, 'it is not a folder', 'Name a folder.');
}

/** The cache folder itself, judged on its descriptor: this user's, nobody else can write it. */
function judgeFolder(real: string, folder: Stats): void {
  if (folder.uid !== userId) {
    throw new Refused(
      'folder-owner',
      real,
      `the folder belongs to uid ${folder.uid}, not to this process's user (uid ${userId})`,
      'Another user could place kernels there. Use a folder of your own ' +
        '(setKernelCacheDirectory or CUDA_TASKS_KERNEL_CACHE).',
    );
  }
  if ((folder.mode & GROUP_OR_OTHERS_WRITE) !== 0) {
    throw new Refused(
      'folder-writable',
      real,
      `its group or others can write the folder (mode ${octal(folder.mode)})`,
      `Another user could place kernels there. Run: chmod go-w '${real}'`,
    );
  }
}

function checkEntry(path: string, entry: Stats): void {
  if (entry.isSymbolicLink()) {
    throw new Refused(
      'entry-symlink',
      path,
      'the entry is a symbolic link',
      'Entries are only ever regular files written by the cache. Delete it.',
    );
  }
  if (!entry.isFile()) {
    throw new Refused(
      'entry-not-regular',
      path,
      'the entry is not a regular file (a FIFO, a device or a folder)',
      'Entries are only ever regular files written by the cache. Delete it.',
    );
  }
  if (userId !== undefined && entry.uid !== userId) {
    throw new Refused(
      'entry-owner',
      path,
      `the entry belongs to uid ${entry.uid}, not to this process's user (uid ${userId})`,
      'Entries written by another user are never loaded. Delete it.',
    );
  }
  if (userId !== undefined && (entry.mode & GROUP_OR_OTHERS_WRITE) !== 0) {
    throw new Refused(
      'entry-writable',
      path,
      `its group or others can write the entry (mode ${octal(entry.mode)})`,
      'The cache writes its entries 0600. Delete it.',
    );
  }
  if (entry.size > HEADER_BYTES + MAX_ENTRY_BYTES) {
    throw new Refused(
      'entry-too-large',
      path,
      `the entry holds ${entry.size} bytes, more than the ${MAX_ENTRY_BYTES} a kernel may`,
      'Delete it.',
    );
  }
}

function damaged(path: string, why: string): Refused {
  return new Refused(
    'entry-damaged',
    path,
    `the entry is damaged (${why})`,
    'It is written again after the compile.',
  );
}

/** Reads exactly `bytes.length` bytes at `position`; false when the file ends first. */
function readFully(descriptor: number, bytes: Buffer, position: number): boolean {
  let done = 0;
  while (done < bytes.length) {
    const count = readSync(descriptor, bytes, done, bytes.length - done, position + done);
    if (count === 0) return false;
    done += count;
  }
  return true;
}

function readEntry(folder: Folder, name: string, key: string): Uint8Array | undefined {
  const path = join(folder.real, name);
  const reached = join(folder.base, name);
  // lstat first, so that a FIFO or a device is never opened; the descriptor is checked again.
  let named: Stats;
  try {
    named = lstatSync(reached);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  checkEntry(path, named);
  let descriptor: number;
  try {
    descriptor = openSync(reached, constants.O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP' || code === 'EMLINK') checkEntry(path, lstatSync(reached));
    throw error;
  }
  try {
    checkStillThere(folder);
    const opened = fstatSync(descriptor);
    checkEntry(path, opened);
    if (opened.dev !== named.dev || opened.ino !== named.ino) {
      throw damaged(path, 'it was replaced while being opened');
    }
    if (opened.size < HEADER_BYTES) throw damaged(path, 'shorter than its header');
    const head = Buffer.alloc(HEADER_BYTES);
    if (!readFully(descriptor, head, 0)) throw damaged(path, 'shorter than its header');
    if (!head.subarray(0, 8).equals(MAGIC)) throw damaged(path, 'not a cache entry');
    // An entry of another format version is a plain miss, rewritten after the compile.
    if (head.readUInt32LE(8) !== FORMAT_VERSION) return undefined;
    if (head.readUInt32LE(12) !== HEADER_BYTES) throw damaged(path, 'a wrong header length');
    if (!head.subarray(16, 48).equals(keyDigest(key))) {
      throw damaged(path, 'it holds the kernel of another key');
    }
    const length = head.readBigUInt64LE(48);
    if (length > BigInt(MAX_ENTRY_BYTES) || Number(length) !== opened.size - HEADER_BYTES) {
      throw damaged(path, 'its length does not match its header');
    }
    const payload = Buffer.alloc(Number(length));
    if (!readFully(descriptor, payload, HEADER_BYTES)) throw damaged(path, 'truncated');
    const digest = createHash('sha256').update(payload).digest();
    if (!digest.equals(head.subarray(56, 88))) throw damaged(path, 'its digest does not match');
    return new Uint8Array(payload.buffer, payload.byteOffset, payload.length);
  } finally {
    closeSync(descriptor);
  }
}

function refusedOr(error: unknown, path: string): CacheReadResult {
  if (error instanceof Refused) {
    warnOnce(error);
    return { refused: error.reason };
  }
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT' || code === 'ENOTDIR') return MISS;
  const refusal = new Refused(
    'entry-unreadable',
    path,
    `it cannot be read (${code ?? String(error)})`,
    'Check the permissions of the cache folder.',
  );
  warnOnce(refusal);
  return { refused: refusal.reason };
}

/**
 * The cubin stored under `key` in `directory` if the trust rules accept the folder and the
 * entry; a miss when there is none; a refusal (warned once per reason) otherwise.
 */
export function readCached(directory: string, key: string): CacheReadResult {
  const name = cacheFileName(key);
  let path = join(directory, name);
  let folder: Folder | undefined;
  try {
    folder = openFolder(directory);
    path = join(folder.real, name);
    const cubin = readEntry(folder, name, key);
    return cubin === undefined ? MISS : { cubin };
  } catch (error) {
    return refusedOr(error, path);
  } finally {
    if (folder !== undefined) closeFolder(folder);
  }
}

/**
 * Creates the missing folders of `directory`, each 0700 whatever the umask. The mode is set on
 * the new folder's descriptor, so that a link swapped in after `mkdir` is never followed.
 */
function createFolders(directory: string): void {
  const missing: string[] = [];
  for (let path = resolve(directory); ; path = dirname(path)) {
    try {
      statSync(path);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || dirname(path) === path) throw error;
      missing.push(path);
    }
  }
  for (const path of missing.reverse()) {
    try {
      mkdirSync(path, { mode: 0o700 });
    } catch (error) {
      // Another process made it first: the trust rules judge it like any other folder.
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') continue;
      throw error;
    }
    if (!FOLDER_DESCRIPTORS) continue;
    const descriptor = openSync(path, FOLDER_FLAGS);
    try {
      fchmodSync(descriptor, 0o700);
    } finally {
      closeSync(descriptor);
    }
  }
}

/**
 * Stores `cubin` under `key` in `directory` (created 0700 when missing; an entry 0600 written
 * to a temporary file and renamed into place). Returns false, leaving no partial file, when the
 * folder is refused (warned once per reason) or cannot be written.
 */
export function writeCached(directory: string, key: string, cubin: Uint8Array): boolean {
  if (cubin.length > MAX_ENTRY_BYTES) return false;
  let folder: Folder;
  try {
    createFolders(directory);
    folder = openFolder(directory);
  } catch (error) {
    if (error instanceof Refused) warnOnce(error);
    return false;
  }
  const name = cacheFileName(key);
  const temporary = join(folder.base, `.${name}.${randomBytes(8).toString('hex')}.tmp`);
  let descriptor: number | undefined;
  try {
    descriptor = openSync(
      temporary,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | O_NOFOLLOW,
      0o600,
    );
    checkStillThere(folder);
    fchmodSync(descriptor, 0o600);
    for (const part of [header(key, cubin), cubin]) {
      let done = 0;
      while (done < part.length) done += writeSync(descriptor, part, done, part.length - done);
    }
    closeSync(descriptor);
    descriptor = undefined;
    renameSync(temporary, join(folder.base, name));
    checkStillThere(folder);
    return true;
  } catch (error) {
    if (error instanceof Refused) warnOnce(error);
    if (descriptor !== undefined) closeSync(descriptor);
    try {
      unlinkSync(temporary);
    } catch {
      // Never created, renamed already, or the folder is gone.
    }
    return false;
  } finally {
    closeFolder(folder);
  }
}

/** Removes the entry stored under `key` (a cubin the driver refused). */
export function removeCached(directory: string, key: string): void {
  let folder: Folder | undefined;
  try {
    folder = openFolder(directory);
    unlinkSync(join(folder.base, cacheFileName(key)));
  } catch {
    // Gone already, or a folder the cache does not use: the next read judges it again.
  } finally {
    if (folder !== undefined) closeFolder(folder);
  }
}

/**
 * Deletes this cache's entries and unfinished temporary files from `directory`, and nothing
 * else (not a user's own `.cubin` files). A folder the trust rules refuse is left untouched.
 */
export function clearCacheFolder(directory: string): void {
  let folder: Folder;
  try {
    folder = openFolder(directory);
  } catch (error) {
    if (error instanceof Refused) warnOnce(error);
    return;
  }
  try {
    for (const name of readdirSync(folder.base)) {
      if (!isCacheFileName(name)) continue;
      const path = join(folder.base, name);
      try {
        if (!lstatSync(path).isDirectory()) unlinkSync(path);
      } catch {
        // Removed by another process meanwhile.
      }
    }
  } catch {
    // The folder cannot be listed: nothing is deleted.
  } finally {
    closeFolder(folder);
  }
}
