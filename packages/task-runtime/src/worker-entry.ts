/**
 * A `WorkerPool` worker thread's module: runs the pool's side of the protocol
 * (worker-jobs.ts) on `parentPort`. Built, it is dist/worker-entry.js beside the package's
 * chunks; from the TypeScript source, worker-entry-source.mjs registers tsx's loader first.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { serveWorkerJobs } from './worker-jobs.js';
import type { WorkerPoolData } from './worker-protocol.js';

if (parentPort !== null) await serveWorkerJobs(parentPort, workerData as WorkerPoolData);
