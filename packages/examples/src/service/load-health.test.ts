import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { healthProblem } from './load.js';

// The load script asks whether the GPU is usable before it sends any load: a server whose
// GET /health answers 503 gets that one request and the script exits 3 with one message,
// instead of hundreds of failing requests and a table of errors.

const packageRoot = fileURLToPath(new URL('../..', import.meta.url));

/** A stand-in server: /health answers `health`; every request is recorded. */
const stub = {
  received: [] as string[],
  health: { status: 200, body: { status: 'ok', gpu: { usable: true, devices: 1 } } as unknown },
};
let server: Server;
let url: string;

beforeAll(async () => {
  server = createServer((request, response) => {
    stub.received.push(`${request.method} ${request.url}`);
    request.resume();
    request.on('end', () => {
      const answer =
        request.url === '/health' ? stub.health : { status: 503, body: { error: 'no GPU' } };
      response.writeHead(answer.status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((closed) => {
    server.close(() => closed());
    server.closeAllConnections();
  });
});

beforeEach(() => {
  stub.received = [];
  stub.health = { status: 200, body: { status: 'ok', gpu: { usable: true, devices: 1 } } };
});

/** Runs the load script in a child process (the stub answers meanwhile: no spawnSync). */
function runLoad(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      join(packageRoot, 'node_modules/.bin/tsx'),
      ['--conditions=@cuda-tasks/source', 'src/service/load.ts', ...args],
      { cwd: packageRoot, env },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 50_000);
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

const small = ['--requests', '20', '--seconds', '1', '--rounds', '1', '--warmup', '0'];

describe('the load script checks /health before sending load', () => {
  it('--url at a server whose GPU is unusable: one GET /health, one message, exit 3', async () => {
    stub.health = {
      status: 503,
      body: {
        status: 'unavailable',
        gpu: { usable: false, reason: 'no CUDA driver: libcuda.so.1 could not be loaded' },
      },
    };
    const result = await runLoad(['--url', url, ...small]);
    expect(stub.received).toEqual(['GET /health']);
    expect(result.status).toBe(3);
    expect(result.stdout).toBe('');
    expect(result.stderr.trim()).toBe(
      `load: the server at ${url} says the GPU is not usable: no CUDA driver: libcuda.so.1 could not be loaded. No load was sent.`,
    );
  }, 60_000);

  it('in process, without a driver: one message, exit 3, no server started', async () => {
    const result = await runLoad(small, {
      ...process.env,
      CUDA_TASKS_LIBCUDA: '/nonexistent/libcuda.so.1',
    });
    expect(result.status).toBe(3);
    expect(result.stdout).toBe('');
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^load: no usable GPU here: .*libcuda.*\. No load was sent\.$/);
  }, 60_000);
});

describe('healthProblem', () => {
  it('is undefined where /health answers 200', async () => {
    expect(await healthProblem(url)).toBeUndefined();
    expect(stub.received).toEqual(['GET /health']);
  });

  it('names a server that is shutting down (503 without a gpu field)', async () => {
    stub.health = { status: 503, body: { error: 'the service is shutting down' } };
    expect(await healthProblem(url)).toBe(
      `the server at ${url} is not ready: the service is shutting down`,
    );
  });

  it('names an answer that is not the service’s', async () => {
    stub.health = { status: 404, body: { error: 'no route' } };
    expect(await healthProblem(url)).toBe(
      `GET ${url}/health answered 404, not 200: is this the GPU service?`,
    );
  });

  it('names a port where nothing listens', async () => {
    const closed = createServer();
    await new Promise<void>((ready) => closed.listen(0, '127.0.0.1', ready));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((done) => closed.close(() => done()));
    expect(await healthProblem(`http://127.0.0.1:${port}`)).toBe(
      `no server answers at http://127.0.0.1:${port} (ECONNREFUSED)`,
    );
  });

  it('in process, asks the check the service would (usable: undefined; else its reason)', async () => {
    expect(await healthProblem(undefined, () => ({ usable: true, devices: 1 }))).toBeUndefined();
    expect(await healthProblem(undefined, () => ({ usable: false, reason: 'no device' }))).toBe(
      'no usable GPU here: no device',
    );
  });
});
