/**
 * The stand-in libcuda with a driver call's footprint (native/pressure.c, `bench:host
 * --pressure`): its cuLaunchKernelEx is the one the library exports, the rest is stubcuda.c's.
 */
import { spawnSync } from 'node:child_process';
import koffi from 'koffi';
import { describe, expect, it } from 'vitest';
import { buildPressureStandIn } from './native.js';

const compiles = spawnSync(process.env.CC ?? 'cc', ['--version']).status === 0;

describe.runIf(compiles)('the pressure stand-in libcuda', () => {
  it('counts its own launches and keeps the plain stand-in for every other function', () => {
    const library = koffi.load(buildPressureStandIn());
    const launchKernel = library.func(
      'int cuLaunchKernelEx(void *config, void *f, void **parameters, void **extra)',
    );
    const launches = library.func('uint64_t pressureLaunches(void)');
    const init = library.func('int cuInit(unsigned int flags)');
    const count = library.func('int cuDeviceGetCount(_Out_ int *count)');
    const before = Number(launches());
    for (let i = 0; i < 3; i++) expect(launchKernel(null, null, null, null)).toBe(0);
    expect(Number(launches()) - before).toBe(3);
    expect(init(0)).toBe(0);
    const devices = [0];
    expect(count(devices)).toBe(0);
    expect(devices[0]).toBe(1);
  });
});
