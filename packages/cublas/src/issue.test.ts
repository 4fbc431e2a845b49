import { recordingOperand, standInStream } from '@cuda-tasks/testing';
import { beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';

// cuBLAS, cuBLASLt, cuBLASLt's planner, the operation observer and the one-element result
// arrays of the reductions replaced by doubles that record, in order, what a routine does:
// `issue` entered, the handle taken, each operand declared used, the pointer mode set, the
// trace begun, the native call with its arguments, the trace ended. What is tested: every
// level 1, 2 and 3 routine goes through the one envelope of issue.ts, in its order, and a
// failing status throws after the trace has ended.
const fake = vi.hoisted(() => {
  const events: string[] = [];
  const state = {
    /** The entry point whose calls fail (CUBLAS_STATUS_EXECUTION_FAILED); the others succeed. */
    failing: undefined as string | undefined,
    plan: undefined as undefined | Record<string, unknown>,
    /** Host scalar arena addresses, shown as 'alpha' and 'beta' in the recorded calls. */
    names: new Map<unknown, string>(),
  };
  const record =
    (name: string) =>
    (...args: unknown[]) => {
      events.push(`${name}(${args.map((a) => state.names.get(a) ?? String(a)).join(', ')})`);
      return name === state.failing ? 13 : 0;
    };
  const api = new Proxy(
    {},
    {
      get: (_target, name: string) => {
        if (name === 'cublasCreate_v2') {
          return (out: bigint[]) => {
            out[0] = 5n;
            return 0;
          };
        }
        // What making and binding the handle calls: not part of a routine's envelope.
        if (['cublasSetMathMode', 'cublasSetStream_v2', 'cublasDestroy_v2'].includes(name)) {
          return () => 0;
        }
        return record(name);
      },
    },
  );
  return {
    events,
    state,
    api,
    lt: { cublasLtMatmul: record('cublasLtMatmul') },
    beginOperation: (name: string) => {
      events.push(`begin ${name}`);
      return name;
    },
    endOperation: (token: string) => events.push(`end ${token}`),
  };
});

/** A float32 operand whose uses on the stream are recorded as `<name> <read|write>`. */
function operand(name: string, shape: readonly number[], address: number): any {
  const { array } = recordingOperand(shape) as { array: Record<string, unknown> };
  array.ffiAddressOn = (_stream: unknown, mode?: string) => {
    fake.events.push(`${name} ${mode ?? 'write'}`);
    return address;
  };
  array.toHost = async () => [3];
  array.dispose = () => fake.events.push(`${name} disposed`);
  return array;
}

vi.mock('@cuda-tasks/cudadrv/internal', async (importOriginal) => ({
  ...(await importOriginal<typeof import('@cuda-tasks/cudadrv/internal')>()),
  beginOperation: fake.beginOperation,
  endOperation: fake.endOperation,
}));
vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => {
  const original = await importOriginal<typeof import('@cuda-tasks/cudadrv')>();
  // matmul's result and the reductions' one-element result: operands of their own.
  class DeviceArray extends original.DeviceArray {
    static override empty(_dtype: string, shape: readonly number[]): never {
      return operand('result', shape, 0x900) as never;
    }
  }
  return { ...original, DeviceArray };
});
vi.mock('./ffi/cublas.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./ffi/cublas.js')>()),
  cublas: () => fake.api,
}));
vi.mock('./ffi/cublaslt.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./ffi/cublaslt.js')>()),
  cublasLt: () => fake.lt,
}));
vi.mock('./lt.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./lt.js')>()),
  ltPlan: () => fake.state.plan,
}));
vi.mock('./issue.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('./issue.js')>();
  return {
    ...original,
    issue: (...args: Parameters<typeof original.issue>) => {
      fake.events.push(`issue ${args[1].operation}`);
      original.issue(...args);
    },
  };
});

import { CublasError } from './errors.js';
import { blas, handle, setWorkspaceSize } from './handle.js';
import {
  asum,
  axpy,
  dot,
  gemm,
  gemmEx,
  gemmStridedBatched,
  gemv,
  iamax,
  matmul,
  nrm2,
  scal,
  setGemmBackend,
} from './index.js';
import { scalars } from './scalars.js';

// No workspace (and a stream outside any capture): binding the handle allocates nothing.
const stream = Object.assign(standInStream(), { capture: null, ffiHandle: 77 });
const events = () => fake.events.splice(0);
const x = operand('x', [8], 0x100);
const y = operand('y', [8], 0x200);
const a = operand('a', [4, 3], 0x300);
const b = operand('b', [3, 5], 0x400);
const c = operand('c', [4, 5], 0x500);
const a3 = operand('a', [4, 3, 2], 0x300);
const b3 = operand('b', [3, 5, 2], 0x400);
const c3 = operand('c', [4, 5, 2], 0x500);
const m = operand('a', [8, 8], 0x300);

beforeAll(() => {
  setWorkspaceSize(0);
  handle(stream); // the handle made and bound once, before any routine's envelope is recorded
  const arena = scalars();
  fake.state.names.set(arena.alpha, 'alpha').set(arena.beta, 'beta');
  const take = blas.handle.bind(blas);
  const bind = blas.binding.bind(blas);
  vi.spyOn(blas, 'handle').mockImplementation((s) => {
    fake.events.push('handle');
    return take(s);
  });
  vi.spyOn(blas, 'binding').mockImplementation((s) => {
    fake.events.push('binding');
    return bind(s);
  });
});

beforeEach(() => {
  events();
  fake.state.failing = undefined;
  fake.state.plan = undefined;
  setGemmBackend('cublas');
});

const H = '5'; // the task's cublasHandle_t as the double made it

/** The recorded envelope of a routine that writes through host scalars. */
const envelope = (operation: string, uses: string[], call: string) => [
  `issue ${operation}`,
  'handle',
  ...uses,
  `begin ${operation}`,
  call,
  `end ${operation}`,
];

/** The recorded envelope of a reduction (device pointer mode around the call). */
const reduction = (operation: string, uses: string[], call: string) => [
  `issue ${operation}`,
  'handle',
  ...uses,
  'result write',
  `cublasSetPointerMode_v2(${H}, 1)`,
  `begin ${operation}`,
  call,
  `end ${operation}`,
  `cublasSetPointerMode_v2(${H}, 0)`,
  'result disposed',
];

/** The recorded envelope of a float32 gemm through cuBLASLt, `taken` its step 1. */
const ltEnvelope = (taken: string[]) => [
  'issue cublas.sgemm',
  ...taken,
  'a read',
  'b read',
  'c write',
  'begin cublas.sgemm',
  'cublasLtMatmul(lt, desc, alpha, 768, aDesc, 1024, bDesc, beta, 1280, cDesc, 1280, cDesc, algo, 0, 0, 77)',
  'end cublas.sgemm',
];

describe('every cuBLAS routine goes through the one issue envelope, in its order', () => {
  const cases: [string, () => unknown, string[]][] = [
    [
      'axpy',
      () => axpy(2, x, y, { stream }),
      envelope(
        'cublas.saxpy',
        ['x read', 'y write'],
        `cublasSaxpy_v2(${H}, 8, alpha, 256, 1, 512, 1)`,
      ),
    ],
    [
      'scal',
      () => scal(2, x, { stream }),
      envelope('cublas.sscal', ['x write'], `cublasSscal_v2(${H}, 8, alpha, 256, 1)`),
    ],
    [
      'dot',
      () => dot(x, y, { stream }),
      reduction(
        'cublas.sdot',
        ['x read', 'y read'],
        `cublasSdot_v2(${H}, 8, 256, 1, 512, 1, 2304)`,
      ),
    ],
    [
      'nrm2',
      () => nrm2(x, { stream }),
      reduction('cublas.snrm2', ['x read'], `cublasSnrm2_v2(${H}, 8, 256, 1, 2304)`),
    ],
    [
      'asum',
      () => asum(x, { stream }),
      reduction('cublas.sasum', ['x read'], `cublasSasum_v2(${H}, 8, 256, 1, 2304)`),
    ],
    [
      'iamax',
      () => iamax(x, { stream }),
      reduction('cublas.isamax', ['x read'], `cublasIsamax_v2(${H}, 8, 256, 1, 2304)`),
    ],
    [
      'gemv',
      () => gemv(m, x, y, { stream, transA: true, alpha: 2, beta: 1 }),
      envelope(
        'cublas.sgemv',
        ['a read', 'x read', 'y write'],
        `cublasSgemv_v2(${H}, 1, 8, 8, alpha, 768, 8, 256, 1, beta, 512, 1)`,
      ),
    ],
    [
      'gemm',
      () => gemm(a, b, c, { stream }),
      envelope(
        'cublas.sgemm',
        ['a read', 'b read', 'c write'],
        `cublasSgemm_v2(${H}, 0, 0, 4, 5, 3, alpha, 768, 4, 1024, 3, beta, 1280, 4)`,
      ),
    ],
    [
      'matmul',
      () => matmul(a, b, { stream }),
      envelope(
        'cublas.sgemm',
        ['a read', 'b read', 'result write'],
        `cublasSgemm_v2(${H}, 0, 0, 4, 5, 3, alpha, 768, 4, 1024, 3, beta, 2304, 4)`,
      ),
    ],
    [
      'gemmStridedBatched',
      () => gemmStridedBatched(a3, b3, c3, { stream }),
      envelope(
        'cublas.sgemmStridedBatched',
        ['a read', 'b read', 'c write'],
        `cublasSgemmStridedBatched(${H}, 0, 0, 4, 5, 3, alpha, 768, 4, 12, 1024, 3, 15, beta, 1280, 4, 20, 2)`,
      ),
    ],
    [
      'gemmEx',
      () => gemmEx(a, b, c, { stream }),
      // float32 operands (CUDA_R_32F = 0), CUBLAS_COMPUTE_32F (68), CUBLAS_GEMM_DEFAULT (-1).
      envelope(
        'cublas.gemmEx',
        ['a read', 'b read', 'c write'],
        `cublasGemmEx(${H}, 0, 0, 4, 5, 3, alpha, 768, 0, 4, 1024, 0, 3, beta, 1280, 0, 4, 68, -1)`,
      ),
    ],
  ];

  for (const [name, call, expected] of cases) {
    it(`${name}: handle, operands, trace begun, the call, trace ended`, async () => {
      await call();
      expect(events()).toEqual(expected);
    });
  }

  it('the reductions resolve to the value the stream computed (iamax from 1-based)', async () => {
    expect(await dot(x, y, { stream })).toBe(3);
    expect(await iamax(x, { stream })).toBe(2);
  });

  it('gemm through cuBLASLt: no cuBLAS handle for an algorithm without workspace', () => {
    setGemmBackend('cublaslt');
    fake.state.plan = planDouble(0);
    gemm(a, b, c, { stream });
    expect(events()).toEqual(ltEnvelope([]));
  });

  it('gemm through cuBLASLt with workspace: the handle’s binding taken first', () => {
    setGemmBackend('cublaslt');
    fake.state.plan = planDouble(1 << 20);
    gemm(a, b, c, { stream });
    // setWorkspaceSize(0): the binding has no workspace of its own, so none is passed.
    expect(events()).toEqual(ltEnvelope(['binding']));
  });
});

describe('a failing status throws a CublasError naming the entry point, the trace ended first', () => {
  it('gemm through cuBLAS', () => {
    fake.state.failing = 'cublasSgemm_v2';
    expect(() => gemm(a, b, c, { stream })).toThrow(
      expect.objectContaining({ name: 'CublasError', call: 'cublasSgemm_v2' }),
    );
    expect(events().slice(-2)).toEqual([
      expect.stringMatching(/^cublasSgemm_v2\(/),
      'end cublas.sgemm',
    ]);
  });

  it('gemm through cuBLASLt reports cublasLtMatmul', () => {
    setGemmBackend('cublaslt');
    fake.state.plan = planDouble(0);
    fake.state.failing = 'cublasLtMatmul';
    expect(() => gemm(a, b, c, { stream })).toThrow(
      expect.objectContaining({ name: 'CublasError', call: 'cublasLtMatmul' }),
    );
    expect(events().at(-1)).toBe('end cublas.sgemm');
  });

  it('a reduction: trace ended and host pointer mode back before the error', async () => {
    fake.state.failing = 'cublasSdot_v2';
    const failure = dot(x, y, { stream });
    await expect(failure).rejects.toThrow(CublasError);
    await expect(failure).rejects.toThrow(expect.objectContaining({ call: 'cublasSdot_v2' }));
    expect(events().slice(-4)).toEqual([
      expect.stringMatching(/^cublasSdot_v2\(/),
      'end cublas.sdot',
      `cublasSetPointerMode_v2(${H}, 0)`,
      'result disposed',
    ]);
  });
});

/** A cuBLASLt plan double whose algorithm needs `workspaceNeeded` bytes. */
function planDouble(workspaceNeeded: number): Record<string, unknown> {
  return {
    usable: true,
    workspaceNeeded,
    ltHandle: 'lt',
    desc: 'desc',
    aDesc: 'aDesc',
    bDesc: 'bDesc',
    cDesc: 'cDesc',
    algo: 'algo',
  };
}
