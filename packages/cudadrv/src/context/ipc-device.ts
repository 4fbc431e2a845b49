/**
 * Which device a shared handle's memory or event lives on, across processes: ordinals are per
 * process (CUDA_VISIBLE_DEVICES reorders and hides devices), so a handle names its device by
 * UUID, and the importer opens it on the device of that UUID or refuses it.
 */
import { check, driver } from '../driver.js';
import { Device } from './device.js';
import { type SharedDeviceIdentity, SharedMemoryError } from './ipc-handle.js';
import { processAlive } from './ipc-leases.js';

const identities = new WeakMap<Device, SharedDeviceIdentity>();

/** The identity a handle carries for `device` (its UUID and PCI bus id are read once). */
export function identityOf(device: Device): SharedDeviceIdentity {
  let identity = identities.get(device);
  if (identity === undefined) {
    const bytes = new Uint8Array(32);
    check(driver().cuDeviceGetPCIBusId(bytes, bytes.length, device.handle), 'cuDeviceGetPCIBusId');
    const end = bytes.indexOf(0);
    const pciBusId = Buffer.from(bytes.subarray(0, end < 0 ? bytes.length : end)).toString('ascii');
    identity = Object.freeze({ ordinal: device.ordinal, uuid: device.uuid(), pciBusId });
    identities.set(device, identity);
  }
  return identity;
}

/**
 * The device of this process that a handle names (by UUID), or a SharedMemoryError
 * ('other-device') naming it when this process does not see it.
 */
export function deviceOf(what: string, identity: SharedDeviceIdentity): Device {
  for (const device of Device.all()) {
    if (identityOf(device).uuid === identity.uuid) return device;
  }
  throw new SharedMemoryError(
    'other-device',
    `${what} lives on device ${identity.uuid} (PCI ${identity.pciBusId}, the exporter's device ${identity.ordinal}), which this process does not see: open it in a process on the same machine that sees that device (check CUDA_VISIBLE_DEVICES)`,
  );
}

/**
 * Refuses a handle of this very process ('own-process': CUDA opens IPC handles only in other
 * processes) or of a process that has exited ('exporter-exited').
 */
export function checkExporter(what: string, pid: number): void {
  if (pid === process.pid) {
    throw new SharedMemoryError(
      'own-process',
      `${what} was exported by this process (${pid}); CUDA opens it only in other processes: use the exported object itself here`,
    );
  }
  if (!processAlive(pid)) {
    throw new SharedMemoryError(
      'exporter-exited',
      `${what}: the process that exported it (${pid}) has exited, and its memory and events went with it`,
    );
  }
}
