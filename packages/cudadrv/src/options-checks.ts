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
 * Throws a CudaArgumentError unless `options` is an object or undefined (catches
 * `lu(a, 'upper')`-style mistakes; a call without options passes none), and, given the names
 * the call takes (`known`), unless every option is one of them: a misspelt option
 * (`{ transa: true }`) would otherwise be ignored, and the call would compute something else
 * without a word. Allocates nothing when the options pass.
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
  const lower = name.toLowerCase();
  const near = known.find((candidate) => candidate.toLowerCase() === lower);
  throw new CudaArgumentError(
    `${call}: unknown option ${JSON.stringify(name)}${near === undefined ? '' : ` (did you mean ${near}?)`}; ${call} takes ${known.join(', ')}`,
  );
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

// Stream's brand (stream/stream.ts, on its prototype), read here without importing the class.
const streamBrand = Symbol.for('@cuda-tasks/Stream');

/**
 * The `stream` option: a Stream, or undefined (the call then runs on the current stream, which
 * `resolveStream` looks up). Anything else (`null`, a raw CUstream handle, a number, an Event)
 * is a CudaArgumentError naming the call, before it could reach a native call; a disposed
 * Stream throws a DisposedError naming it at its first use.
 * @example const stream = resolveStream(streamOption('gemm', options.stream));
 */
export function streamOption(call: string, value: unknown): Stream | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || !(streamBrand in value)) {
    fail(call, 'stream', 'a Stream', value);
  }
  return value as unknown as Stream;
}
