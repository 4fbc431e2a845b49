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
    try {
      return k.load(name);
    } catch (error) {
      failures.push(`${name}: ${(error as Error).message.split('\n')[0]}`);
    }
  }
  throw new CudaUnavailableError(
    `${spec.displayName} is not available: could not load ${names.join(' or ')}` +
      `${override ? ` (from ${spec.environmentVariable})` : ''}. ${spec.installHint}` +
      ` Set ${spec.environmentVariable} to the library's full path if it is installed elsewhere.` +
      `\n  ${failures.join('\n  ')}`,
    spec.displayName,
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
  for (const prototype of prototypes) {
    try {
      return lib.func(prototype);
    } catch (error) {
      lastError = error;
    }
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
