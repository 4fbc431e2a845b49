/**
 * The service's cluster mode without a GPU: real processes (cluster-fixture.ts) with a
 * stand-in index. The workers share one port and get the primary's handle; a worker that dies
 * is replaced; SIGTERM stops the workers first and frees the index after; the flags are checked.
 */
import { fileURLToPath } from 'node:url';
import { SharedMemoryError } from '@cuda-tasks/cudadrv';
import { afterEach, describe, expect, it } from 'vitest';
import { CommandLineError } from '../cli.js';
import { parseClusterArguments, readClusterIndexHandle, SEARCH_INDEX_VARIABLE } from './cluster.js';
import {
  FIXTURE_DIM,
  FIXTURE_ROWS,
  fixtureEmbeddings,
  fixtureQuery,
} from './cluster-fixture-data.js';
import { type ServiceProcess, startServiceProcess } from './spawn-service.js';

const fixture = fileURLToPath(new URL('./cluster-fixture.ts', import.meta.url));
const started: ServiceProcess[] = [];
afterEach(() => {
  for (const service of started.splice(0)) {
    if (service.child.exitCode === null) service.child.kill('SIGKILL');
  }
});

async function ask(port: number): Promise<{ pid: number; exportId: string }> {
  const response = await fetch(`http://127.0.0.1:${port}/`, { headers: { connection: 'close' } });
  return (await response.json()) as { pid: number; exportId: string };
}

/** Asks until `count` distinct workers have answered (or `tries` requests went). */
async function workersAnswering(port: number, count: number, tries = 200): Promise<Set<number>> {
  const pids = new Set<number>();
  for (let i = 0; i < tries && pids.size < count; i++) {
    const answer = await ask(port);
    expect(answer.exportId).toBe('f0'.repeat(16));
    pids.add(answer.pid);
  }
  return pids;
}

describe('the service in cluster mode (stand-in index)', () => {
  it('N workers share the port and the handle; a dead worker is replaced; SIGTERM stops the workers, then frees the index', async () => {
    const service = await startServiceProcess(fixture, [], { FIXTURE_PROCESSES: '3' });
    started.push(service);
    let stdout = '';
    service.child.stdout!.on('data', (chunk) => {
      stdout += chunk;
    });
    const pids = await workersAnswering(service.port, 3);
    expect(pids.size).toBe(3);
    expect(pids.has(service.child.pid!)).toBe(false); // the primary serves nothing
    const [victim] = pids;
    process.kill(victim!, 'SIGKILL');
    let replaced = new Set<number>();
    for (let i = 0; i < 50 && ![...replaced].some((pid) => !pids.has(pid)); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      replaced = await workersAnswering(service.port, 3, 30);
    }
    expect([...replaced].some((pid) => !pids.has(pid))).toBe(true);
    expect(replaced.has(victim!)).toBe(false);
    service.child.kill('SIGTERM');
    const { code } = await service.exited;
    expect(code).toBe(0);
    expect(stdout).toContain('index disposed, 0 workers left');
    expect(service.stderr()).toContain('exited (SIGKILL); starting another');
  }, 60_000);

  it("a worker takes only its primary's well-formed handle from its environment", () => {
    const handle = {
      format: 'cuda-tasks/ipc-memory',
      version: 1,
      ipcHandle: '7e'.repeat(64),
      allocationBytes: 4096,
      byteOffset: 0,
      byteLength: 4096,
      dtype: 'float32',
      shape: [8, 128],
      pid: 4242,
      exportId: 'f0'.repeat(16),
      device: {
        ordinal: 0,
        uuid: `GPU-${'0'.repeat(8)}-1111-2222-3333-${'4'.repeat(12)}`,
        pciBusId: '0000:01:00.0',
      },
    };
    const read = (value: unknown, primary = 4242) =>
      readClusterIndexHandle(
        { [SEARCH_INDEX_VARIABLE]: typeof value === 'string' ? value : JSON.stringify(value) },
        primary,
      );
    expect(read(handle).exportId).toBe(handle.exportId);
    const reason = (run: () => unknown) => {
      try {
        run();
      } catch (error) {
        return SharedMemoryError.isInstance(error) ? error.reason : String(error);
      }
      return 'accepted';
    };
    // Another process's export (a forged or leaked variable): not the primary's index.
    expect(reason(() => read({ ...handle, pid: 4243 }))).toBe('malformed');
    expect(reason(() => read('{"format":'))).toBe('malformed');
    expect(() => readClusterIndexHandle({}, 4242)).toThrow(SEARCH_INDEX_VARIABLE);
  });

  it("--cluster-search primary: every worker's searches run in the primary's batches, each answer back to its request", async () => {
    const service = await startServiceProcess(fixture, [], {
      FIXTURE_PROCESSES: '3',
      FIXTURE_CLUSTER_SEARCH: 'primary',
    });
    started.push(service);
    let stdout = '';
    service.child.stdout!.on('data', (chunk) => {
      stdout += chunk;
    });
    // The reference: float64 dot products of the same data, the whole order sorted here.
    const embeddings = fixtureEmbeddings();
    const best = (seed: number, k: number) => {
      const query = fixtureQuery(seed);
      const dots = Array.from({ length: FIXTURE_ROWS }, (_, i) => {
        let sum = 0;
        for (let j = 0; j < FIXTURE_DIM; j++) sum += embeddings[i + j * FIXTURE_ROWS]! * query[j]!;
        return [i, sum] as const;
      });
      dots.sort((a, b) => b[1] - a[1]);
      return dots.slice(0, k);
    };
    const asks = Array.from({ length: 90 }, (_, i) => ({ seed: i % 23, k: 1 + ((i * 7) % 20) }));
    const answers = await Promise.all(
      asks.map(async ({ seed, k }) => {
        const response = await fetch(
          `http://127.0.0.1:${service.port}/search?seed=${seed}&k=${k}`,
          {
            headers: { connection: 'close' },
          },
        );
        expect(response.status).toBe(200);
        return (await response.json()) as { pid: number; indices: number[]; scores: number[] };
      }),
    );
    const pids = new Set<number>();
    asks.forEach(({ seed, k }, i) => {
      const answer = answers[i]!;
      pids.add(answer.pid);
      const expected = best(seed, k);
      expect(answer.indices).toEqual(expected.map(([row]) => row));
      for (const [r, score] of answer.scores.entries()) {
        expect(score).toBeCloseTo(expected[r]![1], 4);
      }
    });
    expect(pids.size).toBeGreaterThan(1); // more than one worker asked the primary
    expect(pids.has(service.child.pid!)).toBe(false);
    service.child.kill('SIGTERM');
    const { code } = await service.exited;
    expect(code).toBe(0);
    const line =
      /primary searched (\d+) in (\d+) batches \(the largest (\d+)\) for (\d+) requests/.exec(
        stdout,
      );
    expect(line).not.toBeNull();
    const [searches, batches, largest] = line!.slice(1, 4).map(Number);
    expect(searches).toBe(90);
    // 90 searches at once from 3 workers, one batch of at most 16 at a time: batched, and the
    // batches mixed the workers' requests.
    expect(batches).toBeLessThan(45);
    expect(largest).toBeGreaterThan(8); // more than one worker's batch (8 at most) in one
    expect(stdout).toContain('index disposed, 0 workers left');
  }, 60_000);

  it('reads --processes, --search-rows and --cluster-search, refusing bad values', () => {
    expect(parseClusterArguments({}, 'usage')).toEqual({
      processes: 1,
      searchRows: 1_000_000,
      clusterSearch: 'primary',
    });
    expect(
      parseClusterArguments(
        { processes: '8', 'search-rows': '5000', 'cluster-search': 'workers' },
        'usage',
      ),
    ).toEqual({ processes: 8, searchRows: 5000, clusterSearch: 'workers' });
    for (const values of [
      { 'cluster-search': 'both' },
      { 'cluster-search': '' },
      { processes: '0' },
      { processes: '65' },
      { processes: '2.5' },
      { processes: '' },
      { 'search-rows': '-1' },
      { 'search-rows': 'many' },
    ]) {
      expect(() => parseClusterArguments(values, 'usage')).toThrow(CommandLineError);
    }
  });
});
