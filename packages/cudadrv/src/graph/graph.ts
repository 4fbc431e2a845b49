import type { Context } from '../context/device.js';
import { resolveStream } from '../context/provider.js';
import { check, cudaError, ffiValue, scratch } from '../driver.js';
import { CaptureError, CudaArgumentError, CudaError, DisposedError } from '../errors.js';
import {
  CU_GRAPH_EXEC_UPDATE_RESULT_NAMES,
  CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
  type CudaGraphBindings,
  cudaGraph,
} from '../ffi/graph.js';
import type { Module } from '../kernel/module.js';
import {
  type DeviceBuffer,
  type GraphMemory,
  graphMemoryOf,
  launchGraphOutput,
  releaseGraphMemory,
  type StreamOption,
} from '../memory/memory.js';
import type { PinnedHostBuffer } from '../memory/transfer.js';
import { assertOptions, NO_OPTIONS, STREAM_ONLY } from '../options-checks.js';
import { beginOperation, endOperation } from '../stream/observer.js';
import type { Stream } from '../stream/stream.js';
import type { StreamCapture } from './capture.js';

const graphBrand = Symbol.for('@cuda-tasks/Graph');

/** The native side of a graph, all the finalizer needs (no reference to the Graph). */
interface NativeGraph {
  /** The CUgraph. */
  graph: bigint;
  /** The CUgraphExec, 0n until instantiated. */
  exec: bigint;
  readonly context: Context;
  /** The graph memory of the allocations that outlived the capture (the graph's outputs). */
  outputs: GraphMemory[];
  /** Whether the executable graph has been launched (its outputs' memory exists). */
  launched: boolean;
  /** The stream of the last launch (frees of the graph's memory are ordered there). */
  lastStream: Stream | undefined;
}

/** What a launch re-declares and keeps alive, swapped whole by `update`. */
interface GraphResources {
  /** Buffers from outside the capture and buffers the graph owns, declared used at each launch. */
  declared: DeviceBuffer[];
  /** 1 where `declared[i]` is written (else only read). */
  writes: Uint8Array;
  /** Buffers allocated inside the capture and alive at its end (graph memory). */
  outputs: DeviceBuffer[];
  /** Buffers freed with the graph (libraries' capture workspaces). */
  owned: DeviceBuffer[];
  modules: Module[];
  hostBuffers: PinnedHostBuffer[];
  /** Streams a launch orders itself after (hand-offs asked for during the capture). */
  dependencies: Stream[];
  /** Whether the capture allocated memory (its memory nodes cannot be updated). */
  allocates: boolean;
  nodeCount: number;
  /** The trace's name for a replay, e.g. `graph (20 nodes)`. */
  traceName: string;
  traceArgs: Readonly<Record<string, unknown>>;
}

function destroyNative(native: NativeGraph): void {
  const api = cudaGraph();
  native.context.makeCurrent();
  if (native.exec !== 0n) api.cuGraphExecDestroy(native.exec);
  if (native.graph !== 0n) api.cuGraphDestroy(native.graph);
  native.exec = 0n;
  native.graph = 0n;
  const stream =
    native.lastStream === undefined || native.lastStream.disposed
      ? native.context.defaultStream
      : native.lastStream;
  for (const memory of native.outputs) releaseGraphMemory(memory, native.launched, stream);
  native.outputs = [];
  native.lastStream = undefined;
}

const finalizer = new FinalizationRegistry<NativeGraph>((native) => {
  try {
    destroyNative(native);
  } catch {
    // Process teardown or a sticky error: the context's graphs go with it.
  }
});

let bindings: CudaGraphBindings | undefined;
const graphApi = (): CudaGraphBindings => (bindings ??= cudaGraph());

/**
 * A captured CUDA graph (a CUgraph and, once instantiated, its CUgraphExec): work recorded
 * once and replayed with one driver call. `launch()` replays it on the current stream (or
 * `{ stream }`), after declaring every buffer the captured work uses as used by that stream,
 * so that a replay is ordered after other streams' work on those buffers, and their later
 * work after the replay, as for any launch. Buffers allocated inside the capture and not
 * disposed there are the graph's outputs: usable after the first launch, rewritten by each.
 * @example
 * const graph = await capture(async () => { launch(step, config, y, x, n); });
 * for (let i = 0; i < 100; i++) graph.launch();
 * await synchronize();
 * graph.dispose();
 */
export class Graph {
  static {
    (Graph.prototype as any)[graphBrand] = true;
  }
  /** The context the graph's work runs in. */
  readonly context: Context;
  readonly #native: NativeGraph;
  #resources: GraphResources;
  #execValue: number | bigint = 0;
  #disposed = false;

  /** @internal Use `capture()` (task runtime) or `StreamCapture.end()`. */
  constructor(handle: bigint, capture: StreamCapture, outputs: DeviceBuffer[]) {
    this.context = capture.context;
    this.#native = {
      graph: handle,
      exec: 0n,
      context: capture.context,
      outputs: outputs.map(graphMemoryOf),
      launched: false,
      lastStream: undefined,
    };
    finalizer.register(this, this.#native, this);
    this.#resources = resourcesOf(capture, outputs, nodeCountOf(handle, capture.context));
  }

  /** True for a Graph of any loaded copy of this package. */
  static isInstance(value: unknown): value is Graph {
    return typeof value === 'object' && value !== null && graphBrand in value;
  }

  /** The CUgraph handle (0n after dispose). */
  get handle(): bigint {
    return this.#native.graph;
  }

  /** The CUgraphExec handle (0n until instantiated). */
  get execHandle(): bigint {
    return this.#native.exec;
  }

  /** Nodes in the graph (kernels, copies, memsets, allocations, frees, ...). */
  get nodeCount(): number {
    return this.#resources.nodeCount;
  }

  /** Buffers allocated inside the capture that outlived it: the graph's outputs. */
  get outputs(): readonly DeviceBuffer[] {
    return this.#resources.outputs;
  }

  /** Whether `dispose()` has been called. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /** Whether `instantiate()` (or a first `launch()`) has made the executable graph. */
  get instantiated(): boolean {
    return this.#native.exec !== 0n;
  }

  /**
   * Makes the executable graph (cuGraphInstantiateWithFlags; allocations the graph does not
   * free are freed before each relaunch). `capture()` does it; otherwise the first `launch()`.
   */
  instantiate(): this {
    this.#assertUsable();
    const native = this.#native;
    if (native.exec !== 0n) return this;
    this.context.makeCurrent();
    const out: (bigint | null)[] = [null];
    check(
      graphApi().cuGraphInstantiateWithFlags(
        out,
        native.graph,
        CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
      ),
      'cuGraphInstantiateWithFlags',
    );
    native.exec = out[0] as bigint;
    this.#execValue = ffiValue(native.exec);
    return this;
  }

  /**
   * Replays the graph on the stream (default: the current stream): one cuGraphLaunch. Before
   * it, every buffer the captured work used is declared used by that stream (the hand-off
   * rules of `DeviceBuffer.useOn`), so a disposed one gives a DisposedError here rather than a
   * fault on the GPU. Awaitable like any work: `await synchronize()`.
   * @example graph.launch(); await synchronize();
   */
  launch(options: StreamOption = NO_OPTIONS): void {
    assertOptions('Graph.launch', options, STREAM_ONLY);
    const stream = resolveStream(options.stream);
    if (this.#disposed) throw new DisposedError('Graph');
    if (stream.context !== this.context) {
      throw new CudaArgumentError(
        `Graph.launch: the graph belongs to ${this.context}, the stream to ${stream.context}`,
      );
    }
    if (stream.capture !== null) {
      throw new CaptureError(
        'Graph.launch',
        `${stream} is capturing a graph: launching a graph inside a capture is not supported; launch it before or after`,
      );
    }
    stream.assertUsable();
    const native = this.#native;
    if (native.exec === 0n) this.instantiate();
    const resources = this.#resources;
    const modules = resources.modules;
    for (let i = 0; i < modules.length; i++) {
      if (modules[i]!.disposed) throw new DisposedError('Graph.launch: a captured kernel module');
    }
    const declared = resources.declared;
    const writes = resources.writes;
    for (let i = 0; i < declared.length; i++) {
      declared[i]!.ffiAddressOn(stream, writes[i] === 1 ? 'write' : 'read');
    }
    const outputs = resources.outputs;
    for (let i = 0; i < outputs.length; i++) launchGraphOutput(outputs[i]!, stream);
    const dependencies = resources.dependencies;
    for (let i = 0; i < dependencies.length; i++) {
      const dependency = dependencies[i]!;
      if (dependency !== stream && !dependency.disposed) stream.waitFor(dependency);
    }
    this.context.makeCurrent();
    const token = beginOperation(resources.traceName, stream, resources.traceArgs);
    const result = graphApi().cuGraphLaunch(this.#execValue, stream.ffiHandle);
    endOperation(token);
    if (result !== 0) check(result, 'cuGraphLaunch');
    native.launched = true;
    native.lastStream = stream;
  }

  /**
   * Takes the parameters of `source`, a graph captured from the same work with other
   * arguments (other buffers, scalars) and the same topology, into this graph's executable
   * (cuGraphExecUpdate_v2): cheaper than instantiating anew. `source` is disposed; this graph
   * now uses `source`'s buffers. Throws a CudaError naming the mismatch
   * (CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, ...) and leaves both graphs as they were
   * when the topology differs. Graphs that allocate memory inside their capture cannot be
   * updated (the driver cannot change memory nodes): capture those anew.
   */
  update(source: Graph): void {
    this.#assertUsable();
    if (!Graph.isInstance(source) || source === this) {
      throw new CudaArgumentError('Graph.update: source must be another Graph');
    }
    source.#assertUsable();
    if (source.context !== this.context) {
      throw new CudaArgumentError(
        `Graph.update: the graph belongs to ${this.context}, the source to ${source.context}`,
      );
    }
    if (this.#resources.allocates || source.#resources.allocates) {
      throw new CudaArgumentError(
        'Graph.update: a graph whose capture allocated memory cannot be updated (the driver cannot change its memory nodes); capture it anew, or allocate outside the capture',
      );
    }
    this.instantiate();
    this.context.makeCurrent();
    const info = scratch();
    info.u32[0] = 0;
    const result = graphApi().cuGraphExecUpdate_v2(
      this.#native.exec,
      source.#native.graph,
      info.pointer,
    );
    if (result !== 0) {
      const code = info.i32[0]!;
      const detail = CU_GRAPH_EXEC_UPDATE_RESULT_NAMES[code] ?? `CUgraphExecUpdateResult ${code}`;
      const error = cudaError(result, 'cuGraphExecUpdate_v2');
      throw new CudaError(
        result,
        error.status,
        'cuGraphExecUpdate_v2',
        `the new capture does not have the graph's topology (${detail}): the same operations in the same order, with the same kernels, are needed; capture anew instead`,
      );
    }
    // The executable now runs source's work: take its buffers, modules and graph; source goes
    // with what this graph had (its owned buffers are freed after this graph's last launch).
    const mine = this.#resources;
    this.#resources = source.#resources;
    source.#resources = mine;
    const graph = this.#native.graph;
    this.#native.graph = source.#native.graph;
    source.#native.graph = graph;
    source.dispose();
  }

  #assertUsable(): void {
    if (this.#disposed) throw new DisposedError('Graph');
  }

  /**
   * Destroys the executable graph and the graph (a replay in flight completes first, on the
   * GPU), frees the buffers the graph owns and its outputs' memory that no live buffer holds.
   * Outputs still held stay valid until disposed. Safe to call twice.
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    finalizer.unregister(this);
    const resources = this.#resources;
    try {
      destroyNative(this.#native);
    } finally {
      for (const buffer of resources.owned) buffer.dispose();
      resources.declared = [];
      resources.owned = [];
      resources.outputs = [];
      resources.modules = [];
      resources.hostBuffers = [];
      resources.dependencies = [];
    }
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  /** `Graph(N nodes)`. */
  toString(): string {
    return `Graph(${this.#resources.nodeCount} nodes)`;
  }
}

function nodeCountOf(handle: bigint, context: Context): number {
  context.makeCurrent();
  const count = [0];
  check(graphApi().cuGraphGetNodes(handle, null, count), 'cuGraphGetNodes');
  return Number(count[0]);
}

function resourcesOf(
  capture: StreamCapture,
  outputs: DeviceBuffer[],
  nodeCount: number,
): GraphResources {
  const declared: DeviceBuffer[] = [];
  const writes: number[] = [];
  for (const [buffer, access] of capture.uses) {
    declared.push(buffer);
    writes.push(access === 'write' ? 1 : 0);
  }
  for (const buffer of capture.owned) {
    declared.push(buffer);
    writes.push(1);
  }
  return {
    declared,
    writes: Uint8Array.from(writes),
    outputs,
    owned: [...capture.owned],
    modules: [...capture.modules],
    hostBuffers: [...capture.hostBuffers],
    dependencies: [...capture.dependencies],
    allocates: capture.allocations.length > 0,
    nodeCount,
    traceName: `graph (${nodeCount} node${nodeCount === 1 ? '' : 's'})`,
    traceArgs: Object.freeze({ nodes: nodeCount }),
  };
}
