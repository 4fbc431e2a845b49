/**
 * Across the libraries: every public call that takes an options object refuses one it does not
 * know, with a CudaArgumentError that names it, before any native call. An option left unread
 * computes something else without a word (`generator.normal(x, { stdev: 3 })` drew with
 * stddev 1; `sum(x, { output: y })` left y untouched; `task(fn, { priorty: 'high' })` ran at
 * normal priority). This machine has no GPU: a native call would throw CudaUnavailableError
 * instead, so a CudaArgumentError shows the check ran first.
 */
import * as cublas from '@cuda-tasks/cublas';
import { CudaArgumentError, DeviceArray, Event, Stream } from '@cuda-tasks/cudadrv';
import * as curand from '@cuda-tasks/curand';
import * as cusolver from '@cuda-tasks/cusolver';
import * as kernels from '@cuda-tasks/kernels';
import * as runtime from '@cuda-tasks/task-runtime';
import { failureOf, hostOnlyArray, thrown } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';

const f32 = (...shape: number[]) =>
  hostOnlyArray('float32', shape, { byteLength: 4 * shape.reduce((a, b) => a * b, 1) });
const f64 = (...shape: number[]) =>
  hostOnlyArray('float64', shape, { byteLength: 8 * shape.reduce((a, b) => a * b, 1) });
const bogus = { bogus: 1 } as never;

/** [the call's name in its messages, a call given the unknown option `bogus`] */
const calls: [string, () => unknown][] = [
  ['axpy', () => cublas.axpy(1, f32(4), f32(4), bogus)],
  ['scal', () => cublas.scal(2, f32(4), bogus)],
  ['dot', () => cublas.dot(f32(4), f32(4), bogus)],
  ['nrm2', () => cublas.nrm2(f32(4), bogus)],
  ['gemv', () => cublas.gemv(f32(4, 4), f32(4), f32(4), bogus)],
  ['gemm', () => cublas.gemm(f32(4, 4), f32(4, 4), f32(4, 4), bogus)],
  ['matmul', () => cublas.matmul(f32(4, 4), f32(4, 4), bogus)],
  ['lu', () => cusolver.lu(f64(4, 4), bogus)],
  ['solve', () => cusolver.solve(f64(4, 4), f64(4, 1), bogus)],
  ['cholesky', () => cusolver.cholesky(f64(4, 4), bogus)],
  ['qr', () => cusolver.qr(f64(4, 4), bogus)],
  ['eigh', () => cusolver.eigh(f64(4, 4), bogus)],
  ['svd', () => cusolver.svd(f64(4, 4), bogus)],
  ['Generator', () => new curand.Generator(bogus)],
  ['Generator.uniform', () => new curand.Generator({ seed: 1 }).uniform(f32(4), bogus)],
  ['Generator.normal', () => new curand.Generator({ seed: 1 }).normal(f32(4), bogus)],
  ['Generator.logNormal', () => new curand.Generator({ seed: 1 }).logNormal(f32(4), bogus)],
  ['Generator.setSeed', () => new curand.Generator({ seed: 1 }).setSeed(2, bogus)],
  ['rand', () => curand.rand('float32', [4], bogus)],
  ['randn', () => curand.randn('float32', [4], bogus)],
  ['sum', () => kernels.sum(f32(4), bogus)],
  ['topk', () => kernels.topk(f32(8), 2, bogus)],
  ['arange', () => kernels.arange(4, bogus)],
  ['DeviceArray.empty', () => DeviceArray.empty('float32', [4], bogus)],
  ['DeviceArray.fromHost', () => DeviceArray.fromHost(new Float32Array(4), [4], bogus)],
  ['toHost', () => f32(4).toHost(bogus)],
  ['Stream.create', () => Stream.create(bogus)],
  ['Event.create', () => Event.create(bogus)],
  ['task', () => runtime.task(() => 1, bogus)],
  ['configureStreams', () => runtime.configureStreams(bogus)],
  ['configureHandles', () => runtime.configureHandles(bogus)],
  ['capture', () => runtime.capture(() => undefined, bogus)],
  ['WorkerPool.start', () => runtime.WorkerPool.start(new URL('file:///none.mjs'), bogus)],
];

describe('an option a call does not take is refused before any native call', () => {
  it.each(calls)('%s', async (call, fn) => {
    const error = await failureOf(fn);
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect((error as Error).message).toContain(`${call}: unknown option "bogus"`);
  });

  it('a misspelt one is named with the option it most likely misspells', async () => {
    const generator = new curand.Generator({ seed: 1 });
    const misspelt = await failureOf(() => generator.normal(f32(4), { stdev: 3 } as never));
    expect((misspelt as Error).message).toMatch(/unknown option "stdev" \(did you mean stddev\?\)/);
    const priority = await failureOf(() => runtime.task(() => 1, { priorty: 'high' } as never));
    expect((priority as Error).message).toMatch(/did you mean priority\?/);
    const seed = await failureOf(() => new curand.Generator({ seeed: 7 } as never));
    expect((seed as Error).message).toMatch(/did you mean seed\?/);
  });

  it("options of the wrong kind are refused too (a task's name, a generator's context)", async () => {
    const name = await failureOf(() => runtime.task(() => 1, { name: 5 as never }));
    expect(name).toBeInstanceOf(CudaArgumentError);
    expect((name as Error).message).toBe('task: option name must be a string, got 5');
    const context = await failureOf(() => new curand.Generator({ context: 5 as never }));
    expect(context).toBeInstanceOf(CudaArgumentError);
    expect((context as Error).message).toBe('Generator: option context must be a Context, got 5');
  });

  it('a device argument that is neither an ordinal nor a Device is refused', () => {
    for (const call of [
      () => runtime.prewarm(bogus),
      () => runtime.prewarmStreams(bogus),
      () => runtime.withDevice(bogus, () => 1),
    ]) {
      const error = thrown(call);
      expect(error).toBeInstanceOf(CudaArgumentError);
      expect((error as Error).message).toMatch(/the device must be an ordinal or a Device/);
    }
  });
});
