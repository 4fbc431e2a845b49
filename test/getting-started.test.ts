/**
 * docs/getting-started.md holds one program, its tsconfig and its two documented outputs; run
 * from the sources where no libcuda loads, the program prints the no-GPU output as written
 * (`pnpm check:packages` runs it again against the packed tarballs, and
 * packages/examples/src/getting-started.gpu.test.ts on a GPU).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { probeGpu } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { guideBlocks } from '../scripts/package-check/guide.js';

const root = join(import.meta.dirname, '..');
const guide = guideBlocks(readFileSync(join(root, 'docs', 'getting-started.md'), 'utf8'));

describe('guideBlocks', () => {
  it('reads file= and output= blocks with their exit codes, and refuses a name twice', () => {
    const markdown = [
      '```ts file=a.ts',
      'const a = 1;',
      '```',
      'text',
      '```text output=gpu exit=0',
      'ok',
      '```',
      '```text output=no-gpu exit=3',
      'no',
      '```',
      '```ts',
      'not marked',
      '```',
    ].join('\n');
    expect(guideBlocks(markdown)).toEqual({
      files: { 'a.ts': 'const a = 1;\n' },
      outputs: { gpu: { text: 'ok\n', exitCode: 0 }, 'no-gpu': { text: 'no\n', exitCode: 3 } },
    });
    expect(() => guideBlocks(`${markdown}\n\`\`\`ts file=a.ts\nx\n\`\`\``)).toThrow(
      'the guide has two file=a.ts blocks',
    );
  });
});

describe('docs/getting-started.md', () => {
  it('has main.ts (about 20 lines of code), tsconfig.json and both outputs', () => {
    expect(Object.keys(guide.files).sort()).toEqual(['main.ts', 'tsconfig.json']);
    const code = guide.files['main.ts']!.split('\n').filter((line) => /\S/.test(line));
    const statements = code.filter((line) => !line.trim().startsWith('//'));
    expect(statements.length).toBeLessThanOrEqual(30);
    for (const name of [
      'task(',
      'matmul(',
      'elementwise(',
      'await synchronize()',
      'availability()',
    ]) {
      expect(guide.files['main.ts']).toContain(name);
    }
    expect(JSON.parse(guide.files['tsconfig.json']!).compilerOptions.module).toBe('nodenext');
    expect(guide.outputs.gpu).toEqual({ text: 'task 1: 131072, task 2: 196608\n', exitCode: 0 });
    expect(guide.outputs['no-gpu']!.exitCode).toBe(1);
  });

  const gpu = probeGpu();
  it.runIf(!gpu.available && gpu.reason.startsWith('no CUDA driver'))(
    'run from the sources without libcuda, the program prints the no-GPU output and exits 1',
    () => {
      // Beside the examples package, whose node_modules resolve @cuda-tasks/* to the sources.
      const folder = join(root, 'packages', 'examples', 'out', 'getting-started');
      mkdirSync(folder, { recursive: true });
      writeFileSync(join(folder, 'main.mts'), guide.files['main.ts']!);
      const env = Object.fromEntries(
        Object.entries(process.env).filter(([name]) => !name.startsWith('CUDA_TASKS_')),
      );
      const result = spawnSync(
        process.execPath,
        ['--conditions=@cuda-tasks/source', '--import', 'tsx', join(folder, 'main.mts')],
        { cwd: folder, encoding: 'utf8', env: { ...env, NODE_OPTIONS: '' } },
      );
      expect(`${result.stdout}${result.stderr}`).toBe(guide.outputs['no-gpu']!.text);
      expect(result.status).toBe(guide.outputs['no-gpu']!.exitCode);
    },
    30_000,
  );
});
