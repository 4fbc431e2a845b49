import { setTimeout as sleep } from 'node:timers/promises';
import type { Graph, Stream } from '@cuda-tasks/cudadrv';
import { beforeEach, describe, expect, it, vi } from 'vitest';

// The capture state machine against the driver double (testing/fake-driver.ts): which stream
// captures, when the capture begins and ends, what other code sees meanwhile.
const fake = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver(),
);

vi.mock('@cuda-tasks/cudadrv', () => fake.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.module);

import { capture, capturedGraphs, capturedOnce, GraphCache } from './graphs.js';
import { streamPoolStatistics } from './pool.js';
import { stream } from './state.js';
import { synchronize, task, withDevice, withStream } from './task.js';

type FakeGraph = InstanceType<typeof fake.FakeGraph>;
type FakeStream = InstanceType<typeof fake.FakeStream>;

const log = () => fake.state.captureLog.splice(0);
const failures = fake.state.captureFailures;

beforeEach(() => {
  log();
  failures.begin = failures.end = failures.instantiate = failures.update = false;
  capturedGraphs().clear();
  log();
});

/** A promise and its resolve function. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

describe('capture()', () => {
  it('runs fn on a capture stream of its own and returns the instantiated graph', async () => {
    const seen = await task(async () => {
      const own = stream();
      let inside: Stream | undefined;
      let capturingInside = false;
      const graph = (await capture(async () => {
        await Promise.resolve();
        inside = stream();
        capturingInside = inside.capturing;
      })) as unknown as FakeGraph;
      return { own, inside: inside!, capturingInside, graph, after: stream() };
    });
    expect(seen.inside).not.toBe(seen.own);
    expect(seen.capturingInside).toBe(true);
    expect(seen.after).toBe(seen.own);
    expect(seen.inside.capturing).toBe(false);
    const name = (seen.inside as unknown as FakeStream).name;
    expect(log()).toEqual([`begin ${name}`, `end ${name}`, `instantiate graph ${seen.graph.id}`]);
    expect(seen.graph.capturedOn).toBe(seen.inside);
    expect(seen.graph.instantiated).toBe(true);
  });

  it('gives the capture stream back to the pool when the capture ends', async () => {
    await task(() => capture(() => undefined)); // warm: the pool has its streams
    const before = streamPoolStatistics();
    await task(async () => {
      stream();
      await capture(() => undefined);
    });
    expect(streamPoolStatistics()).toEqual(before);
  });

  it('leaves other tasks and the rest of the task on their own, non-capturing streams', async () => {
    const gate = deferred();
    const observed: { who: string; capturing: boolean; stream: Stream }[] = [];
    const note = (who: string) => {
      const current = stream();
      observed.push({ who, capturing: current.capturing, stream: current });
    };
    let captureStream: Stream | undefined;
    const capturing = task(async () => {
      stream();
      const pending = capture(async () => {
        captureStream = stream();
        await gate.promise;
        note('inside');
      });
      // The same task, outside fn, while the capture is in progress.
      await sleep(1);
      note('same task');
      await pending;
    });
    const others = Array.from({ length: 8 }, (_, i) =>
      task(async () => {
        stream(); // each task holds its stream while the others run
        await sleep(1);
        note(`task ${i}`);
        await synchronize();
      }),
    );
    await Promise.all(others);
    gate.resolve();
    await capturing;
    const inside = observed.find((entry) => entry.who === 'inside')!;
    expect(inside.capturing).toBe(true);
    expect(inside.stream).toBe(captureStream);
    const outside = observed.filter((entry) => entry.who !== 'inside');
    expect(outside).toHaveLength(9);
    for (const entry of outside) {
      expect(entry.capturing, entry.who).toBe(false);
      expect(entry.stream, entry.who).not.toBe(captureStream);
    }
    expect(new Set(outside.map((entry) => entry.stream)).size).toBe(9);
  });

  it('ends the capture when fn throws, rethrows, and leaves no stream capturing', async () => {
    let inside: Stream | undefined;
    const boom = new Error('boom');
    await expect(
      task(() =>
        capture(async () => {
          inside = stream();
          await Promise.resolve();
          throw boom;
        }),
      ),
    ).rejects.toBe(boom);
    expect(inside!.capturing).toBe(false);
    const name = (inside as unknown as FakeStream).name;
    expect(log()).toEqual([`begin ${name}`, `abort ${name}`]);
  });

  it('ends the capture when fn throws synchronously', async () => {
    const boom = new Error('sync boom');
    await expect(
      capture(() => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    const steps = log();
    expect(steps).toHaveLength(2);
    expect(steps[1]).toMatch(/^abort /);
  });

  it('synchronize() inside fn rejects with a CaptureError; the task synchronizes afterwards', async () => {
    const result = await task(async () => {
      let error: unknown;
      const graph = await capture(async () => {
        error = await synchronize().then(
          () => undefined,
          (rejection: unknown) => rejection,
        );
      });
      fake.state.waited.length = 0;
      await synchronize();
      return { error, graph, waited: [...fake.state.waited], own: stream() };
    });
    expect(fake.CaptureError.isInstance(result.error)).toBe(true);
    expect((result.error as { call: string }).call).toBe('synchronize()');
    expect((result.error as Error).message).toMatch(/capturing a graph/);
    // The refusal made no wait; the capture went on to a graph.
    expect((result.graph as unknown as FakeGraph).instantiated).toBe(true);
    expect(result.waited).toEqual([result.own]);
  });

  it('an uncaught synchronize() inside fn fails the capture cleanly', async () => {
    const error = await capture(async () => {
      await synchronize();
    }).then(
      () => undefined,
      (rejection: unknown) => rejection,
    );
    expect(fake.CaptureError.isInstance(error)).toBe(true);
    expect(log()[1]).toMatch(/^abort /);
  });

  it('passes on an invalidated capture as the error, and releases the stream', async () => {
    failures.end = true;
    const before = streamPoolStatistics();
    let inside: Stream | undefined;
    const error = await task(() =>
      capture(() => {
        inside = stream();
      }),
    ).then(
      () => undefined,
      (rejection: unknown) => rejection,
    );
    expect(fake.CaptureError.isInstance(error)).toBe(true);
    expect(inside!.capturing).toBe(false);
    expect(streamPoolStatistics().idle).toBe(before.idle + (before.idle === 0 ? 1 : 0));
    expect(log().some((step) => step.startsWith('instantiate'))).toBe(false);
  });

  it('releases the stream when the capture cannot begin', async () => {
    await capture(() => undefined);
    log();
    const before = streamPoolStatistics();
    failures.begin = true;
    await expect(capture(() => undefined)).rejects.toThrow(/cuStreamBeginCapture_v2/);
    expect(streamPoolStatistics()).toEqual(before);
    expect(log()).toEqual([]);
  });

  it('disposes the graph when instantiation fails', async () => {
    failures.instantiate = true;
    await expect(capture(() => undefined)).rejects.toThrow(/cuGraphInstantiateWithFlags/);
    const steps = log();
    expect(steps.at(-1)).toMatch(/^dispose graph \d+$/);
  });

  it('tasks started inside fn get streams of their own, outside the capture', async () => {
    const seen = await capture(async () => {
      const outer = stream();
      const inner = await task(() => stream());
      expect(inner).not.toBe(outer);
      expect(inner.capturing).toBe(false);
      expect(outer.capturing).toBe(true);
    });
    expect(seen).toBeDefined();
  });

  it('withStream inside fn leaves the capture for that scope', async () => {
    const user = new fake.FakeStream(fake.devices[0]!.context, 'user') as unknown as Stream;
    await capture(() => {
      withStream(user, () => {
        expect(stream()).toBe(user);
        expect(stream().capturing).toBe(false);
      });
      expect(stream().capturing).toBe(true);
    });
  });

  it('captures on the current device', async () => {
    const graph = (await withDevice(1, () => capture(() => undefined))) as unknown as FakeGraph;
    expect(graph.capturedOn.context).toBe(fake.devices[1]!.context);
  });

  it('with { update }: updates that graph from the new capture and returns it', async () => {
    const first = (await capture(() => undefined)) as unknown as FakeGraph;
    log();
    const updated = await capture(() => undefined, { update: first as unknown as Graph });
    expect(updated).toBe(first);
    const steps = log();
    expect(steps).toHaveLength(4);
    expect(steps[2]).toMatch(new RegExp(`^update graph ${first.id} from \\d+$`));
    const source = Number(/from (\d+)/.exec(steps[2]!)![1]);
    expect(steps[3]).toBe(`dispose graph ${source}`);
    expect(first.updatedFrom).toEqual([source]);
    expect(steps.some((step) => step.startsWith('instantiate'))).toBe(false);
  });

  it('a failed update disposes the new capture and leaves the graph as it was', async () => {
    const first = (await capture(() => undefined)) as unknown as FakeGraph;
    log();
    failures.update = true;
    await expect(capture(() => undefined, { update: first as unknown as Graph })).rejects.toThrow(
      /TOPOLOGY_CHANGED/,
    );
    expect(first.disposed).toBe(false);
    expect(first.updatedFrom).toEqual([]);
    expect(log().at(-1)).toMatch(/^dispose graph \d+$/);
  });

  it('checks its arguments before any capture begins', async () => {
    const disposed = (await capture(() => undefined)) as unknown as FakeGraph;
    disposed.dispose();
    log();
    await expect(capture('nope' as never)).rejects.toThrow(fake.CudaArgumentError);
    await expect(capture(() => undefined, { update: {} as never })).rejects.toThrow(
      /options\.update must be a Graph/,
    );
    await expect(
      capture(() => undefined, { update: disposed as unknown as Graph }),
    ).rejects.toThrow(/not disposed/);
    const other = (await withDevice(1, () => capture(() => undefined))) as unknown as Graph;
    log();
    await expect(capture(() => undefined, { update: other })).rejects.toThrow(/belongs to/);
    expect(log()).toEqual([]);
  });
});

describe('capturedOnce / GraphCache', () => {
  it('captures once per key: later and concurrent calls get the same graph', async () => {
    const fn = vi.fn();
    const [a, b] = await Promise.all([capturedOnce('k', fn), capturedOnce('k', fn)]);
    const c = await task(() => capturedOnce('k', fn));
    expect(a).toBe(b);
    expect(c).toBe(a);
    expect(fn).toHaveBeenCalledTimes(1);
    const d = await capturedOnce('other', fn);
    expect(d).not.toBe(a);
    expect(fn).toHaveBeenCalledTimes(2);
    expect(capturedGraphs().size).toBe(2);
  });

  it('keeps one graph per key and device', async () => {
    const zero = await capturedOnce('shape', () => undefined);
    const one = await withDevice(1, () => capturedOnce('shape', () => undefined));
    expect(one).not.toBe(zero);
    expect((one as unknown as FakeGraph).capturedOn.context).toBe(fake.devices[1]!.context);
    expect(await capturedOnce('shape', () => undefined)).toBe(zero);
  });

  it('does not keep a failed capture', async () => {
    const boom = new Error('boom');
    await expect(
      capturedOnce('k', () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(capturedGraphs().has('k')).toBe(false);
    const graph = await capturedOnce('k', () => undefined);
    expect((graph as unknown as FakeGraph).instantiated).toBe(true);
  });

  it('captures anew after the user disposed the graph', async () => {
    const first = await capturedOnce('k', () => undefined);
    first.dispose();
    expect(capturedGraphs().has('k')).toBe(false);
    const second = await capturedOnce('k', () => undefined);
    expect(second).not.toBe(first);
    expect(second.disposed).toBe(false);
  });

  it('delete and clear dispose the graphs, also one still being captured', async () => {
    const cache = new GraphCache();
    const one = await cache.get(1, () => undefined);
    const gate = deferred();
    const pending = cache.get(2, () => gate.promise);
    expect(cache.size).toBe(2);
    expect(cache.delete(1)).toBe(true);
    expect(cache.delete(1)).toBe(false);
    expect(one.disposed).toBe(true);
    cache.clear();
    expect(cache.size).toBe(0);
    gate.resolve();
    const two = await pending;
    await Promise.resolve();
    expect(two.disposed).toBe(true);
  });
});
