/**
 * SIGTERM and SIGINT to a real process running the service: the requests in flight get
 * answers, the process exits 0 within the grace; a second signal exits at once. The stand-in
 * (shutdown-fixture.ts) takes the GPU's place; the last case runs the real `server.ts`.
 */
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { LOOP_DELAY_VARIABLE, parseLoopDelayLines } from './loop-monitor.js';
import { startServiceProcess } from './spawn-service.js';

const here = (name: string) => fileURLToPath(new URL(name, import.meta.url));

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});

/** Starts a service script in a child process, killed after the test if it is still running. */
async function startProcess(script: string, args: string[], env: Record<string, string>) {
  const server = await startServiceProcess(script, args, env);
  children.push(server.child);
  return server;
}

async function post(port: number, path: string, body: unknown) {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as any };
}

/** Gives requests just sent `ms` to reach the server. */
const arrive = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('shutdown on a signal, in a real process', () => {
  it('SIGTERM with requests in flight: every one answered 200, exit 0 within the grace', async () => {
    const server = await startProcess(here('./shutdown-fixture.ts'), [], {
      FIXTURE_WORK_MS: '700',
      FIXTURE_GRACE_MS: '5000',
    });
    const requests = Array.from({ length: 12 }, (_, seed) =>
      post(server.port, '/solve-random', { n: 64, seed }),
    );
    await arrive(300);
    const signalled = performance.now();
    server.child.kill('SIGTERM');
    const answers = await Promise.all(requests);
    const { code, at } = await server.exited;
    console.log(
      `SIGTERM with 12 in flight: answered ${answers.map((a) => a.status).join(',')}, exit ${code} after ${Math.round(at - signalled)} ms; ${server.stderr().trim()}`,
    );
    expect(answers.map((answer) => answer.status)).toEqual(Array(12).fill(200));
    expect(code).toBe(0);
    expect(at - signalled).toBeLessThan(5000);
    expect(server.stderr()).toMatch(/12 requests were in flight, 0 cancelled, 0 unanswered/);
  }, 30_000);

  it('SIGTERM with requests longer than the grace: they are cancelled and answered 503, exit 0', async () => {
    const server = await startProcess(here('./shutdown-fixture.ts'), [], {
      FIXTURE_WORK_MS: '60000',
      FIXTURE_GRACE_MS: '300',
    });
    const requests = Array.from({ length: 4 }, (_, seed) =>
      post(server.port, '/solve-random', { n: 64, seed }),
    );
    await arrive(300);
    const signalled = performance.now();
    server.child.kill('SIGTERM');
    const answers = await Promise.all(requests);
    const { code, at } = await server.exited;
    expect(answers.map((answer) => answer.status)).toEqual([503, 503, 503, 503]);
    expect(answers[0]!.body.error).toMatch(/the service is shutting down/);
    expect(code).toBe(0);
    expect(at - signalled).toBeLessThan(3000);
  }, 30_000);

  it('a second signal exits at once', async () => {
    const server = await startProcess(here('./shutdown-fixture.ts'), [], {
      FIXTURE_WORK_MS: '60000',
      FIXTURE_GRACE_MS: '30000',
    });
    const request = post(server.port, '/solve-random', { n: 64, seed: 1 }).catch(() => undefined);
    await arrive(300);
    server.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 200));
    const second = performance.now();
    server.child.kill('SIGINT');
    const { code, at } = await server.exited;
    expect(code).toBe(130);
    expect(at - second).toBeLessThan(2000);
    await request;
  }, 30_000);

  it('the real server.ts exits 0 on SIGTERM, after answering what was in flight', async () => {
    const server = await startProcess(here('./server.ts'), ['--port', '0', '--grace-ms', '5000'], {
      [LOOP_DELAY_VARIABLE]: '1',
    });
    const requests = Array.from({ length: 4 }, (_, seed) =>
      post(server.port, '/solve-random', { n: 256, seed }),
    );
    await arrive(100);
    const signalled = performance.now();
    server.child.kill('SIGTERM');
    const answers = await Promise.all(requests);
    const { code, at } = await server.exited;
    // 200 with a GPU; 503 (no usable GPU) without.
    for (const answer of answers) expect([200, 503]).toContain(answer.status);
    expect(code).toBe(0);
    expect(at - signalled).toBeLessThan(7000);
    // Asked to, it reported its event-loop delays as it exited: one report, its own pid, a
    // bucket per 100 ms of its life.
    const reports = parseLoopDelayLines(server.stderr());
    expect(reports.map((report) => report.pid)).toEqual([server.child.pid]);
    expect(reports[0]!.at.length).toBeGreaterThan(2);
  }, 60_000);
});
