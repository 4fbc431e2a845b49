import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SharedMemoryError } from './ipc-handle.js';
import { LeaseStore, processAlive, processStartTime } from './ipc-leases.js';

// The lease records of shared memory: a folder per export, a file per importing process,
// liveness by pid. Processes here are made up: `alive` says which exist.

let base: string;
let root: string;
const alive = new Set<number>();
const store = () => new LeaseStore(root, (pid) => alive.has(pid));
const id = 'a1'.repeat(16);

beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), 'leases-'));
  root = join(base, 'root');
  alive.clear();
  alive.add(100); // the exporter
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

describe('LeaseStore', () => {
  it('an export is live while its exporter lives and has not closed it', () => {
    const leases = store();
    expect(leases.exportState(100, id)).toBe('stale'); // never opened
    leases.openExport(100, id);
    expect((statSync(root).mode & 0o777).toString(8)).toBe('700');
    expect(leases.exportState(100, id)).toBe('live');
    leases.closeExport(100, id);
    expect(leases.exportState(100, id)).toBe('stale');
  });

  it('an exporter that exited: its export reads exporter-exited and its folder goes', () => {
    const leases = store();
    leases.openExport(100, id);
    alive.delete(100);
    expect(leases.exportState(100, id)).toBe('exporter-exited');
    alive.add(100); // the pid reused by another process: no folder, so not live
    expect(leases.exportState(100, id)).toBe('stale');
  });

  it('holders: live importers only; a dead importer is dropped (it cannot give its lease back)', () => {
    const leases = store();
    leases.openExport(100, id);
    alive.add(201).add(202);
    expect(leases.take(100, id, 201)).toBe(true);
    expect(leases.take(100, id, 202)).toBe(true);
    expect(leases.take(100, id, 202)).toBe(true); // taking twice is one lease
    expect(leases.holders(100, id)).toEqual([201, 202]);
    alive.delete(202); // killed mid-read
    expect(leases.holders(100, id)).toEqual([201]);
    alive.add(202); // and its pid reused: the lease was removed, it does not come back
    expect(leases.holders(100, id)).toEqual([201]);
    leases.give(100, id, 201);
    expect(leases.holders(100, id)).toEqual([]);
    leases.give(100, id, 201); // twice: nothing
  });

  it('two threads of one process hold a lease each: one giving its lease back leaves the other', () => {
    const leases = store();
    leases.openExport(100, id);
    alive.add(201);
    expect(leases.take(100, id, 201)).toBe(true); // the main thread
    expect(leases.take(100, id, 201, 3)).toBe(true); // worker thread 3
    expect(leases.holders(100, id)).toEqual([201]);
    leases.give(100, id, 201);
    expect(leases.holders(100, id)).toEqual([201]); // thread 3 still maps it
    leases.give(100, id, 201, 3);
    expect(leases.holders(100, id)).toEqual([]);
    alive.delete(201);
    leases.take(100, id, 201, 4);
    expect(leases.holders(100, id)).toEqual([]); // a dead process's thread holds nothing
  });

  it('no lease on an export that is gone', () => {
    const leases = store();
    alive.add(201);
    expect(leases.take(100, id, 201)).toBe(false);
    leases.openExport(100, id);
    leases.closeExport(100, id);
    expect(leases.take(100, id, 201)).toBe(false);
    expect(leases.holders(100, id)).toEqual([]);
    leases.give(100, id, 201);
  });

  it('refuses export names that are not a pid and 32 hex digits (no path tricks)', () => {
    const leases = store();
    expect(() => leases.openExport(100, '../../x')).toThrow(TypeError);
    expect(() => leases.exportState(0, id)).toThrow(TypeError);
  });

  it('refuses a root folder that others can write', async () => {
    const { mkdirSync, chmodSync } = await import('node:fs');
    mkdirSync(root, { mode: 0o700 });
    chmodSync(root, 0o777);
    expect(() => store().openExport(100, id)).toThrow(/only it can write/);
  });

  it('refuses, with reason lease-folder, a root that is a link, or in a parent others can write without the sticky bit; for every use', async () => {
    const { mkdirSync, chmodSync, symlinkSync } = await import('node:fs');
    const reason = (run: () => unknown) => {
      try {
        run();
      } catch (error) {
        return (error as SharedMemoryError).reason;
      }
      return 'accepted';
    };
    const elsewhere = join(base, 'elsewhere');
    mkdirSync(elsewhere, { mode: 0o700 });
    symlinkSync(elsewhere, root);
    for (const use of [
      (s: LeaseStore) => s.openExport(100, id),
      (s: LeaseStore) => s.exportState(100, id),
      (s: LeaseStore) => s.take(100, id, 201),
      (s: LeaseStore) => s.holders(100, id),
      (s: LeaseStore) => s.give(100, id, 201),
      (s: LeaseStore) => s.retire(100, id),
    ]) {
      expect(reason(() => use(store()))).toBe('lease-folder');
    }
    rmSync(root);
    const open = join(base, 'open');
    mkdirSync(open, { mode: 0o700 });
    chmodSync(open, 0o777); // another user could rename our folder away and plant theirs
    const inOpen = new LeaseStore(join(open, 'root'), (pid) => alive.has(pid));
    expect(reason(() => inOpen.exportState(100, id))).toBe('lease-folder');
    chmodSync(open, 0o1777); // sticky, as /tmp: only the owner renames its folder
    expect(reason(() => inOpen.openExport(100, id))).toBe('accepted');
  });

  it('retire: a lease taken before is seen and keeps the export for its holder; none can be taken after', () => {
    const leases = store();
    leases.openExport(100, id);
    alive.add(201).add(202);
    expect(leases.take(100, id, 201)).toBe(true);
    expect(leases.retire(100, id)).toBe(false); // 201 holds it
    expect(leases.take(100, id, 202)).toBe(false); // retired: no new lease
    expect(leases.exportState(100, id)).toBe('stale'); // for a new importer
    expect(leases.exportState(100, id, true)).toBe('live'); // for 201, which holds it
    expect(leases.holders(100, id)).toEqual([201]);
    leases.give(100, id, 201);
    expect(leases.holders(100, id)).toEqual([]);
    expect(leases.retire(100, id)).toBe(true);
    expect(readdirSync(root)).toEqual([]);
  });

  it('a pid reused by another process: neither a killed exporter nor a dead importer reads as live', () => {
    const starts = new Map<number, string>([
      [100, '5000'],
      [201, '6000'],
    ]);
    const leases = new LeaseStore(
      root,
      (pid) => alive.has(pid),
      (pid) => starts.get(pid) ?? null,
    );
    leases.openExport(100, id);
    alive.add(201);
    expect(leases.take(100, id, 201)).toBe(true);
    expect(leases.holders(100, id)).toEqual([201]);
    expect(leases.exportState(100, id)).toBe('live');
    starts.set(201, '6100'); // 201 died and its pid went to another process
    expect(leases.holders(100, id)).toEqual([]);
    starts.set(100, '5100'); // the exporter was killed (no exit hook) and its pid reused
    expect(leases.exportState(100, id, true)).toBe('exporter-exited');
    expect(readdirSync(root)).toEqual([]);
  });

  it('processStartTime: this process has one, stable; a pid that does not exist has none', () => {
    const start = processStartTime(process.pid);
    if (process.platform === 'linux') expect(start).toMatch(/^[0-9]+$/);
    expect(processStartTime(process.pid)).toBe(start);
    expect(processStartTime(2 ** 30)).toBeNull();
  });

  it('processAlive: this process lives; a pid far beyond pid_max does not', () => {
    expect(processAlive(process.pid)).toBe(true);
    expect(processAlive(2 ** 30)).toBe(false);
  });
});
