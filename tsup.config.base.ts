import { defineConfig, type Options } from 'tsup';

/** One tsup setup for every package: ESM + .d.ts + sourcemaps, native/FFI deps external. */
export function packageConfig(entry: Record<string, string>, extra: Options = {}) {
  return defineConfig({
    entry,
    format: ['esm'],
    dts: true,
    sourcemap: true,
    clean: true,
    target: 'node20',
    external: ['koffi', /^@cuda-tasks\//],
    ...extra,
  });
}
