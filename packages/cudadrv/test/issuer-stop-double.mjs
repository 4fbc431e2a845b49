// A double of the issuer thread's libcuda calls for the issue engine's stop and failure tests
// (issue-engine.test.ts). `data` is a SharedArrayBuffer of Int32 words:
//   [0] launches seen;
//   [1] set to 1 by the issuer when it is about to sleep (after it checked STOP) the first time
//       after a launch, when [2] is 0;
//   [2] the test's go-ahead: the issuer holds there until the test stores 1 into it (so that
//       the engine's stop lands between the issuer's STOP check and its Atomics.wait).
// A launch whose gy is 66 throws (the issuer thread dies); one whose gy is 67 exits its thread.
export default function calls(data) {
  const words = new Int32Array(data);
  return {
    cuCtxSetCurrent: () => 0,
    cuStreamQuery: () => 0,
    cuLaunchKernel(_fn, _gx, gy) {
      if (gy === 66) throw new Error('the double died on purpose');
      if (gy === 67) process.exit(3);
      Atomics.add(words, 0, 1);
      return 0;
    },
    beforeSleep() {
      if (Atomics.load(words, 0) === 0 || Atomics.load(words, 2) !== 0) return;
      Atomics.store(words, 1, 1);
      Atomics.notify(words, 1);
      Atomics.wait(words, 2, 0, 10_000);
    },
  };
}
