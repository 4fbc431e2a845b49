import { readFileSync } from 'node:fs';
import { DeviceArray, DisposedError, type Stream } from '@cuda-tasks/cudadrv';
import { setCurrentStreamProvider } from '@cuda-tasks/cudadrv/internal';
import { findCudaHeader, hostOnlyArray } from '@cuda-tasks/testing';
import { beforeEach, describe, expect, it, vi } from 'vitest';

// cuSOLVER, the handle cache, device buffers and the operation observer replaced by test
// doubles that record what the envelope does, in order. The `_bufferSize` double writes its
// answer through the out-pointer it is given (koffi's native memory works without a GPU).
const fake = vi.hoisted(() => {
  const events: string[] = [];
  const state = { lwork: 5, status: 0, queryStatus: 0, nextAddress: 0x1000n };
  // The issue worker: whether it takes a call of a size, and what it answers.
  const worker = {
    threshold: 1024,
    ready: true,
    reply: {} as import('./issue-worker.js').OffThreadReply,
    /** Runs while the worker holds the call (before its reply). */
    during: undefined as (() => void) | undefined,
    /** Whether a stream's disposal kept its native stream (the worker outlived the wait). */
    kept: false,
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
  // issueFailureError is the real one: it rebuilds the worker's failures with the checks above.
  ...(await importOriginal<typeof import('./issue-worker.js')>()),
  offThreadReady: (size: number) => size >= fake.worker.threshold && fake.worker.ready,
  nativeStreamKept: () => fake.worker.kept,
  issueOffThread: async (
    symbol: string,
    stream: { context: { handle: bigint }; ffiHandle: bigint },
    args: unknown[],
  ) => {
    fake.events.push(
      `worker ${symbol}(${args.join(', ')}) on context ${stream.context.handle} stream ${stream.ffiHandle}`,
    );
    await Promise.resolve();
    fake.worker.during?.();
    fake.events.push('worker replied');
    return fake.worker.reply;
  },
}));

import { CusolverError } from './errors.js';
import { solve } from './lu.js';
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

const stream = {
  context: { makeCurrent: () => undefined, handle: 11n },
  ffiHandle: 13n,
  capture: null,
} as unknown as Stream;
const events = () => fake.events.splice(0);

beforeEach(() => {
  events();
  Object.assign(fake.state, { lwork: 5, status: 0, queryStatus: 0, nextAddress: 0x1000n });
  Object.assign(fake.worker, {
    threshold: 1024,
    ready: true,
    reply: {},
    during: undefined,
    kept: false,
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

describe('getrf for an awaiting caller (the issue worker)', () => {
  it('at the threshold: sizes and allocates here, issues from the worker, frees after its reply', async () => {
    await getrf(stream, 'float64', 1024, 2048, 100n, 1024, 200n, 300n, true);
    expect(events()).toEqual([
      'cusolverDnDgetrf_bufferSize(7, 1024, 2048, 100, 1024, lwork)',
      'allocate 40 bytes at 4096',
      'begin cusolver.getrf',
      // The worker's own handle: the arguments after it, the caller's context and stream.
      'worker cusolverDnDgetrf(1024, 2048, 100, 1024, 4096, 200, 300) on context 11 stream 13',
      'worker replied',
      'end cusolver.getrf',
      'free 4096',
    ]);
  });

  it('below the threshold (min(m, n)), while the worker is not ready, or capturing: inline', async () => {
    // Inline: issued before it returns, and nothing to await (the caller goes straight on).
    expect(getrf(stream, 'float32', 1023, 4096, 100n, 1023, 200n, 300n, true)).toBeUndefined();
    fake.worker.ready = false;
    expect(getrf(stream, 'float32', 2048, 2048, 100n, 2048, 200n, 300n, true)).toBeUndefined();
    fake.worker.ready = true;
    const capturing = { ...stream, capture: {} } as unknown as Stream;
    expect(getrf(capturing, 'float32', 2048, 2048, 100n, 2048, 200n, 300n, true)).toBeUndefined();
    const calls = events().filter((e) => /getrf\(/.test(e));
    expect(calls).toEqual([
      'cusolverDnSgetrf(7, 1023, 4096, 100, 1023, 4096, 200, 300)',
      'cusolverDnSgetrf(7, 2048, 2048, 100, 2048, 8192, 200, 300)',
      'cusolverDnSgetrf(7, 2048, 2048, 100, 2048, 12288, 200, 300)',
    ]);
  });

  it("the worker's failing status is a CusolverError naming its call, after the free", async () => {
    fake.worker.reply = { error: { name: 'CusolverError', status: 7, call: 'cusolverDnSgetrf' } };
    const failed = getrf(stream, 'float32', 2048, 2048, 100n, 2048, 200n, 300n, true);
    await expect(failed).rejects.toBeInstanceOf(CusolverError);
    await expect(failed).rejects.toMatchObject({
      call: 'cusolverDnSgetrf',
      status: 'CUSOLVER_STATUS_INTERNAL_ERROR',
    });
    expect(events().slice(-2)).toEqual(['end cusolver.getrf', 'free 4096']);
  });

  it('a stream disposed while the worker holds the call: the failure it reported, the workspace freed', async () => {
    const disposable = { ...stream, disposed: false, toString: () => 'Stream(d)' };
    fake.worker.during = () => {
      disposable.disposed = true;
    };
    fake.worker.reply = { error: { name: 'CusolverError', status: 7, call: 'cusolverDnDgetrf' } };
    const failed = getrf(
      disposable as unknown as Stream,
      'float64',
      2048,
      2048,
      100n,
      2048,
      200n,
      300n,
      true,
    );
    await expect(failed).rejects.toBeInstanceOf(CusolverError);
    expect(events().slice(-2)).toEqual(['end cusolver.getrf', 'free 4096']);
  });

  it('a stream disposed while the worker was still issuing past the wait (native stream kept): its kernels are waited for before the free', async () => {
    const disposable = {
      ...stream,
      disposed: false,
      context: { ...stream.context, makeCurrent: () => fake.events.push('make current') },
      toString: () => 'Stream(d)',
    };
    fake.worker.during = () => {
      disposable.disposed = true;
      fake.worker.kept = true;
    };
    const failed = getrf(
      disposable as unknown as Stream,
      'float64',
      2048,
      2048,
      100n,
      2048,
      200n,
      300n,
      true,
    );
    await expect(failed).rejects.toBeInstanceOf(DisposedError);
    // The disposal's drain came before the worker's kernels: the free waits for them on the
    // native stream the disposal left alive.
    expect(events().slice(-4)).toEqual([
      'end cusolver.getrf',
      'make current',
      'synchronize stream 13',
      'free 4096',
    ]);
  });

  it('a stream disposed before the worker issued (nothing issued): a DisposedError naming it, the workspace freed', async () => {
    const disposable = { ...stream, disposed: false, toString: () => 'Stream(d)' };
    fake.worker.during = () => {
      disposable.disposed = true;
    };
    fake.worker.reply = { cancelled: true };
    const failed = getrf(
      disposable as unknown as Stream,
      'float64',
      2048,
      2048,
      100n,
      2048,
      200n,
      300n,
      true,
    );
    await expect(failed).rejects.toBeInstanceOf(DisposedError);
    await expect(failed).rejects.toThrow(
      /cusolverDnDgetrf's stream Stream\(d\) \(disposed before the issue worker issued the call: nothing was issued\) has been disposed/,
    );
    expect(events().slice(-2)).toEqual(['end cusolver.getrf', 'free 4096']);
  });

  it("the task's signal aborting during the worker's getrf: its reason, the workspace freed after the worker's kernels, no getrs", async () => {
    const controller = new AbortController();
    const reason = new Error('deadline');
    const previous = setCurrentStreamProvider(null, null, () => controller.signal);
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
      fake.worker.during = () => controller.abort(reason);
      const n = 1024;
      const a = hostOnlyArray('float64', [n, n], { context: stream.context });
      const b = hostOnlyArray('float64', [n, 1], { context: stream.context });
      await expect(solve(a, b, { stream })).rejects.toBe(reason);
      const log = events();
      expect(log.filter((e) => /getrs/.test(e))).toEqual([]);
      // Freed after the reply (on the stream: ordered after the worker's kernels).
      expect(log.slice(-3)).toEqual(['worker replied', 'end cusolver.getrf', 'free 4096']);
    } finally {
      copies.mockRestore();
      empties.mockRestore();
      setCurrentStreamProvider(previous.stream, previous.device, previous.signal);
    }
  });

  it('a driver call failing in the worker is a CudaError naming that call', async () => {
    fake.worker.reply = { error: { name: 'CudaError', status: 1, call: 'cuCtxSetCurrent' } };
    await expect(
      getrf(stream, 'float64', 2048, 2048, 100n, 2048, 200n, 300n, true),
    ).rejects.toThrow('driver check: cuCtxSetCurrent gave CUresult 1');
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
