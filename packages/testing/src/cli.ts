/**
 * The command lines of the examples and the benchmarks, written once: `node:util` `parseArgs`
 * in strict mode, so an unknown or misspelt flag is an error that lists the valid ones (and
 * suggests the closest), and `--help` prints them. Each flag's default is written once, in its
 * spec: the usage prints it and the parser falls back to it. Imports only Node's own modules,
 * so a command may load it at run time (`@cuda-tasks/testing/cli`).
 */
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

/** One flag of a command line. */
export interface CommandLineOption {
  /** `boolean` for a switch, `string` for a flag that takes a value. */
  readonly type: 'boolean' | 'string';
  /** What the value is, shown in the usage (e.g. `DIR`); for `string` flags. */
  readonly placeholder?: string;
  /** One line for the usage, without the default. */
  readonly description: string;
  /**
   * What the command uses when the flag is absent, printed after the description in
   * parentheses. The parser falls back to this same value, so that `--help` cannot drift.
   */
  readonly default?: string | number;
}

/** The flags of a command, by long name (without the dashes). */
export type CommandLineOptions = Readonly<Record<string, CommandLineOption>>;

/** What a command accepts: its name, its flags and, if any, its positional arguments. */
export interface CommandLineSpec<O extends CommandLineOptions> {
  /** The command as the user runs it, e.g. `pnpm demo`. */
  readonly command: string;
  /** The flags. `--help` / `-h` is added to every command. */
  readonly options: O;
  /** The positional arguments in the usage line (e.g. `trace.json out.svg`); none if absent. */
  readonly positionals?: string;
}

/** The parsed command line: each given flag's value (absent flags are missing), positionals. */
export interface CommandLine<O extends CommandLineOptions> {
  /** The flags given, by long name. */
  readonly values: { [K in keyof O]?: O[K]['type'] extends 'string' ? string : boolean };
  /** The positional arguments. */
  readonly positionals: string[];
  /** True when `--help` or `-h` was given. */
  readonly help: boolean;
}

/** A command line that cannot be parsed: the message says what is wrong, `usage` what is valid. */
export class CommandLineError extends Error {
  /** The command's usage text (see `usage`). */
  readonly usage: string;
  constructor(message: string, usage: string) {
    super(message);
    this.name = 'CommandLineError';
    this.usage = usage;
  }
}

const HELP: CommandLineOption = { type: 'boolean', description: 'print this help and exit' };

function flagText(name: string, option: CommandLineOption): string {
  return option.type === 'string' ? `--${name} ${option.placeholder ?? 'VALUE'}` : `--${name}`;
}

function describeOption(option: CommandLineOption): string {
  return option.default === undefined
    ? option.description
    : `${option.description} (${option.default})`;
}

/**
 * The usage text of a command: one line with every flag, then one line per flag (its
 * description and, in parentheses, its default).
 * @example usage({ command: 'pnpm demo', options: { trace: { type: 'boolean', description: 'trace' } } });
 */
export function usage<O extends CommandLineOptions>(spec: CommandLineSpec<O>): string {
  const options: [string, CommandLineOption][] = [...Object.entries(spec.options), ['help', HELP]];
  const head = [spec.command, ...options.map(([name, option]) => `[${flagText(name, option)}]`)];
  if (spec.positionals) head.push(spec.positionals);
  const width = Math.max(...options.map(([name, option]) => flagText(name, option).length));
  const lines = options.map(
    ([name, option]) => `  ${flagText(name, option).padEnd(width)}  ${describeOption(option)}`,
  );
  return `usage: ${head.join(' ')}\n${lines.join('\n')}`;
}

/** Edit distance counting a swap of two neighbours as one edit, for "did you mean". */
function distance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const same = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + same);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, rows[i - 2]![j - 2]! + 1);
      }
      rows[i]![j] = best;
    }
  }
  return rows[a.length]![b.length]!;
}

/** True when `given` is `name` with letters left out, first letter kept (`reqs` of `requests`). */
function abbreviates(given: string, name: string): boolean {
  if (given.length < 3 || given[0] !== name[0]) return false;
  let at = 0;
  for (const letter of name) if (letter === given[at]) at++;
  return at === given.length;
}

/** The valid flag a misspelt one most likely meant, if any is close. */
function closestName(given: string, names: readonly string[]): string | undefined {
  let best: { name: string; cost: number } | undefined;
  for (const name of names) {
    const cost = distance(given, name);
    const close = cost <= Math.max(1, Math.floor(given.length / 3)) || abbreviates(given, name);
    if (close && (best === undefined || cost < best.cost)) best = { name, cost };
  }
  return best?.name;
}

/**
 * Parses `argv` strictly: an unknown flag, a flag without its value, a value given to a switch,
 * or a positional argument the command does not take is a `CommandLineError` whose message
 * names the valid flags. A leading `--` (what `pnpm run x -- ...` may pass on) is dropped.
 * @example
 * const { values } = parseCommandLine(['--out', 'dir'], {
 *   command: 'pnpm demo',
 *   options: { out: { type: 'string', placeholder: 'DIR', description: 'where to write' } },
 * });
 * values.out; // 'dir'
 */
export function parseCommandLine<O extends CommandLineOptions>(
  argv: readonly string[],
  spec: CommandLineSpec<O>,
): CommandLine<O> {
  const args = argv[0] === '--' ? argv.slice(1) : [...argv];
  const options: Record<string, { type: 'boolean' | 'string'; short?: string }> = {};
  for (const [name, option] of Object.entries(spec.options)) options[name] = { type: option.type };
  options.help = { type: 'boolean', short: 'h' };
  const valid = Object.entries({ ...spec.options, help: HELP })
    .map(([name, option]) => flagText(name, option))
    .join(', ');
  try {
    const parsed = parseArgs({
      args,
      options,
      strict: true,
      allowPositionals: spec.positionals !== undefined,
    });
    const { help, ...values } = parsed.values as Record<string, string | boolean | undefined>;
    return {
      values: values as CommandLine<O>['values'],
      positionals: parsed.positionals,
      help: help === true,
    };
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS_')) throw error;
    const text = (error as Error).message;
    const quoted = /'([^']*)'/.exec(text)?.[1] ?? '';
    let message: string;
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      const given = quoted.replace(/^-+/, '').split('=')[0]!;
      const closest = closestName(given, [...Object.keys(spec.options), 'help']);
      const hint = closest === undefined ? '' : ` (did you mean --${closest}?)`;
      message = `unknown option ${quoted}${hint}; valid options: ${valid}`;
    } else if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
      message = spec.positionals
        ? `unexpected argument '${quoted}'`
        : `unexpected argument '${quoted}': ${spec.command} takes only options: ${valid}`;
    } else {
      message = `${text.split('.')[0]}; valid options: ${valid}`;
    }
    throw new CommandLineError(message, usage(spec));
  }
}

/**
 * Runs a command's parsing step the way every CLI here does: prints the usage and exits 0 on
 * `--help`, prints the error with the usage to stderr and exits 2 on a bad command line.
 */
export function parseCommandLineOrExit<O extends CommandLineOptions>(
  argv: readonly string[],
  spec: CommandLineSpec<O>,
): CommandLine<O> {
  let parsed: CommandLine<O>;
  try {
    parsed = parseCommandLine(argv, spec);
  } catch (error) {
    if (!(error instanceof CommandLineError)) throw error;
    console.error(`${error.message}\n\n${error.usage}`);
    process.exit(2);
  }
  if (parsed.help) {
    console.log(usage(spec));
    process.exit(0);
  }
  return parsed;
}

/** True when `moduleUrl` is the script Node was started with (tsx keeps argv[1] as the script). */
export function isEntryPoint(moduleUrl: string): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(fileURLToPath(moduleUrl)) === realpathSync(resolve(script));
  } catch {
    return false;
  }
}
