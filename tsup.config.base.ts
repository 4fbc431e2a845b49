import { defineConfig, type Options } from 'tsup';

type Plugin = NonNullable<Options['plugins']>[number];

/**
 * Gives every bundled class its own name back. esbuild writes a class that names itself in its
 * body (`static isInstance = markErrorClass(CudaError, ...)`, `new Device(...)`) as
 * `var CudaError = class _CudaError`, so that `CudaError.name` and what `console.log` prints
 * say `_CudaError`. This appends one statement to the chunk that sets each such class's `name`
 * to its own (nothing above it moves, so the source map stays right). esbuild's `keepNames`
 * would fix it too, but it also wraps every named closure in a `__name()` call that costs
 * about 350 ns each time the closure is made, inside hot paths (a reduction's argument check
 * makes two per call).
 */
export const classNames: Plugin = {
  name: 'class-names',
  renderChunk(code) {
    const classes = [...code.matchAll(/^var ([A-Za-z$][\w$]*) = class _\1\b/gm)].map(
      (match) => match[1]!,
    );
    if (classes.length === 0) return undefined;
    const fix = `for (const c of [${classes.join(', ')}]) Object.defineProperty(c, "name", { value: c.name.slice(1), configurable: true });\n`;
    const mapComment = code.lastIndexOf('\n//# sourceMappingURL=');
    return mapComment < 0
      ? { code: `${code}\n${fix}` }
      : { code: `${code.slice(0, mapComment + 1)}${fix}${code.slice(mapComment + 1)}` };
  },
};

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
    plugins: [classNames],
    ...extra,
  });
}
