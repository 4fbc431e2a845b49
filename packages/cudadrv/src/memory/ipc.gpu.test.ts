/**
 * Memory and events shared between real processes (issue 36): a child process
 * (test/ipc-child.ts, forked with the repository's TypeScript loader) opens what this process
 * exports, reads it against the CPU formula that filled it, writes through a read-write view,
 * is refused a write through a read-only one, waits on the GPU for this process's event; and
 * the faults: the exporter exits, an importer is killed mid-read, a handle of another device,
 * a stale handle, a malformed one. Each test prints one summary line.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describeGpu } from '@cuda-tasks/testing';
import { afterEach, expect, it } from 'vitest';
import { pattern } from '../../test/ipc-child.js';
import {
  checkSharedMemory,
  currentStream,
  DeviceArray,
  Event,
  InterprocessEvent,
  launch,
  Module,
  openSharedMemory,
  type SharedMemoryError,
  type SharedMemoryHandle,
  Stream,
  shareableArray,
  sharedMemoryHolders,
  shareMemory,
  waitForStream,
} from '../index.js';

const childScript = fileURLToPath(new URL('../../test/ipc-child.ts', import.meta.url));
const loader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

interface Child {
  process: ChildProcess;
  /** Sends a message and resolves with the child's answer to it (rejects on a failure). */
  ask(message: Record<string, unknown>): Promise<any>;
  /** The next message the child sends of its own accord (not an answer). */
  next(): Promise<any>;
  exited: Promise<number | null>;
}

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});

/** Forks the child fixture and resolves once it has started. */
async function startChild(): Promise<Child> {
  const child = fork(childScript, [], {
    execArgv: ['--conditions=@cuda-tasks/source', '--import', loader],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.push(child);
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const waiting: ((message: any) => void)[] = [];
  const answers = new Map<string, (message: any) => void>();
  child.on('message', (message: any) => {
    if (typeof message.op === 'string' && answers.has(message.op)) {
      const answer = answers.get(message.op)!;
      answers.delete(message.op);
      answer(message);
    } else waiting.shift()?.(message);
  });
  const next = () => new Promise<any>((resolve) => waiting.push(resolve));
  const started = await Promise.race([
    next(),
    exited.then((code) => {
      throw new Error(`the child exited with ${code} before starting`);
    }),
  ]);
  expect(started.started).toBe(child.pid);
  const ask = (message: Record<string, unknown>) =>
    new Promise<any>((resolve, reject) => {
      answers.set(message.op as string, (answer) =>
        answer.failed
          ? reject(
              new Error(`child ${message.op} failed: ${answer.failed.message}\n${answer.stack}`),
            )
          : resolve(answer.result),
      );
      child.send(message);
    });
  return { process: child, ask, next, exited };
}

/** A shareable float32 array of `length` elements holding `pattern`, complete on the GPU. */
async function patterned(length: number): Promise<DeviceArray<'float32'>> {
  const array = shareableArray('float32', [length / 4, 4]);
  const values = new Float32Array(length);
  for (let i = 0; i < length; i++) values[i] = pattern(i);
  array.copyFromHost(values);
  await waitForStream(currentStream());
  return array;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describeGpu('memory shared between processes (CUDA IPC)', () => {
  it('a child reads the exported array, writes through a read-write view, is refused a read-only write', async () => {
    const length = 4 << 20;
    const array = await patterned(length);
    const handle = shareMemory(array);
    const child = await startChild();
    const read = await child.ask({ op: 'read', handle: JSON.parse(JSON.stringify(handle)) });
    expect(read).toMatchObject({ wrong: 0, length, shape: [length / 4, 4], dtype: 'float32' });
    const refused = await child.ask({ op: 'writeReadOnly', handle });
    expect(refused.error).toMatchObject({ name: 'SharedMemoryError', reason: 'read-only' });
    await child.ask({ op: 'write', handle });
    const written = await array.toHost();
    let wrong = 0;
    for (let i = 0; i < length; i++) if (written[i] !== -pattern(i) - 1) wrong++;
    expect(wrong).toBe(0);
    // The child gave its leases back: nothing holds the memory now.
    expect(sharedMemoryHolders(array)).toEqual([]);
    console.log(
      `[ipc] ${length} float32 shared: child read ${read.wrong} wrong (first open ${read.openMs.toFixed(2)} ms), parent saw ${wrong} wrong after the child's write, read-only write -> ${refused.error.reason}`,
    );
    array.dispose();
  });

  it('opening a 1 GiB buffer again in another process takes <= 1 ms', async () => {
    const array = shareableArray('uint8', 1 << 30);
    const handle = shareMemory(array);
    const child = await startChild();
    const times = await child.ask({ op: 'openTimes', handle });
    expect(times.samePointer).toBe(true);
    console.log(
      `[ipc] 1 GiB open in a child: first ${times.firstMs.toFixed(3)} ms, again while open ${times.secondMs.toFixed(3)} ms, again after closing ${times.reopenMs.toFixed(3)} ms (target <= 1 ms)`,
    );
    expect(times.secondMs).toBeLessThanOrEqual(1);
    expect(times.refused).toBe(20);
    // Nothing leaked in the child, which is still running: it holds no lease, and the memory
    // goes back to the device as soon as the exporter frees it.
    expect(sharedMemoryHolders(array)).toEqual([]);
    const device = array.buffer.context.device;
    const before = device.freeMemory();
    array.dispose();
    const freed = device.freeMemory() - before;
    console.log(
      `[ipc] after 23 opens and 20 refused opens in the live child: holders [], dispose freed ${(freed / 2 ** 20).toFixed(0)} MiB`,
    );
    expect(freed).toBeGreaterThanOrEqual(1 << 30);
  });

  it("a reader in another process waits on the GPU for the writer's interprocess event", async () => {
    const module = Module.compile(`
__device__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
extern "C" __global__ void spin_then_flag(unsigned int *flag, unsigned long long ns) {
  unsigned long long start = now();
  while (now() - start < ns) {}
  unsigned long long t = now();
  flag[2] = (unsigned int)t; flag[3] = (unsigned int)(t >> 32);
  __threadfence_system();
  flag[0] = 1;
}
extern "C" __global__ void stamp(unsigned int *out, const unsigned int *flag) {
  unsigned long long t = now();
  out[0] = (unsigned int)t; out[1] = (unsigned int)(t >> 32); out[2] = flag[0];
}`);
    const spin = module.kernel('spin_then_flag', ['uint32*', 'uint64']);
    const stampKernel = module.kernel('stamp', ['uint32*', 'const uint32*']);
    const flag = shareableArray('uint32', 4);
    flag.fill(0);
    const event = InterprocessEvent.create();
    await waitForStream(currentStream());
    const child = await startChild();
    const answer = child.ask({ op: 'eventWait', event: event.share(), flag: shareMemory(flag) });
    expect((await child.next()).ready).toBe(true);
    // The kernel runs 300 ms: the child's wait is queued long before it ends.
    launch(spin, { grid: 1, block: 1 }, flag, 300_000_000);
    event.record();
    child.process.send({ op: 'go' });
    const result = await answer;
    const parentEnd = await flag.toHost();
    const endNs = (BigInt(parentEnd[3]!) << 32n) | BigInt(parentEnd[2]!);
    const latencyMs = Number(BigInt(result.startNs) - endNs) / 1e6;
    console.log(
      `[ipc] interprocess event: the child's kernel saw flag ${result.flagSeen}, started ${latencyMs.toFixed(4)} ms after the writer's kernel ended (issue 36's target <= 0.1 ms)`,
    );
    expect(result.flagSeen).toBe(1);
    expect(latencyMs).toBeGreaterThanOrEqual(0);
    // Ordered on the GPU: the child queued its wait and kernel ~300 ms before the writer's
    // kernel ended (the 'go' message goes right after the launch), saw the flag, and started
    // within 1 ms of the end. The figure includes the GPU switching between the two processes'
    // contexts; issue 36's 0.1 ms target is tracked with the figure, not here.
    expect(latencyMs).toBeLessThanOrEqual(1);
    // Beside it, the same wait without a second process: another stream of this context waits
    // on an ordinary event, on the GPU. The difference is what crossing to the other
    // process's context costs.
    const sameFlag = DeviceArray.zeros('uint32', 4);
    const out = DeviceArray.zeros('uint32', 4);
    const waiter = Stream.create({ name: 'same-context waiter' });
    const plain = Event.create();
    launch(spin, { grid: 1, block: 1 }, sameFlag, 300_000_000);
    plain.record();
    waiter.waitEvent(plain);
    launch(stampKernel, { grid: 1, block: 1, stream: waiter }, out, sameFlag);
    const stamped = await out.toHost();
    const ended = await sameFlag.toHost();
    const sameEndNs = (BigInt(ended[3]!) << 32n) | BigInt(ended[2]!);
    const sameStartNs = (BigInt(stamped[1]!) << 32n) | BigInt(stamped[0]!);
    const sameMs = Number(sameStartNs - sameEndNs) / 1e6;
    console.log(
      `[ipc] the same wait within one context (another stream, an ordinary event): ${sameMs.toFixed(4)} ms; across processes ${latencyMs.toFixed(4)} ms`,
    );
    expect(stamped[2]).toBe(1);
    expect(sameMs).toBeGreaterThanOrEqual(0);
    waiter.dispose();
    plain.dispose();
    out.dispose();
    sameFlag.dispose();
    event.dispose();
    flag.dispose();
  });

  it('the exporter exits: the importer is told, its views refuse use, new opens are refused', async () => {
    const child = await startChild();
    const { handle } = await child.ask({ op: 'export', length: 1 << 20 });
    let heard: SharedMemoryError | undefined;
    const view = openSharedMemory<'float32'>(handle, {
      onExporterExit: (error) => {
        heard = error;
      },
    });
    const values = await view.toHost();
    let wrong = 0;
    for (let i = 0; i < values.length; i++) if (values[i] !== pattern(i)) wrong++;
    expect(wrong).toBe(0);
    child.process.kill('SIGKILL');
    await child.exited;
    const killedAt = performance.now();
    while (heard === undefined && performance.now() - killedAt < 5000) await sleep(20);
    const noticedMs = performance.now() - killedAt;
    expect(heard?.reason).toBe('exporter-exited');
    expect(() => view.ffiAddressOn(currentStream(), 'read')).toThrow(/has exited/);
    expect(() => checkSharedMemory(view)).toThrow(/has exited/);
    let reopened: unknown;
    try {
      openSharedMemory(handle);
    } catch (error) {
      reopened = error;
    }
    expect((reopened as SharedMemoryError).reason).toBe('exporter-exited');
    view.dispose();
    // This process's context is healthy.
    const check = DeviceArray.fromHost(new Float32Array([1, 2, 3]));
    expect(Array.from(await check.toHost())).toEqual([1, 2, 3]);
    check.dispose();
    console.log(
      `[ipc] exporter killed: importer read ${wrong} wrong before, was told in ${noticedMs.toFixed(0)} ms (${heard?.reason}), reopen -> ${(reopened as SharedMemoryError).reason}`,
    );
  });

  it('an importer killed mid-read leaves the exporter healthy and its memory freeable', async () => {
    const length = 16 << 20;
    const array = await patterned(length);
    const handle = shareMemory(array);
    const child = await startChild();
    await child.ask({ op: 'readForever', handle });
    await sleep(200);
    expect(sharedMemoryHolders(array)).toEqual([child.process.pid]);
    child.process.kill('SIGKILL');
    await child.exited;
    expect(sharedMemoryHolders(array)).toEqual([]);
    const values = await array.toHost();
    let wrong = 0;
    for (let i = 0; i < length; i++) if (values[i] !== pattern(i)) wrong++;
    expect(wrong).toBe(0);
    const before = array.buffer.context.device.freeMemory();
    array.dispose();
    await sleep(50);
    const freed = array.buffer.context.device.freeMemory() - before;
    expect(freed).toBeGreaterThanOrEqual(length * 4);
    console.log(
      `[ipc] importer killed mid-read: exporter read ${wrong} wrong after, holders [] , dispose freed ${(freed / 2 ** 20).toFixed(0)} MiB at once`,
    );
  });

  it('refused in the child: another device, a stale handle, malformed input, a handle of its own process', async () => {
    const array = await patterned(1024);
    const handle = shareMemory(array);
    const child = await startChild();
    const otherDevice: SharedMemoryHandle = {
      ...handle,
      device: { ...handle.device, uuid: 'GPU-00000000-0000-0000-0000-000000000000' },
    };
    const reasons = {
      otherDevice: (await child.ask({ op: 'open', handle: otherDevice })).error?.reason,
      malformed: (await child.ask({ op: 'open', handle: '{"format":"cuda-tasks/ipc-memory"' }))
        .error?.reason,
      oversized: (
        await child.ask({
          op: 'open',
          handle: { ...handle, allocationBytes: 1 << 30, byteLength: 4096, shape: [1024] },
        })
      ).error?.reason,
      forged: (await child.ask({ op: 'open', handle: { ...handle, ipcHandle: '00'.repeat(64) } }))
        .error?.reason,
      stale: undefined as string | undefined,
    };
    array.dispose(); // nobody holds it: freed now
    reasons.stale = (await child.ask({ op: 'open', handle })).error?.reason;
    let own: unknown;
    const mine = await patterned(16);
    try {
      openSharedMemory(shareMemory(mine));
    } catch (error) {
      own = error;
    }
    mine.dispose();
    console.log(
      `[ipc] refused: ${JSON.stringify(reasons)}, own process -> ${(own as SharedMemoryError).reason}`,
    );
    expect(reasons).toEqual({
      otherDevice: 'other-device',
      malformed: 'malformed',
      oversized: 'malformed',
      forged: 'stale',
      stale: 'stale',
    });
    expect((own as SharedMemoryError).reason).toBe('own-process');
  });
});
