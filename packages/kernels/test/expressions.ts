/**
 * What the name tests of @cuda-tasks/kernels share: random kernels (signatures with tricky
 * parameter names, dtypes, scalars, and an expression of the parameters), their CUDA C, a CPU
 * evaluation of the same expression, and a reader of generated sources that finds every name
 * a user could spell and the function it appears in.
 */
import type { DType } from '@cuda-tasks/cudadrv';
import fc from 'fast-check';

/** Every dtype a signature can name. */
export const ALL_DTYPES: readonly DType[] = [
  'float32',
  'float64',
  'int32',
  'uint32',
  'int8',
  'uint8',
  'float16',
  'bfloat16',
];

/**
 * Names that met generated names under the old scheme (`ct_<name>_<u>` loads, `ct_i1`..`ct_i3`
 * indices, unprefixed locals and helpers of the reduction kernels), names ending in `_<digit>`,
 * and names of CUDA functions and types the generated code does not use.
 */
export const TRICKY_NAMES: readonly string[] = [
  'x',
  'x_0',
  'x_1',
  'x_2',
  'x_3',
  'y',
  'y_0',
  'y_1',
  'z',
  'i1',
  'i2',
  'i3',
  'i_1',
  'n_1',
  'a',
  'b',
  'a_1',
  'b_2',
  'a0',
  'a1',
  'v0',
  'v1',
  'p0',
  'p1',
  'p0_1',
  'p1_0',
  'o0',
  'o_y',
  'y_7',
  'partials',
  'partials_1',
  'vectors',
  'vector',
  'block_reduce',
  'shuffle_down',
  'shuffle_word',
  'finish',
  'identity',
  'map',
  'reduce',
  'post',
  'acc',
  'body',
  'elementwise',
  'reduce_blocks',
  'f16_to_f32',
  'stride',
  'length',
  'segments',
  'parts',
  'chunk',
  'items',
  'segment_stride',
  'element_stride',
  'begin',
  'end',
  'base',
  'step',
  'head',
  'tile',
  'thread',
  'tail',
  'lane',
  'warp',
  'value',
  'words',
  'count',
  'w',
  's',
  'p',
  'k',
  'd',
  'u',
  'r',
  'q',
  'h',
  'f',
  't',
  'min',
  'max',
  'sinf',
  'float4',
  'dim3',
];

/** C and C++ keywords and CUDA's built-in variables: never a parameter's name. */
export const KEYWORDS: ReadonlySet<string> = new Set(
  (
    'alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t ' +
    'char32_t class compl concept const consteval constexpr constinit const_cast continue ' +
    'co_await co_return co_yield decltype default delete do double dynamic_cast else enum ' +
    'explicit export extern false float for friend goto if inline int long mutable namespace ' +
    'new noexcept not not_eq nullptr operator or or_eq private protected public register ' +
    'reinterpret_cast requires restrict return short signed sizeof static static_assert ' +
    'static_cast struct switch template this thread_local throw true try typedef typeid ' +
    'typename union unsigned using virtual void volatile wchar_t while xor xor_eq ' +
    'threadIdx blockIdx blockDim gridDim warpSize'
  ).split(' '),
);

/** Macros of nvcc's host compiler that a lowercase name could meet (unit tests compile with nvcc). */
const HOST_MACROS = new Set(['unix', 'linux', 'i386', 'assert', 'errno', 'stdin', 'stdout']);

/** What the code of each role sees besides the parameters, and so may not name one. */
export const ROLE_NAMES = {
  elementwise: { inputs: ['i', 'n'], outputs: ['i', 'n'] },
  reduction: { inputs: ['i'], outputs: ['a', 'n'] },
} as const;

/** A name a user may give a parameter of `role` (before the per-kernel uniqueness). */
export function validName(name: string, refused: readonly string[]): boolean {
  return (
    /^[A-Za-z][A-Za-z0-9_]*$/.test(name) &&
    !name.startsWith('ct_') &&
    !KEYWORDS.has(name) &&
    !HOST_MACROS.has(name) &&
    !refused.includes(name)
  );
}

/** A parameter name: a tricky one, or a random lowercase identifier. */
export const nameArbitrary: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...TRICKY_NAMES) },
  { weight: 1, arbitrary: fc.stringMatching(/^[a-z][a-z0-9_]{0,5}$/) },
);

/** An expression over parameters, small non-negative integer constants and `i % 4`. */
export type Expression =
  | { readonly op: 'parameter'; readonly index: number }
  | { readonly op: 'constant'; readonly value: number }
  | { readonly op: 'index' }
  | {
      readonly op: '+' | '*' | 'max' | 'min';
      readonly left: Expression;
      readonly right: Expression;
    };

/** Values every parameter takes in the random cases: integers in 0..MAX_VALUE. */
export const MAX_VALUE = 3;
/**
 * The largest value an expression may reach (with every leaf at its largest): exact in every
 * dtype, int8 and bfloat16 included, so the CPU evaluation is the exact expected result.
 */
export const MAX_RESULT = 127;

/** Expressions over `count` parameters whose largest value is at most MAX_RESULT. */
export function expressionArbitrary(count: number, index: boolean): fc.Arbitrary<Expression> {
  const leaves: fc.Arbitrary<Expression>[] = [
    fc.integer({ min: 0, max: count - 1 }).map((k) => ({ op: 'parameter' as const, index: k })),
    fc.integer({ min: 0, max: MAX_VALUE }).map((value) => ({ op: 'constant' as const, value })),
  ];
  if (index) leaves.push(fc.constant({ op: 'index' as const }));
  const { tree } = fc.letrec<{ tree: Expression; node: Expression }>((tie) => ({
    tree: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      ...leaves.map((arbitrary) => ({ weight: 1, arbitrary })),
      { weight: 2, arbitrary: tie('node') },
    ),
    node: fc.record({
      op: fc.constantFrom('+' as const, '*' as const, 'max' as const, 'min' as const),
      left: tie('tree'),
      right: tie('tree'),
    }),
  }));
  // Every parameter appears at least once: each name must be bound to its own value.
  const all = (expression: Expression): Expression =>
    Array.from({ length: count }, (_, k) => k).reduce<Expression>(
      (sum, k) =>
        uses(sum, k) ? sum : { op: '+', left: sum, right: { op: 'parameter', index: k } },
      expression,
    );
  return tree
    .map(all)
    .filter((expression) => evaluate(expression, () => MAX_VALUE, MAX_VALUE) <= MAX_RESULT);
}

function uses(expression: Expression, k: number): boolean {
  switch (expression.op) {
    case 'parameter':
      return expression.index === k;
    case 'constant':
    case 'index':
      return false;
    default:
      return uses(expression.left, k) || uses(expression.right, k);
  }
}

/** The expression's value with parameter k = `value(k)` and the index `i`. */
export function evaluate(expression: Expression, value: (k: number) => number, i: number): number {
  switch (expression.op) {
    case 'parameter':
      return value(expression.index);
    case 'constant':
      return expression.value;
    case 'index':
      return i % 4;
    default: {
      const left = evaluate(expression.left, value, i);
      const right = evaluate(expression.right, value, i);
      if (expression.op === '+') return left + right;
      if (expression.op === '*') return left * right;
      return expression.op === 'max' ? Math.max(left, right) : Math.min(left, right);
    }
  }
}

/** The expression in C, parameter k spelled `names[k]`. */
export function toC(expression: Expression, names: readonly string[]): string {
  switch (expression.op) {
    case 'parameter':
      return names[expression.index]!;
    case 'constant':
      return `${expression.value}`;
    case 'index':
      return '(i % 4)';
    default: {
      const left = toC(expression.left, names);
      const right = toC(expression.right, names);
      if (expression.op === '+' || expression.op === '*')
        return `(${left} ${expression.op} ${right})`;
      const compare = expression.op === 'max' ? '>' : '<';
      return `(${left} ${compare} ${right} ? ${left} : ${right})`;
    }
  }
}

/** One parameter of a random kernel. */
export interface RandomParameter {
  readonly name: string;
  readonly dtype: DType;
  /** Inputs only: passed as a number. */
  readonly scalar: boolean;
}

/** A random element-wise kernel: inputs (at least one array), outputs, one expression each. */
export interface ElementwiseCase {
  readonly inputs: readonly RandomParameter[];
  readonly outputs: readonly RandomParameter[];
  readonly expressions: readonly Expression[];
}

/** A random reduction: inputs (at least one array), the output, map and the combining op. */
export interface ReductionCase {
  readonly inputs: readonly RandomParameter[];
  readonly output: RandomParameter;
  readonly map: Expression;
  readonly reduce: 'sum' | 'max' | 'min';
  /** Whether post adds the count: `y = a + n`. */
  readonly addCount: boolean;
}

function distinctNames(count: number, valid: (name: string, k: number) => boolean) {
  return fc
    .uniqueArray(nameArbitrary, { minLength: count, maxLength: count })
    .filter((names) => names.every(valid));
}

/** Random element-wise kernels: 1..4 inputs, 1..2 outputs. */
export const elementwiseCaseArbitrary: fc.Arbitrary<ElementwiseCase> = fc
  .record({
    inputCount: fc.integer({ min: 1, max: 4 }),
    outputCount: fc.integer({ min: 1, max: 2 }),
  })
  .chain(({ inputCount, outputCount }) =>
    fc.record({
      names: distinctNames(inputCount + outputCount, (name) =>
        validName(name, ROLE_NAMES.elementwise.inputs),
      ),
      dtypes: fc.array(fc.constantFrom(...ALL_DTYPES), {
        minLength: inputCount + outputCount,
        maxLength: inputCount + outputCount,
      }),
      scalars: fc
        .array(fc.boolean(), { minLength: inputCount, maxLength: inputCount })
        .filter((scalars) => scalars.some((scalar) => !scalar)),
      expressions: fc.array(expressionArbitrary(inputCount, true), {
        minLength: outputCount,
        maxLength: outputCount,
      }),
    }),
  )
  .map(({ names, dtypes, scalars, expressions }) => ({
    inputs: scalars.map((scalar, k) => ({ name: names[k]!, dtype: dtypes[k]!, scalar })),
    outputs: expressions.map((_, j) => ({
      name: names[scalars.length + j]!,
      dtype: dtypes[scalars.length + j]!,
      scalar: false,
    })),
    expressions,
  }));

/** Dtypes that hold every sum of the random reductions exactly. */
const WIDE: readonly DType[] = ['float32', 'float64', 'int32', 'uint32'];

/** Random reductions: 1..4 inputs. */
export const reductionCaseArbitrary: fc.Arbitrary<ReductionCase> = fc
  .integer({ min: 1, max: 4 })
  .chain((inputCount) =>
    fc
      .record({
        names: distinctNames(inputCount + 1, () => true).filter(
          (names) =>
            names
              .slice(0, inputCount)
              .every((name) => validName(name, ROLE_NAMES.reduction.inputs)) &&
            validName(names[inputCount]!, ROLE_NAMES.reduction.outputs),
        ),
        dtypes: fc.array(fc.constantFrom(...ALL_DTYPES), {
          minLength: inputCount,
          maxLength: inputCount,
        }),
        scalars: fc
          .array(fc.boolean(), { minLength: inputCount, maxLength: inputCount })
          .filter((scalars) => scalars.some((scalar) => !scalar)),
        map: expressionArbitrary(inputCount, true),
        reduce: fc.constantFrom('sum' as const, 'max' as const, 'min' as const),
        addCount: fc.boolean(),
      })
      .chain((drawn) =>
        fc
          .constantFrom(...(drawn.reduce === 'sum' ? WIDE : ALL_DTYPES))
          .map((outputDtype) => ({ ...drawn, outputDtype })),
      ),
  )
  .map(({ names, dtypes, scalars, map, reduce, addCount, outputDtype }) => ({
    inputs: scalars.map((scalar, k) => ({ name: names[k]!, dtype: dtypes[k]!, scalar })),
    output: { name: names[scalars.length]!, dtype: outputDtype, scalar: false },
    map,
    reduce,
    addCount: addCount && WIDE.includes(outputDtype),
  }));

/** The signature of a case: every parameter with its dtype. */
export function signatureOf(
  inputs: readonly RandomParameter[],
  outputs: readonly RandomParameter[],
): string {
  const side = (parameters: readonly RandomParameter[]) =>
    parameters.map((parameter) => `${parameter.name}: ${parameter.dtype}`).join(', ');
  return `${side(inputs)} -> ${side(outputs)}`;
}

/** The element-wise body: each output assigned its expression. */
export function elementwiseBody(c: ElementwiseCase): string {
  const names = c.inputs.map((input) => input.name);
  return c.outputs
    .map((output, j) => `${output.name} = ${toC(c.expressions[j]!, names)};`)
    .join(' ');
}

/** The reduction's definition. */
export function reductionDefinition(c: ReductionCase): {
  map: string;
  reduce: string;
  identity: string;
  post: string;
  accumulate?: DType;
} {
  const names = c.inputs.map((input) => input.name);
  const post = `${c.output.name} = a${c.addCount ? ' + n' : ''}`;
  const map = toC(c.map, names);
  if (c.reduce === 'sum')
    return { map, reduce: 'a + b', identity: '0', post, accumulate: 'float64' };
  const compare = c.reduce === 'max' ? '>' : '<';
  return {
    map,
    reduce: `(a ${compare} b ? a : b)`,
    identity: c.reduce === 'max' ? '0' : `${MAX_RESULT}`,
    post,
  };
}

/** The CPU fold of a reduction's contributions (the identity first, as the definition's). */
export function fold(c: ReductionCase, values: readonly number[]): number {
  let a = c.reduce === 'min' ? MAX_RESULT : 0;
  for (const v of values) {
    a = c.reduce === 'sum' ? a + v : c.reduce === 'max' ? Math.max(a, v) : Math.min(a, v);
  }
  return c.addCount ? a + values.length : a;
}

// --- Reading generated sources ---------------------------------------------------------------

/** A top-level definition of a source: a function (with its parameter text) or a type. */
export interface Definition {
  readonly name: string;
  /** A function's parameter list (between its parentheses); undefined for a type. */
  readonly parameters: string | undefined;
  /** Everything from the header to the closing brace. */
  readonly text: string;
}

/** The source without comments, its string literals emptied (asm templates, extern "C"). */
export function stripped(source: string): string {
  return source.replace(/\/\/[^\n]*/g, '').replace(/"(?:[^"\\\n]|\\.)*"/g, '""');
}

/** The top-level braced definitions of a (stripped) source, and the text between them. */
export function definitions(source: string): { definitions: Definition[]; between: string } {
  const found: Definition[] = [];
  let between = '';
  let start = 0;
  let i = 0;
  while (i < source.length) {
    const c = source[i]!;
    if (c === ';') {
      between += source.slice(start, i + 1);
      start = i + 1;
    } else if (c === '{') {
      let depth = 0;
      let j = i;
      for (; j < source.length; j++) {
        if (source[j] === '{') depth++;
        else if (source[j] === '}' && --depth === 0) break;
      }
      const header = source.slice(start, i).trim();
      const text = source.slice(start, j + 1);
      if (header.endsWith(')')) {
        let level = 0;
        let k = header.length - 1;
        for (; k >= 0; k--) {
          if (header[k] === ')') level++;
          else if (header[k] === '(' && --level === 0) break;
        }
        const name = /([A-Za-z_]\w*)\s*$/.exec(header.slice(0, k))![1]!;
        found.push({ name, parameters: header.slice(k + 1, -1), text });
      } else {
        found.push({ name: /([A-Za-z_]\w*)\s*$/.exec(header)![1]!, parameters: undefined, text });
      }
      i = j + 1;
      start = i;
      continue;
    }
    i++;
  }
  between += source.slice(start);
  return { definitions: found, between };
}

/**
 * The identifiers of `text` a user could spell as a parameter name: not a keyword or built-in,
 * not starting with `ct_` or `_`, not a member after `.`, not a number's suffix.
 */
export function spellable(text: string): string[] {
  const names: string[] = [];
  for (const match of text.matchAll(/(\.|->)?\s*\b([A-Za-z_][A-Za-z0-9_]*)|\b\d[\w.]*/g)) {
    const name = match[2];
    if (name === undefined || match[1] !== undefined) continue;
    if (name.startsWith('_') || name.startsWith('ct_') || KEYWORDS.has(name)) continue;
    names.push(name);
  }
  return names;
}

/** A parameter list's names and types, in order. */
export function parameterList(text: string): { name: string; type: string }[] {
  if (text.trim() === '') return [];
  return text.split(',').map((item) => {
    const match = /^(.*?)([A-Za-z_]\w*)\s*$/s.exec(item.trim())!;
    return { type: match[1]!.replace(/\s+/g, ' ').trim(), name: match[2]! };
  });
}

/** Each call of `name(...)` in `text`: its arguments, split at top-level commas. */
export function calls(text: string, name: string): string[][] {
  const found: string[][] = [];
  const pattern = new RegExp(`\\b${name}\\(`, 'g');
  for (const match of text.matchAll(pattern)) {
    let depth = 0;
    let current = '';
    const args: string[] = [];
    for (let k = match.index + match[0].length - 1; k < text.length; k++) {
      const c = text[k]!;
      if (c === '(' || c === '[') {
        if (depth++ > 0) current += c;
      } else if (c === ')' || c === ']') {
        if (--depth === 0) {
          args.push(current.trim());
          break;
        }
        current += c;
      } else if (c === ',' && depth === 1) {
        args.push(current.trim());
        current = '';
      } else current += c;
    }
    found.push(args);
  }
  return found;
}
