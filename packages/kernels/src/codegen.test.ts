import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DType } from '@cuda-tasks/cudadrv';
import { hostOnlyArray } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { elementwise } from './elementwise.js';
import {
  arangeProgram,
  axpbyProgram,
  type BinaryOperation,
  binaryProgram,
  ELEMENTWISE_DTYPES,
  fillProgram,
  type UnaryFunction,
  unaryProgram,
} from './ops.js';
import { reduction } from './reduction.js';
import { REDUCTION_DTYPES, type ReductionOperation, reductionProgram } from './reductions.js';
import { topkSource } from './topk.js';

// The generated CUDA C, compared with golden files in test/golden/ (`vitest -u` rewrites them
// after a deliberate change: read the diff). Then, where nvcc is installed, each is compiled
// for sm_90 (device code only), which catches C errors without a GPU.

const f32 = (n = 8) => hostOnlyArray('float32', [n]);

const goldens: [string, () => string][] = [
  [
    'elementwise-product.cu',
    () => elementwise('x: float32, y: T -> z: T', 'z = sinf(x) * y').source(f32(), f32()),
  ],
  [
    'elementwise-scalar-float64.cu',
    () =>
      elementwise('a: T, x: T -> y: T', 'y = a * x + i').source(2, hostOnlyArray('float64', [3])),
  ],
  [
    'elementwise-half.cu',
    () =>
      elementwise('x: float16, s: float32 -> y: bfloat16, w: float16', 'y = x * s; w += x').source(
        hostOnlyArray('float16', [4]),
        0.5,
      ),
  ],
  [
    'map-sin-in-place.cu',
    () => {
      const c = f32();
      return unaryProgram('sin', 'float32').sourceFor([c], [c]);
    },
  ],
  ['sum-float32.cu', () => reductionProgram('sum', 'float32').sourceFor([f32()])],
  [
    'argmax-float64.cu',
    () => reductionProgram('argmax', 'float64').sourceFor([hostOnlyArray('float64', [4])]),
  ],
  [
    'reduction-weighted-half.cu',
    () =>
      reduction('x: float16, w: float16, s: float32 -> y: float32', {
        map: 'x * w * s',
        reduce: 'a + b',
        identity: '0',
        post: 'y = a / n',
      }).source(hostOnlyArray('float16', [4]), hostOnlyArray('float16', [4]), 2),
  ],
  ['topk-float32-k100-largest.cu', () => topkSource('float32', 100)],
  ['topk-int32-k7-smallest.cu', () => topkSource('int32', 7, false)],
];

describe('generated sources (golden)', () => {
  it.each(goldens)('%s', async (file, generate) => {
    await expect(generate()).toMatchFileSnapshot(`../test/golden/${file}`);
  });
});

const nvcc = spawnSync('nvcc', ['--version'], { encoding: 'utf8' });
const haveNvcc = nvcc.status === 0;

/** Every ready-made operation's source, for every dtype it takes. */
function readyMade(): [string, () => string][] {
  const sources: [string, () => string][] = [];
  const array = (dtype: DType) => hostOnlyArray(dtype, [4]);
  const floats = ELEMENTWISE_DTYPES.filter((dtype) => dtype !== 'int32');
  for (const fn of ['sin', 'cos', 'exp', 'log', 'sqrt', 'abs', 'tanh'] as UnaryFunction[]) {
    for (const dtype of fn === 'abs' ? ELEMENTWISE_DTYPES : floats) {
      sources.push([`map ${fn} ${dtype}`, () => unaryProgram(fn, dtype).sourceFor([array(dtype)])]);
    }
  }
  for (const operation of ['add', 'sub', 'mul', 'div', 'maximum', 'minimum'] as BinaryOperation[]) {
    for (const dtype of ELEMENTWISE_DTYPES) {
      sources.push([
        `${operation} ${dtype}`,
        () => binaryProgram(operation, dtype).sourceFor([array(dtype), array(dtype)]),
      ]);
    }
  }
  for (const dtype of ELEMENTWISE_DTYPES) {
    sources.push([`fill ${dtype}`, () => fillProgram(dtype).sourceFor([1], [array(dtype)])]);
    sources.push([`arange ${dtype}`, () => arangeProgram(dtype).sourceFor([0, 1], [array(dtype)])]);
    if (dtype !== 'int32') {
      sources.push([
        `axpby ${dtype}`,
        () => axpbyProgram(dtype).sourceFor([1, array(dtype), 1, array(dtype)]),
      ]);
    }
  }
  const operations: ReductionOperation[] = ['sum', 'mean', 'max', 'min', 'argmax', 'argmin'];
  for (const operation of operations) {
    for (const dtype of REDUCTION_DTYPES) {
      sources.push([
        `${operation} ${dtype}`,
        () => reductionProgram(operation, dtype).sourceFor([array(dtype)]),
      ]);
    }
  }
  for (const dtype of ['float32', 'float64', 'int32'] as DType[]) {
    for (const k of [1, 64, 1024]) {
      sources.push([`topk ${dtype} ${k}`, () => topkSource(dtype, k, k !== 64)]);
    }
  }
  return sources;
}

describe.runIf(haveNvcc)('generated sources compile (nvcc -arch=sm_90, device code only)', () => {
  // The golden sources to cubins (ptxas checks the inline PTX too); the ready-made ones, many
  // more, to PTX only (the C++ front end; twice as fast).
  it.each([
    ['the golden sources', goldens, '-cubin'],
    ['every ready-made operation and dtype', readyMade(), '-ptx'],
  ])(
    '%s',
    (_label, sources, mode) => {
      // One translation unit (one nvcc start): each source in a namespace of its own, its
      // extern "C" entry point renamed apart.
      const unit = sources
        .map(([file, generate], index) => {
          const source = generate().replace(
            /extern "C" __global__ void (\w+)/g,
            `extern "C" __global__ void $1_${index}`,
          );
          return `// ${file}\nnamespace ct_golden_${index} {\n${source}}\n`;
        })
        .join('\n');
      const folder = mkdtempSync(join(tmpdir(), 'cuda-tasks-kernels-'));
      try {
        const path = join(folder, 'goldens.cu');
        writeFileSync(path, unit);
        const result = spawnSync('nvcc', ['-arch=sm_90', mode, '-o', `${path}.out`, path], {
          encoding: 'utf8',
        });
        expect(result.status === 0 ? 'ok' : result.stderr).toBe('ok');
      } finally {
        rmSync(folder, { recursive: true, force: true });
      }
    },
    120_000,
  );
});
