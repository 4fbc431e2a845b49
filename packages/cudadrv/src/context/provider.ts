import { CudaArgumentError, describeValue } from '../errors.js';
import { cudadrvState } from '../process-state.js';
import type { Stream } from '../stream/stream.js';
import { STREAM_BRAND } from '../stream-brand.js';
import { type Context, Device } from './device.js';

/** Answers "which stream, when none is given". */
export type CurrentStreamProvider = () => Stream;
/** Answers "which device, when none is given" (the task runtime tracks it per task). */
export type CurrentDeviceProvider = () => Device;
/**
 * Answers "what cancels the running code": the task runtime answers the running task's
 * AbortSignal (undefined: nothing cancels it).
 */
export type CurrentSignalProvider = () => AbortSignal | undefined;

interface ProviderState {
  stream: CurrentStreamProvider;
  device: CurrentDeviceProvider;
  signal: CurrentSignalProvider;
  /**
   * The process default device's ordinal (`setDefaultDevice`): what the default providers use,
   * and what the task runtime's providers answer outside tasks and give new top-level tasks.
   */
  defaultDevice: number;
}

/** The default: the default stream of the current device's primary context. */
function defaultStreamProvider(): Stream {
  return state.device().primaryContext().defaultStream;
}

function defaultDeviceProvider(): Device {
  return defaultDevice();
}

function noSignal(): AbortSignal | undefined {
  return undefined;
}

// Process-wide, shared by every loaded copy of this package.
const state: ProviderState = cudadrvState('provider', () => ({
  stream: defaultStreamProvider,
  device: defaultDeviceProvider,
  signal: noSignal,
  defaultDevice: 0,
}));
// A slot made by an older loaded copy of the same compatible version has no signal provider.
state.signal ??= noSignal;

/**
 * The stream that operations use when none is given: the installed provider's answer (by
 * default, the current device's default stream; under `@cuda-tasks/task-runtime`, the
 * running task's stream). Allocates nothing. Inside a task whose signal has aborted, it
 * throws the signal's reason: nothing more is issued for a cancelled task.
 */
export function currentStream(): Stream {
  return state.stream();
}

/**
 * The stream an operation given `stream` (or none) runs on: `stream` itself, else
 * `currentStream()`. Either way it throws the running task's cancellation reason (see
 * `currentSignal`) once its signal has aborted, so that a cancelled task issues nothing more,
 * explicit streams included. What is given and is not a Stream (`null`, a raw CUstream
 * handle, an Event) is a CudaArgumentError naming it. Every operation of the cuda-tasks
 * packages resolves its stream here before any native call; a library of your own should do
 * the same. Allocates nothing.
 * @example const target = resolveStream(options.stream);
 */
export function resolveStream(stream: Stream | undefined): Stream {
  if (stream === undefined) return state.stream();
  // Only a given stream pays for the brand check (one property lookup on the prototype).
  if (typeof stream !== 'object' || stream === null || !(STREAM_BRAND in stream)) {
    notAStream(stream);
  }
  const signal = state.signal();
  if (signal?.aborted) throw signal.reason;
  return stream;
}

/** The refusal of a `stream` option that is not a Stream: the message is built only here. */
function notAStream(value: unknown): never {
  throw new CudaArgumentError(`option stream must be a Stream, got ${describeValue(value)}`);
}

/**
 * The AbortSignal of the running code: under `@cuda-tasks/task-runtime`, the running task's
 * (its own `signal` option combined with its parents'); undefined when nothing cancels it.
 * @example await fetch(url, { signal: currentSignal() });
 */
export function currentSignal(): AbortSignal | undefined {
  return state.signal();
}

/**
 * Throws the running task's cancellation reason if its signal has aborted (see
 * `currentSignal`); does nothing otherwise.
 */
export function throwIfCancelled(): void {
  const signal = state.signal();
  if (signal?.aborted) throw signal.reason;
}

/** The device that operations use when none is given. */
export function currentDevice(): Device {
  return state.device();
}

/**
 * The context of the current device. Like `currentStream()`, it throws the running task's
 * cancellation reason once its signal has aborted (what asks for it is about to create
 * something there: a stream, an event, a module, a library handle).
 */
export function currentContext(): Context {
  throwIfCancelled();
  return state.device().primaryContext();
}

/**
 * Replaces the current-stream, current-device and current-signal providers; returns the
 * previous ones so they can be restored. The task runtime installs its own on import. A
 * stream provider that answers for a cancellable scope should throw the scope's cancellation
 * reason once its signal has aborted, as the task runtime's does.
 */
export function setCurrentStreamProvider(
  stream: CurrentStreamProvider | null,
  device: CurrentDeviceProvider | null = null,
  signal: CurrentSignalProvider | null = null,
): { stream: CurrentStreamProvider; device: CurrentDeviceProvider; signal: CurrentSignalProvider } {
  const previous = { stream: state.stream, device: state.device, signal: state.signal };
  state.stream = stream ?? defaultStreamProvider;
  state.device = device ?? defaultDeviceProvider;
  state.signal = signal ?? noSignal;
  return previous;
}

/** The default device's object, as `defaultDevice()` last found it (this copy's). */
let lastDefault: Device | undefined;

/**
 * The process default device (see `setDefaultDevice`; device 0 until it is set), whatever
 * provider is installed: a field read and a comparison once found. For providers (the task
 * runtime's); exported through `@cuda-tasks/cudadrv/internal` only.
 */
export function defaultDevice(): Device {
  const last = lastDefault;
  if (last !== undefined && last.ordinal === state.defaultDevice) return last;
  const found = Device.get(state.defaultDevice);
  lastDefault = found;
  return found;
}

/**
 * The process default device's ordinal (see `setDefaultDevice`), read without touching the
 * driver. Exported through `@cuda-tasks/cudadrv/internal` only.
 */
export function defaultDeviceOrdinal(): number {
  return state.defaultDevice;
}

/**
 * Sets the process default device: the device of code outside any task and any `withDevice`,
 * and of the tasks started from there (`@cuda-tasks/task-runtime` exports this same function).
 * It works the same with or without the task runtime loaded. A task keeps the device it
 * started with (its nested tasks inherit it); tasks started afterwards, and code outside
 * tasks, use the new one; `withDevice` overrides it either way. `device` is a Device or an
 * ordinal; an ordinal this process does not see (1 on a one-GPU machine), or anything else, is
 * refused with a CudaArgumentError that names the valid range, and the default stays as it was.
 * @example setDefaultDevice(1); // on a machine with two GPUs
 */
export function setDefaultDevice(device: Device | number): void {
  let ordinal: number;
  if (typeof device === 'number') {
    ordinal = device;
  } else if (
    typeof device === 'object' &&
    device !== null &&
    typeof (device as { ordinal?: unknown }).ordinal === 'number' &&
    typeof (device as { primaryContext?: unknown }).primaryContext === 'function'
  ) {
    ordinal = device.ordinal;
  } else {
    throw new CudaArgumentError(
      `setDefaultDevice: device must be a Device or a device ordinal, got ${device === null ? 'null' : typeof device}`,
    );
  }
  // Throws a CudaArgumentError naming the devices this process sees.
  state.defaultDevice = Device.get(ordinal).ordinal;
}
