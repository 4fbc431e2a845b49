import { type Context, Event, type Stream } from '@cuda-tasks/cudadrv';
import { nextUseStamp } from '@cuda-tasks/cudadrv/internal';

/** How a `StreamBinding` tells its library which stream to use. */
export interface StreamBindingOptions {
  /** The context of the object (the hand-off event is created there). */
  context: Context;
  /** Makes the library issue the object's work on `stream` (e.g. curandSetStream). */
  setStream(stream: Stream): void;
  /**
   * Whether the object's work must run in issue order across streams (default true): it
   * holds device state that every call reads and updates (a cuRAND generator's state, a
   * cuSOLVER handle's internal buffers). Then a bind to another stream makes that stream wait,
   * on the GPU, for the work issued on the previous one. False for objects whose calls on two
   * streams share nothing (a cuBLAS handle with a workspace per stream).
   */
  ordered?: boolean;
  /**
   * Whether a `release()` hands the object's earlier work on to the next stream (default
   * true): the next `bind` elsewhere waits for it on the GPU. False for objects the GPU never
   * reads (a host-side counter that only supplies kernel arguments): no event, no wait.
   */
  handOff?: boolean;
  /**
   * Whether the owner calls `use()` right before every native call that issues work for the
   * object (in the same synchronous step, after any allocation or wait the call needs), as a
   * buffer use is declared (default false). Then the binding knows when the object was last
   * used, and a hand-off from a stream whose work is known complete past that use (a task
   * awaited `synchronize()` there) costs nothing: no event record, no stream wait. Without it
   * every hand-off is ordered on the GPU. Call `endDeclaredUses()` once work may be issued
   * without `use()` (a raw handle was given out).
   */
  declaresUses?: boolean;
}

/**
 * Where an object that issues GPU work on a stream of its choosing (a library handle, a cuRAND
 * generator) is bound, with the two rules every such object needs:
 *
 * - **The rebind-skip rule.** `setStream` is called only when the library does not have the
 *   stream already: binding back to the stream it last set (a pooled stream that came back
 *   with the same handle) costs nothing.
 * - **The hand-off.** `release()` records an event where the object's work went last; the
 *   next `bind` to another stream makes that stream wait for it (on the GPU; the host never
 *   waits), so the next user's work is ordered after the previous user's. With `ordered`,
 *   every switch of streams is ordered the same way.
 *
 * The hot path, `bind` to the stream it is bound to, is one comparison.
 * @example
 * const binding = new StreamBinding({ context, setStream: (s) => check(curandSetStream(gen, s.handle)) });
 * binding.bind(stream()); // before each call
 * binding.release();      // when the current user is done with it
 */
export class StreamBinding {
  readonly #options: StreamBindingOptions;
  readonly #ordered: boolean;
  readonly #handOff: boolean;
  /** The stream the object is bound to now (undefined: unbound, the next bind decides). */
  #stream: Stream | undefined;
  /** Where its work last went while bound (kept across `invalidate`), for ordering. */
  #last: Stream | undefined;
  /** The stream the library has (the last setStream), kept across releases. */
  #native: Stream | undefined;
  /** Marks the end of its work on the stream it was released from. */
  #handoff: Event | undefined;
  /** The stream `#handoff` was recorded on, while a next stream has still to wait for it. */
  #handoffStream: Stream | undefined;
  /** Released from this stream, already disposed: the next bind waits for it with waitFor. */
  #releasedFrom: Stream | undefined;
  /** Whether every use is declared (`declaresUses`, until `endDeclaredUses`). */
  #declaresUses: boolean;
  /** The use clock's tick at the last declared use (0: none yet). */
  #useStamp = 0;

  constructor(options: StreamBindingOptions) {
    this.#options = options;
    this.#handOff = options.handOff ?? true;
    this.#ordered = this.#handOff && (options.ordered ?? true);
    this.#declaresUses = options.declaresUses === true;
  }

  /**
   * Declares a use: the owner issues work for the object now, on the bound stream (with
   * `declaresUses`; without it this does nothing that matters). Call it right before the
   * native call, after anything else the call does first. Allocates nothing.
   */
  use(): void {
    this.#useStamp = nextUseStamp();
  }

  /**
   * Work for the object may be issued without `use()` from now on (a raw handle was given
   * out): every later hand-off is ordered on the GPU, as without `declaresUses`.
   */
  endDeclaredUses(): void {
    this.#declaresUses = false;
  }

  /**
   * A wait just issued on the new stream carries the object's earlier work there: it counts as
   * a use, so that a completion of the new stream seen before the wait does not count.
   */
  #carried(): void {
    if (this.#declaresUses) this.#useStamp = nextUseStamp();
  }

  /** Whether the object's work on `stream` is known complete (only where uses are declared). */
  #doneOn(stream: Stream): boolean {
    return this.#declaresUses && stream.hasCompleted(this.#useStamp);
  }

  /** The stream the object is bound to (undefined before its first bind and after a release). */
  get stream(): Stream | undefined {
    return this.#stream;
  }

  /** The stream the library has for the object (its last setStream), kept across releases. */
  get nativeStream(): Stream | undefined {
    return this.#native;
  }

  /**
   * Binds to `stream`: nothing when it already is; otherwise orders `stream` after the
   * object's earlier work where needed (the hand-off of a release, or with `ordered` the
   * previous stream) and calls `setStream` unless the library has `stream` already. Returns
   * whether `setStream` was called (a library like cuBLAS then forgets its workspace).
   */
  bind(stream: Stream): boolean {
    if (stream === this.#stream) return false;
    const handoffStream = this.#handoffStream;
    if (handoffStream !== undefined) {
      // Taken up again by the stream it was released from: already in order there.
      // (A recorded event stays valid after its stream is destroyed.)
      if (handoffStream !== stream && !this.#doneOn(handoffStream)) {
        stream.waitEvent(this.#handoff!);
        this.#carried();
      }
      this.#handoffStream = undefined;
    } else {
      // Released from a stream already disposed (no event could be recorded there), or with
      // `ordered` the stream its work went to last: waitFor orders after it (after a disposed
      // stream's last work too).
      // Where uses are declared and the previous stream is known complete past the last one,
      // the GPU has nothing left to order.
      const previous = this.#releasedFrom ?? (this.#ordered ? this.#last : undefined);
      if (previous !== undefined && previous !== stream && !this.#doneOn(previous)) {
        stream.waitFor(previous);
        this.#carried();
      }
    }
    this.#releasedFrom = undefined;
    let set = false;
    if (this.#native !== stream) {
      this.#options.setStream(stream);
      this.#native = stream;
      set = true;
    }
    this.#stream = stream;
    this.#last = stream;
    return set;
  }

  /**
   * Forgets the bound stream without a hand-off, so that the next `bind` runs again (the
   * library's settings changed): `setStream` is still skipped when the library has the
   * stream, and the order across streams is kept.
   */
  invalidate(): void {
    this.#stream = undefined;
  }

  /**
   * The current user is done with the object: records the hand-off event where its work
   * went last (if that stream is still usable) and unbinds. Safe to call when unbound.
   */
  release(): void {
    const last = this.#last;
    this.#stream = undefined;
    this.#last = undefined;
    if (last === undefined || !this.#handOff) return;
    // Its work there is known complete (uses declared): nothing for the next stream to wait for.
    if (this.#doneOn(last)) return;
    if (last.disposed) {
      this.#releasedFrom = last;
      return;
    }
    this.#handoff ??= Event.create({ context: this.#options.context });
    this.#handoff.record(last);
    this.#handoffStream = last;
  }

  /**
   * `stream` is being disposed (it is still alive while the disposed listeners run): if the
   * object's work went there last, its hand-off is recorded now, so that the next stream
   * still waits for that work; and the library is no longer taken to have that stream.
   */
  forget(stream: Stream): void {
    if (this.#last === stream) this.release();
    if (this.#stream === stream) this.#stream = undefined;
    if (this.#native === stream) this.#native = undefined;
  }

  /** Destroys the hand-off event (the object is being destroyed). Safe to call twice. */
  dispose(): void {
    this.#stream = undefined;
    this.#last = undefined;
    this.#native = undefined;
    this.#handoffStream = undefined;
    this.#releasedFrom = undefined;
    const event = this.#handoff;
    this.#handoff = undefined;
    event?.dispose();
  }
}
