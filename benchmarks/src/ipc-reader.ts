/**
 * The reader of `ipc_event_wait` (src/ipc.ts starts it with `fork`): opens the writer's
 * interprocess event and flag memory from its first message and answers `{ ready: true }`;
 * then at each 'g' makes its stream wait for the event on the GPU, runs `stamp` and answers
 * the stamp's global time and the flag it saw; ends at 'q' or when the writer goes.
 */
import { readFileSync } from 'node:fs';
import {
  DeviceArray,
  InterprocessEvent,
  launch,
  Module,
  openSharedMemory,
  type SharedEventHandle,
  type SharedMemoryHandle,
} from '@cuda-tasks/cudadrv';
import { kernelsPtxPath } from '@cuda-tasks/examples/kernels';
import type { ReaderReply } from './ipc.js';

const send = (reply: ReaderReply) => process.send!(reply);

/** Tells the writer why, and exits once the message is out. */
const fail = (error: unknown) => {
  const why = error instanceof Error ? error.message : String(error);
  process.send!(
    { failed: `ipc_event_wait reader: ${why}` } satisfies ReaderReply,
    undefined,
    {},
    () => process.exit(1),
  );
};

process.once('disconnect', () => process.exit());
process.once('message', (setup: { event: SharedEventHandle; flag: SharedMemoryHandle }) => {
  try {
    const module = Module.fromPtx(readFileSync(kernelsPtxPath, 'utf8'));
    const stamp = module.kernel('stamp', ['uint32*', 'const uint32*']);
    const event = InterprocessEvent.open(setup.event);
    const flag = openSharedMemory<'uint32'>(setup.flag);
    const out = DeviceArray.zeros('uint32', 4);
    process.on('message', (command: unknown) => {
      if (command !== 'g') {
        out.dispose();
        flag.dispose();
        event.dispose();
        module.dispose();
        process.exit(0);
      }
      event.wait();
      launch(stamp, { grid: 1, block: 1 }, out, flag);
      out.toHost().then((values) => {
        send({
          startNs: String((BigInt(values[1]!) << 32n) | BigInt(values[0]!)),
          flagSeen: values[2]!,
        });
      }, fail);
    });
    send({ ready: true });
  } catch (error) {
    fail(error);
  }
});
