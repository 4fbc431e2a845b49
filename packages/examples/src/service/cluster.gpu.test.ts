/**
 * The service in cluster mode on the GPU (issue 36): `server.ts --processes 2` in real
 * processes, the searches run in the primary (`--cluster-search primary`) or in the workers on
 * the primary's index opened through CUDA IPC (`workers`). Every answer to `POST /search` is
 * checked against float64 dot products on the CPU over the same embeddings (seed 7, drawn
 * again here), and the same query gets the same answer from whichever worker serves it.
 */
import { fileURLToPath } from 'node:url';
import { describeGpu, rng } from '@cuda-tasks/testing';
import { afterAll, expect, it } from 'vitest';
import { SearchIndex } from './search.js';
import { type ServiceProcess, startServiceProcess } from './spawn-service.js';

const rows = 20_000;
const dim = 128;
const k = 10;
const started: ServiceProcess[] = [];
afterAll(() => {
  for (const service of started) if (service.child.exitCode === null) service.child.kill('SIGKILL');
});

const streams = new Set<string>();

async function search(
  port: number,
  query: number[],
): Promise<{ indices: number[]; scores: number[] }> {
  const response = await fetch(`http://127.0.0.1:${port}/search`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', connection: 'close' },
    body: JSON.stringify({ query, k }),
  });
  expect(response.status).toBe(200);
  streams.add(response.headers.get('x-cuda-stream') ?? 'none');
  return (await response.json()) as { indices: number[]; scores: number[] };
}

describeGpu('the service in cluster mode (2 processes, one shared index)', () => {
  it.each(['primary', 'workers'])(
    '--cluster-search %s: answers /search as the CPU does, the same from every worker; exits 0 on SIGTERM',
    async (where) => {
      const script = fileURLToPath(new URL('./server.ts', import.meta.url));
      const service = await startServiceProcess(script, [
        '--port',
        '0',
        '--processes',
        '2',
        '--search-rows',
        String(rows),
        '--cluster-search',
        where,
      ]);
      started.push(service);
      // The same embeddings, drawn here from the same seed: the CPU reference.
      const local = await SearchIndex.create({ rows, dim });
      const host = (await local.embeddings.toHost()) as Float32Array;
      local.dispose();
      const next = rng(36);
      let wrong = 0;
      let answers = 0;
      for (let q = 0; q < 8; q++) {
        const query = Array.from({ length: dim }, () => Math.fround(next() * 2 - 1));
        const reference = new Float64Array(rows);
        for (let i = 0; i < rows; i++) {
          let sum = 0;
          for (let j = 0; j < dim; j++) sum += host[i + j * rows]! * query[j]!;
          reference[i] = sum;
        }
        const kth = [...reference].sort((a, b) => b - a)[k - 1]!;
        // 16 at once on fresh connections: both workers serve some.
        const results = await Promise.all(
          Array.from({ length: 16 }, () => search(service.port, query)),
        );
        for (const result of results) {
          answers++;
          // The same rows from every worker; the scores to float32 rounding, since a worker
          // answers a search alone (GEMV) or in a batch (SGEMM), which may sum in another order.
          const first = new Map(results[0]!.indices.map((row, r) => [row, results[0]!.scores[r]!]));
          const same = result.indices.every(
            (row, r) => first.has(row) && Math.abs(first.get(row)! - result.scores[r]!) <= 1e-4,
          );
          const rowsRight = result.indices.every(
            (row, r) =>
              Math.abs(result.scores[r]! - reference[row]!) <= 1e-3 &&
              reference[row]! >= kth - 2e-3,
          );
          if (!same || !rowsRight || result.indices.length !== k) wrong++;
        }
      }
      service.child.kill('SIGTERM');
      const { code } = await service.exited;
      console.log(
        `[cluster] 2 processes, ${rows} x ${dim} shared index, searches in the ${where}: ${answers} /search answers, ${wrong} wrong against CPU dot products; exit ${code} on SIGTERM`,
      );
      expect(wrong).toBe(0);
      expect(code).toBe(0);
    },
  );
});
