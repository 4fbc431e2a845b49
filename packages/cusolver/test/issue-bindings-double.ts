/**
 * A test double of the native functions the issue worker calls (`IssueBindings`), loaded in
 * the worker through `IssueWorkerData.bindings` by the issue worker's unit tests. Every call is
 * logged (as a JSON line, BigInts as "123n") to the file named by ISSUE_WORKER_DOUBLE_LOG and
 * returns 0, except: `_Out_` handles and events are 100n, 101n, ... in creation order; stream
 * 666n is capturing; a getrf whose m is 13 returns CUSOLVER_STATUS_INTERNAL_ERROR (7); a getrf
 * whose m is 17 takes 300 ms (logged when it begins), as a large factorization's enqueue
 * would. With ISSUE_WORKER_DOUBLE_MISSING set, `bindings()` throws as a library that does not
 * load would.
 */
import { appendFileSync } from 'node:fs';
import type { IssueBindings } from '../src/issue-worker-thread.js';

type Handle = number | bigint;

const log = (entry: readonly unknown[]) =>
  appendFileSync(
    process.env.ISSUE_WORKER_DOUBLE_LOG!,
    `${JSON.stringify(entry, (_key, value) => (typeof value === 'bigint' ? `${value}n` : value))}\n`,
  );

let next = 100n;

/** A handle or event of its own, written through the `_Out_` array. */
function create(fn: string, out: (Handle | null)[]): number {
  out[0] = next++;
  log([fn, out[0]]);
  return 0;
}

/** getrf: m = 13 fails, m = 17 takes 300 ms. */
function getrf(fn: string, handle: Handle, args: (number | bigint)[]): number {
  log([fn, handle, ...args]);
  if (args[0] === 17) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
  return args[0] === 13 ? 7 : 0;
}

/** The double's bindings (the worker calls this once, as it would load the libraries). */
export function bindings(): IssueBindings {
  const missing = process.env.ISSUE_WORKER_DOUBLE_MISSING;
  if (missing !== undefined) throw new Error(`${missing}: cannot open shared object file`);
  const logged =
    (fn: string) =>
    (...args: unknown[]) => {
      log([fn, ...args]);
      return 0;
    };
  return {
    cuCtxSetCurrent: logged('cuCtxSetCurrent'),
    cuStreamIsCapturing(stream, captureStatus) {
      captureStatus[0] = stream === 666n ? 1 : 0;
      return 0;
    },
    cuEventCreate: (out) => create('cuEventCreate', out),
    cuEventRecord: logged('cuEventRecord'),
    cuStreamWaitEvent: logged('cuStreamWaitEvent'),
    cusolverDnCreate: (out) => create('cusolverDnCreate', out),
    cusolverDnSetStream: logged('cusolverDnSetStream'),
    cusolverDnSgetrf: (handle, ...args) => getrf('cusolverDnSgetrf', handle, args),
    cusolverDnDgetrf: (handle, ...args) => getrf('cusolverDnDgetrf', handle, args),
  };
}
