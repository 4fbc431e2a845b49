import { cudaLibraryCandidates, koffi } from '@cuda-tasks/cudadrv/ffi';

interface NvtxBindings {
  nvtxRangeStartA(message: string): number | bigint;
  nvtxRangeEnd(id: number | bigint): void;
}

let bindings: NvtxBindings | null | undefined;

/** libnvtx3interop's range functions, or null when the library is not installed. */
function nvtx(): NvtxBindings | null {
  if (bindings !== undefined) return bindings;
  const names = process.env.CUDA_TASKS_LIBNVTX
    ? [process.env.CUDA_TASKS_LIBNVTX]
    : [
        ...cudaLibraryCandidates('libnvtx3interop.so', ['1']),
        ...cudaLibraryCandidates('libnvToolsExt.so', ['1']),
      ];
  bindings = null;
  for (const name of names) {
    try {
      const lib = koffi().load(name);
      bindings = {
        // nvtxRangeId_t nvtxRangeStartA(const char *message);
        nvtxRangeStartA: lib.func('uint64_t nvtxRangeStartA(const char *message)'),
        // void nvtxRangeEnd(nvtxRangeId_t id);
        nvtxRangeEnd: lib.func('void nvtxRangeEnd(uint64_t id)'),
      };
      break;
    } catch {
      // Try the next name; NVTX is optional.
    }
  }
  return bindings;
}

/** Whether NVTX ranges reach a profiler (libnvtx3interop was found). */
export function nvtxAvailable(): boolean {
  return nvtx() !== null;
}

/**
 * Runs `fn` inside an NVTX range named `name` (start/end ranges, so async functions that
 * interleave do not break nesting). A no-op wrapper when libnvtx3interop is not installed.
 * @example await range('solve', async () => { ... });
 */
export function range<T>(name: string, fn: () => T): T {
  const api = nvtx();
  if (api === null) return fn();
  const id = api.nvtxRangeStartA(name);
  let result: T;
  try {
    result = fn();
  } catch (error) {
    api.nvtxRangeEnd(id);
    throw error;
  }
  if (result instanceof Promise) {
    return result.finally(() => api.nvtxRangeEnd(id)) as T;
  }
  api.nvtxRangeEnd(id);
  return result;
}
