import { writeFileSync } from 'node:fs';
import {
  type Context,
  Event,
  type Stream,
  type StreamPriority,
  waitForStream,
} from '@cuda-tasks/cudadrv';
import { type OperationObserver, setOperationObserver } from '@cuda-tasks/cudadrv/internal';
import { pooledStream } from './pool.js';
import { priorityLabel } from './priority.js';
import { processWide } from './process-wide.js';
import { currentTaskState, device, type TaskObserver, type TaskState } from './state.js';

// Process-wide: tasks started through a second loaded copy of this package are traced too.
const slot = processWide('trace-recorder', () => ({ active: null as TaskObserver | null }));
const EVENT_BATCH = 64;

/** @internal The recorder's task hooks while tracing, else null. */
export function taskObserver(): TaskObserver | null {
  return slot.active;
}

interface Operation {
  name: string;
  stream: Stream;
  taskId: number;
  taskName: string;
  /** The issuing task's priority. */
  priority: StreamPriority;
  start: Event;
  end: Event;
  /** Details the operation came with (a graph replay's node count). */
  args: Readonly<Record<string, unknown>> | undefined;
}

/** One entry of a Chrome / Perfetto trace (the JSON "trace event" format). */
export interface TraceEvent {
  /** The operation's or the track's name. */
  name: string;
  /** Phase: 'X' a complete event (a bar), 'M' metadata (a track name). */
  ph: 'X' | 'M';
  /** Start, in microseconds from the start of the recording. */
  ts?: number;
  /** Duration in microseconds. */
  dur?: number;
  /** Process id: 0 for the host's task tracks, 1 + ordinal for each GPU. */
  pid: number;
  /** Thread id: one per stream on a GPU, one per task on the host. */
  tid: number;
  /** Category: 'gpu' for GPU operations, 'task' for task spans. */
  cat?: string;
  /**
   * Extra fields shown when an event is selected: a GPU operation's issuing task (`task`,
   * `taskId`, `priority`), a task span's `priority`, a track's `name` (and a pool stream's
   * numeric CUDA `priority`).
   */
  args?: Record<string, unknown>;
}

/** A finished trace: Chrome / Perfetto trace events, one track per stream and per task. */
export interface Trace {
  /** The events, in the Trace Event Format. */
  traceEvents: TraceEvent[];
  /** How the viewer shows times. */
  displayTimeUnit: 'ms';
  /** Writes the trace as JSON (open it at ui.perfetto.dev or chrome://tracing). */
  write(path: string): void;
}

/**
 * Records, per task and stream, when each GPU operation ran (timed with CUDA events) and
 * when each task was alive (host clock), and writes a Chrome/Perfetto trace: open it at
 * ui.perfetto.dev or chrome://tracing to see tasks overlap, without Nsight. A graph replay is
 * one bar, `graph (N nodes)`, with `nodes` in its args; work issued while a stream captures is
 * not recorded (it does not run then). Opt-in; while no recorder runs, the hooks cost one
 * comparison per operation.
 * @example
 * const recorder = startTrace();
 * await Promise.all([task(work, { name: 'a' }), task(work, { name: 'b' })]);
 * (await recorder.stop()).write('trace.json');
 */
export class TraceRecorder implements OperationObserver, TaskObserver {
  readonly #operations: Operation[] = [];
  readonly #tasks = new Map<
    number,
    { name: string; priority: StreamPriority; start: number; end: number | undefined }
  >();
  readonly #references = new Map<Context, { event: Event; host: number }>();
  /** Timing events created ahead, per context: recording an operation only records two. */
  readonly #spareEvents = new Map<Context, Event[]>();
  readonly #hostStart = performance.now();
  /** Each traced stream's pool priority (undefined: not a pool stream), seen when first used. */
  readonly #streamLevels = new Map<Stream, number | undefined>();
  #stopped = false;

  /** @internal */
  begin(name: string, stream: Stream, args?: Readonly<Record<string, unknown>>): number {
    if (this.#stopped) return -1;
    const context = stream.context;
    if (!this.#references.has(context)) {
      const event = Event.create({ timing: true, context });
      event.record(context.defaultStream);
      this.#references.set(context, { event, host: performance.now() });
    }
    const task = currentTaskState();
    if (!this.#streamLevels.has(stream)) {
      this.#streamLevels.set(stream, pooledStream(stream)?.pool.priority);
    }
    const start = this.takeEvent(context);
    const end = this.takeEvent(context);
    start.record(stream);
    this.#operations.push({
      name,
      stream,
      taskId: task.id,
      taskName: task.name ?? (task.isRoot ? 'root' : `task #${task.id}`),
      priority: task.priority,
      start,
      end,
      args,
    });
    return this.#operations.length - 1;
  }

  /** Creates events in batches (cuEventCreate is slow enough to distort a trace). */
  private spareFor(context: Context): Event[] {
    let spare = this.#spareEvents.get(context);
    if (spare === undefined) this.#spareEvents.set(context, (spare = []));
    if (spare.length === 0) {
      for (let i = 0; i < EVENT_BATCH; i++) spare.push(Event.create({ timing: true, context }));
    }
    return spare;
  }

  private takeEvent(context: Context): Event {
    return this.spareFor(context).pop()!;
  }

  /** Creates the reference event and a first batch of events for `context` ahead of the work. */
  prepare(context: Context): void {
    if (!this.#references.has(context)) {
      const event = Event.create({ timing: true, context });
      event.record(context.defaultStream);
      this.#references.set(context, { event, host: performance.now() });
    }
    this.spareFor(context);
  }

  /** @internal */
  end(token: number): void {
    const operation = this.#operations[token];
    operation?.end.record(operation.stream);
  }

  /** @internal */
  taskStarted(task: TaskState): void {
    this.#tasks.set(task.id, {
      name: task.name ?? `task #${task.id}`,
      priority: task.priority,
      start: performance.now(),
      end: undefined,
    });
  }

  /** @internal */
  taskSettled(task: TaskState): void {
    const entry = this.#tasks.get(task.id);
    if (entry !== undefined) entry.end = performance.now();
  }

  /** Stops recording, waits for the recorded work to finish, and returns the trace. */
  async stop(): Promise<Trace> {
    this.#stopped = true;
    if (slot.active === this) {
      slot.active = null;
      setOperationObserver(null);
    }
    const streams = new Set(this.#operations.map((operation) => operation.stream));
    for (const stream of streams) {
      // A stream capturing a graph now cannot be waited for; its traced work came before the
      // capture, and its events can be.
      if (stream.capturing) {
        for (const operation of this.#operations)
          if (operation.stream === stream) operation.end.synchronize();
      } else await waitForStream(stream);
    }
    for (const reference of this.#references.values()) reference.event.synchronize();

    const events: TraceEvent[] = [];
    const streamIds = new Map<Stream, number>();
    const devicePid = (context: Context) => 1 + context.device.ordinal;
    for (const operation of this.#operations) {
      const reference = this.#references.get(operation.stream.context)!;
      let tid = streamIds.get(operation.stream);
      if (tid === undefined) {
        tid = streamIds.size + 1;
        streamIds.set(operation.stream, tid);
        // A pool stream above or below the default priority says so in its track's name.
        const level = this.#streamLevels.get(operation.stream);
        const label =
          level === undefined ? undefined : priorityLabel(operation.stream.context, level);
        events.push({
          name: 'thread_name',
          ph: 'M',
          pid: devicePid(operation.stream.context),
          tid,
          args: {
            name: `stream ${operation.stream.name ?? tid}${label === undefined ? '' : ` (${label} priority)`}`,
            ...(level === undefined ? {} : { priority: level }),
          },
        });
      }
      const startMs = Event.elapsedTime(reference.event, operation.start);
      const endMs = Event.elapsedTime(reference.event, operation.end);
      events.push({
        name: operation.name,
        cat: 'gpu',
        ph: 'X',
        ts: (reference.host - this.#hostStart + startMs) * 1000,
        dur: Math.max(0, endMs - startMs) * 1000,
        pid: devicePid(operation.stream.context),
        tid,
        args: {
          task: operation.taskName,
          taskId: operation.taskId,
          priority: operation.priority,
          ...operation.args,
        },
      });
      operation.start.dispose();
      operation.end.dispose();
    }
    for (const context of this.#references.keys()) {
      events.push({
        name: 'process_name',
        ph: 'M',
        pid: devicePid(context),
        tid: 0,
        args: { name: `GPU ${context.device.ordinal}` },
      });
    }
    events.push({ name: 'process_name', ph: 'M', pid: 0, tid: 0, args: { name: 'tasks (host)' } });
    const now = performance.now();
    for (const [id, entry] of this.#tasks) {
      events.push({
        name: 'thread_name',
        ph: 'M',
        pid: 0,
        tid: id + 1,
        args: { name: entry.name },
      });
      events.push({
        name: entry.name,
        cat: 'task',
        ph: 'X',
        ts: (entry.start - this.#hostStart) * 1000,
        dur: ((entry.end ?? now) - entry.start) * 1000,
        pid: 0,
        tid: id + 1,
        args: { priority: entry.priority },
      });
    }
    for (const reference of this.#references.values()) reference.event.dispose();
    for (const spare of this.#spareEvents.values()) for (const event of spare) event.dispose();
    this.#spareEvents.clear();
    return new TraceFile(events);
  }
}

class TraceFile implements Trace {
  readonly traceEvents: TraceEvent[];
  readonly displayTimeUnit = 'ms' as const;
  constructor(events: TraceEvent[]) {
    this.traceEvents = events;
  }
  /** Writes the trace as JSON (open it at ui.perfetto.dev or chrome://tracing). */
  write(path: string): void {
    writeFileSync(
      path,
      JSON.stringify({ traceEvents: this.traceEvents, displayTimeUnit: this.displayTimeUnit }),
    );
  }
}

/**
 * Starts recording a trace (replacing any recorder already running). Events for the current
 * device are created up front, so recording costs one cuEventRecord per operation boundary.
 */
export function startTrace(): TraceRecorder {
  const recorder = new TraceRecorder();
  recorder.prepare(device().primaryContext());
  slot.active = recorder;
  setOperationObserver(recorder);
  return recorder;
}
