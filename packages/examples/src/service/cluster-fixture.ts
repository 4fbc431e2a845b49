/**
 * The cluster mode's processes with a stand-in for the GPU, for cluster.test.ts: the primary
 * "builds" an index that hands out a well-formed handle (and says when it is disposed), and
 * forks `FIXTURE_PROCESSES` workers through `startClusterPrimary`; each worker checks the
 * handle it was given as untrusted input and answers every request with its pid and the
 * handle's export id. SIGTERM to the primary stops the workers, then disposes the index.
 *
 * With `FIXTURE_CLUSTER_SEARCH=primary` the primary also searches (`--cluster-search primary`):
 * its stand-in index is `fixtureEmbeddings()` searched on the CPU, and each worker answers
 * `GET /search?seed=S&k=K` (the query `fixtureQuery(S)`) through the primary, in batches.
 *
 * Run: `node --conditions=@cuda-tasks/source --import tsx src/service/cluster-fixture.ts`
 */
import cluster from 'node:cluster';
import { createServer } from 'node:http';
import {
  type ClusterSearch,
  openClusterSearchIndex,
  readClusterIndexHandle,
  searchesInPrimary,
  startClusterPrimary,
  stopClusterOnSignals,
} from './cluster.js';
import {
  FIXTURE_DIM,
  FIXTURE_ROWS,
  fixtureEmbeddings,
  fixtureQuery,
} from './cluster-fixture-data.js';
import type { PrimarySearch } from './cluster-search.js';
import type { SearchResult } from './search.js';
import { SearchBatcher } from './search-batcher.js';

/** The k best rows of `query` by float64 dot products, one query at a time (the stand-in). */
function cpuSearch(embeddings: Float32Array, query: Float32Array, k: number): SearchResult {
  const scores = new Float64Array(FIXTURE_ROWS);
  for (let i = 0; i < FIXTURE_ROWS; i++) {
    for (let j = 0; j < FIXTURE_DIM; j++)
      scores[i]! += embeddings[i + j * FIXTURE_ROWS]! * query[j]!;
  }
  const order = Array.from(scores.keys()).sort((a, b) => scores[b]! - scores[a]!);
  const indices = order.slice(0, k);
  return { indices, scores: indices.map((row) => Math.fround(scores[row]!)) };
}

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
  const clusterSearch = (process.env.FIXTURE_CLUSTER_SEARCH ?? 'workers') as ClusterSearch;
  const embeddings = fixtureEmbeddings();
  const primary = await startClusterPrimary({
    processes: Number(process.env.FIXTURE_PROCESSES ?? 2),
    searchRows: FIXTURE_ROWS,
    clusterSearch,
    searchBatch: { maxBatch: 16, maxInFlight: 1 },
    port: 0,
    graceMs: 2000,
    argv: [],
    runSearchBatch: (work) => work(),
    buildIndex: async () => ({
      share: () => handle,
      dim: FIXTURE_DIM,
      // A batch takes 5 ms, as a GPU's would take some: searches arriving meanwhile wait.
      searchMany: async (queries, ks) => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        return queries.map((query, j) => cpuSearch(embeddings, query, ks[j]!));
      },
      dispose: () => {
        const searches = primary.searchStatistics();
        if (searches !== undefined) {
          const { requests, batches } = searches;
          console.log(
            `primary searched ${batches!.searches} in ${batches!.batches} batches (the largest ${batches!.largestBatch}) for ${requests} requests`,
          );
        }
        console.log(`index disposed, ${primary.workers().length} workers left`);
      },
    }),
  });
  stopClusterOnSignals(primary);
} else {
  // As a real worker reads it: untrusted, and only its primary's.
  const shared = readClusterIndexHandle();
  const backend = searchesInPrimary()
    ? ((await openClusterSearchIndex()) as PrimarySearch)
    : undefined;
  const batcher = backend && new SearchBatcher(backend, { maxBatch: 8, maxInFlight: 2 });
  const server = createServer((request, response) => {
    response.setHeader('connection', 'close');
    const url = new URL(request.url ?? '/', 'http://localhost');
    if (url.pathname === '/search' && batcher !== undefined) {
      const seed = Number(url.searchParams.get('seed'));
      const k = Number(url.searchParams.get('k'));
      batcher.search(fixtureQuery(seed), k).then(
        (result) => response.end(JSON.stringify({ pid: process.pid, ...result })),
        (error: unknown) => {
          response.statusCode = 400;
          response.end(JSON.stringify({ pid: process.pid, error: String(error) }));
        },
      );
      return;
    }
    response.end(JSON.stringify({ pid: process.pid, exportId: shared.exportId }));
  });
  server.listen(0, '127.0.0.1');
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}
