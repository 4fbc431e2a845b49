import { DeviceArray } from '@cuda-tasks/cudadrv';
import { startTrace, type Trace, task } from '@cuda-tasks/task-runtime';
import { barrier, describeGpu, rng } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';
import {
  destroyIdlePlans,
  fft,
  ifft,
  planStatistics,
  rfft,
  scaleComplex,
  version,
} from './index.js';

/** Interleaved complex values with parts in [-1, 1). */
function randomComplex(count: number, seed: number): Float32Array {
  const next = rng(seed);
  return Float32Array.from({ length: 2 * count }, () => next() * 2 - 1);
}

/**
 * CPU float64 DFT of `batch` interleaved complex transforms of length n, stored one after
 * another: X_k = sum_j x_j exp(sign 2 pi i j k / n).
 */
function dft(x: ArrayLike<number>, n: number, batch = 1, sign = -1): Float64Array {
  const out = new Float64Array(2 * n * batch);
  const cos = Float64Array.from({ length: n }, (_, t) => Math.cos((2 * Math.PI * t) / n));
  const sin = Float64Array.from({ length: n }, (_, t) => Math.sin((2 * Math.PI * t) / n));
  for (let b = 0; b < batch; b++) {
    const base = 2 * n * b;
    for (let k = 0; k < n; k++) {
      let re = 0;
      let im = 0;
      for (let j = 0; j < n; j++) {
        const t = (j * k) % n;
        const c = cos[t]!;
        const s = sign * sin[t]!;
        const xr = x[base + 2 * j]!;
        const xi = x[base + 2 * j + 1]!;
        re += xr * c - xi * s;
        im += xr * s + xi * c;
      }
      out[base + 2 * k] = re;
      out[base + 2 * k + 1] = im;
    }
  }
  return out;
}

/** ||a - b||_2 / ||b||_2 */
function relativeError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let difference = 0;
  let norm = 0;
  for (let i = 0; i < b.length; i++) {
    difference += (a[i]! - b[i]!) ** 2;
    norm += b[i]! ** 2;
  }
  return Math.sqrt(difference / norm);
}

async function forward(host: Float32Array, arrive?: () => Promise<void>): Promise<Float32Array> {
  const x = DeviceArray.fromHost(host);
  const y = fft(x);
  await arrive?.(); // with a barrier: every task holds its plan until all have issued
  try {
    return await y.toHost();
  } finally {
    x.dispose();
    y.dispose();
  }
}

describeGpu('the cuFFT user library', () => {
  it('reports the cuFFT version', () => {
    expect(version()).toBeGreaterThan(10000);
  });

  it.each([256, 1000])('fft of n = %i matches a float64 DFT', async (n) => {
    const host = randomComplex(n, n);
    const result = await task(() => forward(host));
    expect(relativeError(result, dft(host, n))).toBeLessThan(1e-4);
  });

  it('ifft(fft(x)) gives x back (normalized by the NVRTC kernel)', async () => {
    const n = 1000;
    const host = randomComplex(n, 7);
    const back = await task(async () => {
      const x = DeviceArray.fromHost(host);
      const spectrum = fft(x);
      const y = ifft(spectrum);
      try {
        return await y.toHost();
      } finally {
        x.dispose();
        spectrum.dispose();
        y.dispose();
      }
    });
    expect(relativeError(back, host)).toBeLessThan(1e-5);
  });

  it('fft(x, { inverse: true, normalize: false }) matches the unscaled float64 inverse DFT', async () => {
    const n = 256;
    const host = randomComplex(n, 8);
    const result = await task(async () => {
      const x = DeviceArray.fromHost(host);
      const y = fft(x, { inverse: true, normalize: false });
      try {
        return await y.toHost();
      } finally {
        x.dispose();
        y.dispose();
      }
    });
    expect(relativeError(result, dft(host, n, 1, +1))).toBeLessThan(1e-4);
  });

  it('batches: a 2-D [2n, batch] array gives one transform per column', async () => {
    const [n, batch] = [128, 4];
    const host = randomComplex(n * batch, 9);
    const result = await task(async () => {
      const x = DeviceArray.fromHost(host, [2 * n, batch]);
      const y = fft(x);
      try {
        expect(y.shape).toEqual([2 * n, batch]);
        return await y.toHost();
      } finally {
        x.dispose();
        y.dispose();
      }
    });
    expect(relativeError(result, dft(host, n, batch))).toBeLessThan(1e-4);
  });

  it('rfft gives the first n / 2 + 1 coefficients of the DFT of real data', async () => {
    const n = 256;
    const next = rng(10);
    const real = Float32Array.from({ length: n }, () => next() * 2 - 1);
    const result = await task(async () => {
      const x = DeviceArray.fromHost(real);
      const y = rfft(x);
      try {
        return await y.toHost();
      } finally {
        x.dispose();
        y.dispose();
      }
    });
    const complex = new Float64Array(2 * n);
    for (let j = 0; j < n; j++) complex[2 * j] = real[j]!;
    const reference = dft(complex, n).subarray(0, 2 * (n / 2 + 1));
    expect(relativeError(result, reference)).toBeLessThan(1e-4);
  });

  it('issues every transform through the issue envelope: traced on the task stream, results right', async () => {
    const n = 256;
    const host = randomComplex(n, 12);
    const real = Float32Array.from(host.subarray(0, n));
    const recorder = startTrace();
    let trace: Trace;
    let results: { spectrum: Float32Array; half: Float32Array; unscaled: Float32Array };
    try {
      results = await task(async () => {
        const x = DeviceArray.fromHost(host);
        const r = DeviceArray.fromHost(real);
        const spectrum = fft(x);
        const unscaled = fft(x, { inverse: true, normalize: false });
        const half = rfft(r);
        try {
          return {
            spectrum: await spectrum.toHost(),
            half: await half.toHost(),
            unscaled: await unscaled.toHost(),
          };
        } finally {
          for (const array of [x, r, spectrum, unscaled, half]) array.dispose();
        }
      });
    } finally {
      trace = await recorder.stop();
    }
    const names = ['cufft.c2c.forward', 'cufft.c2c.inverse', 'cufft.r2c'];
    const bars = trace.traceEvents.filter((event) => names.includes(event.name));
    // Each call once, in issue order, as a timed GPU bar on one stream's track (the task's).
    expect(bars.map((event) => event.name)).toEqual(names);
    expect(new Set(bars.map((event) => `${event.pid}:${event.tid}`)).size).toBe(1);
    for (const bar of bars) {
      expect(bar.ph).toBe('X');
      expect(bar.dur).toBeGreaterThanOrEqual(0);
    }
    const complex = new Float64Array(2 * n);
    for (let j = 0; j < n; j++) complex[2 * j] = real[j]!;
    const errors = [
      relativeError(results.spectrum, dft(host, n)),
      relativeError(results.unscaled, dft(host, n, 1, +1)),
      relativeError(results.half, dft(complex, n).subarray(0, 2 * (n / 2 + 1))),
    ];
    for (const error of errors) expect(error).toBeLessThan(1e-4);
    console.log(
      `user-library envelope: traced ${bars.map((bar) => `${bar.name} ${bar.dur!.toFixed(1)} us`).join(', ')}; relative errors vs float64 DFT ${errors.map((e) => e.toExponential(1)).join(', ')}`,
    );
  });

  it('scaleComplex multiplies in place', async () => {
    const host = randomComplex(1001, 11);
    const result = await task(async () => {
      const x = DeviceArray.fromHost(host);
      try {
        expect(scaleComplex(x, -0.25)).toBe(x);
        return await x.toHost();
      } finally {
        x.dispose();
      }
    });
    for (let i = 0; i < host.length; i++) expect(result[i]).toBe(Math.fround(host[i]! * -0.25));
  });

  it('16 concurrent tasks give the serial results, with plans bounded by the concurrency', async () => {
    const n = 777; // a size no other test uses: its plan cache starts empty
    const inputs = Array.from({ length: 16 }, (_, i) => randomComplex(n, 100 + i));
    const serial: Float32Array[] = [];
    for (const input of inputs) serial.push(await task(() => forward(input)));
    // The first use made the cache's whole bound ahead (16 plans), as every HandleCache does.
    expect(planStatistics('c2c', n)[0]).toMatchObject({ created: 16, leased: 0, idle: 16 });

    const concurrent = await Promise.all(inputs.map((input) => task(() => forward(input))));
    concurrent.forEach((result, i) => {
      expect(relativeError(result, serial[i]!)).toBeLessThan(1e-6);
      expect(relativeError(result, dft(inputs[i]!, n))).toBeLessThan(1e-4);
    });
    const afterFirst = planStatistics('c2c', n)[0]!;
    expect(afterFirst.created).toBeGreaterThan(1);
    expect(afterFirst.created).toBeLessThanOrEqual(16);
    expect(afterFirst).toMatchObject({ destroyed: 0, leased: 0, idle: afterFirst.created });

    // A second wave reuses the idle plans: none is created.
    await Promise.all(inputs.map((input) => task(() => forward(input))));
    expect(planStatistics('c2c', n)[0]).toMatchObject({
      created: afterFirst.created,
      leased: 0,
      idle: afterFirst.created,
    });
  });

  it('24 concurrent tasks share at most 16 plans and give the serial results; destroyIdlePlans drops the cache', async () => {
    const n = 779; // a size no other test uses
    const inputs = Array.from({ length: 24 }, (_, i) => randomComplex(n, 300 + i));
    const serial: Float32Array[] = [];
    for (const input of inputs) serial.push(await task(() => forward(input)));
    const arrive = barrier(inputs.length);
    const concurrent = await Promise.all(inputs.map((input) => task(() => forward(input, arrive))));
    concurrent.forEach((result, i) => {
      // The same plan sizes and work areas: the same bits, whichever plan and stream ran it.
      expect(result).toEqual(serial[i]);
    });
    const statistics = planStatistics('c2c', n)[0]!;
    expect(statistics.created).toBeLessThanOrEqual(16);
    expect(statistics.shared).toBeGreaterThanOrEqual(24 - 16);
    expect(statistics).toMatchObject({ leased: 0, idle: statistics.created });
    expect(destroyIdlePlans()).toBeGreaterThanOrEqual(statistics.created);
    expect(planStatistics('c2c', n)[0]).toMatchObject({ created: 0, idle: 0 });
  });
});
