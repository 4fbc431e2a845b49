/**
 * The launch gate: whether a kernel launch may go straight to the driver, or must take the
 * full path (docs/decisions/0051-the-launch-gate.md). A launch checks its stream (not
 * disposed, not capturing, of the kernel's context) and then this one slot: the gate is open
 * for a context when that context is current on the event loop's thread, no operation
 * observer is installed and no issue engine runs. Whatever changes one of those conditions
 * sets the slot again (`Context.makeCurrent`, `setOperationObserver`, the engine's start and
 * stop), so that a launch reads one field instead of the registry, the observer slot and the
 * engine, and issues the same call the full path would.
 */
import { cudadrvState } from '../process-state.js';
import type { Context } from './device.js';

interface LaunchGate {
  /** The context a launch may go to directly, or null: every launch takes the full path. */
  open: Context | null;
  /** The context made current on the event loop's thread by `Context.makeCurrent`, or null. */
  current: Context | null;
  /** Loaded copies of this package whose issue engine runs now. */
  engines: number;
  /** Whether an operation observer is installed (`setOperationObserver`). */
  observed: boolean;
}

/** @internal The gate, process-wide (every loaded copy of this package reads the same one). */
export const launchGate: LaunchGate = cudadrvState('launch-gate', () => ({
  open: null,
  current: null,
  engines: 0,
  observed: false,
}));

/** @internal Sets `launchGate.open` from the conditions; called by whatever changes one. */
export function reopenLaunchGate(): void {
  const gate = launchGate;
  gate.open = !gate.observed && gate.engines === 0 ? gate.current : null;
}
