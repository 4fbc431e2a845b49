/**
 * Kernel signatures: `'x: float32, y: T -> z: T'`. Inputs left of `->`, outputs right of it;
 * each parameter is `name: type`, the type a dtype or a type variable (a capitalized name
 * such as `T`, bound at each call from the arrays' dtypes).
 */
import { CudaArgumentError, DTYPES, type DType } from '@cuda-tasks/cudadrv';

/** A parameter's declared type: a dtype, or the index of a type variable. */
export type DeclaredType = { dtype: DType } | { variable: number };

/** One parameter of a signature. */
export interface Parameter {
  /** The name the body uses. */
  readonly name: string;
  /** The declared type. */
  readonly type: DeclaredType;
}

/** A parsed signature. */
export interface Signature {
  /** The text as written (whitespace folded), for messages and generated comments. */
  readonly text: string;
  /** Parameters left of `->`: arrays or scalars at each call. */
  readonly inputs: readonly Parameter[];
  /** Parameters right of `->`: arrays, allocated when not passed. */
  readonly outputs: readonly Parameter[];
  /** Type variable names, by index. */
  readonly variables: readonly string[];
}

/** Parameters per kernel at most (variant keys pack 4 bits per parameter into a double). */
export const MAX_PARAMETERS = 13;

const IDENTIFIER = /^[A-Za-z][A-Za-z0-9_]*$/;
const TYPE_VARIABLE = /^[A-Z][A-Za-z0-9]*$/;

/**
 * The prefix of every identifier the generators make (locals, helpers, kernel parameters, which
 * are named by the parameter's index, never its name): no parameter's name may start with it.
 */
export const GENERATED_PREFIX = 'ct_';

// C and C++ keywords (through C++20) and CUDA's built-in variables cannot name a parameter.
const KEYWORDS = new Set(
  (
    'alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t ' +
    'char16_t char32_t class compl concept const consteval constexpr constinit const_cast ' +
    'continue co_await co_return co_yield decltype default delete do double dynamic_cast else ' +
    'enum explicit export extern false float for friend goto if inline int long mutable ' +
    'namespace new noexcept not not_eq nullptr operator or or_eq private protected public ' +
    'register reinterpret_cast requires restrict return short signed sizeof static ' +
    'static_assert static_cast struct switch template this thread_local throw true try typedef ' +
    'typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq'
  ).split(' '),
);
const BUILT_INS = new Set(['threadIdx', 'blockIdx', 'blockDim', 'gridDim', 'warpSize']);

/**
 * The names the user's code sees besides the parameters, which a parameter therefore cannot
 * take: per name, what it is (e.g. `i`: "the body's element index"). Inputs and outputs apart:
 * a reduction's map sees the inputs and `i`, its post the output, `a` and `n`.
 */
export interface RoleNames {
  /** Names no input may take. */
  readonly inputs: Readonly<Record<string, string>>;
  /** Names no output may take. */
  readonly outputs: Readonly<Record<string, string>>;
}

/**
 * Why `name` cannot name a parameter whose role reserves `reserved` (undefined when it can):
 * not a C identifier starting with a letter, the generated prefix, a keyword, a CUDA built-in,
 * or a name the role's code sees.
 */
export function refusedName(
  name: string,
  reserved: Readonly<Record<string, string>>,
): string | undefined {
  if (!IDENTIFIER.test(name)) return 'not a name (letters, digits and _, starting with a letter)';
  if (name.startsWith(GENERATED_PREFIX))
    return `names starting with ${GENERATED_PREFIX} are reserved for generated code`;
  if (KEYWORDS.has(name)) return 'a C/C++ keyword cannot name a parameter';
  if (BUILT_INS.has(name)) return 'a CUDA built-in variable cannot name a parameter';
  const seen = Object.hasOwn(reserved, name) ? reserved[name] : undefined;
  if (seen !== undefined) return `reserved, ${seen} is named ${name}`;
  return undefined;
}

/**
 * Parses and checks a signature. `reserved` names what the generated code defines for the
 * user's code (`i`, `n`; a reduction's `a`). Throws CudaArgumentError on bad syntax, an unknown
 * dtype, a refused name (see `refusedName`; the message names the parameter and the rule), a
 * repeated name, or no output.
 */
export function parseSignature(
  text: unknown,
  call: string,
  reserved: RoleNames,
  options: { maxOutputs?: number } = {},
): Signature {
  if (typeof text !== 'string')
    throw new CudaArgumentError(`${call}: the signature must be a string, got ${typeof text}`);
  const folded = text.replace(/\s+/g, ' ').trim();
  const fail = (reason: string): never => {
    throw new CudaArgumentError(`${call}: bad signature ${JSON.stringify(folded)}: ${reason}`);
  };
  const sides = folded.split('->');
  if (sides.length !== 2)
    fail('expected "inputs -> outputs", e.g. "x: float32, y: float32 -> z: float32"');
  const variables: string[] = [];
  const seen = new Set<string>();
  const parseSide = (side: string, role: 'input' | 'output'): Parameter[] => {
    if (side.trim() === '') return [];
    return side.split(',').map((item) => {
      const parts = item.split(':');
      if (parts.length !== 2)
        fail(`${role} parameter ${JSON.stringify(item.trim())} is not "name: type"`);
      const name = parts[0]!.trim();
      const type = parts[1]!.trim();
      const refused = refusedName(name, role === 'input' ? reserved.inputs : reserved.outputs);
      if (refused !== undefined)
        fail(`${role} ${IDENTIFIER.test(name) ? name : JSON.stringify(name)}: ${refused}`);
      if (seen.has(name)) fail(`${JSON.stringify(name)} is declared twice`);
      seen.add(name);
      if (Object.hasOwn(DTYPES, type)) return { name, type: { dtype: type as DType } };
      if (TYPE_VARIABLE.test(type)) {
        let index = variables.indexOf(type);
        if (index < 0) index = variables.push(type) - 1;
        return { name, type: { variable: index } };
      }
      return fail(
        `unknown dtype ${JSON.stringify(type)} for ${name}; expected one of ${Object.keys(DTYPES).join(', ')}, or a type variable such as T`,
      );
    });
  };
  const inputs = parseSide(sides[0]!, 'input');
  const outputs = parseSide(sides[1]!, 'output');
  if (outputs.length === 0) fail('no output after "->"');
  if (options.maxOutputs !== undefined && outputs.length > options.maxOutputs)
    fail(`at most ${options.maxOutputs} output${options.maxOutputs === 1 ? '' : 's'}`);
  if (inputs.length + outputs.length > MAX_PARAMETERS)
    fail(`at most ${MAX_PARAMETERS} parameters in all`);
  return { text: folded, inputs, outputs, variables };
}

/**
 * Whether `code` assigns `name` (`name = ...`, `name += ...`, not `name == ...`): a body that
 * never assigns an output would leave it undefined.
 */
export function assigns(code: string, name: string): boolean {
  return new RegExp(`\\b${name}\\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)`).test(code);
}

/**
 * Whether `code` reads `name` other than as the target of a plain assignment (a half-type
 * output is then loaded before the body runs).
 */
export function reads(code: string, name: string): boolean {
  return new RegExp(`\\b${name}\\b`).test(
    code.replace(new RegExp(`\\b${name}\\s*=(?!=)`, 'g'), ''),
  );
}

/** Throws unless `code` is a non-empty string of C. */
export function checkCode(code: unknown, call: string, name: string): string {
  if (typeof code !== 'string' || code.trim() === '')
    throw new CudaArgumentError(`${call}: ${name} must be a non-empty string of CUDA C`);
  return code;
}
