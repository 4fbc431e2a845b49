'use strict';
// A koffi test double for the issue worker's program (issue-worker.test.ts): `load` gives a
// library whose functions log their calls (as JSON lines, BigInts as "123n") to the file
// named by ISSUE_WORKER_DOUBLE_LOG and return 0, except: a name containing "missing" does not
// load; `_Out_` handles and events are 100n, 101n, ... in creation order; stream 666n is
// capturing; a getrf whose m is 13 returns CUSOLVER_STATUS_INTERNAL_ERROR (7); a getrf whose
// m is 17 takes 300 ms (logged when it begins), as a large factorization's enqueue would.
const { appendFileSync } = require('node:fs');

const log = (entry) =>
  appendFileSync(
    process.env.ISSUE_WORKER_DOUBLE_LOG,
    `${JSON.stringify(entry, (_key, value) => (typeof value === 'bigint' ? `${value}n` : value))}\n`,
  );
let next = 100n;

exports.load = (name) => {
  if (name.includes('missing')) throw new Error(`${name}: cannot open shared object file`);
  return {
    func(prototype) {
      const fn = /([A-Za-z_]\w*)\s*\(/.exec(prototype)[1];
      return (...args) => {
        if (fn === 'cuEventCreate' || fn === 'cusolverDnCreate') {
          args[0][0] = next++;
          log([fn, args[0][0]]);
          return 0;
        }
        if (fn === 'cuStreamIsCapturing') {
          args[1][0] = args[0] === 666n ? 1 : 0;
          return 0;
        }
        log([fn, ...args]);
        if (fn.endsWith('getrf') && args[1] === 17) {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
        }
        return fn.endsWith('getrf') && args[1] === 13 ? 7 : 0;
      };
    },
  };
};
