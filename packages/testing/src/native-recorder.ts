/**
 * A stand-in for cudadrv's native door (`koffi()` and `loadLibrary()` of its ffi/library.ts,
 * through which libcuda, cuBLAS, cuRAND, cuSOLVER and NVRTC are all reached) that records each
 * use and fails it. A test replaces that module with it to prove that something makes no
 * native call at all:
 *
 * ```ts
 * const native = await vi.hoisted(async () =>
 *   (await import('@cuda-tasks/testing/native-recorder')).createNativeRecorder(),
 * );
 * vi.mock('<path to>/cudadrv/src/ffi/library.ts', async (importOriginal) =>
 *   native.replace(await importOriginal<object>()),
 * );
 * ```
 */
export function createNativeRecorder() {
  /** What was touched, in order: `koffi.load`, `koffi.alloc`, `loadLibrary cuBLAS`, ... */
  const calls: string[] = [];
  const fail = (what: string): never => {
    calls.push(what);
    throw new Error(`native call: ${what}`);
  };
  const koffi = new Proxy(
    {},
    {
      get(_target, key) {
        // Not a thenable, not a primitive: only named members are native uses.
        if (typeof key === 'symbol' || key === 'then') return undefined;
        return () => fail(`koffi.${key}`);
      },
    },
  );
  /** The library module with its native door replaced (the rest, pure helpers, kept). */
  function replace<M extends object>(original: M): M {
    return {
      ...original,
      koffi: () => koffi,
      loadLibrary: (spec: { displayName: string }) => fail(`loadLibrary ${spec.displayName}`),
    };
  }
  return { koffi, calls, replace };
}
