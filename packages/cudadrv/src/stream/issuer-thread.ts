/**
 * An issue engine's issuer thread (started by issue-engine.ts; built as dist/issuer-thread.js):
 * binds libcuda (the process's own copy, through the package's FFI declarations), then drains
 * its ring (issue-ring.ts) for as long as the engine runs. An empty ring is checked again for
 * `spinMicroseconds`, then the thread sleeps in `Atomics.wait` until the engine publishes more
 * (it wakes the thread only when it sleeps). Between drains it queries the streams that a wait
 * asked about (issue-ring.ts, QUERY), so the waiting thread makes no driver call. It exits
 * once the engine stops and the ring is empty. A thread that fails (throws, or exits before the
 * stop) marks its ring `FAILED` with why, so that the engine's thread, waiting for it without
 * its event loop, sees it at once.
 */
import { workerData } from 'node:worker_threads';
import { cuda } from '../ffi/cuda.js';
import { koffi } from '../ffi/library.js';
import type { IssuerData } from './issue-engine.js';
import {
  createWatch,
  drain,
  HEAD,
  type IssuerCalls,
  markFailed,
  type Reader,
  SLEEPING,
  STOP,
  watchRound,
} from './issue-ring.js';

const { ring, slots, spinMicroseconds, watchMicroseconds, callsModule, callsData } =
  workerData as IssuerData;
const control = new Int32Array(ring.control);
let stopped = false;
process.once('exit', (code) => {
  if (!stopped) markFailed(control, `exited with code ${code}`);
});

try {
  await run();
  stopped = true;
} catch (error) {
  markFailed(
    control,
    `failed: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`,
  );
  throw error;
}

async function run(): Promise<void> {
  const api: IssuerCalls =
    callsModule === undefined
      ? cuda()
      : ((await import(callsModule)) as { default: (data: unknown) => IssuerCalls }).default(
          callsData,
        );
  const k = koffi();
  /** Room for the `void*` of every argument of the largest launch the engine carries. */
  const POINTERS = 256;
  const pointersAddress = k.alloc('uint64_t', POINTERS) as bigint;
  const data = new Int32Array(ring.data);
  const reader: Reader = {
    control,
    data,
    issued: new Int32Array(slots.issued),
    errors: new Int32Array(slots.errors),
    cancelled: new Int32Array(slots.cancelled),
    dataAddress: Number(k.address(data) as bigint),
    pointers: new Int32Array(k.view(pointersAddress, 8 * POINTERS) as ArrayBuffer),
    pointersAddress: Number(pointersAddress),
    current: 0,
    tail: 0,
    watch: createWatch(watchMicroseconds),
  };

  for (;;) {
    // Streams that a wait asked about are queried between drains, and the thread does not
    // sleep while it watches any (each is watched `watchMicroseconds` at most).
    const issued = drain(reader, api);
    const watching = reader.watch.count > 0 && watchRound(reader, api) > 0;
    if (issued > 0 || watching) continue;
    // Empty: look again for a while (a launch pushed meanwhile needs no wake-up), then sleep.
    const until = performance.now() + spinMicroseconds / 1000;
    while (Atomics.load(control, HEAD) === reader.tail && performance.now() < until) {}
    if (Atomics.load(control, HEAD) !== reader.tail) continue;
    if (Atomics.load(control, STOP) === 1) break;
    api.beforeSleep?.();
    Atomics.store(control, SLEEPING, 1);
    // The engine publishes HEAD, then reads SLEEPING: either it sees 1 and wakes this thread,
    // or this wait sees the new HEAD and returns at once. A stop publishes a PAD after setting
    // STOP, so a stop that comes after the check above also changes HEAD: this wait returns and
    // the next round sees STOP.
    Atomics.wait(control, HEAD, reader.tail);
    Atomics.store(control, SLEEPING, 0);
  }
}
