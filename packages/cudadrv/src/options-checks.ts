/**
 * The checks of a call's options object every library runs before its native calls, beside the
 * operand checks (`memory/array-checks.ts`): that the options are an object, and that a flag,
 * a number or the `stream` option holds a value of its kind. They take the call first, then
 * the option's name, then its value, as the operand checks do, and apply a default to
 * `undefined` only (as destructuring defaults do: `null` is a bad value, not an omitted one).
 * Pure, and they allocate nothing when the value passes: messages are built only on failure,
 * each a CudaArgumentError that starts with the call and names the option
 * (`gemm: option transA must be true or false, got "yes"`).
 */
import { CudaArgumentError } from './errors.js';
import type { Stream } from './stream/stream.js';
import { STREAM_BRAND } from './stream-brand.js';

/** A short description of a wrong option value: `null`, a class name, a quoted string, `1n`. */
function describeOption(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value !== 'object' || value === null) return String(value);
  return value.constructor?.name ?? 'an object';
}

function fail(call: string, name: string, expected: string, value: unknown): never {
  throw new CudaArgumentError(
    `${call}: option ${name} must be ${expected}, got ${describeOption(value)}`,
  );
}

/**
 * The options object a call's default stands for when none is passed (a parameter default of
 * `{}` would make one per call): one shared, frozen, empty object. For the sibling packages
 * (`@cuda-tasks/cudadrv/internal`).
 * @internal
 */
export const NO_OPTIONS: Readonly<Record<string, undefined>> = Object.freeze({});

/**
 * The names a call that takes only the `stream` option knows (see `assertOptions`).
 * @internal
 */
export const STREAM_ONLY: readonly string[] = ['stream'];

/**
 * Throws a CudaArgumentError unless `options` is an object or undefined (catches
 * `lu(a, 'upper')`-style mistakes; a call without options passes none), and, given the names
 * the call takes (`known`), unless every option is one of them: a misspelt option
 * (`{ transa: true }`) would otherwise be ignored, and the call would compute something else
 * without a word; the message names the option it most likely misspells (`transA`) and lists
 * those the call takes. Allocates nothing when the options pass.
 * @example assertOptions('gemm', options, ['transA', 'transB', 'alpha', 'beta', 'stream']);
 */
export function assertOptions(
  call: string,
  options: unknown,
  known?: readonly string[],
): asserts options is object | undefined {
  if (options === undefined) return;
  if (typeof options !== 'object' || options === null) {
    throw new CudaArgumentError(
      `${call}: options must be an object, got ${describeOption(options)}`,
    );
  }
  if (known === undefined) return;
  for (const name in options) {
    if (known.indexOf(name) < 0) unknownOption(call, name, known);
  }
}

function unknownOption(call: string, name: string, known: readonly string[]): never {
  const near = nearestName(name, known);
  throw new CudaArgumentError(
    `${call}: unknown option ${JSON.stringify(name)}${near === undefined ? '' : ` (did you mean ${near}?)`}; ${call} takes ${known.join(', ')}`,
  );
}

/**
 * The name of `known` that `name` most likely misspells: the one equal to it but for case, else
 * the one nearest by edit distance (a letter added, dropped, changed, or two swapped), when
 * that is at most 1 (2 for names of 6 letters or more) and no other is as near. Undefined when
 * none is near enough: the message then only lists the names. Built on failure only.
 */
function nearestName(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  const sameButCase = known.find((candidate) => candidate.toLowerCase() === lower);
  if (sameButCase !== undefined) return sameButCase;
  const limit = lower.length >= 6 ? 2 : 1;
  let best: string | undefined;
  let bestDistance = limit + 1;
  let tie = false;
  for (const candidate of known) {
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
      tie = false;
    } else if (distance === bestDistance) tie = true;
  }
  return tie ? undefined : best;
}

/** The optimal string alignment distance of `a` and `b` (Levenshtein with swaps). */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let distance = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        distance = Math.min(distance, rows[i - 2]![j - 2]! + 1);
      }
      row.push(distance);
    }
    rows.push(row);
  }
  return rows[a.length]![b.length]!;
}

/**
 * A flag option: `value` when it is true or false, `fallback` when it is undefined; anything
 * else is a CudaArgumentError.
 * @example const transA = booleanOption('gemm', 'transA', options.transA);
 */
export function booleanOption(
  call: string,
  name: string,
  value: unknown,
  fallback = false,
): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') fail(call, name, 'true or false', value);
  return value;
}

/**
 * A flag option that has a deprecated spelling too (`oldName`, read from `oldValue`): either is
 * taken, and both given must say the same.
 * @example const transA = renamedBooleanOption('gemv', 'transA', options.transA, 'trans', options.trans);
 */
export function renamedBooleanOption(
  call: string,
  name: string,
  value: unknown,
  oldName: string,
  oldValue: unknown,
  fallback = false,
): boolean {
  const flag = booleanOption(call, name, value, fallback);
  if (oldValue === undefined) return flag;
  const old = booleanOption(call, oldName, oldValue);
  if (value !== undefined && old !== flag) {
    throw new CudaArgumentError(
      `${call}: option ${name} is ${flag} but ${oldName} (its deprecated spelling) is ${old}: pass ${name} only`,
    );
  }
  return old;
}

/**
 * A number option (a scalar such as alpha): `value` when it is a number, `fallback` when it
 * is undefined; anything else is a CudaArgumentError.
 * @example const alpha = numberOption('gemm', 'alpha', options.alpha, 1);
 */
export function numberOption(call: string, name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number') fail(call, name, 'a number', value);
  return value;
}

/**
 * The `stream` option: a Stream, or undefined (the call then runs on the current stream, which
 * `resolveStream` looks up). Anything else (`null`, a raw CUstream handle, a number, an Event)
 * is a CudaArgumentError naming the call, before it could reach a native call; a disposed
 * Stream throws a DisposedError naming it at its first use.
 * @example const stream = resolveStream(streamOption('gemm', options.stream));
 */
export function streamOption(call: string, value: unknown): Stream | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || !(STREAM_BRAND in value)) {
    fail(call, 'stream', 'a Stream', value);
  }
  return value as unknown as Stream;
}

/**
 * The `context` option of the calls that create in a context (`Stream.create`, `Event.create`,
 * `new Generator`): a Context, or undefined (the current one). Anything else is a
 * CudaArgumentError naming the call, before any native call.
 * @internal
 */
export function contextOption<C extends { makeCurrent(): void }>(
  call: string,
  value: C | undefined,
): C | undefined {
  if (value === undefined) return undefined;
  if (
    typeof value !== 'object' ||
    value === null ||
    typeof (value as { makeCurrent?: unknown }).makeCurrent !== 'function'
  ) {
    fail(call, 'context', 'a Context', value);
  }
  return value;
}

/**
 * A string option (a name shown in traces and errors), or undefined.
 * @internal
 */
export function stringOption(call: string, name: string, value: unknown): string | undefined {
  if (value !== undefined && typeof value !== 'string') fail(call, name, 'a string', value);
  return value as string | undefined;
}

/**
 * A stream priority option, checked without its context: a name ('high', 'normal', 'low') or
 * an integer (`streamPriority` maps a name into the context's range later).
 * @internal
 */
export function priorityOption(call: string, value: unknown): void {
  if (value === undefined || Number.isSafeInteger(value)) return;
  if (value === 'high' || value === 'normal' || value === 'low') return;
  fail(call, 'priority', "'high', 'normal', 'low' or an integer", value);
}
