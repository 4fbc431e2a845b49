/**
 * 1-D FFTs over DeviceArrays with cuFFT, issued the way this repository's library packages
 * issue theirs: validate first (no native call for bad input), then the kit's issue envelope
 * (`IssueEnvelope` of `@cuda-tasks/task-runtime`, one per transform, from `plans.ts`), in its
 * order: the plan leased by the current task for this transform, bound to the stream with
 * its context current; the operands declared used on the stream (`useOn`); the trace begun;
 * the cuFFT call; the trace ended and the status checked (a CufftError naming the call).
 * Everything is queued on the current stream; nothing waits for the GPU.
 */
import {
  assertSameContext,
  booleanOption,
  DeviceArray,
  resolveStream,
  type StreamOption,
  streamOption,
} from '@cuda-tasks/cudadrv';
import { CUFFT_FORWARD, CUFFT_INVERSE, cufft } from './ffi.js';
import { transformPlans } from './plans.js';
import { scaleComplex } from './scale.js';
import { type BatchOption, fftLayout, rfftLayout } from './validate.js';

/** Options of `fft`. */
export interface FftOptions extends BatchOption, StreamOption {
  /** The inverse transform (cuFFT's CUFFT_INVERSE, exponent sign +) instead of the forward one. */
  inverse?: boolean;
  /**
   * Divide the result by n. Default: true for the inverse (so that the inverse undoes the
   * forward transform, as numpy.fft.ifft), false for the forward transform (cuFFT itself never
   * scales).
   */
  normalize?: boolean;
}

/** Options of `rfft`. */
export interface RfftOptions extends BatchOption, StreamOption {}

/**
 * The discrete Fourier transform of complex float32 data (interleaved re, im), as a new array
 * of x's shape: X_k = sum_j x_j exp(-2 pi i j k / n) (forward), or with exp(+...) and a 1 / n
 * factor (inverse). `x` holds `batch` transforms of length n one after another: a 1-D array of
 * 2 n batch floats, or a 2-D array [2n, batch] with one transform per column. Runs on the
 * current task's stream with a cuFFT plan leased by the task (or on `{ stream }`).
 * @example
 * const x = DeviceArray.fromHost(interleaved); // 2n floats
 * const spectrum = fft(x);
 * const back = fft(spectrum, { inverse: true }); // == x, up to rounding
 */
export function fft(x: DeviceArray<'float32'>, options: FftOptions = {}): DeviceArray<'float32'> {
  const { n, batch } = fftLayout(x, options, 'fft');
  const inverse = booleanOption('fft', 'inverse', options.inverse);
  const normalize = booleanOption('fft', 'normalize', options.normalize, inverse);
  const stream = resolveStream(streamOption('fft', options.stream));
  // An array of another device (or context) would reach cuFFT as an illegal address.
  assertSameContext('fft', 'x', x, stream);
  const envelope = transformPlans('c2c', n, batch).envelope;
  // 1: the task's plan for this transform, bound to the stream with its work area there.
  const plan = envelope.handle(stream);
  const output = DeviceArray.empty('float32', x.shape, { stream });
  try {
    // 2: the operands, declared used on the stream.
    const input = x.useOn(stream, 'read');
    const result = output.useOn(stream);
    // 3, 4, 5: the trace around the call, then its status.
    const token = envelope.begin(stream, inverse ? 'cufft.c2c.inverse' : 'cufft.c2c.forward');
    const status = cufft().cufftExecC2C(
      plan.handle,
      input,
      result,
      inverse ? CUFFT_INVERSE : CUFFT_FORWARD,
    );
    envelope.end(token, status, 'cufftExecC2C');
    if (normalize) scaleComplex(output, 1 / n, { stream });
    return output;
  } catch (error) {
    output.dispose();
    throw error;
  }
}

/**
 * The inverse transform, normalized: `fft(x, { ...options, inverse: true })`.
 * @example const x = ifft(fft(signal)); // == signal, up to rounding
 */
export function ifft(
  x: DeviceArray<'float32'>,
  options: Omit<FftOptions, 'inverse'> = {},
): DeviceArray<'float32'> {
  return fft(x, { ...options, inverse: true });
}

/**
 * The forward transform of real float32 data: for each of the `batch` transforms of length
 * n, the n / 2 + 1 complex coefficients X_0 .. X_{n/2} (interleaved re, im; the others are
 * their complex conjugates). The result is 1-D, or [2 (n / 2 + 1), batch] for a 2-D input
 * [n, batch].
 * @example const spectrum = rfft(DeviceArray.fromHost(samples)); // samples.length / 2 + 1 complex
 */
export function rfft(x: DeviceArray<'float32'>, options: RfftOptions = {}): DeviceArray<'float32'> {
  const { n, batch, outputLength } = rfftLayout(x, options, 'rfft');
  const stream = resolveStream(streamOption('rfft', options.stream));
  assertSameContext('rfft', 'x', x, stream);
  const shape =
    x.shape.length === 2 && x.shape[1] === batch ? [outputLength / batch, batch] : [outputLength];
  const envelope = transformPlans('r2c', n, batch).envelope;
  const plan = envelope.handle(stream);
  const output = DeviceArray.empty('float32', shape, { stream });
  try {
    const input = x.useOn(stream, 'read');
    const result = output.useOn(stream);
    const token = envelope.begin(stream, 'cufft.r2c');
    const status = cufft().cufftExecR2C(plan.handle, input, result);
    envelope.end(token, status, 'cufftExecR2C');
    return output;
  } catch (error) {
    output.dispose();
    throw error;
  }
}
