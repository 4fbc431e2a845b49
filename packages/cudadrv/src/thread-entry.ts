/**
 * Where a package's worker thread starts (the issue engine's issuers, the task runtime's
 * `WorkerPool`, cuSOLVER's issue worker), written once. Built, a thread's module is a `.js`
 * entry beside the starting module's chunk. From the TypeScript source (vitest, tsx: the
 * starting module's URL ends in `.ts`), the thread starts a small `.mjs` beside the source
 * that registers tsx's loader in the new thread and imports the thread's `.ts` module; the
 * thread gets the `@cuda-tasks/source` condition so that it resolves the workspace packages to
 * their sources too.
 */
export interface ThreadEntry {
  /** The module the thread runs. */
  readonly url: URL;
  /** The thread's `execArgv` (undefined: Node's default, the process's). */
  readonly execArgv: string[] | undefined;
}

/**
 * The entry of a worker thread started from the module at `from` (its `import.meta.url`):
 * `built` (a file name in the built package, e.g. `issuer-thread.js`) or, from the source,
 * `source` (the `.mjs` that loads the `.ts` thread module). For the sibling packages
 * (`@cuda-tasks/cudadrv/internal`).
 * @example new Worker(threadEntry(import.meta.url, 'issuer-thread.js', 'issuer-thread-source.mjs').url)
 */
export function threadEntry(from: string, built: string, source: string): ThreadEntry {
  if (!from.endsWith('.ts')) return { url: new URL(`./${built}`, from), execArgv: undefined };
  return {
    url: new URL(`./${source}`, from),
    execArgv: [...process.execArgv, '--conditions=@cuda-tasks/source'],
  };
}
