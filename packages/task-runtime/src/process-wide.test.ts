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
  it('a second request for the same name and version shares the value', () => {
    const first = processWide('test-shared', 1, () => ({ count: 0 }));
    first.count++;
    const second = processWide('test-shared', 1, () => ({ count: 100 }));
    expect(second).toBe(first);
    expect(second.count).toBe(1);
  });

  it('a copy with another shape version refuses loudly, naming both', () => {
    processWide('test-versioned', 1, () => ({}));
    expect(() => processWide('test-versioned', 2, () => ({}))).toThrow(
      /two incompatible copies .* test-versioned .* version 2, the other's is version 1/,
    );
  });

  it('state stored by an older, unversioned copy is refused too', () => {
    (globalThis as Record<symbol, unknown>)[Symbol.for('@cuda-tasks/task-runtime/test-old')] = {
      pools: new Map(),
    };
    expect(() => processWide('test-old', 1, () => ({}))).toThrow(/an unversioned older copy/);
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
