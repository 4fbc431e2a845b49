import { setTimeout as sleep } from 'node:timers/promises';

import type { Context, Stream } from '@cuda-tasks/cudadrv';
import { afterEach, describe, expect, it, vi } from 'vitest';

// The driver is replaced by a test double (see testing/fake-driver.ts). Each test uses its own
// fresh context, so that pools start empty.
const fake = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver(),
);

vi.mock('@cuda-tasks/cudadrv', () => fake.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.module);

import {
  acquireExclusiveStream,
  acquireStream,
  configureStreams,
  DEFAULT_MAX_STREAMS,
  onStreamReleased,
  releaseStream,
  settingsFrom,
  streamPoolStatistics,
} from './pool.js';
import { stream } from './state.js';
import { prewarmStreams, task, withDevice } from './task.js';

type FakeStream = InstanceType<typeof fake.FakeStream>;

const device0 = fake.devices[0]!;
const created = () => fake.state.created.length;

/** A context no pool has seen yet (a fresh device of the double). */
function freshContext(): Context {
  const device = new (
    fake.devices[0]!.constructor as new (
      ordinal: number,
    ) => {
      context: unknown;
    }
  )(9);
  return device.context as Context;
}

/** Runs `count` tasks that hold their streams at once; returns their streams, then settles them. */
async function burst(count: number, body: () => Stream = stream): Promise<FakeStream[]> {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const seen: FakeStream[] = [];
  const tasks = Array.from({ length: count }, () =>
    task(async () => {
      seen.push(body() as unknown as FakeStream);
      await gate;
    }),
  );
  // Every task holds its stream until all have started (a burst's starts may span turns).
  while (seen.length < count) await sleep(1);
  release();
  await Promise.all(tasks);
  return seen;
}

const defaults = settingsFrom({});
afterEach(() => {
  configureStreams({
    prewarm: defaults.prewarm,
    maxStreams: defaults.maxStreams,
    maxIdle: defaults.maxIdle,
    spare: defaults.spare,
    trimIdleAfterMs: defaults.trimIdleAfterMs,
  });
});

/** Waits for n turns of the event loop (growth is scheduled with setImmediate: a timer could fire before it on a loaded machine). */
async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('the stream pool is made ahead of bursts', () => {
  it('defaults: 128 streams per context, all created at the pool’s first use', () => {
    expect(defaults).toEqual({
      prewarm: DEFAULT_MAX_STREAMS,
      maxStreams: DEFAULT_MAX_STREAMS,
      maxIdle: DEFAULT_MAX_STREAMS,
      spare: 2,
      trimIdleAfterMs: 1000,
    });
    expect(DEFAULT_MAX_STREAMS).toBe(128);
  });

  it('the environment sets maxStreams and prewarm; a bad value is ignored with a warning', async () => {
    expect(settingsFrom({ CUDA_TASKS_MAX_STREAMS: '8' })).toMatchObject({
      maxStreams: 8,
      prewarm: 8,
      maxIdle: 8,
    });
    expect(
      settingsFrom({ CUDA_TASKS_MAX_STREAMS: '16', CUDA_TASKS_PREWARM_STREAMS: '4' }),
    ).toMatchObject({ maxStreams: 16, prewarm: 4 });
    // prewarm never exceeds maxStreams.
    expect(
      settingsFrom({ CUDA_TASKS_MAX_STREAMS: '4', CUDA_TASKS_PREWARM_STREAMS: '64' }),
    ).toMatchObject({ maxStreams: 4, prewarm: 4 });
    // A bad value is ignored with one warning naming the variable and the value (captured
    // here, so the test run prints nothing).
    const emitted = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      expect(settingsFrom({ CUDA_TASKS_MAX_STREAMS: 'many' }).maxStreams).toBe(128);
      expect(settingsFrom({ CUDA_TASKS_PREWARM_STREAMS: '-3' }).prewarm).toBe(128);
      // A count that would have the first task create millions of streams, and a long value.
      expect(settingsFrom({ CUDA_TASKS_MAX_STREAMS: '5000000' }).maxStreams).toBe(128);
      expect(settingsFrom({ CUDA_TASKS_MAX_STREAMS: '4096' }).maxStreams).toBe(4096);
      expect(settingsFrom({ CUDA_TASKS_PREWARM_STREAMS: '9'.repeat(1000) }).prewarm).toBe(128);
      const type = { type: 'CudaTasksConfigurationWarning' };
      expect(emitted.mock.calls).toEqual([
        ['CUDA_TASKS_MAX_STREAMS="many" is not an integer in 0..4096; ignored', type],
        ['CUDA_TASKS_PREWARM_STREAMS="-3" is not an integer in 0..4096; ignored', type],
        ['CUDA_TASKS_MAX_STREAMS="5000000" is not an integer in 0..4096; ignored', type],
        [
          `CUDA_TASKS_PREWARM_STREAMS="${'9'.repeat(40)}..." is not an integer in 0..4096; ignored`,
          type,
        ],
      ]);
    } finally {
      emitted.mockRestore();
    }
  });

  it('the first task to need a stream creates the whole prewarm at once; a burst after it creates none', async () => {
    configureStreams({ prewarm: 12, maxStreams: 12 });
    const context = freshContext();
    const before = created();
    const first = acquireStream(context);
    expect(created() - before).toBe(12);
    releaseStream(first);
    const held = Array.from({ length: 12 }, () => acquireStream(context));
    expect(created() - before).toBe(12);
    expect(new Set(held.map((entry) => entry.stream)).size).toBe(12);
    for (const entry of held) releaseStream(entry);
  });

  it('prewarmStreams() creates the pool before any task needs it', async () => {
    configureStreams({ prewarm: 6, maxStreams: 6 });
    const before = created();
    const count = prewarmStreams(1);
    expect(count).toBeGreaterThanOrEqual(6);
    const afterPrewarm = created();
    expect(afterPrewarm - before).toBeLessThanOrEqual(6);
    expect(streamPoolStatistics(1).streams).toBe(count);
    // A burst on device 1 creates nothing.
    const seen = await withDevice(1, () => burst(6));
    expect(created()).toBe(afterPrewarm);
    expect(new Set(seen).size).toBe(6);
    expect(prewarmStreams(1)).toBe(count); // idempotent
  });

  it('past maxStreams, tasks share streams round-robin and nothing more is created', async () => {
    configureStreams({ prewarm: 4, maxStreams: 4 });
    const context = freshContext();
    const before = created();
    const sharedBefore = streamPoolStatistics().shared;
    const held = Array.from({ length: 10 }, () => acquireStream(context));
    expect(created() - before).toBe(4);
    const streams = held.map((entry) => entry.stream);
    const distinct = [...new Set(streams)];
    expect(distinct).toHaveLength(4);
    // Round-robin: each stream serves 2 or 3 of the 10 tasks.
    const uses = distinct.map((s) => streams.filter((other) => other === s).length).sort();
    expect(uses).toEqual([2, 2, 3, 3]);
    expect(streamPoolStatistics().shared - sharedBefore).toBe(6);
    // Distinct streams first: the first four tasks got four different ones.
    expect(new Set(streams.slice(0, 4)).size).toBe(4);
    for (const entry of held) releaseStream(entry);
  });

  it('a shared stream goes back to the pool when its last holder lets go, the listeners running once', async () => {
    configureStreams({ prewarm: 1, maxStreams: 1 });
    const context = freshContext();
    const released = vi.fn();
    const off = onStreamReleased(released);
    try {
      const a = acquireStream(context);
      const b = acquireStream(context);
      expect(b).toBe(a);
      expect(a.holders).toBe(2);
      const epoch = a.epoch;
      releaseStream(a);
      expect(released).not.toHaveBeenCalled();
      expect(a.epoch).toBe(epoch);
      releaseStream(b);
      expect(released).toHaveBeenCalledTimes(1);
      expect(released).toHaveBeenCalledWith(a.stream);
      expect(a.epoch).toBe(epoch + 1);
    } finally {
      off();
    }
  });

  it('below maxStreams the pool grows ahead of need, one stream per event-loop turn, and tasks never create inline', async () => {
    configureStreams({ prewarm: 2, maxStreams: 6, spare: 2 });
    const context = freshContext();
    const before = created();
    const a = acquireStream(context);
    expect(created() - before).toBe(2); // the prewarm only
    const b = acquireStream(context);
    // No idle stream left: a third task shares rather than creating a stream inline.
    const c = acquireStream(context);
    expect(created() - before).toBe(2);
    expect([a.stream, b.stream]).toContain(c.stream);
    // Growth happens between turns, one stream per turn, until two are idle.
    await new Promise((resolve) => setImmediate(resolve));
    expect(created() - before).toBe(3);
    await turns(4);
    expect(created() - before).toBe(4);
    expect(streamPoolStatistics().created).toBe(created());
    const d = acquireStream(context);
    const e = acquireStream(context);
    expect(new Set([a, b, d, e].map((entry) => entry.stream)).size).toBe(4);
    await turns(4);
    // It grew again, up to maxStreams and no further.
    expect(created() - before).toBe(6);
    for (let i = 0; i < 4; i++) acquireStream(context);
    await turns(4);
    expect(created() - before).toBe(6);
  });

  it('an exclusive stream (a graph capture’s) is never shared; beyond maxStreams it is destroyed on release', () => {
    configureStreams({ prewarm: 1, maxStreams: 1 });
    const context = freshContext();
    const shared = acquireStream(context);
    // The only stream is held (shareable): the capture gets a new one, beyond the bound.
    const capture = acquireExclusiveStream(context);
    expect(capture.stream).not.toBe(shared.stream);
    expect(capture.pool.streams).toHaveLength(2);
    // Tasks arriving now share the ordinary stream, never the capture's.
    for (let i = 0; i < 4; i++) expect(acquireStream(context).stream).toBe(shared.stream);
    const destroyed = streamPoolStatistics().destroyed;
    releaseStream(capture);
    expect(streamPoolStatistics().destroyed - destroyed).toBe(1);
    expect((capture.stream as unknown as FakeStream).disposed).toBe(true);
    expect(shared.pool.streams).toEqual([shared]);
  });

  it('a pool per priority: streams created with it, kept apart', () => {
    configureStreams({ prewarm: 2, maxStreams: 2 });
    const context = freshContext();
    const normal = acquireStream(context);
    const high = acquireStream(context, -1);
    expect((high.stream as unknown as FakeStream).priority).toBe(-1);
    expect((normal.stream as unknown as FakeStream).priority).toBe(0);
    expect(high.pool).not.toBe(normal.pool);
    expect(high.pool.priority).toBe(-1);
    releaseStream(high);
    expect(acquireStream(context, -1)).toBe(high);
    expect(acquireStream(context, 0)).not.toBe(high);
  });

  it('the cached memory of a stream idle for trimIdleAfterMs goes back; a held stream keeps its own', async () => {
    configureStreams({ prewarm: 2, maxStreams: 2, trimIdleAfterMs: 5 });
    const context = freshContext();
    const first = acquireStream(context);
    const second = acquireStream(context);
    releaseStream(first);
    await sleep(30);
    expect(fake.state.trimmed).toContain(first.stream);
    expect(fake.state.trimmed).not.toContain(second.stream);
    // Trimmed once per idle period, not again.
    const count = fake.state.trimmed.filter((s) => s === (first.stream as unknown)).length;
    await sleep(20);
    expect(fake.state.trimmed.filter((s) => s === (first.stream as unknown))).toHaveLength(count);
    releaseStream(second);
    await sleep(30);
    expect(fake.state.trimmed).toContain(second.stream);
  });

  it('raising prewarm and maxStreams after the pool’s first use creates the new streams at once; a burst after it creates none', async () => {
    configureStreams({ prewarm: 4, maxStreams: 4 });
    const context = freshContext();
    const first = acquireStream(context);
    const pool = first.pool;
    releaseStream(first);
    expect(pool.streams).toHaveLength(4);
    configureStreams({ prewarm: 9, maxStreams: 9 });
    expect(pool.streams).toHaveLength(9);
    const before = created();
    const held = Array.from({ length: 9 }, () => acquireStream(context));
    expect(new Set(held.map((entry) => entry.stream)).size).toBe(9);
    expect(created()).toBe(before);
    for (const entry of held) releaseStream(entry);
  });

  it('raising maxStreams alone lets a used pool grow ahead, between turns, instead of sharing', async () => {
    configureStreams({ prewarm: 2, maxStreams: 2, spare: 2 });
    const context = freshContext();
    const held = [acquireStream(context), acquireStream(context)];
    const pool = held[0]!.pool;
    expect(pool.streams).toHaveLength(2);
    configureStreams({ maxStreams: 6 });
    expect(pool.streams).toHaveLength(2); // nothing inline
    await turns(6);
    expect(pool.streams).toHaveLength(4); // two spare, made between turns
    const more = [acquireStream(context), acquireStream(context)];
    expect(new Set([...held, ...more].map((entry) => entry.stream)).size).toBe(4);
    for (const entry of [...held, ...more]) releaseStream(entry);
  });

  it('lowering maxStreams destroys idle streams beyond it', () => {
    configureStreams({ prewarm: 8, maxStreams: 8 });
    const context = freshContext();
    const held = acquireStream(context);
    const idle = [...held.pool.idle];
    configureStreams({ maxStreams: 3 });
    expect(held.pool.streams).toHaveLength(3);
    expect(held.pool.streams).toContain(held);
    // The five oldest idle streams were taken out to be destroyed once their work is done.
    const retired = idle.filter((entry) => !held.pool.streams.includes(entry));
    expect(retired).toHaveLength(5);
    releaseStream(held);
  });
});

describe('tasks and the shared streams', () => {
  it('128 concurrent tasks get 128 distinct streams by default; 140 share, none created mid-burst', async () => {
    const before = created();
    const first = await burst(128);
    expect(new Set(first).size).toBe(128);
    const afterFirst = created();
    expect(afterFirst - before).toBeLessThanOrEqual(128);
    const second = await burst(140);
    expect(created()).toBe(afterFirst);
    expect(new Set(second).size).toBe(128);
    for (const s of second) expect(s).not.toBe(device0.context.defaultStream);
  });
});
