// A double of the issuer thread's libcuda calls (issue-engine.test.ts): each cuLaunchKernel
// appends [stream, gx, gy, first argument word, issuer thread id] to a shared log; a launch
// whose gy is 13 fails with CUDA_ERROR_INVALID_VALUE (1). The log's word 0 counts used words.
// cuStreamQuery appends [stream, -1, answer, 0, issuer thread id]: a stream is not ready
// (CUDA_ERROR_NOT_READY, 600) at the first query after a launch, then done; after a launch
// whose gy is 14 it is never ready (until a launch whose gy is 16); after one whose gy is 15 its
// queries fail with CUDA_ERROR_ILLEGAL_ADDRESS (700). A launch whose gy is 17 takes 30 ms (as
// one does when the GPU's queue is full).
import { threadId } from 'node:worker_threads';

export default function calls(log) {
  const words = new Int32Array(log);
  /** Per stream: 'fresh' (a launch since the last query), 'stuck', 'faulty' or 'done'. */
  const states = new Map();
  return {
    cuStreamQuery(stream) {
      const state = states.get(stream) ?? 'done';
      let answer = 0;
      if (state === 'fresh') {
        answer = 600;
        states.set(stream, 'done');
      } else if (state === 'stuck') answer = 600;
      else if (state === 'faulty') answer = 700;
      const at = Atomics.add(words, 0, 5) + 1;
      words[at] = stream;
      words[at + 1] = -1;
      words[at + 2] = answer;
      words[at + 3] = 0;
      words[at + 4] = threadId;
      return answer;
    },
    cuCtxSetCurrent: () => 0,
    cuLaunchKernel(_fn, gx, gy, _gz, _bx, _by, _bz, _shared, stream, params) {
      const at = Atomics.add(words, 0, 5) + 1;
      words[at] = stream;
      words[at + 1] = gx;
      words[at + 2] = gy;
      words[at + 3] = params === 0 ? -1 : 0;
      words[at + 4] = threadId;
      const state = states.get(stream);
      if (gy === 14) states.set(stream, 'stuck');
      else if (gy === 15) states.set(stream, 'faulty');
      else if (gy === 16 || (state !== 'stuck' && state !== 'faulty')) states.set(stream, 'fresh');
      if (gy === 17) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 30);
      return gy === 13 ? 1 : 0;
    },
  };
}
