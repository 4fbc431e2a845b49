/**
 * The code generated for each kernel: its marshaller of an argument list, and its whole launch
 * (checks, stores, the pointers declared used, cuLaunchKernelEx with the kernel's own launch
 * configuration), the only code that issues a launch. See
 * docs/decisions/0027-launch-marshals-per-kernel.md, 0028-launch-is-one-function-per-kernel.md
 * and 0029-launch-without-layers.md.
 */
import { launchGate } from '../context/launch-gate.js';
import { resolveStream } from '../context/provider.js';
import { check, driver } from '../driver.js';
import type { DType } from '../dtype.js';
import { DeviceArray } from '../memory/array.js';
import { handOff } from '../memory/memory.js';
import { engine, issueKernelId, MAX_ENGINE_ARGUMENTS } from '../stream/issue-engine.js';
import { beginOperation, endOperation } from '../stream/observer.js';
import type { Stream } from '../stream/stream.js';
import type { Kernel, KernelArgument, KernelParameter } from './kernel.js';
import type { LaunchConfig } from './launch.js';

// Writer codes, one per parameter: how the generated code checks and stores its argument.
const W_I8 = 0;
const W_U8 = 1;
const W_I16 = 2;
const W_U16 = 3;
const W_I32 = 4;
const W_U32 = 5;
const W_I64 = 6;
const W_U64 = 7;
const W_F32 = 8;
const W_F64 = 9;
export const W_PTR = 10;

export const writerOf: Record<string, number> = {
  int8: W_I8,
  uint8: W_U8,
  int16: W_I16,
  uint16: W_U16,
  int32: W_I32,
  uint32: W_U32,
  int64: W_I64,
  uint64: W_U64,
  float32: W_F32,
  float64: W_F64,
  pointer: W_PTR,
};
const INTEGER_RANGES: Record<number, [number, number]> = {
  [W_I8]: [-128, 127],
  [W_U8]: [0, 255],
  [W_I16]: [-32768, 32767],
  [W_U16]: [0, 65535],
  [W_I32]: [-2147483648, 2147483647],
  [W_U32]: [0, 4294967295],
};
export const TWO_32 = 4294967296;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

/** Kernels of up to this many parameters are launched without an argument array. */
export const MAX_POSITIONAL = 8;

/** Bytes of a CUlaunchConfig (7 dimensions and sizes, the stream, attrs, numAttrs), rounded up. */
export const LAUNCH_CONFIG_BYTES = 64;

/** Up to `MAX_POSITIONAL` kernel arguments, one by one (undefined past the count). */
export type PositionalArguments = [
  a0: unknown,
  a1: unknown,
  a2: unknown,
  a3: unknown,
  a4: unknown,
  a5: unknown,
  a6: unknown,
  a7: unknown,
];

/** A launch's geometry, checked: the grid's and the block's three dimensions, the shared memory. */
export type LaunchGeometry = [
  gx: number,
  gy: number,
  gz: number,
  bx: number,
  by: number,
  bz: number,
  sharedMemory: number,
];

/**
 * A whole launch taking the stream and geometry (checked), the argument count and the
 * arguments one by one.
 */
export type PositionalLaunch = (
  ...launch: [
    stream: Stream,
    ...geometry: LaunchGeometry,
    count: number,
    ...args: PositionalArguments,
  ]
) => void;

/**
 * The whole launch from `launch()`'s own arguments (`config`, the argument count, the
 * arguments one by one): the stream resolved, a one-dimensional geometry checked, then what
 * `PositionalLaunch` does. Returns false, having done nothing, when the geometry is not a
 * number of blocks and a number of threads within the limits (`launch` then takes the general
 * path).
 */
export type DirectLaunch = (
  config: LaunchConfig,
  count: number,
  ...args: PositionalArguments
) => boolean;

/** A marshaller taking the arguments as a list. */
export type ListMarshal = (args: readonly KernelArgument[], stream: Stream) => void;

/**
 * The whole launch with the arguments as a list, on a checked stream and geometry (`launchOn`,
 * and `launch` for other geometries of kernels of more than `MAX_POSITIONAL` parameters).
 */
export type ListLaunch = (
  ...launch: [args: readonly KernelArgument[], stream: Stream, ...geometry: LaunchGeometry]
) => void;

/** What a kernel's marshaller is made from. */
export interface ArgumentLayout {
  kernel: Kernel;
  /** Writer code per parameter. */
  writers: Uint8Array;
  /** 1 where a pointer parameter is only read (declared `const`). */
  readOnly: Uint8Array;
  /** The dtype a pointer parameter requires, or undefined (any pointer, or not a pointer). */
  dtypes: readonly (DType | undefined)[];
  /** Byte offset of the first argument slot in the arena (after the `void*` array). */
  slotBase: number;
  views: ArenaViews;
  /** Byte offset of the kernel's CUlaunchConfig in the arena. */
  configBase: number;
  /** Its address as koffi converts it fastest. */
  configAddress: number | bigint;
}

/** The typed views of a kernel's argument arena. */
export interface ArenaViews {
  i8: Int8Array;
  u8: Uint8Array;
  i16: Int16Array;
  u16: Uint16Array;
  i32: Int32Array;
  u32: Uint32Array;
  i64: BigInt64Array;
  u64: BigUint64Array;
  f32: Float32Array;
  f64: Float64Array;
}

/**
 * What `compileLaunch` makes: the list marshaller, the list launch and, for up to
 * `MAX_POSITIONAL` parameters, the positional and direct launches.
 */
export interface CompiledLaunch {
  /** The text compiled (see `Kernel.launchSource`). */
  source: string;
  marshal: ListMarshal;
  list: ListLaunch;
  positional: PositionalLaunch | undefined;
  direct: DirectLaunch | undefined;
}

/**
 * The lines that store `value` (an expression naming an address or handle as `ffiValue` gives
 * it: a Number or a BigInt) as 64 bits at the `u32` index `word`.
 */
function storeAddress(value: string, word: number): string[] {
  return [
    `if (typeof ${value} === 'number') {`,
    `  u32[${word}] = ${value} >>> 0;`,
    `  u32[${word + 1}] = (${value} / ${TWO_32}) >>> 0;`,
    `} else u64[${word >> 1}] = ${value};`,
  ];
}

/**
 * The lines that store the address or handle `owner` keeps as two int32 halves (`halves`: the
 * fields of the low and the high half) at the `u32` index `word`, with two `Int32Array` stores;
 * from its field `full` (an `ffiValue`) when `owner` comes from an older loaded copy of the
 * package and has no halves. `name` names the local it reads the low half into.
 */
function storeHalves(
  owner: string,
  halves: readonly [string, string],
  full: string,
  word: number,
  name: string,
): string[] {
  return [
    `const ${name} = ${owner}.${halves[0]};`,
    `if (typeof ${name} === 'number') {`,
    `  i32[${word}] = ${name};`,
    `  i32[${word + 1}] = ${owner}.${halves[1]};`,
    '} else {',
    `  const ${name}Full = ${owner}.${full};`,
    ...storeAddress(`${name}Full`, word),
    '}',
  ];
}

/**
 * The code made for one kernel's parameter list: straight-line code with each parameter's
 * check and store written out (no loop, no switch on the parameter type), so that the checks
 * cost what they would in hand-written code and the branches are the same at every launch
 * (docs/decisions/0027-launch-marshals-per-kernel.md).
 * Every argument is checked (an error names the argument and the declared type) before any
 * pointer argument is declared used on `stream`.
 *
 * - `marshal`: the arguments from a list, checked and stored, nothing launched
 *   (`Kernel.marshal`).
 * - `list`: the whole launch on a checked stream and geometry, the arguments from a list
 *   (`launchOn`; `launch` for kernels of more parameters and other geometries).
 * - `positional`: the whole launch on a checked stream and geometry, the arguments one by one;
 *   the kernel's own CUlaunchConfig is written (geometry, stream) and cuLaunchKernelEx called
 *   with the configuration, function and argument addresses as constants of the code, so that
 *   a launch reads no shared configuration and passes nothing on to another function
 *   (docs/decisions/0028-launch-is-one-function-per-kernel.md).
 * - `direct`: `positional` from `launch()`'s own arguments: it resolves the stream and checks a
 *   one-dimensional geometry, the stream and the kernel's module itself
 *   (docs/decisions/0029-launch-without-layers.md).
 *
 * The launch itself is one block of text ending each of the three launch functions. Through
 * the launch gate (context/launch-gate.ts: the kernel's context current, no observer, no issue
 * engine) and on a stream that is not capturing, it writes the configuration and calls
 * cuLaunchKernelEx at once. Otherwise it takes the full path: the module kept for a capture,
 * the launch handed to the issue engine, or the context made current, the configuration
 * written and cuLaunchKernelEx called between the trace's begin and end. Both check the
 * status. A `DeviceArray` argument of a typed pointer parameter is handed off by one call of
 * the memory layer's `handOff` (its common case is small enough for V8 to inline); an untyped
 * pointer's argument by its own `ffiAddressOn`.
 */
export function compileLaunch({
  kernel,
  writers,
  readOnly,
  dtypes,
  slotBase,
  views,
  configBase,
  configAddress,
}: ArgumentLayout): CompiledLaunch {
  const count = writers.length;
  const positional = count <= MAX_POSITIONAL;
  /** The checks and stores of every argument (the list form reads `args[i]` first). */
  const checks = (list: boolean): string[] => {
    const lines: string[] = list
      ? [`if (args.length !== ${count}) kernel.wrongCount(args.length);`]
      : [`if (count !== ${count}) kernel.wrongCount(count);`];
    for (let i = 0; i < count; i++) {
      const offset = slotBase + i * 8;
      const v = `v${i}`;
      if (list) lines.push(`const ${v} = args[${i}];`);
      switch (writers[i]) {
        case W_PTR: {
          // The valid cases inline (a live DeviceArray of the declared dtype; for an untyped
          // pointer also a bigint address), checkPointer for the rest: it accepts a live
          // DeviceBuffer for an untyped pointer and throws the argument's error otherwise. A
          // live allocation has a nonzero address (`live`); at 0, `disposed` tells (an empty
          // buffer, graph memory; an array of an older loaded copy, whose record has no `live`).
          const dtype = dtypes[i];
          const dead = `(!${v}.allocation.live && ${v}.disposed)`;
          lines.push(
            dtype === undefined
              ? `if (typeof ${v} !== 'bigint' && !(DeviceArray.isInstance(${v}) && !${dead})) kernel.checkPointer(${i}, ${v});`
              : `if (!DeviceArray.isInstance(${v}) || ${v}.dtype !== ${JSON.stringify(dtype)} || ${dead}) kernel.checkPointer(${i}, ${v});`,
          );
          break;
        }
        case W_F32:
        case W_F64: {
          const view = writers[i] === W_F32 ? `f32[${offset >> 2}]` : `f64[${offset >> 3}]`;
          lines.push(
            `if (typeof ${v} !== 'number') kernel.badArgument(${i}, ${v});`,
            `${view} = ${v};`,
          );
          break;
        }
        case W_I64:
        case W_U64: {
          const signed = writers[i] === W_I64;
          const bigintCheck = signed
            ? `${v} < INT64_MIN || ${v} > INT64_MAX`
            : `${v} < 0n || ${v} > UINT64_MAX`;
          lines.push(
            `if (typeof ${v} === 'bigint') {`,
            `  if (${bigintCheck}) kernel.badArgument(${i}, ${v});`,
            `  ${signed ? 'i64' : 'u64'}[${offset >> 3}] = ${v};`,
            `} else if (typeof ${v} === 'number' && Number.isSafeInteger(${v})${signed ? '' : ` && ${v} >= 0`}) {`,
            `  u32[${offset >> 2}] = ${v} >>> 0;`,
            `  i32[${(offset >> 2) + 1}] = Math.floor(${v} / ${TWO_32});`,
            `} else kernel.badArgument(${i}, ${v});`,
          );
          break;
        }
        default: {
          const writer = writers[i]!;
          const [low, high] = INTEGER_RANGES[writer]!;
          const n = `n${i}`;
          const view = {
            [W_I8]: `i8[${offset}]`,
            [W_U8]: `u8[${offset}]`,
            [W_I16]: `i16[${offset >> 1}]`,
            [W_U16]: `u16[${offset >> 1}]`,
            [W_I32]: `i32[${offset >> 2}]`,
            [W_U32]: `u32[${offset >> 2}]`,
          }[writer];
          lines.push(
            `const ${n} = typeof ${v} === 'boolean' ? (${v} ? 1 : 0) : ${v};`,
            `if (typeof ${n} !== 'number' || !Number.isInteger(${n}) || ${n} < ${low} || ${n} > ${high}) kernel.badArgument(${i}, ${v});`,
            `${view} = ${n};`,
          );
        }
      }
    }
    // Every argument has passed: the pointers are declared used (the memory layer's one
    // hand-off, see `handOff` in memory.ts) and their addresses written.
    for (let i = 0; i < count; i++) {
      if (writers[i] !== W_PTR) continue;
      const offset = slotBase + i * 8;
      const v = `v${i}`;
      const p = `p${i}`;
      const access = readOnly[i] === 1 ? 'read' : 'write';
      if (dtypes[i] === undefined) {
        // A bigint address, or a DeviceArray or DeviceBuffer of any loaded copy of the package.
        lines.push(
          `const ${p} = typeof ${v} === 'bigint' ? ${v} : ${v}.ffiAddressOn(stream, '${access}');`,
          ...storeAddress(p, offset >> 2),
        );
      } else {
        // A DeviceArray (checked above): its buffer, its allocation record and its address as
        // two int32 halves (`ffiLo`; an array of an older loaded copy has only `ffiAddress`).
        lines.push(
          `handOff(${v}.buffer, ${v}.allocation, stream, '${access}');`,
          ...storeHalves(v, ['ffiLo', 'ffiHi'], 'ffiAddress', offset >> 2, p),
        );
      }
    }
    return lines;
  };
  /** The launch itself, written once: every launch function below ends with it. */
  const word = configBase >> 2;
  /** The geometry and the stream handle (`handle`, the lines that write it) into the config. */
  const configWrites = (handle: string[]): string[] => [
    `u32[${word}] = gx;`,
    `u32[${word + 1}] = gy;`,
    `u32[${word + 2}] = gz;`,
    `u32[${word + 3}] = bx;`,
    `u32[${word + 4}] = by;`,
    `u32[${word + 5}] = bz;`,
    `u32[${word + 6}] = sharedMemory;`,
    ...handle,
  ];
  const issue = [
    'const capture = stream.capture;',
    // The launch gate (context/launch-gate.ts) is open for the kernel's context while that
    // context is current, no operation observer is installed and no issue engine runs: then
    // nothing below but the driver call applies, and the launch makes it at once
    // (docs/decisions/0051-the-launch-gate.md).
    'if (capture === null && GATE.open === CONTEXT && stream.context === CONTEXT) {',
    // The handle as two int32 halves (a stream of an older loaded copy has only its handle).
    ...configWrites(
      storeHalves('stream', ['rawLo', 'rawHi'], 'rawFfiHandle', word + 8, 'streamLo'),
    ),
    '  const result = (cuLaunchKernelEx ??= driver().cuLaunchKernelEx)(CONFIG, FUNCTION, ARGUMENTS, 0);',
    `  if (result !== 0) check(result, 'cuLaunchKernelEx(' + name + ')');`,
    '} else {',
    // A captured kernel needs its module loaded for as long as the graph lives.
    'if (capture !== null) capture.retainModule(module);',
    // With the issue engine running, a launch outside a capture goes to the stream's issuer:
    // the geometry and the argument values just stored, copied into its ring.
    // (Without the engine this costs one property read; the stream's handle is then read
    // without the engine's fence, which only a stream the engine drains needs.)
    'const running = ENGINE.running;',
    'const ring = running && capture === null ? (stream.issue ?? ENGINE.attach(stream)) : null;',
    ...(count <= MAX_ENGINE_ARGUMENTS
      ? [
          'if (ring !== null) {',
          '  const token = beginOperation(name, stream);',
          `  ring.launch(FUNCTION, KERNEL_ID, gx, gy, gz, bx, by, bz, sharedMemory, i32, ${slotBase >> 2}, ${count});`,
          '  endOperation(token);',
          '} else {',
        ]
      : ['{']),
    'stream.context.makeCurrent();',
    ...configWrites([
      'const streamHandle = running ? stream.ffiHandle : stream.rawFfiHandle;',
      ...storeAddress('streamHandle', word + 8),
    ]),
    'const token = beginOperation(name, stream);',
    'const result = driver().cuLaunchKernelEx(CONFIG, FUNCTION, ARGUMENTS, 0);',
    'endOperation(token);',
    `if (result !== 0) check(result, 'cuLaunchKernelEx(' + name + ')');`,
    '}',
    '}',
  ];
  const values = Array.from({ length: MAX_POSITIONAL }, (_, i) => `v${i}`).join(', ');
  const source = [
    "'use strict';",
    'const { i8, u8, i16, u16, i32, u32, i64, u64, f32, f64 } = views;',
    'const { module, CONTEXT, name, CONFIG, FUNCTION, ARGUMENTS, driver, check, beginOperation, endOperation, resolveStream, DeviceArray, handOff, ENGINE, KERNEL_ID, GATE } = launch;',
    // The driver's cuLaunchKernelEx, looked up at the first launch through the gate.
    'let cuLaunchKernelEx;',
    'function marshal(args, stream) {',
    ...checks(true),
    '}',
    'function launchList(args, stream, gx, gy, gz, bx, by, bz, sharedMemory) {',
    ...checks(true),
    ...issue,
    '}',
  ];
  if (positional) {
    source.push(
      `function launchKernel(stream, gx, gy, gz, bx, by, bz, sharedMemory, count, ${values}) {`,
      ...checks(false),
      ...issue,
      '}',
      // The stream, a one-dimensional geometry (x >>> 0 === x: an integer in [0, 2^32 - 1]),
      // the stream's and the module's state, then the arguments: the order `launch` checks in.
      `function launchDirect(config, count, ${values}) {`,
      'const stream = resolveStream(config.stream);',
      'const gx = config.grid;',
      'const bx = config.block;',
      'const sharedMemory = config.sharedMemory ?? 0;',
      "if (typeof gx !== 'number' || typeof bx !== 'number' || gx >>> 0 !== gx || gx === 0 || bx >>> 0 !== bx || bx === 0 || sharedMemory >>> 0 !== sharedMemory) return false;",
      'if (stream.disposed) stream.assertUsable();',
      'if (module.disposed || stream.context !== CONTEXT) kernel.checkStream(stream);',
      'const gy = 1, gz = 1, by = 1, bz = 1;',
      ...checks(false),
      ...issue,
      'return true;',
      '}',
      'return { marshal, list: launchList, positional: launchKernel, direct: launchDirect };',
    );
  } else
    source.push('return { marshal, list: launchList, positional: undefined, direct: undefined };');
  const text = launchText(kernel.name, source);
  // Indirect eval compiles exactly the text `Kernel.launchSource()` prints, in the global scope.
  const factory = globalEval(text) as (...parts: unknown[]) => Omit<CompiledLaunch, 'source'>;
  const made = factory(kernel, views, INT64_MIN, INT64_MAX, UINT64_MAX, {
    module: kernel.module,
    CONTEXT: kernel.module.context,
    name: kernel.name,
    CONFIG: configAddress,
    FUNCTION: kernel.ffiHandle,
    ARGUMENTS: kernel.ffiArgumentArray,
    driver,
    check,
    beginOperation,
    endOperation,
    resolveStream,
    DeviceArray,
    handOff,
    ENGINE: engine,
    KERNEL_ID: issueKernelId(kernel.name),
    GATE: launchGate,
  });
  return {
    source: text,
    marshal: made.marshal,
    list: made.list,
    positional: made.positional,
    direct: made.direct,
  };
}

/** `eval` called indirectly: it sees the global scope only, as `new Function` would. */
// biome-ignore lint/security/noGlobalEval: the launch code is generated per kernel (docs/decisions/0027) from the declared parameter types only
const globalEval: (text: string) => unknown = globalThis.eval;

/** Launches compiled so far in this process: each one's source name is unique. */
let compiledLaunches = 0;

/**
 * The whole text of a kernel's launch factory: a function expression of the parts it closes
 * over (`LAUNCH_FACTORY_PARAMETERS`), named for stack traces and debuggers by its
 * `//# sourceURL=cuda-tasks/launch/<kernel name>-<n>.js`.
 */
function launchText(name: string, body: readonly string[]): string {
  const file = `${name.replace(/[^\w.$-]/g, '_')}-${++compiledLaunches}.js`;
  return [
    `(function launchFactory(${LAUNCH_FACTORY_PARAMETERS.join(', ')}) {`,
    ...body,
    '})',
    `//# sourceURL=cuda-tasks/launch/${file}`,
  ].join('\n');
}

/**
 * The parameters of the function `Kernel.launchSource()` prints, in order: the kernel, its
 * arena's typed views (`ArenaViews`), the int64 and uint64 bounds as bigints, and the launch's
 * constants and functions (`module`, `CONTEXT`, `name`, `CONFIG`, `FUNCTION`, `ARGUMENTS`,
 * `driver`, `check`, `beginOperation`, `endOperation`, `resolveStream`, `DeviceArray`,
 * `handOff`, the issue engine `ENGINE` with this kernel's `KERNEL_ID` in it, and the launch
 * gate `GATE`).
 */
export const LAUNCH_FACTORY_PARAMETERS = Object.freeze([
  'kernel',
  'views',
  'INT64_MIN',
  'INT64_MAX',
  'UINT64_MAX',
  'launch',
] as const);

export function describe(declared: KernelParameter): string {
  const parameter = declared.startsWith('const ') ? declared.slice(6) : declared;
  if (parameter === 'pointer') return 'a DeviceArray, DeviceBuffer or bigint device address';
  if (parameter.endsWith('*')) return `a DeviceArray of ${parameter.slice(0, -1)}`;
  if (parameter === 'int64' || parameter === 'uint64')
    return `an integer (${parameter}, number or bigint)`;
  if (parameter === 'float32' || parameter === 'float64') return `a number (${parameter})`;
  return `an integer in the ${parameter} range`;
}
