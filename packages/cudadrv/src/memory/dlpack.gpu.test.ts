/**
 * DLPack on the GPU (issue 36): a DeviceArray round-trips through a DLManagedTensorVersioned
 * without copying (values against the host data), a C library built here sums our exported
 * tensor from device memory and calls our deleter (on its thread and on another), and its own
 * tensor over device memory is imported, read, written and given back once.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describeGpu, randomFloat32 } from '@cuda-tasks/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildDLPackLibrary, type DLPackLibrary } from '../../test/dlpack-library.js';
import {
  currentStream,
  DeviceArray,
  DLDeviceType,
  fromDLPack,
  HostView,
  type Kernel,
  launch,
  Module,
  pendingDLPackExports,
  toDLPack,
  waitForStream,
} from '../index.js';

const fixtures = fileURLToPath(new URL('../../test/fixtures/', import.meta.url));

/** Lets koffi's queued calls from other threads run, until `done()` or 2 s. */
async function turnUntil(done: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
}

describeGpu('DLPack on the GPU (issue 36)', () => {
  let module: Module;
  let axpb: Kernel;
  let library: DLPackLibrary | string;
  beforeAll(() => {
    module = Module.fromPtx(readFileSync(`${fixtures}kernels.ptx`, 'utf8'));
    axpb = module.kernel('axpb_f32', ['float32*', 'float32*', 'float32', 'float32', 'uint64']);
    library = buildDLPackLibrary();
    if (typeof library === 'string') {
      console.log(`[cuda-tasks] DLPack C-library GPU tests skipped: ${library}`);
    }
  });
  afterAll(() => module.dispose());

  it('round trip: the imported view reads and writes the exported array’s memory', async () => {
    const rows = 300;
    const columns = 7;
    const host = randomFloat32(rows * columns, 36);
    const array = DeviceArray.fromHost(host, [rows, columns]);
    const block = array.block(10, 2, 200, 4);
    const imported = fromDLPack<'float32'>(toDLPack(block));
    expect(imported.pointer).toBe(block.pointer);
    const values = await imported.toHost();
    let worst = 0;
    for (let j = 0; j < 4; j++) {
      for (let i = 0; i < 200; i++) {
        worst = Math.max(worst, Math.abs(values[j * 200 + i]! - host[(j + 2) * rows + 10 + i]!));
      }
    }
    expect(worst).toBe(0);
    // A kernel writes through the import (contiguous column 0 of the block), the owner sees it.
    const column = fromDLPack<'float32'>(toDLPack(array.column(3).slice(10, 200)));
    const source = DeviceArray.fromHost(new Float32Array(200).fill(1));
    launch(axpb, { grid: 1, block: 256 }, column, source, 2, 0.5, 200);
    const after = await array.toHost();
    for (let i = 0; i < 200; i++) expect(after[3 * rows + 10 + i]).toBe(2.5);
    expect(pendingDLPackExports()).toBe(2);
    imported.dispose();
    column.dispose();
    expect(pendingDLPackExports()).toBe(0);
    source.dispose();
    array.dispose();
    console.log(
      `[dlpack] round trip of a 200x4 block of 300x7 float32: max |difference| ${worst}, kernel write through the import seen by the owner, exports pending after dispose: ${pendingDLPackExports()}`,
    );
  });

  it('a C library sums our exported tensor from device memory and calls the deleter once', async () => {
    if (typeof library === 'string') return;
    const n = 1 << 16;
    const host = randomFloat32(n, 361);
    const array = DeviceArray.fromHost(host, [256, 256]);
    const stream = currentStream();
    const tensor = toDLPack(array, { stream, readOnly: true });
    // The library copies with the legacy stream: our upload must be done first.
    await waitForStream(stream);
    const fields = library.describeTensor(tensor);
    expect(fields.slice(0, 9)).toEqual([1, 1, 1, DLDeviceType.kDLCUDA, 0, 2, 2, 32, 1]);
    const sum = library.sumDeviceFloat32(tensor);
    let reference = 0;
    for (const value of host) reference += value;
    expect(Math.abs(sum - reference)).toBeLessThan(1e-9 * n);
    library.releaseNow(tensor);
    expect(pendingDLPackExports()).toBe(0);
    // A second export released from a thread of the library's own.
    const second = toDLPack(array, { stream });
    array.dispose();
    expect(library.releaseOnThread(second)).toBe(0);
    await turnUntil(() => pendingDLPackExports() === 0);
    expect(pendingDLPackExports()).toBe(0);
    console.log(
      `[dlpack] C library sum of 65536 float32 from device memory ${sum.toFixed(6)} vs float64 reference ${reference.toFixed(6)}; deleter from another thread ran once (pending ${pendingDLPackExports()})`,
    );
  });

  it('a mapped HostView disposed while exported: the C library still sums it, unpinned at the deleter', async () => {
    if (typeof library === 'string') return;
    const n = 1 << 15;
    const host = randomFloat32(n, 363);
    const view = HostView.allocate('float32', n, { mapped: true });
    view.array.set(host);
    const held = view.array;
    const tensor = toDLPack(view.deviceArray([128, 256]), { readOnly: true });
    view.dispose();
    // The consumer's tensor still points at the pinned memory: the library reads it.
    const sum = library.sumDeviceFloat32(tensor);
    let reference = 0;
    for (const value of host) reference += value;
    expect(Math.abs(sum - reference)).toBeLessThan(1e-9 * n);
    expect(held.length).toBe(n);
    library.releaseNow(tensor);
    expect(held.length).toBe(0);
    expect(pendingDLPackExports()).toBe(0);
    console.log(
      `[dlpack] HostView disposed during an export: C library sum ${sum.toFixed(6)} vs float64 reference ${reference.toFixed(6)}; typed array length ${n} until the deleter, ${held.length} after`,
    );
  });

  it('the library’s row-major tensor over device memory: imported as its transpose, given back once', async () => {
    if (typeof library === 'string') return;
    const rows = 64;
    const columns = 48;
    const memory = DeviceArray.fromHost(randomFloat32(rows * columns, 362));
    const values = await memory.toHost();
    const before = library.deletedCount();
    const tensor = library.makeTensor(
      memory.pointer,
      DLDeviceType.kDLCUDA,
      0,
      rows,
      columns,
      true,
      0n,
    );
    const imported = fromDLPack<'float32'>(tensor, { reverseDimensions: true });
    expect(imported.shape).toEqual([columns, rows]);
    // Element (c, r) of the column-major view is the row-major (r, c): the same flat memory.
    const read = await imported.toHost();
    expect(Array.from(read)).toEqual(Array.from(values));
    imported.dispose();
    expect(library.deletedCount()).toBe(before + 1);
    memory.dispose();
    console.log(
      `[dlpack] imported a C library's 64x48 row-major tensor as 48x64 column-major: values equal, deleter called ${library.deletedCount() - before} time(s)`,
    );
  });
});
