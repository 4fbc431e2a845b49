/**
 * Lease records of shared memory, so that its lifetime cannot dangle across processes. CUDA
 * does not tell an exporter who opened its memory, nor an importer that the exporter exited,
 * so each export keeps a folder of its own, named `<exporter pid>-<export id>`, in a folder
 * private to the user; each importing process holds a file named after its pid in it while
 * it has the memory open:
 *
 * - the exporter frees the memory only once no live process holds a lease (a lease whose
 *   process has died is removed when found: an importer killed mid-read never pins it);
 * - an importer checks that the exporter's process lives and that its export folder is still
 *   there (a pid reused by another process leaves no folder; a freed export removes its own).
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
  rmSync,
  unlinkSync,
} from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { CudaArgumentError } from '../errors.js';

/** Whether process `pid` exists (signal 0: EPERM means it exists but belongs to another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
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
const LEASE_NAME = /^[1-9][0-9]{0,6}$/;

/** The lease records under one root folder (see the module's comment). */
export class LeaseStore {
  readonly root: string;
  readonly #alive: (pid: number) => boolean;
  #checked = false;

  constructor(root: string = defaultLeaseRoot(), alive: (pid: number) => boolean = processAlive) {
    this.root = root;
    this.#alive = alive;
  }

  /**
   * Creates the root folder (mode 0700) on first use and checks that it is a real folder of
   * this user that nobody else can write: lease records in a folder another user controls
   * could keep memory alive, or free it early.
   */
  #ensureRoot(): void {
    if (this.#checked) return;
    mkdirSync(this.root, { recursive: true, mode: 0o700 });
    const stats = lstatSync(this.root);
    const uid = process.getuid?.();
    if (
      !stats.isDirectory() ||
      (uid !== undefined && stats.uid !== uid) ||
      (stats.mode & 0o022) !== 0
    ) {
      throw new CudaArgumentError(
        `the lease folder ${this.root} of shared memory must be a folder of this user that only it can write (found mode ${(stats.mode & 0o777).toString(8)}, owner ${stats.uid}); remove it and try again`,
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
    mkdirSync(this.#exportFolder(pid, exportId), { mode: 0o700 });
  }

  /** The exporter: the export is freed; its folder and any lease left in it go. */
  closeExport(pid: number, exportId: string): void {
    rmSync(this.#exportFolder(pid, exportId), { recursive: true, force: true });
  }

  /**
   * Whether the export is still there to be opened: its exporter lives and has not freed it.
   * 'exporter-exited' when the process is gone (its folder, left by a killed exporter, is
   * removed), 'stale' when the process lives but the export's folder is gone.
   */
  exportState(pid: number, exportId: string): 'live' | 'exporter-exited' | 'stale' {
    const folder = this.#exportFolder(pid, exportId);
    if (!this.#alive(pid)) {
      rmSync(folder, { recursive: true, force: true });
      return 'exporter-exited';
    }
    try {
      return lstatSync(folder).isDirectory() ? 'live' : 'stale';
    } catch {
      return 'stale';
    }
  }

  /** The importer: holds a lease on the export. False when the export is gone. */
  take(pid: number, exportId: string, importer: number): boolean {
    this.#ensureRoot();
    const folder = this.#exportFolder(pid, exportId);
    try {
      closeSync(openSync(join(folder, String(importer)), 'w', 0o600));
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw error;
    }
  }

  /** The importer: gives its lease back (nothing when the export is already gone). */
  give(pid: number, exportId: string, importer: number): void {
    try {
      unlinkSync(join(this.#exportFolder(pid, exportId), String(importer)));
    } catch {
      // The exporter freed the export (or its process went): no lease to give back.
    }
  }

  /**
   * The exporter: the pids that hold a lease on the export now, in ascending order. The lease
   * of a process that has died is removed on the way (it can never give it back).
   */
  holders(pid: number, exportId: string): number[] {
    const folder = this.#exportFolder(pid, exportId);
    let names: string[];
    try {
      names = readdirSync(folder);
    } catch {
      return [];
    }
    const live: number[] = [];
    for (const name of names) {
      if (!LEASE_NAME.test(name)) continue;
      const holder = Number(name);
      if (holder !== pid && this.#alive(holder)) live.push(holder);
      else {
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
