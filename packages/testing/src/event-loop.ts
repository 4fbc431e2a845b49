/**
 * Watches the event loop with a 1 ms interval timer from now on: `stop()` ends the watch and
 * returns the largest gap between two ticks (or between the last tick and the stop), in ms:
 * how long the loop was held at most. Start it a few milliseconds before the measured code, so
 * that the timer's first tick has come.
 * @example
 * const watch = watchEventLoop();
 * await burst();
 * const largestGapMs = watch.stop();
 */
export function watchEventLoop(): { stop(): number } {
  let last = performance.now();
  let largest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    largest = Math.max(largest, now - last);
    last = now;
  }, 1);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(largest, performance.now() - last);
    },
  };
}
