import { streamDouble } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

// gemm called again with the same three arrays and the default options skips the checks that
// depend only on the arrays (level3.ts, `lastGemm`). What is tested: over random sequences of
// gemm calls on a few arrays (of both dtypes, other shapes, leading dimensions, offsets and
// contexts), with arrays disposed, the current stream changed, options given, the math mode
// and workspace size changed and the remembered arrays forgotten in between, every call
// either throws the error an independent model of the checks expects and issues nothing, or
// issues cublasLtMatmul with the problem, addresses, stream and scalars the model computes
// for that call alone. cuBLASLt's planner and the native calls are doubles that record.

const record = vi.hoisted(() => ({
  problems: [] as Record<string, unknown>[],
  matmuls: [] as { a: unknown; b: unknown; c: unknown; stream: unknown }[],
  scalars: [] as { alpha: number; beta: number }[],
}));

vi.mock('./ffi/cublaslt.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./ffi/cublaslt.js')>()),
  cublasLt: () => ({
    cublasLtMatmul: (...args: unknown[]) => {
      record.matmuls.push({ a: args[3], b: args[5], c: args[8], stream: args[15] });
      return 0;
    },
  }),
}));
vi.mock('./lt.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('./lt.js')>();
  const plan = { usable: true, workspaceNeeded: 0, ltHandle: 1, desc: 2, aDesc: 3, bDesc: 4 };
  return {
    ...original,
    ltPlan: (context: unknown, problem: Record<string, unknown>) => {
      record.problems.push({ ...problem, context });
      return { ...plan, cDesc: 5, algo: 6 };
    },
  };
});
vi.mock('./scalars.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./scalars.js')>()),
  scalars: () => ({
    alpha: 0,
    beta: 0,
    set(_scalar: unknown, alpha: number, beta: number) {
      record.scalars.push({ alpha, beta });
    },
  }),
}));

import {
  CudaArgumentError,
  DeviceArray,
  type DeviceBuffer,
  DisposedError,
  type Stream,
} from '@cuda-tasks/cudadrv';
import { setCurrentStreamProvider } from '@cuda-tasks/cudadrv/internal';
import { gemm, setMathMode, setWorkspaceSize } from './index.js';

const CUBLAS_OP_N = 0;
const CUBLAS_OP_T = 1;
const COMPUTE = { f32: 68, tf32: 77, f64: 70 };

/** Two contexts: the arrays' and the streams' checks compare them by identity. */
const contexts = [0, 1].map((ordinal) =>
  Object.freeze({
    makeCurrent() {},
    device: { ordinal },
    toString: () => `Context(device ${ordinal})`,
  }),
);
/** Two streams of context 0, one of context 1. */
const streams = [0, 0, 1].map((context, i) =>
  streamDouble({
    context: contexts[context],
    ffiHandle: 0x5000 + i,
    handle: BigInt(0x5000 + i),
    disposed: false,
    assertUsable() {},
  }),
);

/** An array of the model: what the checks read, and the real DeviceArray made from it. */
interface ModelArray {
  dtype: 'float32' | 'float64';
  rows: number;
  columns: number;
  ld: number;
  offset: number;
  context: number;
  address: number;
  buffer: { disposed: boolean };
  array: DeviceArray;
}

/** Mostly 2 (so that most products fit), sometimes 1 or 3. */
const dimension = fc.oneof(
  { weight: 5, arbitrary: fc.constant(2) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 3 }) },
);
/** True once in `n` times. */
const onceIn = (n: number) => fc.integer({ min: 1, max: n }).map((x) => x === 1);
const arraySpec = fc.record({
  float64: onceIn(10),
  rows: dimension,
  columns: dimension,
  extraLd: fc.integer({ min: 0, max: 2 }),
  offset: fc.integer({ min: 0, max: 3 }),
  otherContext: onceIn(8).map((other) => (other ? 1 : 0)),
  // A base of 2^20 times the index, plus 0 to 63 float32 elements: alignments 4 to 256.
  misalign: fc.integer({ min: 0, max: 63 }),
});
type ArraySpec = typeof arraySpec extends fc.Arbitrary<infer T> ? T : never;

function makeArray(spec: ArraySpec, index: number): ModelArray {
  const dtype = spec.float64 ? 'float64' : 'float32';
  const bytes = spec.float64 ? 8 : 4;
  const ld = spec.rows + spec.extraLd;
  const address = (index + 1) * 0x10_0000 + spec.misalign * 4;
  const buffer = {
    byteLength: (spec.offset + ld * (spec.columns - 1) + spec.rows) * bytes,
    address,
    disposed: false,
    context: contexts[spec.otherContext],
  };
  const array = new DeviceArray(
    buffer as unknown as DeviceBuffer,
    dtype,
    [spec.rows, spec.columns],
    [1, ld],
    spec.offset,
    false,
  );
  // The hand-off to the stream is the memory layer's; here the address is all that matters.
  Object.defineProperty(array, 'ffiAddressOn', { value: () => array.ffiAddress });
  return {
    dtype,
    rows: spec.rows,
    columns: spec.columns,
    ld,
    offset: spec.offset,
    context: spec.otherContext,
    address: address + spec.offset * bytes,
    buffer,
    array,
  };
}

/** The arrays of a sequence. */
const ARRAYS = 6;
const INDICES = Array.from({ length: ARRAYS }, (_, i) => i);

/** A stream: mostly one of context 0's two, sometimes context 1's. */
const streamIndex = fc.oneof(
  { weight: 4, arbitrary: fc.nat(1) },
  { weight: 1, arbitrary: fc.constant(2) },
);
const step = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant('gemm' as const),
      // Mostly three different arrays; sometimes any three (c may then be a or b).
      operands: fc.oneof(
        { weight: 4, arbitrary: fc.shuffledSubarray(INDICES, { minLength: 3, maxLength: 3 }) },
        {
          weight: 1,
          arbitrary: fc.tuple(...INDICES.slice(0, 3).map(() => fc.constantFrom(...INDICES))),
        },
      ),
      options: fc.oneof(
        { weight: 6, arbitrary: fc.constant('default' as const) },
        { weight: 1, arbitrary: fc.constant('empty' as const) },
        { weight: 1, arbitrary: fc.constant('transA' as const) },
        { weight: 1, arbitrary: fc.constant('alpha' as const) },
        { weight: 1, arbitrary: fc.constant('stream' as const) },
      ),
      stream: streamIndex,
    }),
  },
  // The last gemm's arrays again, with the default options.
  { weight: 8, arbitrary: fc.record({ kind: fc.constant('again' as const) }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('current' as const), stream: streamIndex }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('dispose' as const), array: fc.nat(ARRAYS - 1) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('tf32' as const), on: fc.boolean() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('workspace' as const),
      bytes: fc.constantFrom(0, 1 << 20, 32 << 20),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('forget' as const) }) },
);

function alignment(address: number): number {
  const low = address % 256;
  return low === 0 ? 256 : low & -low;
}

/** What the model expects of one gemm: the error class, or the native call's values. */
function expected(
  a: ModelArray,
  b: ModelArray,
  c: ModelArray,
  transA: boolean,
  alpha: number,
  stream: number,
  tf32: boolean,
  workspace: number,
) {
  if (a.buffer.disposed || b.buffer.disposed || c.buffer.disposed) return { error: DisposedError };
  if (a.dtype !== b.dtype || a.dtype !== c.dtype) return { error: CudaArgumentError };
  const m = transA ? a.columns : a.rows;
  const k = transA ? a.rows : a.columns;
  if (k !== b.rows || c.rows !== m || c.columns !== b.columns) return { error: CudaArgumentError };
  // Distinct model arrays have distinct buffers: only the same array overlaps.
  if (c === a || c === b) return { error: CudaArgumentError };
  const context = stream === 2 ? 1 : 0;
  if (a.context !== context || b.context !== context || c.context !== context) {
    return { error: CudaArgumentError };
  }
  const float64 = a.dtype === 'float64';
  // cuBLAS never steps past the first column of a one-column matrix: its leading dimension
  // goes as the row count.
  const ld = (x: ModelArray) => (x.columns === 1 ? x.rows : x.ld);
  return {
    problem: {
      float64,
      transA: transA ? CUBLAS_OP_T : CUBLAS_OP_N,
      transB: CUBLAS_OP_N,
      m,
      n: b.columns,
      k,
      lda: ld(a),
      ldb: ld(b),
      ldc: ld(c),
      alignA: alignment(a.address),
      alignB: alignment(b.address),
      alignC: alignment(c.address),
      computeType: float64 ? COMPUTE.f64 : tf32 ? COMPUTE.tf32 : COMPUTE.f32,
      workspaceBytes: workspace,
      context: contexts[context],
    },
    matmul: { a: a.address, b: b.address, c: c.address, stream: 0x5000 + stream },
    scalars: { alpha, beta: 0 },
  };
}

describe('gemm of no arrays, while none is remembered', () => {
  it('refuses missing operands with a CudaArgumentError, as a first call would', () => {
    // Nothing remembered (the forgetting timer ran, or no gemm passed yet) matches absent
    // operands: they are refused by the checks, not read as arrays.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      vi.advanceTimersByTime(1000);
      for (const operand of [undefined, null]) {
        const missing = operand as unknown as DeviceArray;
        expect(() => gemm(missing, missing, missing)).toThrow(CudaArgumentError);
        expect(() => gemm(missing, missing, missing)).toThrow(/a must be a DeviceArray/);
      }
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('gemm of the same arrays again, against a model of every check', () => {
  let previous: ReturnType<typeof setCurrentStreamProvider>;
  let current: Stream = streams[0]!;
  beforeAll(() => {
    // Only setTimeout: the forgetting timer's (other timers run the test harness's hooks).
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    previous = setCurrentStreamProvider(() => current);
  });
  afterAll(() => {
    setCurrentStreamProvider(previous.stream, previous.device, previous.signal);
    setMathMode('default');
    setWorkspaceSize(32 << 20);
    vi.useRealTimers();
  });

  it('issues what a first call would, or refuses as a first call would', () => {
    let calls = 0;
    let issued = 0;
    // Calls that found the arrays and stream of a default-options call that passed just before.
    let repeated = 0;
    fc.assert(
      fc.property(
        fc.array(arraySpec, { minLength: ARRAYS, maxLength: ARRAYS }),
        onceIn(4),
        fc.array(step, { minLength: 10, maxLength: 60 }),
        (specs, float64, steps) => {
          // One dtype for the sequence; a spec's `float64` gives that array the other one.
          const arrays = specs.map((spec, i) =>
            makeArray({ ...spec, float64: float64 !== spec.float64 }, i),
          );
          let tf32 = false;
          let workspace = 32 << 20;
          setMathMode('default');
          setWorkspaceSize(workspace);
          current = streams[0]!;
          let last = { a: 0, b: 0, c: 0 };
          let passed: string | undefined;
          for (const step of steps) {
            const s =
              step.kind === 'again'
                ? { kind: 'gemm' as const, ...last, options: 'default' as const, stream: 0 }
                : step.kind === 'gemm'
                  ? { ...step, a: step.operands[0]!, b: step.operands[1]!, c: step.operands[2]! }
                  : step;
            if (s.kind === 'current') current = streams[s.stream]!;
            else if (s.kind === 'dispose') arrays[s.array]!.buffer.disposed = true;
            else if (s.kind === 'tf32') {
              tf32 = s.on;
              setMathMode(tf32 ? 'tf32' : 'default');
            } else if (s.kind === 'workspace') {
              workspace = s.bytes;
              setWorkspaceSize(workspace);
            } else if (s.kind === 'forget') vi.advanceTimersByTime(1000);
            else {
              last = { a: s.a, b: s.b, c: s.c };
              const [a, b, c] = [arrays[s.a]!, arrays[s.b]!, arrays[s.c]!];
              const options =
                s.options === 'default'
                  ? undefined
                  : s.options === 'empty'
                    ? {}
                    : s.options === 'transA'
                      ? { transA: true }
                      : s.options === 'alpha'
                        ? { alpha: 2 }
                        : { stream: streams[s.stream]! };
              const stream =
                s.options === 'stream' ? s.stream : streams.indexOf(current as (typeof streams)[0]);
              const want = expected(
                a,
                b,
                c,
                s.options === 'transA',
                s.options === 'alpha' ? 2 : 1,
                stream,
                tf32,
                workspace,
              );
              record.problems.length = record.matmuls.length = record.scalars.length = 0;
              calls++;
              const key = `${s.a} ${s.b} ${s.c} ${stream}`;
              if (s.options === 'default' && passed === key && want.error === undefined) repeated++;
              passed = s.options === 'default' && want.error === undefined ? key : undefined;
              if (want.error !== undefined) {
                const thrown = (() => {
                  try {
                    gemm(a.array, b.array, c.array, options);
                  } catch (error) {
                    return error;
                  }
                  return undefined;
                })();
                expect(thrown).toBeInstanceOf(want.error);
                if (want.error !== DisposedError) expect(thrown).not.toBeInstanceOf(DisposedError);
                expect(record.matmuls).toEqual([]);
              } else {
                expect(gemm(a.array, b.array, c.array, options)).toBe(c.array);
                expect(record.problems).toEqual([want.problem]);
                expect(record.matmuls).toEqual([want.matmul]);
                expect(record.scalars).toEqual([want.scalars]);
                issued++;
              }
            }
          }
        },
      ),
      { numRuns: 1000 },
    );
    // The sequences made both kinds of call many times over (the checks above ran).
    expect(calls).toBeGreaterThan(10_000);
    expect(issued).toBeGreaterThan(1500);
    expect(repeated).toBeGreaterThan(400);
  });
});
