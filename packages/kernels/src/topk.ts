/**
 * `topk(x, k)`: the k largest (or smallest) elements along an axis, with their indices,
 * sorted best first. Runs a few passes of one kernel (see codegen-topk.ts): the first reduces
 * ranges of the input to sorted lists of K, each later one merges 16 lists into one, until
 * one list per segment remains.
 */
import {
  assertOptions,
  assertSameContext,
  CudaArgumentError,
  DeviceArray,
  DeviceBuffer,
  type DType,
  describeValue,
  type KernelArgument,
  launchOn,
  resolveStream,
  type Stream,
} from '@cuda-tasks/cudadrv';
import {
  type CallOptions,
  checkArray,
  checkDType,
  checkOutputApart,
  clearList,
} from './arguments.js';
import { generateTopk, TOPK_DTYPES, TOPK_ENTRY, topkParameters } from './codegen-topk.js';
import { CompiledSource } from './compiled.js';

/** The largest k topk takes. */
export const MAX_TOPK = 1024;

/** Lists merged by one block in the passes after the first. */
const MERGE_WIDTH = 16;
/** Tiles a block of the first pass handles at least. */
const FIRST_PASS_TILES = 8;
/** Blocks a launch asks for at most (each block loops over its share of the work). */
const MAX_GRID = 1 << 20;

/** Options of `topk`. */
export interface TopkOptions extends CallOptions {
  /**
   * The axis to select along, for a matrix: 1 (the last axis, the default: per row) or 0 (per
   * column; columns are contiguous in column-major order, so this is the faster one). -1 means
   * the last axis. A vector has only axis 0.
   */
  axis?: number;
  /** The k largest (default) or, with false, the k smallest. */
  largest?: boolean;
  /** Where to write the values (dtype of x, the result's shape). */
  values?: DeviceArray;
  /** Where to write the indices (int32, the result's shape). */
  indices?: DeviceArray<'int32'>;
}

/** What `topk` returns. */
export interface TopkResult<D extends DType = DType> {
  /** The selected values, best first along the axis. */
  values: DeviceArray<D>;
  /** Their indices along the axis (int32). */
  indices: DeviceArray<'int32'>;
}

const sources = new Map<string, CompiledSource>();

function compiledFor(dtype: DType, slots: number, largest: boolean): CompiledSource {
  const key = `${dtype} ${slots} ${largest}`;
  let compiled = sources.get(key);
  if (compiled === undefined) {
    compiled = new CompiledSource(
      `topk_${dtype}_${slots}_${largest ? 'largest' : 'smallest'}.cu`,
      generateTopk({ dtype, slots, largest }),
      [{ name: TOPK_ENTRY, parameters: topkParameters(), blockSize: slots }],
    );
    sources.set(key, compiled);
  }
  return compiled;
}

/** The generated source for these parameters (for reading and for the tests). */
export function topkSource(dtype: DType, k: number, largest = true): string {
  return generateTopk({ dtype, slots: slotsFor(k), largest });
}

function slotsFor(k: number): number {
  return Math.max(32, 2 ** Math.ceil(Math.log2(k)));
}

/** How one call lays out its segments (validated, before any native call). */
interface Plan {
  dtype: DType;
  k: number;
  slots: number;
  largest: boolean;
  length: number;
  segments: number;
  segmentStride: number;
  elementStride: number;
  outShape: number[];
  outSegmentStride: number;
  outRankStride: number;
}

const TOPK_OPTIONS: readonly string[] = Object.freeze([
  'axis',
  'largest',
  'values',
  'indices',
  'stream',
]);

function plan(x: unknown, k: unknown, options: TopkOptions | undefined): Plan {
  const array = checkArray(x, 'topk', 'x');
  assertOptions('topk', options, TOPK_OPTIONS);
  checkDType(array.dtype, TOPK_DTYPES, 'topk', 'x');
  const shape = array.shape;
  if (shape.length > 2) {
    throw new CudaArgumentError(
      `topk: x must be a vector or a matrix, got shape [${shape.join(', ')}]`,
    );
  }
  const last = shape.length - 1;
  const axis = options?.axis === undefined || options.axis === -1 ? last : options.axis;
  if (axis !== 0 && axis !== last) {
    throw new CudaArgumentError(
      `topk: axis must be ${shape.length === 1 ? '0' : '0 or 1'} (or -1), got ${describeValue(options?.axis)}`,
    );
  }
  const rows = shape[0]!;
  const columns = shape.length === 2 ? shape[1]! : 1;
  const length = axis === 0 ? rows : columns;
  const segments = axis === 0 ? columns : rows;
  if (typeof k !== 'number' || !Number.isInteger(k) || k < 1 || k > MAX_TOPK) {
    throw new CudaArgumentError(
      `topk: k must be an integer in 1..${MAX_TOPK}, got ${describeValue(k)}`,
    );
  }
  if (k > length) {
    throw new CudaArgumentError(
      `topk: k = ${k} is more than the ${length} elements along axis ${axis}`,
    );
  }
  if (length > 2 ** 31 - 1) {
    throw new CudaArgumentError(`topk: ${length} elements along the axis exceed int32 indices`);
  }
  const largest = options?.largest ?? true;
  if (typeof largest !== 'boolean')
    throw new CudaArgumentError(`topk: largest must be a boolean, got ${describeValue(largest)}`);
  // Column-major: element (r, c) of a rows x columns matrix is at r + c * rows.
  const result: Plan = {
    dtype: array.dtype,
    k,
    slots: slotsFor(k),
    largest,
    length,
    segments,
    segmentStride: axis === 0 ? rows : 1,
    elementStride: axis === 0 ? 1 : rows,
    outShape: shape.length === 1 ? [k] : axis === 0 ? [k, columns] : [rows, k],
    outSegmentStride: axis === 0 ? k : 1,
    outRankStride: axis === 0 ? 1 : rows,
  };
  const check = (given: unknown, dtype: DType, name: string) => {
    if (given === undefined) return;
    const out = checkArray(given, 'topk', name);
    if (out.dtype !== dtype)
      throw new CudaArgumentError(`topk: ${name} must be ${dtype}, got ${out.dtype}`);
    if (
      out.shape.length !== result.outShape.length ||
      out.shape.some((d, i) => d !== result.outShape[i])
    ) {
      throw new CudaArgumentError(
        `topk: ${name} must have shape [${result.outShape.join(', ')}], got [${out.shape.join(', ')}]`,
      );
    }
  };
  check(options?.values, array.dtype, 'values');
  check(options?.indices, 'int32', 'indices');
  return result;
}

const args: KernelArgument[] = new Array(14).fill(0);

/**
 * The `k` largest elements of `x` along an axis (or the smallest, with `largest: false`),
 * sorted best first, with their int32 indices along that axis. `x` is float32, float64 or
 * int32, a vector (result shape [k]) or a column-major matrix: along axis 1, the default, per
 * row (result [rows, k]); along axis 0, per column (result [k, columns]), the faster layout.
 * NaN counts as larger than every number; ties go to the smaller index. k <= 1024.
 * @example
 * const { values, indices } = topk(scores, 10); // the 10 best scores of a vector
 * const perQuery = topk(scoreMatrix, 5, { axis: 0 }); // per column
 */
export function topk<D extends DType>(
  x: DeviceArray<D>,
  k: number,
  options?: TopkOptions,
): TopkResult<D> {
  const p = plan(x, k, options);
  const stream: Stream = resolveStream(options?.stream);
  const valuesOut = options?.values;
  const indicesOut = options?.indices;
  assertSameContext('topk', 'x', x, stream);
  if (valuesOut !== undefined) {
    assertSameContext('topk', 'values', valuesOut, stream);
    checkOutputApart('topk', 'values', valuesOut, 'x', x, false);
  }
  if (indicesOut !== undefined) {
    assertSameContext('topk', 'indices', indicesOut, stream);
    checkOutputApart('topk', 'indices', indicesOut, 'x', x, false);
    if (valuesOut !== undefined) {
      checkOutputApart('topk', 'indices', indicesOut, 'values', valuesOut, false);
    }
  }
  const values = (valuesOut ??
    DeviceArray.empty(p.dtype, p.outShape, { stream })) as DeviceArray<D>;
  const indices = indicesOut ?? DeviceArray.empty('int32', p.outShape, { stream });
  if (p.segments === 0) return { values, indices };
  const loaded = compiledFor(p.dtype, p.slots, p.largest).kernels(stream.context)[0]!;
  const slots = p.slots;
  const valueBytes = x.elementBytes;
  // First pass: ranges of whole tiles, enough of them to fill the device.
  let parts = Math.max(
    1,
    Math.min(
      Math.ceil(loaded.fullGrid / p.segments),
      Math.ceil(p.length / (FIRST_PASS_TILES * slots)),
    ),
  );
  let range = Math.ceil(Math.ceil(p.length / parts) / slots) * slots;
  parts = Math.ceil(p.length / range);
  let input: KernelArgument = x;
  let inputIndices: DeviceBuffer | undefined;
  let inputValues: DeviceBuffer | undefined;
  let length = p.length;
  let segmentStride = p.segmentStride;
  let elementStride = p.elementStride;
  try {
    for (;;) {
      const last = parts === 1;
      let outValues: KernelArgument = values;
      let outIndices: KernelArgument = indices;
      let scratchValues: DeviceBuffer | undefined;
      let scratchIndices: DeviceBuffer | undefined;
      if (!last) {
        const count = p.segments * parts * slots;
        scratchValues = DeviceBuffer.allocate(count * valueBytes, { stream });
        scratchIndices = DeviceBuffer.allocate(count * 4, { stream });
        outValues = scratchValues;
        outIndices = scratchIndices;
      }
      args[0] = input;
      args[1] = inputIndices ?? 0n;
      args[2] = outValues;
      args[3] = outIndices;
      args[4] = length;
      args[5] = p.segments;
      args[6] = segmentStride;
      args[7] = elementStride;
      args[8] = range;
      args[9] = parts;
      args[10] = p.k;
      args[11] = p.outSegmentStride;
      args[12] = p.outRankStride;
      args[13] = last ? 1 : 0;
      const items = p.segments * parts;
      launchOn(loaded.kernel, stream, Math.min(items, MAX_GRID), slots, 0, args);
      inputValues?.dispose();
      inputIndices?.dispose();
      inputValues = undefined;
      inputIndices = undefined;
      if (last) break;
      // The next pass merges MERGE_WIDTH lists per block.
      input = scratchValues!;
      inputValues = scratchValues;
      inputIndices = scratchIndices;
      length = parts * slots;
      segmentStride = length;
      elementStride = 1;
      range = MERGE_WIDTH * slots;
      parts = Math.ceil(parts / MERGE_WIDTH);
    }
  } finally {
    clearList(args, 0);
    inputValues?.dispose();
    inputIndices?.dispose();
  }
  return { values, indices };
}
