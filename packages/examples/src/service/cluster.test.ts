/**
 * The service's cluster mode without a GPU: real processes (cluster-fixture.ts) with a
 * stand-in index. The workers share one port and get the primary's handle; a worker that dies
 * is replaced; SIGTERM stops the workers first and frees the index after; the flags are checked.
 */
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { CommandLineError } from '../cli.js';
import { parseClusterArguments } from './cluster.js';
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

  it('reads --processes and --search-rows, refusing bad values', () => {
    expect(parseClusterArguments({}, 'usage')).toEqual({ processes: 1, searchRows: 1_000_000 });
    expect(parseClusterArguments({ processes: '8', 'search-rows': '5000' }, 'usage')).toEqual({
      processes: 8,
      searchRows: 5000,
    });
    for (const values of [
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
