/**
 * A process that parses a large body off the loop and then has nothing left to do, for the
 * parse pool's test that no worker keeps a process alive: `close` closes the pool, `idle`
 * leaves it idle (its workers unref'd), `service` runs a service with a stand-in GPU, answers a
 * large `/solve`, and shuts it down. Prints one JSON line with what it parsed, then returns:
 * the process must exit on its own.
 *
 * Run: `node --conditions=@cuda-tasks/source --import tsx src/service/parse-pool-fixture.ts close`
 */
import { isEntryPoint } from '../cli.js';
import { ParsePool } from './parse-pool.js';
import { createServer } from './server.js';
import { DEFAULT_LIMITS, type SolveRequest } from './validation.js';

/** A `/solve` body of n = 64 (about 80 KB, parsed in a worker). */
function solveBody(): Buffer {
  const n = 64;
  const a = Array.from({ length: n * n }, (_, i) => Math.sin(i) + (i % (n + 1) === 0 ? n : 0));
  const b = Array.from({ length: n }, (_, i) => i);
  return Buffer.from(JSON.stringify({ n, a, b }));
}

/** Runs the fixture in `mode` (`close`, `idle` or `service`) and prints what it parsed. */
export async function runParseFixture(mode: string): Promise<void> {
  if (mode === 'service') {
    const service = createServer({
      checkGpu: () => ({ usable: true, devices: 1 }),
      runTask: async (_work, options) => ({ ran: options.name }),
      bodyParsing: { prestart: true },
    });
    await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
    const address = service.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    const response = await fetch(`http://127.0.0.1:${address.port}/solve`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: solveBody(),
    });
    const answer = await response.json();
    const { bodyParsing } = service.statistics();
    await service.shutdown({ graceMs: 0, drainMs: 0 });
    process.stdout.write(
      `${JSON.stringify({ status: response.status, answer, offloaded: bodyParsing.offloaded })}\n`,
    );
    return;
  }
  const pool = new ParsePool({ workers: 2, prestart: true });
  const context = { limits: DEFAULT_LIMITS, searchDim: 3, searchRows: 10 };
  const request = (await pool.parse('/solve', solveBody(), context)) as SolveRequest;
  const { offloaded } = pool.statistics();
  if (mode === 'close') await pool.close();
  process.stdout.write(`${JSON.stringify({ n: request.n, a0: request.a[0], offloaded })}\n`);
}

if (isEntryPoint(import.meta.url)) {
  runParseFixture(process.argv[2] ?? 'close').catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
