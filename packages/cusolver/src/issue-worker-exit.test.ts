import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// A process whose issue worker is idle must be free to exit: the worker holds the event loop
// only while a call is in flight. Run in a real child process on the test double of the
// worker's native functions.
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));
const directory = mkdtempSync(join(tmpdir(), 'issue-worker-exit-'));

afterAll(() => rmSync(directory, { recursive: true, force: true }));

describe('an idle issue worker', () => {
  it.each([
    ['started, no call made', false],
    ['after a call went through it', true],
  ])('lets the process exit by itself: %s', (_, call) => {
    const script = join(directory, `child-${call}.mts`);
    writeFileSync(
      script,
      `const CALL = ${call};
import { issueOffThread, startIssueWorkerWith } from ${JSON.stringify(here('./issue-worker.ts'))};
const ready = await startIssueWorkerWith({
  bindings: ${JSON.stringify(here('../test/issue-bindings-double.ts'))},
  handlesPerContext: 4,
});
const reply = !CALL ? {} : await issueOffThread(
  'cusolverDnDgetrf',
  { context: { handle: 1n }, ffiHandle: 10n } as never,
  [4, 4, 1000n, 4, 2000n, 3000n, 4000n],
);
console.log(JSON.stringify({ ready, reply }));
`,
    );
    const started = Date.now();
    const child = spawnSync(
      process.execPath,
      ['--conditions=@cuda-tasks/source', '--import', 'tsx', script],
      {
        encoding: 'utf8',
        timeout: 20_000,
        env: { ...process.env, ISSUE_WORKER_DOUBLE_LOG: join(directory, 'calls.jsonl') },
      },
    );
    const seconds = (Date.now() - started) / 1000;
    expect(child.error, child.stderr).toBeUndefined();
    expect(child.signal, `still running after ${seconds} s`).toBeNull();
    expect(child.status, child.stderr).toBe(0);
    expect(JSON.parse(child.stdout.trim().split('\n').at(-1) ?? '')).toEqual({
      ready: true,
      reply: {},
    });
  });
});
