/**
 * Regenerates src/philox-fatbin.generated.ts from src/philox.cu: a fat binary built by nvcc
 * (SASS for sm_75 to sm_120, PTX for compute_75 as the fallback of other GPUs), base64, with
 * the source's sha256 (a unit test checks it against the source) and the source itself (for
 * the NVRTC fallback of drivers that cannot load the binary).
 * Run: pnpm --filter @cuda-tasks/curand gen:philox (needs nvcc on PATH, or NVCC=/path/to/nvcc).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const sourcePath = join(root, 'src', 'philox.cu');
const outputPath = join(root, 'src', 'philox-fatbin.generated.ts');
const nvcc = process.env.NVCC ?? 'nvcc';

const SASS = ['75', '80', '86', '89', '90', '100', '120'];
const flags = [
  '-fatbin',
  '-O3',
  '-compress-mode=size',
  ...SASS.flatMap((sm) => ['-gencode', `arch=compute_${sm},code=sm_${sm}`]),
  '-gencode',
  'arch=compute_75,code=compute_75',
];

const source = readFileSync(sourcePath, 'utf8');
const sha256 = createHash('sha256').update(source).digest('hex');
const folder = mkdtempSync(join(tmpdir(), 'gen-philox-'));
try {
  const fatbinPath = join(folder, 'philox.fatbin');
  execFileSync(nvcc, [...flags, sourcePath, '-o', fatbinPath], { stdio: 'inherit' });
  const version = execFileSync(nvcc, ['--version'], { encoding: 'utf8' }).trim().split('\n').at(-1);
  const image = readFileSync(fatbinPath);
  const text = `// Generated from src/philox.cu by scripts/gen-philox.ts (pnpm --filter @cuda-tasks/curand gen:philox): do not edit.
// nvcc ${flags.join(' ')} src/philox.cu
// ${version}; ${image.length} bytes of fat binary.

/** @internal sha256 of src/philox.cu when this file was generated (a unit test compares). */
export const PHILOX_SOURCE_SHA256 = '${sha256}';

/** @internal src/philox.cu, for the NVRTC fallback where the driver cannot load the fat binary. */
export const PHILOX_SOURCE = ${JSON.stringify(source)};

/** @internal The fat binary, base64. */
export const PHILOX_FATBIN_BASE64 =
  '${image.toString('base64')}';
`;
  writeFileSync(outputPath, text);
  execFileSync('pnpm', ['exec', 'biome', 'format', '--write', outputPath], {
    cwd: root,
    stdio: 'inherit',
  });
  console.log(`wrote ${outputPath} (${image.length} bytes of fat binary, source ${sha256})`);
} finally {
  rmSync(folder, { recursive: true, force: true });
}
