import { check, driver, stickyError } from '../driver.js';
import { cuda } from '../ffi/cuda.js';
import { visibleDeviceCount } from './device.js';

/** The oldest driver we support: one for CUDA 12.0 (`cuDriverGetVersion` gives 12000). */
export const MINIMUM_DRIVER_VERSION = 12000;

/** What `availability()` found: whether CUDA work can run in this process, and if not, why. */
export interface CudaAvailability {
  /**
   * True when the driver loads and initializes, is new enough (CUDA 12.0 or newer), reports
   * at least one device, and no sticky error (an illegal address, a failed launch) has made
   * the process's CUDA context unusable.
   */
  available: boolean;
  /** CUDA devices the driver reports: 0 where no driver loads or it sees no GPU. */
  deviceCount: number;
  /**
   * The CUDA version the driver supports, as major * 1000 + minor * 10 (13000 for 13.0);
   * absent where no driver library loads.
   */
  driverVersion?: number;
  /**
   * Why CUDA work cannot run (only when `available` is false): the message of the error a
   * CUDA call would throw, saying what is missing and how to fix it.
   */
  reason?: string;
}

/**
 * Whether a GPU is usable here, and if not, why: loads the driver (creating no CUDA context),
 * reads its version and device count, and checks for a sticky error. Never throws. A failed
 * driver load is retried on the next call (installing the driver or setting
 * `CUDA_TASKS_LIBCUDA` takes effect without a restart).
 * @example
 * const gpu = availability();
 * if (!gpu.available) console.error(`no usable GPU: ${gpu.reason}`);
 * else console.log(`${gpu.deviceCount} device(s), driver version ${gpu.driverVersion}`); // 13000: CUDA 13.0
 */
export function availability(): CudaAvailability {
  let driverVersion: number | undefined;
  try {
    // cuDriverGetVersion needs no cuInit: the version is known even where cuInit fails.
    const version = [0];
    check(cuda().cuDriverGetVersion(version), 'cuDriverGetVersion');
    driverVersion = version[0]!;
    if (driverVersion < MINIMUM_DRIVER_VERSION) {
      return {
        available: false,
        deviceCount: 0,
        driverVersion,
        reason: `The NVIDIA driver supports CUDA ${formatCudaVersion(driverVersion)}; cuda-tasks needs a driver for CUDA 12.0 or newer (version 525 or newer; 580 or newer for CUDA 13). Update the NVIDIA GPU driver.`,
      };
    }
    driver();
    const deviceCount = visibleDeviceCount();
    if (deviceCount === 0) {
      return {
        available: false,
        deviceCount,
        driverVersion,
        reason:
          'The CUDA driver reports no device. Check that CUDA_VISIBLE_DEVICES does not hide the GPU.',
      };
    }
    const sticky = stickyError();
    if (sticky !== undefined) {
      return {
        available: false,
        deviceCount,
        driverVersion,
        reason: `The CUDA context is unusable since ${sticky}; restart the process to use the GPU again.`,
      };
    }
    return { available: true, deviceCount, driverVersion };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return driverVersion === undefined
      ? { available: false, deviceCount: 0, reason }
      : { available: false, deviceCount: 0, driverVersion, reason };
  }
}

/**
 * Whether CUDA work can run in this process: `availability().available` (see there). Never
 * throws; false where no driver, no GPU, a driver older than CUDA 12.0, or a sticky error.
 * @example if (!isAvailable()) console.log('no usable GPU: running on the CPU');
 */
export function isAvailable(): boolean {
  return availability().available;
}

/** `12080` as `12.8`. */
function formatCudaVersion(version: number): string {
  return `${Math.floor(version / 1000)}.${Math.floor((version % 1000) / 10)}`;
}
