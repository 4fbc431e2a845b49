import { createRequire } from 'node:module';
import type koffiModule from 'koffi';
import { CudaUnavailableError } from '../errors.js';

type Koffi = typeof koffiModule;
/** A library loaded by koffi (what `koffi.load` returns). */
export type NativeLibrary = ReturnType<Koffi['load']>;

let koffiInstance: Koffi | undefined;

/** koffi itself, loaded on first use so that importing a package never touches native code. */
export function koffi(): Koffi {
  if (koffiInstance === undefined) {
    const require = createRequire(import.meta.url);
    try {
      koffiInstance = require('koffi') as Koffi;
    } catch (error) {
      throw new CudaUnavailableError(
        `koffi could not be loaded (${(error as Error).message}); reinstall the package so that its platform binary (@koromix/koffi-<platform>) is present`,
        'koffi',
      );
    }
  }
  return koffiInstance;
}

/**
 * The file koffi is loaded from, for a worker thread that loads koffi too (it must load the
 * same copy). Throws the CudaUnavailableError of `koffi()` when koffi cannot be found.
 */
export function koffiModulePath(): string {
  try {
    return createRequire(import.meta.url).resolve('koffi');
  } catch (error) {
    throw new CudaUnavailableError(
      `koffi could not be found (${(error as Error).message}); reinstall the package`,
      'koffi',
    );
  }
}

/** Where to find one NVIDIA library, and what to tell the user when it is missing. */
export interface LibrarySpec {
  /** Shown in errors, e.g. "cuBLAS". */
  displayName: string;
  /** Environment variable holding an explicit path that overrides the search. */
  environmentVariable: string;
  /** Sonames tried in order, e.g. ["libcublas.so.13", "libcublas.so.12"]. */
  candidates: readonly string[];
  /** One sentence: what to install. */
  installHint: string;
  /**
   * The oldest release that has every function we bind, named in the error for a missing
   * one, e.g. "cuBLAS from CUDA 12.0 or newer".
   */
  minimumVersion?: string;
}

/**
 * Loads a shared library by the spec's environment variable or candidate names; throws one
 * CudaUnavailableError naming what is missing and how to fix it.
 */
export function loadLibrary(spec: LibrarySpec): NativeLibrary {
  const k = koffi();
  const override = process.env[spec.environmentVariable];
  const names = override ? [override] : spec.candidates;
  const failures: string[] = [];
  for (const name of names) {
    let lib: NativeLibrary;
    try {
      lib = k.load(name);
    } catch (error) {
      failures.push(`${name}: ${(error as Error).message.split('\n')[0]}`);
      continue;
    }
    return withMissingSymbolErrors(lib, spec, name);
  }
  throw new CudaUnavailableError(
    `${spec.displayName} is not available: could not load ${names.join(' or ')}` +
      `${override ? ` (from ${spec.environmentVariable})` : ''}. ${spec.installHint}` +
      ` Set ${spec.environmentVariable} to the library's full path if it is installed elsewhere.` +
      `\n  ${failures.join('\n  ')}`,
    spec.displayName,
  );
}

/** The function a koffi prototype declares: `int cuInit(unsigned int flags)` gives `cuInit`. */
function functionName(prototype: unknown): string {
  if (typeof prototype !== 'string') return String(prototype);
  return /([A-Za-z_]\w*)\s*\(/.exec(prototype)?.[1] ?? prototype;
}

/**
 * The library with `func` turning koffi's "Cannot find function" (an old or partial driver or
 * toolkit) into a CudaUnavailableError naming the function, the library file and the oldest
 * release that has it.
 */
export function withMissingSymbolErrors(
  lib: NativeLibrary,
  spec: LibrarySpec,
  file: string,
): NativeLibrary {
  const func = (...args: unknown[]) => {
    try {
      return (lib.func as (...a: unknown[]) => unknown)(...args);
    } catch (error) {
      const message = (error as Error).message ?? '';
      if (!message.startsWith('Cannot find function')) throw error;
      const symbol = /'([^']+)'/.exec(message)?.[1] ?? functionName(args[0]);
      throw missingSymbolError(spec, file, [symbol]);
    }
  };
  return new Proxy(lib, {
    get(target, property) {
      if (property === 'func') return func;
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** The CudaUnavailableError for functions that `file` lacks (any one of `symbols` would do). */
function missingSymbolError(
  spec: LibrarySpec,
  file: string,
  symbols: readonly string[],
): CudaUnavailableError {
  const wanted = symbols.length === 1 ? symbols[0] : `any of ${symbols.join(', ')}`;
  return new CudaUnavailableError(
    `${spec.displayName} at ${file} is too old or incomplete: it has no ${wanted}. ` +
      `cuda-tasks needs ${spec.minimumVersion ?? `a newer ${spec.displayName}`}. ${spec.installHint}` +
      ` Set ${spec.environmentVariable} to the library's full path to use another copy.`,
    symbols[0]!,
  );
}

/**
 * Declares a set of bindings that is built on first access and then reused: the library is
 * not loaded until a binding is needed.
 */
export function lazyBindings<T>(build: () => T): () => T {
  let bindings: T | undefined;
  return () => {
    if (bindings === undefined) bindings = build();
    return bindings;
  };
}

/**
 * Binds the first of several exported names that the library has (for `_v2` entry points
 * that older drivers lack). Throws when none is exported.
 */
export function funcFirst(lib: NativeLibrary, prototypes: readonly string[]): any {
  let lastError: unknown;
  const missing: string[] = [];
  for (const prototype of prototypes) {
    try {
      return lib.func(prototype);
    } catch (error) {
      lastError = error;
      if (CudaUnavailableError.isInstance(error)) missing.push(error.missing);
    }
  }
  if (missing.length === prototypes.length && CudaUnavailableError.isInstance(lastError)) {
    // Name every alternative, not only the last one tried.
    throw new CudaUnavailableError(
      lastError.message.replace(`has no ${missing.at(-1)}.`, `has none of ${missing.join(', ')}.`),
      missing[0]!,
    );
  }
  throw lastError;
}

/**
 * Sonames to try for a CUDA toolkit library: the plain soname for each major version (found
 * through the loader path), then the same under $CUDA_HOME (or /usr/local/cuda)/lib64.
 */
export function cudaLibraryCandidates(base: string, majors: readonly string[]): string[] {
  const home = process.env.CUDA_HOME ?? process.env.CUDA_PATH ?? '/usr/local/cuda';
  const names = majors.map((major) => `${base}.${major}`);
  return [...names, base, ...names.map((name) => `${home}/lib64/${name}`)];
}
