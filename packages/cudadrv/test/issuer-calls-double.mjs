// A double of the issuer thread's libcuda calls (issue-engine.test.ts): each cuLaunchKernel
// appends [stream, gx, gy, first argument word, issuer thread id] to a shared log; a launch
// whose gy is 13 fails with CUDA_ERROR_INVALID_VALUE (1). The log's word 0 counts used words.
import { threadId } from 'node:worker_threads';

export default function calls(log) {
  const words = new Int32Array(log);
  return {
    cuCtxSetCurrent: () => 0,
    cuLaunchKernel(_fn, gx, gy, _gz, _bx, _by, _bz, _shared, stream, params) {
      const at = Atomics.add(words, 0, 5) + 1;
      words[at] = stream;
      words[at + 1] = gx;
      words[at + 2] = gy;
      words[at + 3] = params === 0 ? -1 : 0;
      words[at + 4] = threadId;
      return gy === 13 ? 1 : 0;
    },
  };
}
