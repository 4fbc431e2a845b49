import type { WorkspaceCount } from './handle-workspaces.js';

/** What `HandleCache.statistics()` reports (see there). */
export interface HandleStatistics extends WorkspaceCount {
  /** Handles created so far. */
  created: number;
  /** Handles destroyed so far. */
  destroyed: number;
  /** Idle handles now, over every context. */
  idle: number;
  /** Task leases held now. */
  leased: number;
  /** Handles alive now, idle or leased. */
  handles: number;
  /** Leases that shared a handle (taken while another lease held it). */
  shared: number;
}

/** What the statistics read of a context's handles: the idle ones. */
interface IdleHandles {
  readonly idle: readonly unknown[];
}

/** What the statistics read of a handle: its workspaces, if it has any. */
interface CountedHandle {
  readonly workspaces: { count(count: WorkspaceCount): void } | undefined;
}

/**
 * A cache's counters: handles created and destroyed so far, task leases held now, leases that
 * shared a handle. Updated in place (a lease allocates nothing); `statistics` adds what the
 * handles hold now.
 */
export class HandleCounters {
  /** Handles created so far. */
  created = 0;
  /** Handles destroyed so far. */
  destroyed = 0;
  /** Task leases held now. */
  leased = 0;
  /** Leases that shared a handle. */
  shared = 0;

  /** Counts a lease taken of a handle that `leases` other leases hold now. */
  leaseTaken(leases: number): void {
    if (leases > 0) this.shared++;
    this.leased++;
  }

  /** Counts a lease given back. */
  leaseReturned(): void {
    this.leased--;
  }

  /**
   * The counters, with the idle handles of `contexts` and the handles of `records` (alive now)
   * and their workspaces, bound or spare.
   */
  statistics(
    contexts: ReadonlyMap<unknown, IdleHandles>,
    records: ReadonlyMap<unknown, CountedHandle>,
  ): HandleStatistics {
    let idle = 0;
    for (const handles of contexts.values()) idle += handles.idle.length;
    const count: WorkspaceCount = { workspaces: 0, workspaceBytes: 0 };
    for (const record of records.values()) record.workspaces?.count(count);
    return {
      created: this.created,
      destroyed: this.destroyed,
      idle,
      leased: this.leased,
      handles: records.size,
      shared: this.shared,
      workspaces: count.workspaces,
      workspaceBytes: count.workspaceBytes,
    };
  }
}
