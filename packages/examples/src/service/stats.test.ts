import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createServer } from './server.js';
import type { memoryStatistics } from './stats.js';

describe('GET /stats', () => {
  it('answers the process figures, and the GPU ones or why they are missing', async () => {
    const server = createServer({ checkGpu: () => ({ usable: false, reason: 'test' }) });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const response = await fetch(`http://127.0.0.1:${port}/stats`);
      expect(response.status).toBe(200);
      const body = (await response.json()) as ReturnType<typeof memoryStatistics>;
      expect(body.rssBytes).toBeGreaterThan(1024 * 1024);
      expect(body.heapUsedBytes).toBeGreaterThan(0);
      // Either the pool's figures (a GPU) or a reason (none here).
      if (body.pool === undefined) expect(body.reason).toMatch(/GPU/);
      else expect(body.pool.reservedBytes).toBeGreaterThanOrEqual(body.pool.usedBytes);
    } finally {
      await server.shutdown({ graceMs: 0 });
    }
  });
});
