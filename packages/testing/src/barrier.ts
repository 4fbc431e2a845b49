/**
 * A barrier for `count` tasks: each awaits `arrive()` once, and all go on when the last has
 * arrived. Tests that need a burst's tasks alive at once use it: task starts are spread over
 * event-loop turns, and a task that finished before the last one started would give its
 * stream and handles back for the next to reuse.
 * @example
 * const arrive = barrier(4);
 * await Promise.all([0, 1, 2, 3].map(() => task(async () => { launch(k, config); await arrive(); })));
 */
export function barrier(count: number): () => Promise<void> {
  let arrived = 0;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  return () => {
    if (++arrived === count) open();
    return gate;
  };
}
