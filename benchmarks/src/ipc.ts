/**
 * `ipc_event_wait`, the same work as c/bench.cu's: a reader in another process
 * (src/ipc-reader.ts) waits on the GPU for the writer's interprocess event. Per round the writer
 * runs `spin_then_flag` for 20 ms on its task's stream, records the event after it and tells
 * the reader, whose stream waits for the event and runs `stamp`; the result is the reader's
 * stamp minus the time the spin ended, in microseconds of the GPU's global timer (one clock for
 * both processes), median over the rounds. Issue 36's target is 0.1 ms; the C row beside it is
 * the floor.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  InterprocessEvent,
  launch,
  Module,
  shareableArray,
  shareMemory,
} from '@cuda-tasks/cudadrv';
import { kernelsPtxPath } from '@cuda-tasks/examples/kernels';
import { task } from '@cuda-tasks/task-runtime';
import { emit, type Result, repeatMedian } from './harness.js';

/** How long the writer's kernel spins before it sets the flag (the reader's wait is queued by then). */
const SPIN_NS = 20_000_000;

/** The reader's program, run under the same loader as this one. */
const READER = fileURLToPath(new URL('./ipc-reader.ts', import.meta.url));

/** A message of the reader: ready, a round's stamp, or why it failed. */
export interface ReaderReply {
  /** The reader opened the event and the memory and waits for rounds. */
  ready?: boolean;
  /** The stamp's global time, ns (a decimal string: past 2^53). */
  startNs?: string;
  /** flag[0] as the stamp read it: 1 once the writer's kernel has ended. */
  flagSeen?: number;
  /** Why the reader stopped (it exits after saying so). */
  failed?: string;
}

/** The reader's messages in order; a reader that exits answers every pending and later ask with `failed`. */
export function readerReplies(
  reader: Pick<ChildProcess, 'on' | 'once'>,
): () => Promise<ReaderReply> {
  const waiting: ((reply: ReaderReply) => void)[] = [];
  const early: ReaderReply[] = [];
  let gone: string | undefined;
  reader.on('message', (message: ReaderReply) => {
    const next = waiting.shift();
    if (next) next(message);
    else early.push(message);
  });
  reader.once('exit', (code, signal) => {
    gone = `ipc_event_wait: the reader exited (${signal ?? `code ${code}`})`;
    for (const next of waiting.splice(0)) next({ failed: gone });
  });
  return () =>
    new Promise((resolve) => {
      const message = early.shift();
      if (message !== undefined) resolve(message);
      else if (gone !== undefined) resolve({ failed: gone });
      else waiting.push(resolve);
    });
}

/** How long the reader may take to start, to answer a round, or to exit when told. */
const READER_TIMEOUT_MS = 30_000;

/** `promise`, or an Error naming `what` after READER_TIMEOUT_MS. */
function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(`ipc_event_wait: the reader did not ${what} within ${READER_TIMEOUT_MS} ms`),
        ),
      READER_TIMEOUT_MS,
    );
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * Runs the benchmark and prints its line, or a `_skip` line with the reason where it cannot
 * run here (interprocess handles refused, as in a container without a shared IPC namespace; the
 * reader failed or went silent) or a round went wrong (the reader ran before the writer's flag
 * was set). A machine without the driver throws, as every other benchmark does.
 */
export async function runIpc(): Promise<Result[]> {
  try {
    const median_us = await measure();
    return [
      emit({
        name: 'ipc_event_wait',
        median_us,
        unit: 'us/op',
        note: "GPU time from the writer's kernel end to the reader's kernel start, the reader in another process waiting on an interprocess event (us of the global timer)",
      }),
    ];
  } catch (error) {
    if (error instanceof Error && error.name === 'CudaUnavailableError') throw error;
    const reason = error instanceof Error ? error.message : String(error);
    console.log(JSON.stringify({ name: '_skip', id: 'ipc_event_wait', reason }));
    return [];
  }
}

/** The rounds; the median in us. */
async function measure(): Promise<number> {
  const module = Module.fromPtx(readFileSync(kernelsPtxPath, 'utf8'));
  const spin = module.kernel('spin_then_flag', ['uint32*', 'uint64']);
  const flag = shareableArray('uint32', 4);
  const event = InterprocessEvent.create();
  // Started once everything of this side stands: a reader is never left waiting for a setup
  // that does not come (its channel would keep this process alive).
  const reader = fork(READER, [], { execArgv: process.execArgv, stdio: ['ignore', 2, 2, 'ipc'] });
  const exited = new Promise<void>((resolve) => reader.once('exit', () => resolve()));
  const next = readerReplies(reader);
  try {
    reader.send({ event: event.share(), flag: shareMemory(flag) });
    const ready = await within(next(), 'start');
    if (ready.ready !== true) {
      throw new Error(ready.failed ?? 'ipc_event_wait: the reader did not start');
    }
    return await task(() =>
      repeatMedian(async () => {
        flag.fill(0);
        launch(spin, { grid: 1, block: 1 }, flag, SPIN_NS);
        event.record();
        const answer = next();
        reader.send('g');
        const { startNs, flagSeen, failed } = await within(answer, 'answer a round');
        if (failed !== undefined || startNs === undefined) {
          throw new Error(failed ?? 'ipc_event_wait: the reader answered without a stamp');
        }
        const host = await flag.toHost();
        if (flagSeen !== 1) {
          throw new Error("ipc_event_wait: the reader ran before the writer's flag was set");
        }
        const endNs = (BigInt(host[3]!) << 32n) | BigInt(host[2]!);
        return Number(BigInt(startNs) - endNs) / 1e3;
      }),
    );
  } finally {
    if (reader.connected) reader.send('q');
    await within(exited, 'exit').catch(() => {
      reader.kill('SIGKILL');
      return exited;
    });
    event.dispose();
    flag.dispose();
    module.dispose();
  }
}
