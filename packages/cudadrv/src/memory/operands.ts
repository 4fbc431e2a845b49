/**
 * The checks every library package runs on its operands before any native call: that an
 * array lives in the context of the stream it is used on, and that what a routine writes does
 * not overlap what it reads. Both are pure (no driver call) and allocate nothing when the
 * operands pass; messages are built only on failure.
 */
import type { Context } from '../context/device.js';
import { CudaArgumentError } from '../errors.js';
import type { Stream } from '../stream/stream.js';

/** What the context check reads of an array (a DeviceArray has it). */
export interface ContextOperand {
  /** The array's memory, and through it the context that owns it. */
  readonly buffer: { readonly context: Context };
}

function describeContext(context: Context, other: Context): string {
  // Two contexts of one device read the same in toString(): add the CUcontext then.
  return context.device?.ordinal === other.device?.ordinal && context !== other
    ? `${context} (CUcontext 0x${context.handle?.toString(16)})`
    : String(context);
}

/**
 * Throws a CudaArgumentError unless `array`'s memory belongs to the context of `stream`: an
 * array of one device (or context) used on a stream of another would reach the device as an
 * illegal address and lose the context for the whole process. One comparison of two fields.
 * @example assertSameContext('gemm', 'a', a, stream);
 */
export function assertSameContext(
  call: string,
  name: string,
  array: ContextOperand,
  stream: Stream,
): void {
  const context = array.buffer.context;
  const streamContext = stream.context;
  if (context === streamContext) return;
  throw new CudaArgumentError(
    `${call}: ${name} lives in ${describeContext(context, streamContext)}, but ${stream} belongs to ${describeContext(streamContext, context)}; use arrays of the stream's context (copy them there first) or a stream of theirs`,
  );
}

/**
 * The bytes of one buffer a routine touches for one operand: `blocks` blocks `blockStride`
 * bytes apart; each block `runs` runs `runStride` bytes apart; each run `runBytes` long; the
 * first at byte `start`. A column-major matrix of `rows` x `columns` elements of `e` bytes with
 * leading dimension `ld` at element offset `o` is { start: o e, runBytes: rows e, runs:
 * columns, runStride: ld e, blocks: 1 }; a strided batch adds blocks; a vector of `n` elements
 * `inc` apart is runs of one element. Strides are never negative.
 */
export interface Footprint {
  /** The memory the bytes are counted in; distinct buffers never share memory. */
  buffer: unknown;
  /** The first byte, from the buffer's start. */
  start: number;
  /** Bytes of each run (a column of a matrix, an element of a vector). */
  runBytes: number;
  /** Runs per block (a matrix's columns, a vector's elements). */
  runs: number;
  /** Bytes between the starts of consecutive runs (the leading dimension, the increment). */
  runStride: number;
  /** Blocks (the matrices of a strided batch; 1 otherwise). */
  blocks: number;
  /** Bytes between the starts of consecutive blocks (0: one block used for all). */
  blockStride: number;
}

/** An empty footprint, to be filled by `matrixFootprint` / `vectorFootprint` (reuse it). */
export function newFootprint(): Footprint {
  return { buffer: null, start: 0, runBytes: 0, runs: 0, runStride: 0, blocks: 0, blockStride: 0 };
}

/**
 * Fills `out` with the footprint of a column-major matrix (or `blocks` of them, `blockStride`
 * elements apart) at element `offset` of `buffer`, and returns it.
 */
export function matrixFootprint(
  out: Footprint,
  buffer: unknown,
  offset: number,
  elementBytes: number,
  rows: number,
  columns: number,
  leadingDimension: number,
  blocks = 1,
  blockStride = 0,
): Footprint {
  out.buffer = buffer;
  out.start = offset * elementBytes;
  out.runBytes = rows * elementBytes;
  out.runs = columns;
  out.runStride = leadingDimension * elementBytes;
  out.blocks = blocks;
  out.blockStride = blockStride * elementBytes;
  return out;
}

/** Fills `out` with the footprint of `length` elements `increment` apart from element `offset`. */
export function vectorFootprint(
  out: Footprint,
  buffer: unknown,
  offset: number,
  elementBytes: number,
  length: number,
  increment: number,
): Footprint {
  return matrixFootprint(out, buffer, offset, elementBytes, 1, length, increment);
}

function isEmpty(f: Footprint): boolean {
  return f.runBytes <= 0 || f.runs <= 0 || f.blocks <= 0;
}

/** Blocks that are not all the same one (a stride of 0 repeats one block). */
function distinctBlocks(f: Footprint): number {
  return f.blockStride === 0 ? 1 : f.blocks;
}

/** Runs that are not all the same one. */
function distinctRuns(f: Footprint): number {
  return f.runStride === 0 ? 1 : f.runs;
}

/** Bytes from a block's first byte to one past its last. */
function blockSpan(f: Footprint): number {
  return (distinctRuns(f) - 1) * f.runStride + f.runBytes;
}

/** Bytes from the first byte to one past the last. */
function span(f: Footprint): number {
  return (distinctBlocks(f) - 1) * f.blockStride + blockSpan(f);
}

/**
 * Whether runs [a + j s, + aBytes) for j < aRuns and [b + k s, + bBytes) for k < bRuns share
 * a byte (one run stride `s` for both): runs j and k meet when (j - k) s lies strictly
 * between b - a - aBytes and b - a + bBytes.
 */
function sameStrideMeet(
  a: number,
  aRuns: number,
  aBytes: number,
  b: number,
  bRuns: number,
  bBytes: number,
  s: number,
): boolean {
  const d = b - a;
  if (s === 0) return d < aBytes && -d < bBytes;
  const low = Math.max(Math.floor((d - aBytes) / s) + 1, 1 - bRuns);
  const high = Math.min(Math.ceil((d + bBytes) / s) - 1, aRuns - 1);
  return low <= high;
}

/** The first and last block of `f` whose extent can meet bytes [p, p + bytes). */
function blockRange(f: Footprint, p: number, bytes: number, range: { low: number; high: number }) {
  const blocks = distinctBlocks(f);
  if (blocks === 1) {
    range.low = 0;
    range.high = 0;
    return range;
  }
  range.low = Math.max(0, Math.ceil((p - f.start - blockSpan(f) + 1) / f.blockStride));
  range.high = Math.min(blocks - 1, Math.floor((p + bytes - 1 - f.start) / f.blockStride));
  return range;
}

const outerRange = { low: 0, high: 0 };

/** Whether bytes [p, p + bytes) meet any run of `f`. */
function runMeets(f: Footprint, p: number, bytes: number): boolean {
  const runs = distinctRuns(f);
  const { low, high } = blockRange(f, p, bytes, outerRange);
  for (let block = low; block <= high; block++) {
    const base = f.start + block * f.blockStride;
    if (sameStrideMeet(p, 1, bytes, base, runs, f.runBytes, f.runStride)) return true;
  }
  return false;
}

const innerRange = { low: 0, high: 0 };

/**
 * Whether bytes [aStart, aStart + aBytes) and [bStart, bStart + bBytes) share a byte (an
 * empty range shares none): the check of two contiguous operands of one buffer.
 */
export function byteRangesOverlap(
  aStart: number,
  aBytes: number,
  bStart: number,
  bBytes: number,
): boolean {
  return aBytes > 0 && bBytes > 0 && aStart < bStart + bBytes && bStart < aStart + aBytes;
}

/**
 * Whether two footprints share a byte. Distinct buffers never do; on one buffer, disjoint
 * extents answer at once; otherwise the runs are compared exactly: per pair of blocks in O(1)
 * when both have one run stride, else run by run of the footprint with fewer runs.
 */
export function footprintsOverlap(a: Footprint, b: Footprint): boolean {
  if (a.buffer !== b.buffer || isEmpty(a) || isEmpty(b)) return false;
  if (!byteRangesOverlap(a.start, span(a), b.start, span(b))) return false;
  // The outer loops below go over the blocks of the first: take the one with fewer.
  if (distinctBlocks(a) > distinctBlocks(b)) return footprintsOverlap(b, a);
  const aRuns = distinctRuns(a);
  const bRuns = distinctRuns(b);
  // One run stride (a lone run takes the other's).
  const stride = aRuns === 1 ? b.runStride : a.runStride;
  if (aRuns === 1 || bRuns === 1 || a.runStride === b.runStride) {
    const aStride = aRuns === 1 ? stride : a.runStride;
    const bStride = bRuns === 1 ? stride : b.runStride;
    if (aStride === bStride) {
      const aSpan = blockSpan(a);
      for (let block = 0; block < distinctBlocks(a); block++) {
        const base = a.start + block * a.blockStride;
        const { low, high } = blockRange(b, base, aSpan, innerRange);
        for (let other = low; other <= high; other++) {
          const otherBase = b.start + other * b.blockStride;
          if (sameStrideMeet(base, aRuns, a.runBytes, otherBase, bRuns, b.runBytes, aStride)) {
            return true;
          }
        }
      }
      return false;
    }
  }
  // Different run strides: each run of the footprint with fewer runs against the other.
  const few = distinctBlocks(a) * aRuns <= distinctBlocks(b) * bRuns ? a : b;
  const many = few === a ? b : a;
  const fewRuns = distinctRuns(few);
  for (let block = 0; block < distinctBlocks(few); block++) {
    for (let run = 0; run < fewRuns; run++) {
      const p = few.start + block * few.blockStride + run * few.runStride;
      if (runMeets(many, p, few.runBytes)) return true;
    }
  }
  return false;
}

/**
 * Throws a CudaArgumentError when `written` (what `call` writes of operand `writtenName`)
 * shares a byte with `read` (what it reads of `readName`): the library leaves the result of
 * such a call undefined. Allocates nothing when they are apart.
 * @example assertApart('gemm', 'c', footprintC, 'a', footprintA);
 */
export function assertApart(
  call: string,
  writtenName: string,
  written: Footprint,
  readName: string,
  read: Footprint,
): void {
  if (!footprintsOverlap(written, read)) return;
  throw new CudaArgumentError(
    `${call}: the output ${writtenName} overlaps ${readName} in memory (bytes ${written.start}..${written.start + span(written) - 1} and ${read.start}..${read.start + span(read) - 1} of one buffer share elements); the result would be undefined: pass an output that does not overlap its inputs (a copy, or another array)`,
  );
}
