import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeGpu } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';

// The load script end to end on the GPU, small: the server in the script's process, the client
// in a child, the head-of-line and search workloads' tables. What it checks is that they run and
// every answer is right (the client checks each one); the figures are the benchmark's business.

describeGpu('the load script (pnpm --filter @cuda-tasks/examples load)', () => {
  it('runs the head-of-line and search workloads with no wrong answer and prints their tables', () => {
    const packageRoot = fileURLToPath(new URL('../..', import.meta.url));
    const result = spawnSync(
      join(packageRoot, 'node_modules/.bin/tsx'),
      [
        '--conditions=@cuda-tasks/source',
        'src/service/load.ts',
        '--workload',
        'head-of-line,search',
        '--seconds',
        '2',
        '--small-rate',
        '50',
        '--large-every',
        '500',
        '--large-n',
        '1024',
        '--rows',
        '50000',
        '--requests',
        '200',
        '--concurrency',
        '8',
        '--warmup',
        '4',
        '--rounds',
        '2',
        '--clients',
        '2',
      ],
      { cwd: packageRoot, encoding: 'utf8', timeout: 170_000 },
    );
    expect(result.error).toBeUndefined();
    expect(result.stderr).not.toMatch(/^\s+at /m);
    expect(result.status).toBe(0);
    const out = result.stdout;
    // Progress while it ran, from the client process.
    expect(out).toMatch(/ {2}one shared stream, measured \d+ s: small \d+\/\d+ answered/);
    // The head-of-line table: its three rows, and the p99 comparisons.
    expect(out).toMatch(/^one shared stream\s+\d+\s+[\d.]+\s+[\d.]+/m);
    expect(out).toMatch(/^stream per request\s+\d+\s+[\d.]+\s+[\d.]+/m);
    expect(out).toMatch(/^stream per request, small at high priority\s+\d+\s+[\d.]+\s+[\d.]+/m);
    expect(out).toMatch(/small requests' p99, stream per request \/ one shared stream: x[\d.]+/);
    expect(out).toMatch(
      /small requests' p99, small at high priority \/ stream per request: x[\d.]+; \/ one shared stream: x[\d.]+/,
    );
    // The shared-data table.
    expect(out).toContain('shared read-only data: POST /search over 50,000 embeddings');
    expect(out).toMatch(/stream per request \/ one shared stream: throughput x[\d.]+, p99 x[\d.]+/);
    // Its modes in turns: a round not counted, then two, the second in the other order.
    const runs = [...out.matchAll(/^(warm-up round \(not counted\)|round \d of 2): (.+?) \(/gm)];
    expect(runs.map(([, round, mode]) => `${round}: ${mode}`)).toEqual([
      'warm-up round (not counted): stream per request',
      'warm-up round (not counted): one shared stream',
      'round 1 of 2: stream per request',
      'round 1 of 2: one shared stream',
      'round 2 of 2: one shared stream',
      'round 2 of 2: stream per request',
    ]);
    expect(out).toMatch(
      /^per round \(stream per request \/ one shared stream\): throughput x[\d.]+, x[\d.]+; p99 x[\d.]+, x[\d.]+$/m,
    );
    // Searches in batches (two load clients at once share the concurrency of 8).
    expect(out).toMatch(
      /^server: \d+ searches in \d+ batches \([\d.]+ a batch, the largest \d+\)$/m,
    );
    expect(out).not.toContain('error:');
  }, 180_000);
});
