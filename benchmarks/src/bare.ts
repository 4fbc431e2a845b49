import type { KernelParameter } from '@cuda-tasks/cudadrv';
import koffi from 'koffi';

/**
 * A CUlaunchConfig for a one-dimensional launch of `grid` blocks of `block` threads on the
 * stream `streamHandle` (56 bytes: 3 + 3 dimensions, no shared memory, the stream at byte 32,
 * no attributes), as launch() keeps one: what the floor rows pass to a bare
 * `cuLaunchKernelEx`. Free it with koffi.free.
 */
export function bareLaunchConfig(streamHandle: bigint, grid = 1, block = 1): bigint {
  const pointer = koffi.alloc('uint8_t', 64) as bigint;
  const view = koffi.view(pointer, 64);
  new Uint32Array(view).set([grid, 1, 1, block, 1, 1, 0, 0]);
  new BigUint64Array(view).set([streamHandle, 0n, 0n, 0n], 4);
  return pointer;
}

/** The parameters of `axpb_f32` (y = a x + b) in kernels.ptx, as the benchmarks declare it. */
export const AXPB_PARAMETERS = [
  'float32*',
  'const float32*',
  'float32',
  'float32',
  'uint64',
] as const satisfies readonly KernelParameter[];

/**
 * The argument array a bare `cuLaunchKernelEx` of `axpb_f32` takes for y = a x + b over `n`
 * floats (`to` is y's device address, `from` x's): five `void*` to the five values that follow
 * them in the same 80 bytes, as `launch()` marshals them. Free it with koffi.free.
 */
export function bareAxpbArguments(
  to: bigint,
  from: bigint,
  a: number,
  b: number,
  n: number,
): bigint {
  // [void* x 5][y, x, a, b, n]
  const pointer = koffi.alloc('uint8_t', 80) as bigint;
  const view = koffi.view(pointer, 80);
  const u64 = new BigUint64Array(view);
  const f32 = new Float32Array(view);
  for (let i = 0; i < 5; i++) u64[i] = pointer + BigInt(40 + 8 * i);
  u64[5] = to;
  u64[6] = from;
  f32[14] = a;
  f32[16] = b;
  u64[9] = BigInt(n);
  return pointer;
}

/**
 * The floor rows' waits: what waiting for streams costs from JavaScript with no runtime around
 * it. Bare `cuStreamQuery` calls, one round-robin over every pending stream, the same tier-1
 * strategy as the runtime's waiter (decision 0021): rounds repeat in one microtask until one
 * settles a wait or the microtask has made `queriesPerPass` queries; then the next microtask.
 * No fallback to events or the libuv pool: the floor rows wait microseconds.
 */

/** CUDA_ERROR_NOT_READY: the stream is busy. */
const NOT_READY = 600;

/** Creates a bare waiter over `query` (the driver's `cuStreamQuery` as koffi binds it). */
export function bareStreamWaiter(
  query: (stream: number | bigint) => number,
  queriesPerPass = 8,
): (stream: number | bigint) => Promise<void> {
  const streams: (number | bigint)[] = [];
  const resolves: (() => void)[] = [];
  const rejects: ((error: Error) => void)[] = [];
  let scheduled = false;
  const spin = () => {
    scheduled = false;
    let queries = 0;
    let settled = false;
    while (!settled && streams.length > 0 && queries < queriesPerPass) {
      let kept = 0;
      for (let i = 0; i < streams.length; i++) {
        const result = query(streams[i]!);
        queries++;
        if (result === 0) {
          resolves[i]!();
          settled = true;
        } else if (result !== NOT_READY) {
          rejects[i]!(new Error(`cuStreamQuery returned ${result}`));
          settled = true;
        } else {
          streams[kept] = streams[i]!;
          resolves[kept] = resolves[i]!;
          rejects[kept++] = rejects[i]!;
        }
      }
      streams.length = resolves.length = rejects.length = kept;
    }
    if (streams.length > 0) {
      scheduled = true;
      queueMicrotask(spin);
    }
  };
  return (stream) =>
    new Promise<void>((resolve, reject) => {
      streams.push(stream);
      resolves.push(resolve);
      rejects.push(reject);
      if (!scheduled) {
        scheduled = true;
        queueMicrotask(spin);
      }
    });
}
