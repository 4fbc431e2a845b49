import { cudadrvState } from '../process-state.js';
import type { Stream } from '../stream/stream.js';
import { type Context, Device } from './device.js';

/** Answers "which stream, when none is given". */
export type CurrentStreamProvider = () => Stream;
/** Answers "which device, when none is given" (the task runtime tracks it per task). */
export type CurrentDeviceProvider = () => Device;

interface ProviderState {
  stream: CurrentStreamProvider;
  device: CurrentDeviceProvider;
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

// Process-wide, shared by every loaded copy of this package.
const state: ProviderState = cudadrvState('provider', () => ({
  stream: defaultStreamProvider,
  device: defaultDeviceProvider,
  defaultDevice: 0,
}));

/**
 * The stream that operations use when none is given: the installed provider's answer (by
 * default, the current device's default stream; under `@cuda-tasks/task-runtime`, the
 * running task's stream). Allocates nothing.
 */
export function currentStream(): Stream {
  return state.stream();
}

/** The device that operations use when none is given. */
export function currentDevice(): Device {
  return state.device();
}

/** The context of the current device. */
export function currentContext(): Context {
  return state.device().primaryContext();
}

/**
 * Replaces the current-stream and current-device providers; returns the previous ones so
 * they can be restored. The task runtime installs its own on import.
 */
export function setCurrentStreamProvider(
  stream: CurrentStreamProvider | null,
  device: CurrentDeviceProvider | null = null,
): { stream: CurrentStreamProvider; device: CurrentDeviceProvider } {
  const previous = { stream: state.stream, device: state.device };
  state.stream = stream ?? defaultStreamProvider;
  state.device = device ?? defaultDeviceProvider;
  return previous;
}

/** Sets the device that the default providers use (no effect while a task runtime provider is installed). */
export function setDefaultDevice(device: Device | number): void {
  state.defaultDevice = typeof device === 'number' ? Device.get(device).ordinal : device.ordinal;
}
