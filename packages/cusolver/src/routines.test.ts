import { readFileSync } from 'node:fs';
import { DeviceArray } from '@cuda-tasks/cudadrv';
import { setCurrentStreamProvider } from '@cuda-tasks/cudadrv/internal';
import { findCudaHeader, hostOnlyArray, streamDouble } from '@cuda-tasks/testing';
import { beforeEach, describe, expect, it, vi } from 'vitest';

// cuSOLVER, the handle cache, device buffers and the operation observer replaced by test
// doubles that record what the envelope does, in order. The `_bufferSize` double writes its
// answer through the out-pointer it is given (koffi's native memory works without a GPU).
const fake = vi.hoisted(() => {
  const events: string[] = [];
  const state = { lwork: 5, status: 0, queryStatus: 0, nextAddress: 0x1000n };
  // The issue worker: whether it takes a call of a size, and how its answer goes.
  const worker = {
    threshold: 1024,
    ready: true,
    /** Runs while the worker holds the call (before its answer). */
    during: undefined as (() => void) | undefined,
    /** What the call rejects with, if anything. */
    failure: undefined as Error | undefined,
  };
  const record =
    (name: string, status: () => number) =>
    (...args: unknown[]) => {
      events.push(`${name}(${args.join(', ')})`);
      return status();
    };
  const query =
    (name: string) =>
    (...args: unknown[]) => {
      const lwork = args.at(-1) as bigint;
      const k = require('koffi') as typeof import('koffi');
      new DataView(k.view(lwork, 4)).setInt32(0, state.lwork, true);
      events.push(`${name}(${args.slice(0, -1).join(', ')}, lwork)`);
      return state.queryStatus;
    };
  const api = new Proxy(
    {},
    {
      get: (_target, name: string) =>
        name.endsWith('_bufferSize') ? query(name) : record(name, () => state.status),
    },
  );
  const DeviceBuffer = {
    allocate(bytes: number) {
      const address = state.nextAddress;
      state.nextAddress += 0x1000n;
      events.push(`allocate ${bytes} bytes at ${address}`);
      return {
        // As the real one: a disposed stream takes no use (a DisposedError naming it).
        useOn: (stream: { disposed?: boolean }) => {
          if (stream.disposed === true) throw new Error(`DisposedError: ${stream} (useOn)`);
          return address;
        },
        dispose: () => events.push(`free ${address}`),
      };
    },
  };
  return {
    api,
    events,
    state,
    worker,
    DeviceBuffer,
    beginOperation: (name: string) => {
      events.push(`begin ${name}`);
      return name;
    },
    endOperation: (token: string) => events.push(`end ${token}`),
  };
});

vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => ({
  ...(await importOriginal<typeof import('@cuda-tasks/cudadrv')>()),
  DeviceBuffer: fake.DeviceBuffer,
  // Only the stream synchronization of a kept native stream reaches the driver here.
  driver: () => ({
    cuStreamSynchronize: (handle: unknown) => {
      fake.events.push(`synchronize stream ${handle}`);
      return 0;
    },
  }),
  // The driver's CUresult check, without a driver to name the result.
  check: (result: number, call: string) => {
    if (result !== 0) throw new Error(`driver check: ${call} gave CUresult ${result}`);
  },
}));
vi.mock('@cuda-tasks/cudadrv/internal', async (importOriginal) => ({
  ...(await importOriginal<typeof import('@cuda-tasks/cudadrv/internal')>()),
  beginOperation: fake.beginOperation,
  endOperation: fake.endOperation,
}));
vi.mock('./ffi/cusolver.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./ffi/cusolver.js')>()),
  cusolver: () => fake.api,
}));
vi.mock('./handle.js', () => ({ handles: { get: () => 7n } }));
vi.mock('./issue-worker.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./issue-worker.js')>()),
  offThreadReady: (size: number) => size >= fake.worker.threshold && fake.worker.ready,
  factorOffThread: async (
    stream: { ffiHandle: bigint },
    factors: DeviceArray,
    _pivots: DeviceArray,
    _info: DeviceArray,
    m: number,
    n: number,
    signal: AbortSignal | undefined,
  ) => {
    fake.events.push(
      `worker getrf ${factors.dtype} ${m}x${n} on stream ${stream.ffiHandle}${signal === undefined ? '' : ', with a signal'}`,
    );
    await Promise.resolve();
    fake.worker.during?.();
    fake.events.push('worker answered');
    if (fake.worker.failure !== undefined) throw fake.worker.failure;
  },
}));

import { CusolverError } from './errors.js';
import { lu, solve } from './lu.js';
import {
  GEQRF,
  GESVD,
  GETRF,
  GETRS,
  gesvd,
  getrf,
  getrs,
  ORGQR,
  POTRF,
  POTRS,
  potrf,
  type SolverFamily,
  SYEVD,
  syevd,
} from './routines.js';

const stream = streamDouble({
  context: { makeCurrent: () => undefined, handle: 11n },
  ffiHandle: 13n,
  capture: null,
});
const events = () => fake.events.splice(0);

beforeEach(() => {
  events();
  Object.assign(fake.state, { lwork: 5, status: 0, queryStatus: 0, nextAddress: 0x1000n });
  Object.assign(fake.worker, {
    threshold: 1024,
    ready: true,
    during: undefined,
    failure: undefined,
  });
});

describe('the workspace envelope', () => {
  it('sizes the workspace, allocates it on the stream, calls the routine with it, frees it', () => {
    getrf(stream, 'float64', 6, 4, 100n, 8, 200n, 300n);
    expect(events()).toEqual([
      'cusolverDnDgetrf_bufferSize(7, 6, 4, 100, 8, lwork)',
      'allocate 40 bytes at 4096', // 5 doubles
      'begin cusolver.getrf',
      'cusolverDnDgetrf(7, 6, 4, 100, 8, 4096, 200, 300)',
      'end cusolver.getrf',
      'free 4096',
    ]);
  });

  it('passes the queried size to routines that take it, and allocates one element for none', () => {
    fake.state.lwork = 0;
    potrf(stream, 'float32', true, 3, 100n, 3, 300n);
    expect(events()).toEqual([
      'cusolverDnSpotrf_bufferSize(7, 1, 3, 100, 3, lwork)',
      'allocate 4 bytes at 4096',
      'begin cusolver.potrf',
      'cusolverDnSpotrf(7, 1, 3, 100, 3, 4096, 0, 300)',
      'end cusolver.potrf',
      'free 4096',
    ]);
  });

  it('gives gesvd its rwork after at least one workspace element', () => {
    fake.state.lwork = 0;
    gesvd(stream, 'float32', false, 5, 3, 100n, 5, 110n, 120n, 5, 130n, 3, 300n);
    const address = 4096;
    expect(events()).toEqual([
      'cusolverDnSgesvd_bufferSize(7, 5, 3, lwork)',
      `allocate ${(1 + 3) * 4} bytes at ${address}`,
      'begin cusolver.gesvd',
      // jobu = jobvt = 'S' (83); work, lwork 1, rwork one float later.
      `cusolverDnSgesvd(7, 83, 83, 5, 3, 100, 5, 110, 120, 5, 130, 3, ${address}, 1, ${address + 4}, 300)`,
      'end cusolver.gesvd',
      `free ${address}`,
    ]);
  });

  it('calls a routine without workspace directly', () => {
    getrs(stream, 'float32', true, 4, 2, 100n, 4, 200n, 150n, 4, 300n);
    expect(events()).toEqual([
      'begin cusolver.getrs',
      'cusolverDnSgetrs(7, 1, 4, 2, 100, 4, 200, 150, 4, 300)',
      'end cusolver.getrs',
    ]);
  });

  it('a failed routine ends the operation, frees the workspace and names the routine', () => {
    fake.state.status = 7;
    let thrown: unknown;
    try {
      syevd(stream, 'float64', false, 3, 100n, 3, 110n, 300n);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(CusolverError);
    expect((thrown as CusolverError).call).toBe('cusolverDnDsyevd');
    expect((thrown as CusolverError).status).toBe('CUSOLVER_STATUS_INTERNAL_ERROR');
    expect(events().slice(-3)).toEqual([
      // jobz = CUSOLVER_EIG_MODE_VECTOR (1), uplo = lower (0)
      'cusolverDnDsyevd(7, 1, 0, 3, 100, 3, 110, 4096, 5, 300)',
      'end cusolver.syevd',
      'free 4096',
    ]);
  });

  it('a failed query allocates nothing and begins no operation', () => {
    fake.state.queryStatus = 3;
    expect(() => getrf(stream, 'float32', 2, 2, 100n, 2, 200n, 300n)).toThrow(
      /cusolverDnSgetrf_bufferSize failed: CUSOLVER_STATUS_INVALID_VALUE/,
    );
    expect(events()).toEqual(['cusolverDnSgetrf_bufferSize(7, 2, 2, 100, 2, lwork)']);
  });
});

describe('lu and solve: large factorizations go to the issue worker', () => {
  /** Runs `fn` with DeviceArray copies and allocations as host-only arrays (no GPU here). */
  async function withHostArrays<T>(fn: () => Promise<T>): Promise<T> {
    const copies = vi.spyOn(DeviceArray.prototype, 'copy').mockImplementation(function (
      this: DeviceArray,
    ) {
      return hostOnlyArray(this.dtype, this.shape, { context: stream.context }) as never;
    });
    const empties = vi.spyOn(DeviceArray, 'empty').mockImplementation((dtype, shape) =>
      hostOnlyArray(dtype, typeof shape === 'number' ? [shape] : shape, {
        context: stream.context,
      }),
    );
    try {
      return await fn();
    } finally {
      copies.mockRestore();
      empties.mockRestore();
    }
  }

  it('at the threshold: the worker factors inside the trace on the caller’s stream, nothing issued here for it', async () => {
    const n = 1024;
    const a = hostOnlyArray('float64', [n, n], { context: stream.context });
    const b = hostOnlyArray('float64', [n, 1], { context: stream.context });
    await withHostArrays(() => solve(a, b, { stream }).catch(() => undefined));
    const log = events();
    const begin = log.indexOf('begin cusolver.getrf');
    expect(begin).toBeGreaterThanOrEqual(0);
    expect(log.slice(begin, begin + 4)).toEqual([
      'begin cusolver.getrf',
      'worker getrf float64 1024x1024 on stream 13',
      'worker answered',
      'end cusolver.getrf',
    ]);
    expect(log.filter((e) => /^cusolverDnDgetrf/.test(e))).toEqual([]);
  });

  it('below the threshold (min(m, n)), while the worker is not ready, or with { info }: issued here', async () => {
    const run = (m: number, n: number, options: Record<string, unknown> = {}) =>
      withHostArrays(async () => {
        const a = hostOnlyArray('float32', [m, n], { context: stream.context });
        await lu(a, { stream, ...options }).catch(() => undefined);
        return events();
      });
    for (const log of [
      await run(1023, 4096),
      await (async () => {
        fake.worker.ready = false;
        return run(2048, 2048);
      })(),
      await (async () => {
        fake.worker.ready = true;
        const info = hostOnlyArray('int32', [1], { context: stream.context });
        return run(2048, 2048, { info });
      })(),
    ]) {
      expect(log.filter((e) => e.startsWith('worker'))).toEqual([]);
      expect(log.filter((e) => /^cusolverDnSgetrf\(/.test(e))).toHaveLength(1);
    }
  });

  it('the worker’s failure rejects the call, the trace closed; the task’s signal goes with the call', async () => {
    const failure = new CusolverError(7, 'CUSOLVER_STATUS_INTERNAL_ERROR', 'cusolverDnDgetrf', 'x');
    fake.worker.failure = failure;
    const controller = new AbortController();
    const previous = setCurrentStreamProvider(null, null, () => controller.signal);
    try {
      const n = 2048;
      const a = hostOnlyArray('float64', [n, n], { context: stream.context });
      await expect(withHostArrays(() => lu(a, { stream }))).rejects.toBe(failure);
      const log = events();
      expect(log).toContain('worker getrf float64 2048x2048 on stream 13, with a signal');
      expect(log.indexOf('end cusolver.getrf')).toBeGreaterThan(log.indexOf('worker answered'));
    } finally {
      setCurrentStreamProvider(previous.stream, previous.device, previous.signal);
    }
  });
});

const FAMILIES: Record<string, SolverFamily> = {
  GETRF,
  GETRS,
  POTRF,
  POTRS,
  GEQRF,
  ORGQR,
  GESVD,
  SYEVD,
};

describe('the routine tables', () => {
  it('record the operation names traces have always shown, with float and double sizes', () => {
    for (const [name, family] of Object.entries(FAMILIES)) {
      const operation = `cusolver.${name.toLowerCase()}`;
      expect(family.float32).toMatchObject({ operation, elementBytes: 4 });
      expect(family.float64).toMatchObject({ operation, elementBytes: 8 });
    }
  });
});

const headerDirectory = findCudaHeader('cusolverDn.h');

describe.runIf(headerDirectory !== undefined)('the routine tables against cusolverDn.h', () => {
  const source = () => readFileSync(`${headerDirectory}/cusolverDn.h`, 'utf8');

  /** The parameter list of `symbol`'s prototype, white space folded. */
  function parameters(header: string, symbol: string): string {
    const match = new RegExp(`\\b${symbol}\\s*\\(([^)]*)\\)`).exec(header);
    if (match === null) throw new Error(`${symbol} is not declared`);
    return match[1]!.replace(/\s+/g, ' ');
  }

  it('give float32 matrices to float routines and float64 matrices to double routines', () => {
    const header = source();
    for (const [name, family] of Object.entries(FAMILIES)) {
      for (const [routine, own, other] of [
        [family.float32, 'float', 'double'],
        [family.float64, 'double', 'float'],
      ] as const) {
        for (const symbol of [routine.symbol, routine.bufferSize]) {
          if (symbol === undefined) continue;
          const list = parameters(header, symbol);
          // gesvd's query takes no matrix: only its routine names the precision.
          if (symbol !== GESVD.float32.bufferSize && symbol !== GESVD.float64.bufferSize) {
            expect(list, `${name} ${symbol}`).toMatch(new RegExp(`\\b${own} ?\\*`));
          }
          expect(list, `${name} ${symbol}`).not.toMatch(new RegExp(`\\b${other}\\b`));
        }
      }
    }
  });

  it('query a workspace exactly where the routine takes one', () => {
    const header = source();
    for (const [name, family] of Object.entries(FAMILIES)) {
      for (const routine of [family.float32, family.float64]) {
        const takesWorkspace = /\*\s*(Workspace|work)\b/i.test(parameters(header, routine.symbol));
        expect(routine.bufferSize !== undefined, name).toBe(takesWorkspace);
      }
    }
  });
});
