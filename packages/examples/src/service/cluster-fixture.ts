/**
 * The cluster mode's processes with a stand-in for the GPU, for cluster.test.ts: the primary
 * "builds" an index that hands out a well-formed handle (and says when it is disposed), and
 * forks `FIXTURE_PROCESSES` workers through `startClusterPrimary`; each worker checks the
 * handle it was given as untrusted input and answers every request with its pid and the
 * handle's export id. SIGTERM to the primary stops the workers, then disposes the index.
 *
 * Run: `node --conditions=@cuda-tasks/source --import tsx src/service/cluster-fixture.ts`
 */
import cluster from 'node:cluster';
import { createServer } from 'node:http';
import { readClusterIndexHandle, startClusterPrimary, stopClusterOnSignals } from './cluster.js';

const handle = {
  format: 'cuda-tasks/ipc-memory',
  version: 1,
  ipcHandle: '7e'.repeat(64),
  allocationBytes: 1000 * 128 * 4,
  byteOffset: 0,
  byteLength: 1000 * 128 * 4,
  dtype: 'float32',
  shape: [1000, 128],
  pid: process.pid,
  exportId: 'f0'.repeat(16),
  device: {
    ordinal: 0,
    uuid: 'GPU-00000000-1111-2222-3333-444444444444',
    pciBusId: '0000:01:00.0',
  },
} as const;

if (cluster.isPrimary) {
  const primary = await startClusterPrimary({
    processes: Number(process.env.FIXTURE_PROCESSES ?? 2),
    searchRows: 1000,
    port: 0,
    graceMs: 2000,
    argv: [],
    buildIndex: async () => ({
      share: () => handle,
      dispose: () => console.log(`index disposed, ${primary.workers().length} workers left`),
    }),
  });
  stopClusterOnSignals(primary);
} else {
  // As a real worker reads it: untrusted, and only its primary's.
  const shared = readClusterIndexHandle();
  const server = createServer((_request, response) => {
    response.setHeader('connection', 'close');
    response.end(JSON.stringify({ pid: process.pid, exportId: shared.exportId }));
  });
  server.listen(0, '127.0.0.1');
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}
