/**
 * The concurrency scaling benchmark's settings: which K, which job shapes and how large, how
 * many batches. One definition, passed to every program as `key=value` arguments (C's
 * c/scaling.cu, the Python peers' python/scaling.py and ours, src/scaling.ts), so that all of
 * them run the same jobs.
 */

/** The job shapes (see `SHAPES`). */
export type ShapeName = 'latency' | 'mixed' | 'control';

/** Every shape, in report order. */
export const SHAPE_NAMES: readonly ShapeName[] = ['latency', 'mixed', 'control'];

/** Ours' variants of the jobs (see scaling.ts), in the order each shape runs them. */
export const OURS_SYSTEMS = [
  'ours',
  'ours_workers',
  'ours_engine',
  'ours_graph',
  'ours_floor',
  'ours_floor_workers',
] as const;

/** One of ours' variants. */
export type OursSystem = (typeof OURS_SYSTEMS)[number];

/** The benchmark's settings. */
export interface ScalingConfig {
  /** Numbers of jobs started together. */
  ks: number[];
  /** Job shapes to run. */
  shapes: ShapeName[];
  /** Untimed batches per (shape, K) before the timed ones. */
  warmups: number;
  /** Timed batches per (shape, K), at least ... */
  minSamples: number;
  /** ... and at least `sampleJobs / K` of them (so small K get more batches). */
  sampleJobs: number;
  /** Jobs one after another in a serial batch. */
  serialJobs: number;
  /** Latency-bound: elementwise steps per job. */
  latencySteps: number;
  /** Latency-bound: a synchronize after every this many steps. */
  latencySyncEvery: number;
  /** Latency-bound: floats per elementwise step. */
  latencyN: number;
  /** Mixed: (uniform fill, SGEMM, elementwise) steps per job. */
  mixedSteps: number;
  /** Mixed: matrix size. */
  mixedN: number;
  /** GPU-filling control: SGEMM steps per job. */
  controlSteps: number;
  /** GPU-filling control: matrix size. */
  controlN: number;
  /** Job slot i's cuRAND generator (Philox) has seed `seed + i`. */
  seed: number;
  /** Ours only: worker threads of the worker-tasks variant (`ours_workers`). */
  workers: number;
  /** Ours only: issuer threads of the issue-engine variant (`ours_engine`). */
  issuers: number;
  /**
   * Ours only: 1 when the engine variant's waits are queried by the issuers (the engine's
   * default, `queriesOnIssuers`), 0 when by the main thread.
   */
  engineQueries: number;
  /**
   * Ours only: 1 (the default) when a thread of the worker floor that has one job in a batch
   * waits for it with a blocking `cuStreamSynchronize`, as C's threads do (the faster wait when
   * a thread has one job: decision 0042); 0 when it queries, as a thread with several jobs does.
   */
  floorSync: number;
  /** Ours only: which of ours' variants run (all by default; `systems=ours,ours_floor`). */
  systems: OursSystem[];
}

/** The defaults: about a minute of GPU time for all five systems on an H200. */
export const SCALING_DEFAULTS: Readonly<ScalingConfig> = Object.freeze({
  ks: [1, 2, 4, 8, 16, 32, 64],
  shapes: [...SHAPE_NAMES],
  warmups: 2,
  minSamples: 9,
  sampleJobs: 512,
  serialJobs: 8,
  latencySteps: 20,
  latencySyncEvery: 5,
  latencyN: 65_536,
  mixedSteps: 10,
  mixedN: 256,
  controlSteps: 4,
  controlN: 2048,
  seed: 1000,
  workers: 8,
  issuers: 8,
  engineQueries: 1,
  floorSync: 1,
  systems: [...OURS_SYSTEMS],
});

/** The `key=value` names of the numeric settings, as the C and Python programs spell them. */
const NUMERIC_KEYS: readonly (readonly [keyof ScalingConfig, string])[] = [
  ['warmups', 'warmups'],
  ['minSamples', 'min_samples'],
  ['sampleJobs', 'sample_jobs'],
  ['serialJobs', 'serial_jobs'],
  ['latencySteps', 'latency_steps'],
  ['latencySyncEvery', 'latency_sync_every'],
  ['latencyN', 'latency_n'],
  ['mixedSteps', 'mixed_steps'],
  ['mixedN', 'mixed_n'],
  ['controlSteps', 'control_steps'],
  ['controlN', 'control_n'],
  ['seed', 'seed'],
  ['workers', 'workers'],
  ['issuers', 'issuers'],
  ['engineQueries', 'engine_queries'],
  ['floorSync', 'floor_sync'],
];

/** Settings that take 0 or 1 (switches). */
const SWITCH_KEYS: ReadonlySet<keyof ScalingConfig> = new Set(['engineQueries', 'floorSync']);

/** Settings that may be 0 besides the switches (every other number is at least 1). */
const ZERO_KEYS: ReadonlySet<keyof ScalingConfig> = new Set(['warmups', 'seed']);

/** The most worker threads `workers` may ask for (WorkerPool's own limit). */
export const MAX_WORKERS = 1024;

/** The most issuer threads `issuers` may ask for (startIssueEngine's own limit). */
export const MAX_ISSUERS = 64;

/**
 * Settings only ours reads (`python/scaling.py` rejects a key it does not know, C ignores one
 * with a warning): `scalingArguments` leaves them out unless asked for ours.
 */
const OURS_ONLY_KEYS: ReadonlySet<keyof ScalingConfig> = new Set([
  'workers',
  'issuers',
  'engineQueries',
  'floorSync',
]);

/**
 * The settings as `key=value` arguments (`ks=1,2,4`, `shapes=latency,mixed`, `mixed_n=256`...):
 * those every program reads, and with `{ ours: true }` also those only ours reads (`workers`,
 * `issuers`, `engine_queries`, and `systems` when it leaves some out).
 * @example scalingArguments(SCALING_DEFAULTS); // ['ks=1,2,4,8,16,32,64', 'shapes=...', ...]
 */
export function scalingArguments(
  config: ScalingConfig,
  options: { ours?: boolean } = {},
): string[] {
  const every = OURS_SYSTEMS.every((system) => config.systems.includes(system));
  return [
    `ks=${config.ks.join(',')}`,
    `shapes=${config.shapes.join(',')}`,
    ...NUMERIC_KEYS.filter(([field]) => options.ours === true || !OURS_ONLY_KEYS.has(field)).map(
      ([field, key]) => `${key}=${config[field]}`,
    ),
    // Only when some of ours' variants are left out: the default needs no argument.
    ...(options.ours === true && !every ? [`systems=${config.systems.join(',')}`] : []),
  ];
}

/**
 * Parses `key=value` arguments over the defaults; throws a message naming a bad one. Other
 * arguments (not `key=value`) are an error too.
 * @example parseScalingArguments(['ks=1,4', 'shapes=latency']).ks; // [1, 4]
 */
export function parseScalingArguments(argv: readonly string[]): ScalingConfig {
  const config: ScalingConfig = {
    ...SCALING_DEFAULTS,
    ks: [...SCALING_DEFAULTS.ks],
    shapes: [...SCALING_DEFAULTS.shapes],
    systems: [...SCALING_DEFAULTS.systems],
  };
  const integer = (key: string, text: string, minimum: number) => {
    const value = Number(text);
    if (text === '' || !Number.isSafeInteger(value) || value < minimum) {
      throw new Error(`scaling: ${key} must be an integer >= ${minimum}, got '${text}'`);
    }
    return value;
  };
  for (const argument of argv) {
    const equals = argument.indexOf('=');
    if (equals < 0) throw new Error(`scaling: expected key=value, got '${argument}'`);
    const key = argument.slice(0, equals);
    const value = argument.slice(equals + 1);
    if (key === 'ks') {
      config.ks = value.split(',').map((k) => integer('ks', k, 1));
      if (config.ks.length === 0) throw new Error('scaling: ks must not be empty');
    } else if (key === 'shapes') {
      const shapes = value.split(',');
      for (const shape of shapes) {
        if (!SHAPE_NAMES.includes(shape as ShapeName)) {
          throw new Error(`scaling: unknown shape '${shape}' (${SHAPE_NAMES.join(', ')})`);
        }
      }
      config.shapes = shapes as ShapeName[];
    } else if (key === 'systems') {
      const systems = value.split(',');
      for (const system of systems) {
        if (!OURS_SYSTEMS.includes(system as OursSystem)) {
          throw new Error(`scaling: unknown system '${system}' (${OURS_SYSTEMS.join(', ')})`);
        }
      }
      config.systems = systems as OursSystem[];
    } else {
      const entry = NUMERIC_KEYS.find(([, name]) => name === key);
      if (entry === undefined) throw new Error(`scaling: unknown setting '${key}'`);
      const isSwitch = SWITCH_KEYS.has(entry[0]);
      const parsed = integer(key, value, isSwitch || ZERO_KEYS.has(entry[0]) ? 0 : 1);
      if (entry[0] === 'workers' && parsed > MAX_WORKERS) {
        throw new Error(`scaling: workers must be at most ${MAX_WORKERS}, got '${value}'`);
      }
      if (isSwitch && parsed > 1) {
        throw new Error(`scaling: ${key} must be 0 or 1, got '${value}'`);
      }
      if (entry[0] === 'issuers' && parsed > MAX_ISSUERS) {
        throw new Error(`scaling: issuers must be at most ${MAX_ISSUERS}, got '${value}'`);
      }
      (config as unknown as Record<string, number>)[entry[0]] = parsed;
    }
  }
  return config;
}

/** Timed batches at K: `minSamples`, or more so that they hold `sampleJobs` jobs in all. */
export function samplesFor(config: Pick<ScalingConfig, 'minSamples' | 'sampleJobs'>, k: number) {
  return Math.max(config.minSamples, Math.ceil(config.sampleJobs / k));
}

/** Rounds in which ours' variants of one shape take turns at each K (see `interleave`). */
export const INTERLEAVE_ROUNDS = 5;

/** One timed turn of `interleave`: `samples` batches of variant `variant`. */
export interface Turn {
  /** Which variant times now (an index into the variants of the shape). */
  variant: number;
  /** How many timed batches it runs in this turn. */
  samples: number;
}

/**
 * The order in which `variants` systems measured in one process share `samples` timed batches
 * each: `rounds` rounds, each variant taking one turn per round, every other round in reverse
 * order. The machine's speed drifts over seconds (a shared host, clock
 * changes); taking turns lets every variant see the same drift, so their ratio (ours over the
 * Node floor) does not depend on which one ran first. Every variant gets `samples` batches in
 * all, split as evenly as the rounds allow (the earlier rounds get the remainder).
 * @example interleave(2, 3, 7); // turns (variant, samples): 0,3 1,3 | 1,2 0,2 | 0,2 1,2
 */
export function interleave(variants: number, rounds: number, samples: number): Turn[] {
  const turns: Turn[] = [];
  const used = Math.max(1, Math.min(rounds, samples));
  for (let round = 0; round < used; round++) {
    const share = Math.floor(samples / used) + (round < samples % used ? 1 : 0);
    for (let i = 0; i < variants; i++) {
      const variant = round % 2 === 0 ? i : variants - 1 - i;
      turns.push({ variant, samples: share });
    }
  }
  return turns;
}

/** A shape's title and what one job does, in words. */
export interface ShapeInfo {
  /** Short title, e.g. "latency-bound". */
  title: string;
  /** What one job does at these settings. */
  describe(config: ScalingConfig): string;
}

const count = (n: number) => n.toLocaleString('en-US');

/** The job shapes. */
export const SHAPES: Readonly<Record<ShapeName, ShapeInfo>> = {
  latency: {
    title: 'latency-bound',
    describe: (c) =>
      `${c.latencySteps} x elementwise axpb over ${count(c.latencyN)} floats, synchronize after every ${c.latencySyncEvery}`,
  },
  mixed: {
    title: 'mixed',
    describe: (c) =>
      `${c.mixedSteps} x (cuRAND uniform fill, SGEMM ${c.mixedN}, axpb over ${count(c.mixedN * c.mixedN)} floats), synchronize at the end`,
  },
  control: {
    title: 'GPU-filling control',
    describe: (c) => `${c.controlSteps} x SGEMM ${c.controlN}, synchronize at the end`,
  },
};
