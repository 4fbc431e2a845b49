import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hostOnlyArray } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { elementwise } from './elementwise.js';
import { topkSource } from './topk.js';

// The generated CUDA C, compared with golden files in src/golden/ (`vitest -u` rewrites them
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
  ['topk-float32-k100-largest.cu', () => topkSource('float32', 100)],
  ['topk-int32-k7-smallest.cu', () => topkSource('int32', 7, false)],
];

describe('generated sources (golden)', () => {
  it.each(goldens)('%s', async (file, generate) => {
    await expect(generate()).toMatchFileSnapshot(`./golden/${file}`);
  });
});

const nvcc = spawnSync('nvcc', ['--version'], { encoding: 'utf8' });
const haveNvcc = nvcc.status === 0;

describe.runIf(haveNvcc)('generated sources compile (nvcc -arch=sm_90, device code only)', () => {
  it('every golden source', () => {
    // One translation unit (one nvcc start): each source in a namespace of its own, its
    // extern "C" entry point renamed apart.
    const unit = goldens
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
      const result = spawnSync('nvcc', ['-arch=sm_90', '-cubin', '-o', `${path}.cubin`, path], {
        encoding: 'utf8',
      });
      expect(result.status === 0 ? 'ok' : result.stderr).toBe('ok');
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  }, 120_000);
});
