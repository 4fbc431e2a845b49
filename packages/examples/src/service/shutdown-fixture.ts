/**
 * The service in a process of its own with a stand-in for the GPU, for the shutdown tests:
 * each GPU request "runs" for `FIXTURE_WORK_MS` (honouring its signal, as a task does), and
 * SIGTERM / SIGINT shut it down as `main()` does (`stopOnSignals`, grace `FIXTURE_GRACE_MS`).
 * Prints `{"port": N}` on a line once it listens.
 *
 * Run: `node --conditions=@cuda-tasks/source --import tsx src/service/shutdown-fixture.ts`
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { isEntryPoint } from '../cli.js';
import { createServer, stopOnSignals } from './server.js';

/** Rejects with the signal's reason once it aborts. */
function untilAborted(signal: AbortSignal | undefined): Promise<never> {
  return new Promise((_, reject) => {
    if (signal === undefined) return;
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

/** Starts the stand-in service on 127.0.0.1 and stops it on the first signal. */
export function startFixture(environment: NodeJS.ProcessEnv = process.env): void {
  const workMs = Number(environment.FIXTURE_WORK_MS ?? 500);
  const graceMs = Number(environment.FIXTURE_GRACE_MS ?? 2000);
  const service = createServer({
    checkGpu: () => ({ usable: true, devices: 1 }),
    runTask: async (_work, options) => {
      await Promise.race([sleep(workMs, undefined, { ref: false }), untilAborted(options.signal)]);
      return { ran: options.name };
    },
  });
  service.listen(0, '127.0.0.1', () => {
    const address = service.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    process.stdout.write(`${JSON.stringify({ port: address.port })}\n`);
    stopOnSignals(service, { graceMs, log: (line) => process.stderr.write(`${line}\n`) });
  });
}

if (isEntryPoint(import.meta.url)) startFixture();
