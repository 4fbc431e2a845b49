import { request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { handleCache } from '@cuda-tasks/cublas';
import { Device } from '@cuda-tasks/cudadrv';
import { generatorStatistics } from '@cuda-tasks/curand';
import { handles as cusolverHandles } from '@cuda-tasks/cusolver';
import { streamPoolStatistics } from '@cuda-tasks/task-runtime';
import { describeGpu } from '@cuda-tasks/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createServer } from './server.js';
import type { RequestError } from './validation.js';

/** An 8192 x 8192 float64 LU solve: tens of milliseconds of GPU work. */
const LARGE = 8192;

async function post(base: string, path: string, body: unknown) {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as any };
}

/**
 * What a request could leave behind, once the GPU has drained: task streams still held,
 * library handles still leased, device memory still used (cached blocks given back first).
 */
function leftovers() {
  const context = Device.get(0).primaryContext();
  context.synchronize(); // test-only: wait for every queued (also cancelled) piece of work
  context.memoryPool.releaseCached();
  context.synchronize();
  const streams = streamPoolStatistics(0);
  return {
    heldStreams: streams.streams - streams.idle,
    cublasLeases: handleCache().statistics().leased,
    cusolverLeases: cusolverHandles.statistics().leased,
    curandLeases: generatorStatistics().leased,
    usedBytes: context.memoryPool.statistics().usedBytes,
  };
}

async function until(condition: () => boolean, timeoutMs: number): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!condition() && performance.now() < end) await sleep(1);
}

describeGpu('a client that disconnects mid-request', () => {
  let server: Server;
  let base: string;
  let port: number;
  const cancelled: { path: string; reason: RequestError; at: number }[] = [];
  const serverErrors: unknown[] = [];
  /** Called as a request's task is about to start (the taskOptionsFor hook). */
  let onTaskStart: (() => void) | undefined;

  beforeAll(async () => {
    server = createServer({
      maxDimension: LARGE,
      onCancelled: (path, reason) => cancelled.push({ path, reason, at: performance.now() }),
      onServerError: (error) => serverErrors.push(error),
      taskOptionsFor: () => {
        onTaskStart?.();
        return {};
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    base = `http://127.0.0.1:${port}`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  });

  it('cancels its task, leaves no stream, handle or memory behind, and the server keeps answering', async () => {
    // Warm up with the same requests: streams, handles, workspaces and modules exist after.
    expect((await post(base, '/solve-random', { n: LARGE, seed: 1 })).status).toBe(200);
    const small = await post(base, '/solve-random', { n: 64, seed: 2 });
    expect(small.status).toBe(200);
    const before = leftovers();
    expect(before.heldStreams).toBe(0);

    // A large request whose client goes away 2 ms after its task has issued its GPU work.
    const disconnectedAt = await new Promise<number>((resolve) => {
      const client = httpRequest({
        host: '127.0.0.1',
        port,
        path: '/solve-random',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
      });
      client.on('error', () => {}); // the socket we destroy
      onTaskStart = () => {
        onTaskStart = undefined;
        setTimeout(() => {
          client.destroy();
          resolve(performance.now());
        }, 2);
      };
      client.end(JSON.stringify({ n: LARGE, seed: 3 }));
    });
    await until(() => cancelled.length > 0, 2000);
    expect(cancelled).toHaveLength(1);
    expect(cancelled[0]!.path).toBe('/solve-random');
    expect(cancelled[0]!.reason.status).toBe(499);
    const lag = cancelled[0]!.at - disconnectedAt;
    console.log(`the task was cancelled ${lag.toFixed(2)} ms after its client went away`);
    expect(lag).toBeLessThan(100);

    // The server keeps answering, correctly, while the cancelled work may still run.
    const again = await post(base, '/solve-random', { n: 64, seed: 2 });
    expect(again.status).toBe(200);
    expect(again.body.residual).toBeLessThan(1e-12);
    expect(again.body.x).toEqual(small.body.x);

    // Once the GPU has drained, nothing of the cancelled request is left.
    expect(leftovers()).toEqual(before);
    expect(serverErrors).toEqual([]);
  });
});
