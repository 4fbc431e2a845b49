/**
 * The suite's command line: `node:util` `parseArgs` in strict mode, so that an unknown or
 * misspelt flag is an error naming the valid ones (and the closest), and `--help` prints them.
 * Each flag's default is written once, in its spec: the usage prints it and the parser falls
 * back to it.
 */
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

/** One flag: a switch (`boolean`) or a flag that takes a value (`string`). */
export interface CommandLineOption {
  /** `boolean` for a switch, `string` for a flag that takes a value. */
  readonly type: 'boolean' | 'string';
  /** What the value is, shown in the usage (e.g. `DIR`). */
  readonly placeholder?: string;
  /** One line for the usage, without the default. */
  readonly description: string;
  /** What the command uses when the flag is absent, printed after the description. */
  readonly default?: string | number;
}

/** A command that takes flags only: its name as the user runs it and its flags by long name. */
export interface CommandLineSpec {
  /** The command as the user runs it, e.g. `pnpm bench`. */
  readonly command: string;
  /** The flags. `--help` / `-h` is added to every command. */
  readonly options: Readonly<Record<string, CommandLineOption>>;
}

/** The flags given (absent ones missing), and whether `--help` was asked for. */
export interface CommandLine<S extends CommandLineSpec> {
  /** The flags given, by long name. */
  readonly values: {
    [K in keyof S['options']]?: S['options'][K]['type'] extends 'string' ? string : boolean;
  };
  /** True when `--help` or `-h` was given. */
  readonly help: boolean;
}

/** A command line that cannot be parsed: the message says what is wrong, `usage` what is valid. */
export class CommandLineError extends Error {
  /** The command's usage text. */
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

/**
 * The usage text: one line with every flag, then one line per flag with its description and,
 * in parentheses, its default.
 */
export function usage(spec: CommandLineSpec): string {
  const options: [string, CommandLineOption][] = [...Object.entries(spec.options), ['help', HELP]];
  const flags = options.map(([name, option]) => flagText(name, option));
  const width = Math.max(...flags.map((flag) => flag.length));
  const lines = options.map(([, option], i) => {
    const text =
      option.default === undefined
        ? option.description
        : `${option.description} (${option.default})`;
    return `  ${flags[i]!.padEnd(width)}  ${text}`;
  });
  return `usage: ${[spec.command, ...flags.map((flag) => `[${flag}]`)].join(' ')}\n${lines.join('\n')}`;
}

/** Edit distance counting a swap of two neighbours as one edit. */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
      }
    }
  }
  return d[a.length]![b.length]!;
}

/** The flag a misspelt or shortened (`reqs` for `requests`) one most likely meant, if any. */
function closestName(given: string, names: readonly string[]): string | undefined {
  const shortens = (name: string) => {
    if (given.length < 3 || given[0] !== name[0]) return false;
    let at = 0;
    for (const letter of name) if (letter === given[at]) at++;
    return at === given.length;
  };
  let best: { name: string; cost: number } | undefined;
  for (const name of names) {
    const cost = distance(given, name);
    const close = cost <= Math.max(1, Math.floor(given.length / 3)) || shortens(name);
    if (close && (best === undefined || cost < best.cost)) best = { name, cost };
  }
  return best?.name;
}

/**
 * Parses `argv` strictly: an unknown flag, a flag without its value, a value given to a
 * switch, or any positional argument is a `CommandLineError` whose message lists the valid
 * flags. A leading `--` (what `pnpm run x -- ...` may pass on) is dropped.
 * @example parseCommandLine(['--rounds', '5'], benchCommandLine).values.rounds; // '5'
 */
export function parseCommandLine<S extends CommandLineSpec>(
  argv: readonly string[],
  spec: S,
): CommandLine<S> {
  const args = argv[0] === '--' ? argv.slice(1) : [...argv];
  const options: Record<string, { type: 'boolean' | 'string'; short?: string }> = {
    help: { type: 'boolean', short: 'h' },
  };
  for (const [name, option] of Object.entries(spec.options)) options[name] = { type: option.type };
  const valid = Object.entries({ ...spec.options, help: HELP })
    .map(([name, option]) => flagText(name, option))
    .join(', ');
  try {
    const { help, ...values } = parseArgs({ args, options, strict: true }).values;
    return { values: values as CommandLine<S>['values'], help: help === true };
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
      message = `unexpected argument '${quoted}': ${spec.command} takes only options: ${valid}`;
    } else {
      message = `${text.split('.')[0]}; valid options: ${valid}`;
    }
    throw new CommandLineError(message, usage(spec));
  }
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
