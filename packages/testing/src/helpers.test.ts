import { describe, expect, it } from 'vitest';
import { barrier } from './barrier.js';
import { watchEventLoop } from './event-loop.js';

describe('test helpers', () => {
  it('barrier: nobody goes on before the last arrives, then everybody does', async () => {
    const arrive = barrier(3);
    const passed: number[] = [];
    const waiting = [0, 1].map((i) => arrive().then(() => passed.push(i)));
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(passed).toEqual([]);
    await arrive();
    await Promise.all(waiting);
    expect(passed.sort()).toEqual([0, 1]);
  });

  it('watchEventLoop: a 30 ms hold of the thread shows as a gap of at least 30 ms', async () => {
    const watch = watchEventLoop();
    await new Promise((resolve) => setTimeout(resolve, 5));
    const end = performance.now() + 30;
    while (performance.now() < end);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const gap = watch.stop();
    expect(gap).toBeGreaterThanOrEqual(30);
    expect(gap).toBeLessThan(1000);
  });
});
