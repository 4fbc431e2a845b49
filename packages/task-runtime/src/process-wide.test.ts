import { describe, expect, it, vi } from 'vitest';

// The driver is replaced by a test double (see testing/fake-driver.ts).
const fake = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver(),
);

vi.mock('@cuda-tasks/cudadrv', () => fake.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.module);

import { processWide } from './process-wide.js';

/** A second, separately evaluated copy of the package (as a bundled copy would be). */
async function loadCopy(): Promise<typeof import('./index.js')> {
  vi.resetModules();
  return import('./index.js');
}

describe('process-wide state', () => {
  it('a second request for the same name shares the value (cudadrv’s processState keeps it)', () => {
    const first = processWide('test-shared', () => ({ count: 0 }));
    first.count++;
    const second = processWide('test-shared', () => ({ count: 100 }));
    expect(second).toBe(first);
    expect(second.count).toBe(1);
    // Under this package's name, where another copy of the package finds it.
    const key = Symbol.for('@cuda-tasks/task-runtime@fake/test-shared');
    expect((globalThis as Record<symbol, unknown>)[key]).toBe(first);
  });

  it('two loaded copies of the package share task ids, the root task and the stream pool', async () => {
    const one = await loadCopy();
    const two = await loadCopy();
    expect(two.task).not.toBe(one.task); // really two copies
    const ids = [
      await one.task(() => one.currentTask().id),
      await two.task(() => two.currentTask().id),
      await one.task(() => one.currentTask().id),
      await two.task(() => two.currentTask().id),
    ];
    expect(new Set([...ids, one.currentTask().id]).size).toBe(5);
    expect(two.currentTask().id).toBe(one.currentTask().id);
    // A stream that one copy's task gave back is the next stream the other copy's task gets.
    const released = await one.task(() => one.stream());
    expect(await two.task(() => two.stream())).toBe(released);
    expect(two.streamPoolStatistics()).toEqual(one.streamPoolStatistics());
  });

  it('a trace started through one copy records the tasks of the other', async () => {
    const one = await loadCopy();
    const two = await loadCopy();
    const recorder = one.startTrace();
    await two.task(() => 1, { name: 'from the other copy' });
    const trace = await recorder.stop();
    const spans = trace.traceEvents.filter((event) => event.cat === 'task').map((e) => e.name);
    expect(spans).toContain('from the other copy');
  });
});
