import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// A process whose issue worker is idle must be free to exit: the worker (a WorkerPool of one
// thread) holds the event loop only while a call is in flight. Run in a real child process:
// where there is no GPU the worker fails to start (it loads the driver first), and where there
// is one it starts and idles; either way the process ends by itself.
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));
const directory = mkdtempSync(join(tmpdir(), 'issue-worker-exit-'));

afterAll(() => rmSync(directory, { recursive: true, force: true }));

describe('an idle issue worker', () => {
  it('lets the process exit by itself, started or failed to start', () => {
    const script = join(directory, 'child.mts');
    writeFileSync(
      script,
      `import { issueWorkerStatistics, startIssueWorker } from ${JSON.stringify(here('./issue-worker.ts'))};
const ready = await startIssueWorker();
console.log(JSON.stringify({ ready, state: issueWorkerStatistics().state }));
`,
    );
    const started = Date.now();
    const child = spawnSync(
      process.execPath,
      ['--conditions=@cuda-tasks/source', '--import', 'tsx', script],
      { encoding: 'utf8', timeout: 30_000 },
    );
    const seconds = (Date.now() - started) / 1000;
    expect(child.error, child.stderr).toBeUndefined();
    expect(child.signal, `still running after ${seconds} s`).toBeNull();
    expect(child.status, child.stderr).toBe(0);
    const { ready, state } = JSON.parse(child.stdout.trim().split('\n').at(-1) ?? '');
    expect(state).toBe(ready ? 'ready' : 'failed');
  });
});
