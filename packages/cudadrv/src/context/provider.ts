import { cudadrvState } from '../process-state.js';
import type { Stream } from '../stream/stream.js';
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
  /** The device used by the default providers. */
  defaultDevice: number;
}

/** The default: the default stream of the current device's primary context. */
function defaultStreamProvider(): Stream {
  return state.device().primaryContext().defaultStream;
}

function defaultDeviceProvider(): Device {
  return Device.get(state.defaultDevice);
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
 * explicit streams included. Every operation of the cuda-tasks packages resolves its stream
 * here before any native call; a library of your own should do the same. Allocates nothing.
 * @example const target = resolveStream(options.stream);
 */
export function resolveStream(stream: Stream | undefined): Stream {
  if (stream === undefined) return state.stream();
  const signal = state.signal();
  if (signal?.aborted) throw signal.reason;
  return stream;
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

/** Sets the device that the default providers use (no effect while a task runtime provider is installed). */
export function setDefaultDevice(device: Device | number): void {
  state.defaultDevice = typeof device === 'number' ? Device.get(device).ordinal : device.ordinal;
}
