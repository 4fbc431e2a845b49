import type { Context, Stream } from '@cuda-tasks/cudadrv';
import { describe, expect, it, vi } from 'vitest';

// The driver is replaced by a test double: its streams log GPU-side waits and its events their
// records in `fake.state.gpuLog`.
const fake = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver(),
);

vi.mock('@cuda-tasks/cudadrv', () => fake.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.module);

import { StreamBinding } from './stream-binding.js';

const context = fake.devices[0]!.context as unknown as Context;
const streamNamed = (name: string) =>
  new fake.FakeStream(fake.devices[0]!.context, name) as unknown as Stream;
const gpu = () => fake.state.gpuLog.splice(0);

function binding(ordered?: boolean) {
  const calls: string[] = [];
  const result = new StreamBinding({
    context,
    setStream: (stream) => calls.push(`setStream ${String(stream)}`),
    ordered,
  });
  gpu();
  return { binding: result, calls };
}

describe('StreamBinding', () => {
  it('binds once per stream; setStream only when the library does not have the stream', () => {
    const { binding: b, calls } = binding(false);
    const a = streamNamed('a');
    expect(b.bind(a)).toBe(true);
    expect(b.bind(a)).toBe(false);
    b.release();
    expect(b.stream).toBeUndefined();
    expect(b.nativeStream).toBe(a);
    expect(b.bind(a)).toBe(false); // the library still has it
    b.invalidate();
    expect(b.bind(a)).toBe(false);
    expect(calls).toEqual(['setStream FakeStream(a)']);
  });

  it('release records the hand-off; the next stream waits for it, the same stream does not', () => {
    const { binding: b } = binding(false);
    const a = streamNamed('a');
    const c = streamNamed('c');
    b.bind(a);
    b.release();
    const [record] = gpu();
    expect(record).toMatch(/^record event (\d+) on a$/);
    const id = record!.split(' ')[2];
    b.bind(c);
    expect(gpu()).toEqual([`c waits for event ${id} (a)`]);
    b.release();
    gpu();
    b.bind(c);
    expect(gpu()).toEqual([]);
  });

  it('ordered: every switch of streams waits for the previous one; unordered: none', () => {
    const a = streamNamed('a');
    const c = streamNamed('c');
    const ordered = binding(true).binding;
    ordered.bind(a);
    ordered.bind(c);
    ordered.bind(a);
    expect(gpu()).toEqual(['c waits for a', 'a waits for c']);
    const unordered = binding(false).binding;
    unordered.bind(a);
    unordered.bind(c);
    expect(gpu()).toEqual([]);
  });

  it('a stream being disposed: the hand-off is recorded while it lives, and the library forgets it', () => {
    const { binding: b, calls } = binding(false);
    const doomed = streamNamed('doomed');
    const next = streamNamed('next');
    b.bind(doomed);
    b.forget(doomed);
    expect(gpu()).toEqual([expect.stringMatching(/^record event \d+ on doomed$/)]);
    expect(b.stream).toBeUndefined();
    expect(b.nativeStream).toBeUndefined();
    b.bind(next);
    expect(gpu()[0]).toMatch(/^next waits for event \d+ \(doomed\)$/);
    expect(calls).toHaveLength(2);
  });

  it('released after its stream was disposed: the next stream waits for that stream instead', () => {
    const { binding: b } = binding(false);
    const gone = new fake.FakeStream(fake.devices[0]!.context, 'gone');
    const next = streamNamed('next');
    b.bind(gone as unknown as Stream);
    gone.disposed = true; // disposed without this binding hearing of it
    b.release();
    expect(gpu()).toEqual([]);
    b.bind(next);
    expect(gpu()).toEqual(['next waits for gone']);
  });

  it('dispose() forgets everything (the object is being destroyed); safe twice', () => {
    const { binding: b, calls } = binding(true);
    const a = streamNamed('a');
    b.bind(a);
    b.release();
    gpu();
    b.dispose();
    b.dispose();
    expect(b.nativeStream).toBeUndefined();
    // Nothing pending: a later bind neither waits for the old hand-off nor skips setStream.
    b.bind(a);
    expect(gpu()).toEqual([]);
    expect(calls).toEqual(['setStream FakeStream(a)', 'setStream FakeStream(a)']);
  });
});

describe('a binding without hand-off', () => {
  it('records no event on release and makes the next stream wait for nothing', () => {
    const calls: string[] = [];
    const b = new StreamBinding({
      context,
      setStream: (stream) => calls.push(`setStream ${String(stream)}`),
      handOff: false,
    });
    gpu();
    const a = streamNamed('a');
    const c = streamNamed('c');
    b.bind(a);
    b.release();
    expect(gpu()).toEqual([]);
    b.bind(c);
    b.bind(a);
    expect(gpu()).toEqual([]);
    expect(calls).toEqual([
      'setStream FakeStream(a)',
      'setStream FakeStream(c)',
      'setStream FakeStream(a)',
    ]);
  });
});
