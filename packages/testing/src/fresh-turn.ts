/**
 * Vitest setup (vitest.config.ts's `setupFiles`): every test starts on a fresh turn of the event
 * loop. The runtime's per-turn budget (task starts and the waits' spinning, cudadrv's
 * `stream/turn.ts`) counts wall time from a turn's first task start, and the runner may go from
 * one test to the next without the loop turning: a test's first task would then start a turn
 * later, after a timer the test set to let it start.
 */
import { beforeEach } from 'vitest';

beforeEach(() => new Promise<void>((resolve) => setImmediate(resolve)));
