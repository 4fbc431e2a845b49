import type { Context } from '@cuda-tasks/cudadrv';
import { beforeEach, describe, expect, it, vi } from 'vitest';

// cuBLASLt replaced by a test double that records its calls and reads the attribute values
// from the addresses it is given (koffi's native memory works without a GPU). What is tested:
// which plan a gemm problem gets, when cuBLASLt's heuristic runs, and what is destroyed.
const fake = vi.hoisted(() => {
  const calls: string[] = [];
  let next = 100n;
  const state = { heuristicCount: 1, heuristicState: 0, heuristicWorkspace: 0n };
  const read = (address: number | bigint, bytes: number) => {
    const k = require('koffi') as typeof import('koffi');
    const view = new DataView(k.view(BigInt(address), bytes));
    return bytes === 8 ? Number(view.getBigUint64(0, true)) : view.getInt32(0, true);
  };
  const api = {
    cublasLtCreate(out: unknown[]) {
      out[0] = next++;
      calls.push(`create ${out[0]}`);
      return 0;
    },
    cublasLtDestroy(handle: bigint) {
      calls.push(`destroy ${handle}`);
      return 0;
    },
    cublasLtMatmulDescCreate(out: unknown[], compute: number, scale: number) {
      out[0] = next++;
      calls.push(`desc ${compute} ${scale}`);
      return 0;
    },
    cublasLtMatmulDescDestroy(desc: bigint) {
      calls.push(`descDestroy ${desc}`);
      return 0;
    },
    cublasLtMatmulDescSetAttribute(_desc: bigint, attr: number, buf: number, size: number) {
      calls.push(`descAttr ${attr}=${read(buf, size)}`);
      return 0;
    },
    cublasLtMatrixLayoutCreate(
      out: unknown[],
      type: number,
      rows: number,
      cols: number,
      ld: number,
    ) {
      out[0] = next++;
      calls.push(`layout ${type} ${rows}x${cols} ld ${ld}`);
      return 0;
    },
    cublasLtMatrixLayoutDestroy(layout: bigint) {
      calls.push(`layoutDestroy ${layout}`);
      return 0;
    },
    cublasLtMatmulPreferenceCreate(out: unknown[]) {
      out[0] = next++;
      return 0;
    },
    cublasLtMatmulPreferenceDestroy: () => 0,
    cublasLtMatmulPreferenceSetAttribute(_pref: bigint, attr: number, buf: number, size: number) {
      calls.push(`pref ${attr}=${read(buf, size)}`);
      return 0;
    },
    cublasLtMatmulAlgoGetHeuristic(...args: unknown[]) {
      const result = BigInt(args[8] as number | bigint);
      const count = args[9] as number[];
      const k = require('koffi') as typeof import('koffi');
      const view = new DataView(k.view(result, 96));
      view.setBigUint64(64, state.heuristicWorkspace, true);
      view.setInt32(72, state.heuristicState, true);
      count[0] = state.heuristicCount;
      calls.push(`heuristic ${args[7]}`);
      return 0;
    },
  };
  return { api, calls, state };
});

vi.mock('./ffi/cublaslt.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./ffi/cublaslt.js')>()),
  cublasLt: () => fake.api,
}));

import {
  alignmentOf,
  computeTypeOf,
  type LtProblem,
  ltPlan,
  PLAN_LIMIT,
  planStatistics,
  releasePlans,
} from './lt.js';

const context = { name: 'context 0' } as unknown as Context;
const problem = (changes: Partial<LtProblem> = {}): LtProblem => ({
  float64: false,
  transA: 0,
  transB: 0,
  m: 8,
  n: 6,
  k: 4,
  lda: 8,
  ldb: 4,
  ldc: 8,
  alignA: 256,
  alignB: 256,
  alignC: 256,
  computeType: 68,
  workspaceBytes: 32 * 1024 * 1024,
  ...changes,
});
const calls = () => fake.calls.splice(0);

beforeEach(() => {
  releasePlans();
  calls();
  Object.assign(fake.state, { heuristicCount: 1, heuristicState: 0, heuristicWorkspace: 0n });
});

describe('cuBLASLt gemm plans', () => {
  it('builds a plan once per problem: descriptor, layouts of op(A) and op(B), preferences, one heuristic', () => {
    const plan = ltPlan(context, problem({ transA: 1, lda: 4, alignB: 4 }));
    expect(plan.usable).toBe(true);
    expect(calls()).toEqual([
      'create 100',
      'desc 68 0',
      'descAttr 3=1',
      'descAttr 4=0',
      // A is stored k x m (transposed), B k x n, C m x n; float32 is CUDA_R_32F (0).
      'layout 0 4x8 ld 4',
      'layout 0 4x6 ld 4',
      'layout 0 8x6 ld 8',
      `pref 1=${32 * 1024 * 1024}`,
      'pref 5=256',
      'pref 6=4',
      'pref 7=256',
      'pref 8=256',
      'heuristic 1',
    ]);
    // The same problem again: the same plan, no native call.
    expect(ltPlan(context, problem({ transA: 1, lda: 4, alignB: 4 }))).toBe(plan);
    expect(calls()).toEqual([]);
  });

  it('keeps plans apart by alignment, dtype, compute type and workspace, and finds each again', () => {
    const base = ltPlan(context, problem());
    const variants = [
      problem({ alignA: 16 }),
      problem({ float64: true, computeType: 70 }),
      problem({ computeType: 77 }),
      problem({ workspaceBytes: 0 }),
    ].map((p) => ltPlan(context, p));
    expect(new Set([base, ...variants]).size).toBe(5);
    expect(planStatistics().cached).toBe(5);
    const built = planStatistics().built;
    calls();
    // Back to each: from the cache (the last-call shortcut and the keyed map), nothing built.
    expect(ltPlan(context, problem())).toBe(base);
    expect(ltPlan(context, problem({ computeType: 77 }))).toBe(variants[2]);
    expect(planStatistics().built).toBe(built);
    expect(calls()).toEqual([]);
    // float64 layouts are CUDA_R_64F (1), and its descriptor FP64 compute with FP64 scalars.
    releasePlans();
    calls();
    ltPlan(context, problem({ float64: true, computeType: 70 }));
    expect(calls().filter((c) => c.startsWith('desc ') || c.startsWith('layout'))).toEqual([
      'desc 70 1',
      'layout 1 8x4 ld 8',
      'layout 1 4x6 ld 4',
      'layout 1 8x6 ld 8',
    ]);
  });

  it('marks a plan unusable when the heuristic finds nothing, or wants more workspace than given', () => {
    fake.state.heuristicCount = 0;
    expect(ltPlan(context, problem()).usable).toBe(false);
    fake.state.heuristicCount = 1;
    fake.state.heuristicWorkspace = 1024n;
    expect(ltPlan(context, problem({ workspaceBytes: 512 })).usable).toBe(false);
    const plan = ltPlan(context, problem({ workspaceBytes: 4096 }));
    expect(plan.usable).toBe(true);
    // What the algorithm needs, for gemm to decide whether it needs the handle's workspace.
    expect(plan.workspaceNeeded).toBe(1024);
    fake.state.heuristicWorkspace = 0n;
    expect(ltPlan(context, problem({ workspaceBytes: 8192 })).workspaceNeeded).toBe(0);
    fake.state.heuristicState = 15;
    expect(ltPlan(context, problem({ m: 9, lda: 9, ldc: 9 })).usable).toBe(false);
  });

  it(`keeps at most ${PLAN_LIMIT} plans per context, destroying the oldest`, () => {
    const first = ltPlan(context, problem({ m: 1, lda: 1, ldc: 1 }));
    for (let m = 2; m <= PLAN_LIMIT + 1; m++) ltPlan(context, problem({ m, lda: m, ldc: m }));
    expect(planStatistics().cached).toBe(PLAN_LIMIT);
    const destroyed = calls().filter((c) => c.includes('Destroy'));
    expect(destroyed).toEqual([
      `layoutDestroy ${first.owned.layouts[0]}`,
      `layoutDestroy ${first.owned.layouts[1]}`,
      `layoutDestroy ${first.owned.layouts[2]}`,
      `descDestroy ${first.owned.desc}`,
    ]);
    // The first problem comes back as a new plan.
    expect(ltPlan(context, problem({ m: 1, lda: 1, ldc: 1 }))).not.toBe(first);
  });

  it('releasePlans destroys every plan and the cuBLASLt handle of each context', () => {
    const other = { name: 'context 1' } as unknown as Context;
    ltPlan(context, problem());
    ltPlan(other, problem());
    calls();
    expect(releasePlans()).toBe(2);
    const destroyed = calls();
    expect(destroyed.filter((c) => c.startsWith('descDestroy')).length).toBe(2);
    expect(destroyed.filter((c) => c.startsWith('destroy ')).length).toBe(2);
    expect(planStatistics().cached).toBe(0);
  });
});

describe('alignment and compute type', () => {
  it('alignmentOf gives the largest power of two up to 256 that divides the address', () => {
    expect(alignmentOf(0x7f00_0000_1000)).toBe(256);
    expect(alignmentOf(0x7f00_0000_1004)).toBe(4);
    expect(alignmentOf(0x7f00_0000_1010)).toBe(16);
    expect(alignmentOf(0x7f00_0000_1080)).toBe(128);
    expect(alignmentOf((1n << 60n) + 8n)).toBe(8);
    expect(alignmentOf(1n << 60n)).toBe(256);
  });

  it('computeTypeOf: FP64, FP32, or FP32 with TF32 when the math mode allows it', () => {
    expect(computeTypeOf(true, true)).toBe(70);
    expect(computeTypeOf(false, false)).toBe(68);
    expect(computeTypeOf(false, true)).toBe(77);
  });
});
