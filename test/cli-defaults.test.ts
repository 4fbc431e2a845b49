import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { benchCommandLine, parseBenchArguments } from '../benchmarks/src/run.js';
import {
  type CommandLineOptions,
  type CommandLineSpec,
  usage,
} from '../packages/examples/src/cli.js';
import { demoCommandLine, parseDemoArguments } from '../packages/examples/src/seed/demo.js';
import { parseClusterArguments } from '../packages/examples/src/service/cluster.js';
import {
  DEFAULT_CLOSED_LOOP_WARMUP,
  DEFAULT_RUN_REQUESTS,
  loadCommandLine,
  parseLoadArguments,
  runMeasureOptions,
} from '../packages/examples/src/service/load.js';
import { defaultParseWorkers } from '../packages/examples/src/service/parse-pool.js';
import { DEFAULT_SEARCH_BATCH } from '../packages/examples/src/service/search-batcher.js';
import {
  DEFAULT_GPU_IN_FLIGHT,
  DEFAULT_GRACE_MS,
  DEFAULT_SEARCH_MESSAGES,
  parseServerArguments,
  serverCommandLine,
} from '../packages/examples/src/service/server.js';
import {
  parseSoakArguments,
  SOAK_WORKLOADS,
  soakCommandLine,
} from '../packages/examples/src/service/soak.js';
import { renderCommandLine } from '../packages/examples/src/trace/render.js';

// What `--help` says a flag defaults to is what the code uses when the flag is absent: each
// default is written once, as the option's `default` (usage() prints it), and the parser
// falls back to that same value. A description that hand-writes a default fails here.

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

type Parse = (argv: readonly string[]) => unknown;

/** Every command line of the examples and the benchmarks, with its parser. */
const commands: Record<string, { spec: CommandLineSpec<CommandLineOptions>; parse?: Parse }> = {
  demoCommandLine: { spec: demoCommandLine, parse: (argv) => parseDemoArguments(argv, {}) },
  serverCommandLine: { spec: serverCommandLine, parse: (argv) => parseServerArguments(argv, {}) },
  loadCommandLine: { spec: loadCommandLine, parse: parseLoadArguments },
  soakCommandLine: { spec: soakCommandLine, parse: parseSoakArguments },
  benchCommandLine: { spec: benchCommandLine, parse: parseBenchArguments },
  // No flag of the renderer has a default to show.
  renderCommandLine: { spec: renderCommandLine },
};

/**
 * Defaults that say more than one value (a path, a default per workload): each is checked
 * against the code by hand here. Any other default must be a plain value.
 */
const described: Record<string, (text: string) => void> = {
  'demoCommandLine --out': (text) => {
    expect(parseDemoArguments([], {}).out).toBe(resolve(root, text));
  },
  'benchCommandLine --out': (text) => {
    expect(parseBenchArguments([]).out).toBe(resolve(root, text));
  },
  'loadCommandLine --requests': (text) => {
    expect(text).toBe(`${DEFAULT_RUN_REQUESTS}`);
    expect(runMeasureOptions(parseLoadArguments([])).requests).toBe(DEFAULT_RUN_REQUESTS);
  },
  'loadCommandLine --warmup': (text) => {
    expect(text).toBe(`${DEFAULT_CLOSED_LOOP_WARMUP}; head-of-line: the concurrency`);
    expect(runMeasureOptions(parseLoadArguments([])).warmup).toBe(DEFAULT_CLOSED_LOOP_WARMUP);
  },
  'loadCommandLine --in-flight': (text) => {
    // Absent, the load client sends none and the server applies its own bound.
    expect(parseLoadArguments([]).inFlight).toBeUndefined();
    expect(text).toBe(
      `the server's: ${DEFAULT_GPU_IN_FLIGHT['/search']} one by one, none in batches`,
    );
  },
  'loadCommandLine --search-batch': (text) => {
    // Absent, the load script leaves the server's own batch size.
    expect(parseLoadArguments([]).searchBatch).toBeUndefined();
    expect(text).toBe(`the server's, ${DEFAULT_SEARCH_BATCH.maxBatch}`);
    expect(parseServerArguments([], {}).searchBatch).toBe(DEFAULT_SEARCH_BATCH.maxBatch);
  },
  'loadCommandLine --search-batches': (text) => {
    // Absent, the load script leaves the server's own number of batches at once.
    expect(parseLoadArguments([]).searchBatches).toBeUndefined();
    expect(text).toBe(`the server's, ${DEFAULT_SEARCH_BATCH.maxInFlight}`);
    expect(parseServerArguments([], {}).searchBatches).toBe(DEFAULT_SEARCH_BATCH.maxInFlight);
  },
  'loadCommandLine --cluster-search': (text) => {
    // Absent, the load script leaves the server's own choice.
    expect(parseLoadArguments(['--processes', '2']).clusterSearch).toBeUndefined();
    expect(text).toBe("the server's, primary");
    expect(parseClusterArguments({}, '').clusterSearch).toBe('primary');
  },
  'loadCommandLine --search-messages': (text) => {
    // Absent, the load script leaves the server's own number of batches waiting.
    expect(parseLoadArguments(['--processes', '2']).searchMessages).toBeUndefined();
    expect(text).toBe(`the server's, ${DEFAULT_SEARCH_MESSAGES}`);
    expect(parseServerArguments([], {}).searchMessages).toBe(DEFAULT_SEARCH_MESSAGES);
  },
  'soakCommandLine --warmup-minutes': (text) => {
    expect(text).toBe('at least 1 and one round of each workload');
    const oneRoundEach = (seconds: number) => (SOAK_WORKLOADS.length * seconds) / 60;
    expect(parseSoakArguments([]).warmupMinutes).toBe(
      Math.max(1, oneRoundEach(Number(soakCommandLine.options['round-seconds'].default))),
    );
    expect(parseSoakArguments(['--round-seconds', '40']).warmupMinutes).toBe(oneRoundEach(40));
  },
  'serverCommandLine --parse-workers': (text) => {
    // Absent, the server's ParsePool sizes itself from the cores.
    expect(text).toBe('3/8 of the cores, 4 to 8, fewer than the cores');
    expect(parseServerArguments([], {}).parseWorkers).toBeUndefined();
    expect([2, 4, 5, 16, 32].map((cores) => defaultParseWorkers(cores))).toEqual([1, 3, 4, 6, 8]);
  },
  'loadCommandLine --parse-workers': (text) => {
    // Absent, the load script leaves the server's own number of parse workers.
    expect(parseLoadArguments([]).parseWorkers).toBeUndefined();
    expect(text).toBe("the server's, 3/8 of the cores, 4 to 8");
  },
  'serverCommandLine --port': (text) => {
    expect(text).toBe('$PORT, else a random free one');
    expect(parseServerArguments([], { PORT: '8123' }).port).toBe(8123);
    expect(parseServerArguments([], {}).port).toBe(0);
  },
};

const PLAIN = /^[\w.-]+$/;

/** The usage text's lines, by flag: what each line says in its final parentheses. */
function defaultsShown(text: string): Map<string, string | undefined> {
  const shown = new Map<string, string | undefined>();
  for (const line of text.split('\n').slice(1)) {
    const match = /^ {2}--([\w-]+)(?: \S+)? +(.*)$/.exec(line);
    if (match === null) throw new Error(`not a flag line: ${JSON.stringify(line)}`);
    shown.set(match[1]!, /\(([^()]*)\)$/.exec(match[2]!)?.[1]);
  }
  return shown;
}

describe('command-line defaults', () => {
  it('covers every command line of the examples and the benchmarks', () => {
    const found: string[] = [];
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) {
          if (entry.name !== 'node_modules') walk(path);
        } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) {
          for (const match of readFileSync(path, 'utf8').matchAll(
            /export const (\w+CommandLine) = \{/g,
          )) {
            found.push(`${relative(root, path)}: ${match[1]}`);
          }
        }
      }
    };
    for (const folder of ['packages', 'benchmarks/src']) walk(join(root, folder));
    expect(found.map((entry) => entry.split(': ')[1]).sort()).toEqual(Object.keys(commands).sort());
  });

  it('no description hand-writes a default: the usage prints the option’s own', () => {
    const handWritten: string[] = [];
    for (const [name, { spec }] of Object.entries(commands)) {
      for (const [flag, option] of Object.entries(spec.options)) {
        if (/\([^()]*\d[^()]*\)|\(default|default:/i.test(option.description)) {
          handWritten.push(`${name} --${flag}: ${option.description}`);
        }
      }
    }
    expect(handWritten).toEqual([]);
  });

  it('the usage text shows each option’s default, and only those', () => {
    for (const { spec } of Object.values(commands)) {
      const shown = defaultsShown(usage(spec));
      for (const [flag, option] of Object.entries(spec.options)) {
        const expected = option.default === undefined ? undefined : String(option.default);
        expect(shown.get(flag), `${spec.command} --${flag}`).toBe(expected);
      }
      expect(shown.get('help')).toBeUndefined();
    }
  });

  it('giving a flag its default changes nothing: the parser falls back to the same value', () => {
    const unchecked: string[] = [];
    for (const [name, { spec, parse }] of Object.entries(commands)) {
      for (const [flag, option] of Object.entries(spec.options)) {
        if (option.default === undefined) continue;
        const text = String(option.default);
        const check = described[`${name} --${flag}`];
        if (check !== undefined) {
          check(text);
        } else if (parse !== undefined && PLAIN.test(text)) {
          expect(parse([`--${flag}`, text]), `${name} --${flag} ${text}`).toEqual(parse([]));
        } else {
          unchecked.push(`${name} --${flag} (${text})`);
        }
      }
    }
    expect(unchecked).toEqual([]);
  });

  it('the defaults named in the issue: in-flight searches 4, grace 10 s, 32 requests in flight', () => {
    expect(DEFAULT_GPU_IN_FLIGHT['/search']).toBe(4);
    expect(usage(loadCommandLine)).toMatch(
      /--in-flight N +.*\(the server's: 4 one by one, none in batches\)$/m,
    );
    expect(usage(serverCommandLine)).toContain(`(${DEFAULT_GRACE_MS})`);
    expect(parseLoadArguments([]).concurrency).toBe(32);
    expect(usage(loadCommandLine)).toMatch(/--concurrency N +requests in flight \(32\)$/m);
  });
});
