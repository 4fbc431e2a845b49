/**
 * Lease records of shared memory, so that its lifetime cannot dangle across processes. CUDA
 * does not tell an exporter who opened its memory, nor an importer that the exporter exited,
 * so each export keeps a folder of its own, named `<exporter pid>-<export id>`, in a folder
 * private to the user; each importing process holds a file named after its pid in it while
 * it has the memory open (`<pid>.<thread id>` for a worker thread: the threads of a process
 * open and close their mappings apart, so each holds a lease of its own):
 *
 * - the exporter frees the memory only once no live process holds a lease (a lease whose
 *   process has died is removed when found: an importer killed mid-read never pins it);
 * - an importer checks that the exporter's process lives and that its export folder is still
 *   there (a pid reused by another process leaves no folder; a freed export removes its own).
 *
 * To free, the exporter first renames the export's folder aside (`retire`, one atomic step),
 * then reads the leases in it: an importer's lease is either in the folder before the rename
 * (seen, the free waits) or refused after it (the folder is gone: 'stale'); no importer can
 * take a lease between the exporter's look and its free. Importers that already hold one keep
 * using the retired export until they give it back.
 *
 * A pid alone can be reused by another process once its own has died (an exporter killed
 * without its exit hook leaves its folder; a dead importer's lease stays until looked at), so
 * each record also holds its process's start time (Linux: /proc/<pid>/stat), and a live pid
 * with another start time counts as dead. Where the start time cannot be read, the pid decides.
 *
 * Nothing here calls CUDA; `LeaseStore` takes the folder and the liveness test, so the unit
 * tests drive it with a temporary folder and made-up processes.
 */
import {
  closeSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { CudaArgumentError } from '../errors.js';
import { SharedMemoryError } from './ipc-handle.js';

/** Whether process `pid` exists (signal 0: EPERM means it exists but belongs to another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * When process `pid` started, as the kernel counts it (clock ticks since boot: /proc/<pid>/stat,
 * field 22), or null where that cannot be read (another system, or no such process). Together
 * with the pid it names one process: a reused pid has another start time.
 */
export function processStartTime(pid: number): string | null {
  if (!Number.isSafeInteger(pid) || pid < 1) return null;
  const text = readSmall(`/proc/${pid}/stat`, 1024);
  if (text === null) return null;
  // The command name (field 2) is in parentheses and may hold spaces: count after its end.
  const start = text.slice(text.lastIndexOf(')') + 2).split(' ')[19];
  return start !== undefined && /^[0-9]{1,20}$/.test(start) ? start : null;
}

/** The first `limit` bytes of a file as text, or null when it cannot be read. */
function readSmall(path: string, limit: number): string | null {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return null;
  }
  try {
    const bytes = Buffer.alloc(limit);
    const length = readSync(fd, bytes, 0, limit, 0);
    return bytes.toString('latin1', 0, length);
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}

/** The default folder of the lease records: in the temporary folder, one per user. */
export function defaultLeaseRoot(): string {
  let user: string | number;
  try {
    user = process.getuid?.() ?? userInfo().username;
  } catch {
    user = 'user';
  }
  return join(tmpdir(), `cuda-tasks-ipc-${user}`);
}

const EXPORT_NAME = /^([1-9][0-9]{0,6})-([0-9a-f]{32})$/;
/** A lease: the importer's pid, and its worker thread's id for a thread other than the main one. */
const LEASE_NAME = /^([1-9][0-9]{0,6})(?:\.[1-9][0-9]{0,9})?$/;
/** The suffix of a retired export's folder (see the module's comment). */
const RETIRED = '.retired';
/** The record, in an export's folder, of the exporter's start time. */
const EXPORTER = 'exporter';

/** The lease records under one root folder (see the module's comment). */
export class LeaseStore {
  readonly root: string;
  readonly #alive: (pid: number) => boolean;
  readonly #startOf: (pid: number) => string | null;
  #checked = false;

  constructor(
    root: string = defaultLeaseRoot(),
    alive: (pid: number) => boolean = processAlive,
    startOf: (pid: number) => string | null = processStartTime,
  ) {
    this.root = root;
    this.#alive = alive;
    this.#startOf = startOf;
  }

  /**
   * Whether process `pid` lives and is the one that wrote `record` (its start time; an empty
   * or unreadable record, or a start time that cannot be read now, leaves it to the pid).
   */
  #lives(pid: number, record: string | null): boolean {
    if (!this.#alive(pid)) return false;
    if (record === null || record === '') return true;
    const now = this.#startOf(pid);
    return now === null || now === record;
  }

  /**
   * Creates the root folder (mode 0700) on first use and checks, before any record is read or
   * written, that it is a real folder (not a link) of this user that nobody else can write, in
   * a parent where nobody else can rename it away (not writable by others, or sticky as /tmp
   * is): lease records in a folder another user controls could keep memory alive, or free it
   * early. A SharedMemoryError ('lease-folder') otherwise.
   */
  #ensureRoot(): void {
    if (this.#checked) return;
    const uid = process.getuid?.();
    const refuse = (detail: string) =>
      new SharedMemoryError(
        'lease-folder',
        `the lease folder ${this.root} of shared memory must be a folder of this user that only it can write, in a folder others cannot rename it in: ${detail}`,
      );
    let parent: ReturnType<typeof statSync>;
    try {
      parent = statSync(dirname(this.root));
    } catch (error) {
      throw refuse(`its parent cannot be read (${(error as NodeJS.ErrnoException).code})`);
    }
    if ((parent.mode & 0o022) !== 0 && (parent.mode & 0o1000) === 0) {
      throw refuse(
        `its parent is writable by others and not sticky (mode ${(parent.mode & 0o7777).toString(8)})`,
      );
    }
    try {
      mkdirSync(this.root, { mode: 0o700 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw refuse(`it cannot be made (${(error as NodeJS.ErrnoException).code})`);
      }
    }
    const stats = lstatSync(this.root);
    if (
      !stats.isDirectory() ||
      (uid !== undefined && stats.uid !== uid) ||
      (stats.mode & 0o022) !== 0
    ) {
      throw refuse(
        `found ${stats.isSymbolicLink() ? 'a link' : stats.isDirectory() ? 'a folder' : 'a file'} of mode ${(stats.mode & 0o777).toString(8)}, owner ${stats.uid}; remove it and try again`,
      );
    }
    this.#checked = true;
  }

  #exportFolder(pid: number, exportId: string): string {
    const name = `${pid}-${exportId}`;
    if (!EXPORT_NAME.test(name)) throw new CudaArgumentError(`bad export name ${name}`);
    return join(this.root, name);
  }

  /** The exporter: opens the record of a new export (its folder). */
  openExport(pid: number, exportId: string): void {
    this.#ensureRoot();
    const folder = this.#exportFolder(pid, exportId);
    mkdirSync(folder, { mode: 0o700 });
    writeFileSync(join(folder, EXPORTER), this.#startOf(pid) ?? '', { mode: 0o600 });
  }

  /** The exporter: the export is freed; its folder and any lease left in it go. */
  closeExport(pid: number, exportId: string): void {
    const folder = this.#exportFolder(pid, exportId);
    this.#ensureRoot();
    rmSync(folder, { recursive: true, force: true });
    rmSync(folder + RETIRED, { recursive: true, force: true });
  }

  /**
   * The exporter wants to free the export: from now on no process can take a lease on it (its
   * folder is renamed aside, atomically). True when no live process holds one (its records are
   * removed: free the memory now); false while some do (call again later; the holders keep it).
   */
  retire(pid: number, exportId: string): boolean {
    const folder = this.#exportFolder(pid, exportId);
    this.#ensureRoot();
    try {
      renameSync(folder, folder + RETIRED);
    } catch (error) {
      // Retired before (or never opened): the records are where a retire left them.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    if (this.#holdersIn(folder + RETIRED, pid).length > 0) return false;
    rmSync(folder + RETIRED, { recursive: true, force: true });
    return true;
  }

  /**
   * Whether the export is still there to be opened: its exporter lives and has not freed it.
   * 'exporter-exited' when the process is gone (its folder, left by a killed exporter, is
   * removed), 'stale' when the process lives but the export's folder is gone.
   */
  exportState(
    pid: number,
    exportId: string,
    holding = false,
  ): 'live' | 'exporter-exited' | 'stale' {
    const folder = this.#exportFolder(pid, exportId);
    this.#ensureRoot();
    const where = isFolder(folder) ? folder : folder + RETIRED;
    if (!this.#lives(pid, readSmall(join(where, EXPORTER), 32))) {
      rmSync(folder, { recursive: true, force: true });
      rmSync(folder + RETIRED, { recursive: true, force: true });
      return 'exporter-exited';
    }
    // An importer that holds a lease keeps using an export its exporter has retired.
    return isFolder(folder) || (holding && isFolder(folder + RETIRED)) ? 'live' : 'stale';
  }

  /**
   * The importer (process `importer`, thread `thread`: 0 for the main one) holds a lease on
   * the export. False when the export is gone.
   */
  take(pid: number, exportId: string, importer: number, thread = 0): boolean {
    this.#ensureRoot();
    const folder = this.#exportFolder(pid, exportId);
    try {
      writeFileSync(join(folder, leaseName(importer, thread)), this.#startOf(importer) ?? '', {
        mode: 0o600,
      });
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw error;
    }
  }

  /** The importer: gives its lease back (nothing when the export is already gone). */
  give(pid: number, exportId: string, importer: number, thread = 0): void {
    const folder = this.#exportFolder(pid, exportId);
    this.#ensureRoot();
    for (const where of [folder, folder + RETIRED]) {
      try {
        unlinkSync(join(where, leaseName(importer, thread)));
      } catch {
        // The exporter freed the export (or its process went): no lease to give back.
      }
    }
  }

  /**
   * The exporter: the pids that hold a lease on the export now, in ascending order, each once. The lease
   * of a process that has died is removed on the way (it can never give it back).
   */
  holders(pid: number, exportId: string): number[] {
    const folder = this.#exportFolder(pid, exportId);
    this.#ensureRoot();
    // One pid per process, however many of its threads hold a lease.
    const pids = new Set([
      ...this.#holdersIn(folder, pid),
      ...this.#holdersIn(folder + RETIRED, pid),
    ]);
    return [...pids].sort((a, b) => a - b);
  }

  #holdersIn(folder: string, pid: number): number[] {
    let names: string[];
    try {
      names = readdirSync(folder);
    } catch {
      return [];
    }
    const live: number[] = [];
    for (const name of names) {
      const match = LEASE_NAME.exec(name);
      if (match === null) continue;
      const holder = Number(match[1]);
      if (holder !== pid && this.#lives(holder, readSmall(join(folder, name), 32))) {
        live.push(holder);
      } else {
        try {
          unlinkSync(join(folder, name));
        } catch {
          // Gone already.
        }
      }
    }
    return live.sort((a, b) => a - b);
  }
}

function leaseName(importer: number, thread: number): string {
  if (
    !Number.isSafeInteger(importer) ||
    importer < 1 ||
    !Number.isSafeInteger(thread) ||
    thread < 0
  ) {
    throw new CudaArgumentError(`bad lease holder ${importer}.${thread}`);
  }
  return thread === 0 ? String(importer) : `${importer}.${thread}`;
}

function isFolder(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}
