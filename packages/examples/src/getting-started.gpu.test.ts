/**
 * The program of docs/getting-started.md, as written there, on the GPU: run from the sources in
 * a child process (as `node main.js` would run it), it prints the guide's GPU output and exits
 * 0; also with isAvailable()/availability() as the guide shows them.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { availability, isAvailable } from '@cuda-tasks/cudadrv';
import { describeGpu } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';
import { guideBlocks } from '../../../scripts/package-check/guide.js';

const guidePath = fileURLToPath(new URL('../../../docs/getting-started.md', import.meta.url));

describeGpu('the getting-started program on a GPU', () => {
  it('availability() says available, with the device count and driver version', () => {
    const found = availability();
    console.log('availability():', JSON.stringify(found));
    expect(found.available).toBe(true);
    expect(found.deviceCount).toBeGreaterThan(0);
    expect(found.driverVersion).toBeGreaterThanOrEqual(12000);
    expect(found.reason).toBeUndefined();
    expect(isAvailable()).toBe(true);
  });

  it('prints the documented output and exits 0', () => {
    const { files, outputs } = guideBlocks(readFileSync(guidePath, 'utf8'));
    const folder = fileURLToPath(new URL('../out/getting-started-gpu/', import.meta.url));
    mkdirSync(folder, { recursive: true });
    writeFileSync(`${folder}main.mts`, files['main.ts']!);
    const started = performance.now();
    const result = spawnSync(
      process.execPath,
      ['--conditions=@cuda-tasks/source', '--import', 'tsx', `${folder}main.mts`],
      { cwd: folder, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } },
    );
    const printed = `${result.stdout}${result.stderr}`;
    console.log(
      `guide program: exit ${result.status} in ${Math.round(performance.now() - started)} ms, printed ${JSON.stringify(printed)}`,
    );
    expect(printed).toBe(outputs.gpu!.text);
    expect(result.status).toBe(outputs.gpu!.exitCode);
  }, 120_000);
});
