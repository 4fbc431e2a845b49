/**
 * Runs a service script in a child process for the shutdown tests: with the package scripts'
 * Node flags (tsx and the in-repo source condition), resolved once it prints the port it
 * listens on.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

/** A service in a child process. */
export interface ServiceProcess {
  /** The child. */
  child: ChildProcess;
  /** The port it listens on, on 127.0.0.1. */
  port: number;
  /** What it wrote to stderr so far. */
  stderr(): string;
  /** Resolves when it exits: its code (or signal), and when (`performance.now()`). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
}

/** The Node flags of the package's scripts: the TypeScript loader and the source condition. */
export function serviceExecArgv(): string[] {
  const loader = createRequire(import.meta.url).resolve('tsx');
  return ['--conditions=@cuda-tasks/source', '--import', pathToFileURL(loader).href];
}

/** The port in the line `server.ts` prints once it listens, if this is that line. */
export function listeningPort(line: string): number | undefined {
  const match = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(line);
  if (match !== null) return Number(match[1]);
  if (line.startsWith('{"port"')) return (JSON.parse(line) as { port: number }).port;
  return undefined;
}

/**
 * Spawns `script` with `args` and `env` (over this process's), and resolves once a line of its
 * stdout names its port (`listeningPort`); rejects if it exits first.
 * @example const server = await startServiceProcess(path, ['--port', '0']);
 */
export function startServiceProcess(
  script: string,
  args: readonly string[] = [],
  env: Readonly<Record<string, string>> = {},
): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [...serviceExecArgv(), script, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise<{
    code: number | null;
    signal: NodeJS.Signals | null;
    at: number;
  }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, at: performance.now() })),
  );
  return new Promise((resolve, reject) => {
    let stdout = '';
    let found = false;
    child.stdout!.on('data', (chunk) => {
      stdout += chunk;
      if (found) return;
      for (const line of stdout.split('\n')) {
        const port = listeningPort(line);
        if (port === undefined) continue;
        found = true;
        resolve({ child, port, stderr: () => stderr, exited });
        return;
      }
    });
    void exited.then(({ code }) =>
      reject(new Error(`the service exited with ${code} before listening: ${stderr}`)),
    );
  });
}
