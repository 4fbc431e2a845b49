import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CudaArgumentError, type DType } from '@cuda-tasks/cudadrv';
import { hostOnlyArray, thrown } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  calls,
  definitions,
  type ElementwiseCase,
  elementwiseBody,
  elementwiseCaseArbitrary,
  parameterList,
  type RandomParameter,
  type ReductionCase,
  reductionCaseArbitrary,
  reductionDefinition,
  signatureOf,
  spellable,
  stripped,
} from '../test/expressions.js';
import { elementwise } from './elementwise.js';
import { unaryProgram } from './ops.js';
import { reduction } from './reduction.js';
import { reductionProgram } from './reductions.js';
import { topkSource } from './topk.js';

// Generated names never meet a user's: every generated identifier starts with ct_ (which no
// parameter may) and is made from the parameter's index, never its name; a user's code sees
// only its own names (and the documented i, n, a, b) bound to its own values. Checked on the
// generated source, without a GPU: which names appear in which function, how each call binds
// them, that the kernels do not change when the user's names do, and (where nvcc is
// installed) that the sources compile.

const SEED = 20_260_131;

/** What each function holding a user's code may see, in its parameters' order. */
type Scopes = Record<string, readonly string[]>;

function elementwiseScopes(inputs: readonly string[], outputs: readonly string[]): Scopes {
  return { ct_body: [...inputs, ...outputs, 'i', 'n'] };
}

function reductionScopes(inputs: readonly string[], output: string): Scopes {
  return {
    ct_identity: [],
    ct_map: [...inputs, 'i'],
    ct_reduce: ['a', 'b'],
    ct_post: ['a', output, 'n'],
  };
}

/**
 * What is wrong with a generated source: a name a user could spell outside the functions
 * holding a user's code, or in them beyond what they may see; a user function's parameters
 * not exactly what it may see, in order; a call of a user function (`callee`) whose argument j
 * reads another parameter than j; an entry point whose first parameters are not ct_p0, ct_p1,
 * ... (the launch's order). `extra` names the user code itself uses (functions it calls).
 */
function problems(
  source: string,
  scopes: Scopes,
  callee: string,
  parameterCount: number,
  extra: readonly string[] = [],
): string[] {
  const found: string[] = [];
  const { definitions: all, between } = definitions(stripped(source));
  for (const name of spellable(between)) found.push(`${name} at the top level`);
  for (const definition of all) {
    const scope = scopes[definition.name];
    if (scope === undefined) {
      for (const name of new Set(spellable(definition.text)))
        found.push(`${name} in ${definition.name}`);
      continue;
    }
    const names = parameterList(definition.parameters ?? '').map((parameter) => parameter.name);
    if (names.join(',') !== scope.join(','))
      found.push(`${definition.name} takes (${names.join(', ')}), expected (${scope.join(', ')})`);
    for (const name of new Set(spellable(definition.text))) {
      if (!scope.includes(name) && !extra.includes(name))
        found.push(`${name} in ${definition.name}`);
    }
  }
  for (const definition of all) {
    if (scopes[definition.name] !== undefined || definition.parameters === undefined) continue;
    for (const args of calls(definition.text, callee)) {
      args.forEach((arg, j) => {
        // Parameter j's pointer or value (ct_p<j>), a value loaded from it (ct_p<j>_<u>), its
        // half output's float (ct_o<j>), or a lane of the one array's vector (ct_v<u>).
        const references = [...arg.matchAll(/\bct_[po](\d+)(?:_\d+)?\b/g)];
        const wrong =
          j < parameterCount
            ? references.some((match) => Number(match[1]) !== j) ||
              (references.length === 0 && !/^ct_v\d+\.ct_lane\[\d+\]$/.test(arg))
            : references.length > 0;
        if (wrong) found.push(`${definition.name}: ${callee} argument ${j} is ${arg}`);
      });
    }
    if (/\b__global__\b/.test(definition.text.slice(0, definition.text.indexOf('(')))) {
      const kernelParameters = parameterList(definition.parameters);
      kernelParameters.forEach(({ name }, k) => {
        const index = /^ct_p(\d+)$/.exec(name);
        if (index !== null && Number(index[1]) < k)
          found.push(`${definition.name}: parameter ${k} is ${name}`);
      });
    }
  }
  return found;
}

/** The arguments a call of an element-wise case passes (numbers for its scalar inputs). */
function elementwiseArguments(c: ElementwiseCase): (number | ReturnType<typeof hostOnlyArray>)[] {
  return c.inputs.map((input) => (input.scalar ? 2 : hostOnlyArray(input.dtype, [5])));
}

function elementwiseSource(c: ElementwiseCase): string {
  return elementwise(signatureOf(c.inputs, c.outputs), elementwiseBody(c)).source(
    ...elementwiseArguments(c),
  );
}

function reductionSource(c: ReductionCase): string {
  return reduction(signatureOf(c.inputs, [c.output]), reductionDefinition(c)).source(
    ...c.inputs.map((input) => (input.scalar ? 2 : hostOnlyArray(input.dtype, [5]))),
  );
}

function elementwiseProblems(c: ElementwiseCase): string[] {
  return problems(
    elementwiseSource(c),
    elementwiseScopes(
      c.inputs.map((input) => input.name),
      c.outputs.map((output) => output.name),
    ),
    'ct_body',
    c.inputs.length + c.outputs.length,
  );
}

function reductionProblems(c: ReductionCase): string[] {
  return problems(
    reductionSource(c),
    reductionScopes(
      c.inputs.map((input) => input.name),
      c.output.name,
    ),
    'ct_map',
    c.inputs.length,
  );
}

/** The same case with its parameters named q0, q1, ... */
function renamed<C extends { inputs: readonly RandomParameter[] }>(
  c: C,
  rename: (c: C, name: (k: number) => string) => C,
): C {
  return rename(c, (k) => `q${k}`);
}

/** A source's kernels: everything but the functions holding the user's code and the comments. */
function kernelsOf(source: string, scopes: Scopes): string {
  const { definitions: all, between } = definitions(stripped(source));
  return [between, ...all.filter((d) => scopes[d.name] === undefined).map((d) => d.text)].join(
    '\n',
  );
}

const f32 = (n = 8) => hostOnlyArray('float32', [n]);

describe('regressions: generated names that met user names', () => {
  it("elementwise 'x, x_1': the scalar x_1 reaches the body as x_1 (was the load ct_x_1 of x)", () => {
    const kernel = elementwise('x: float32, x_1: float32 -> y: float32', 'y = x + x_1');
    const source = kernel.source(f32(), 100);
    expect(problems(source, elementwiseScopes(['x', 'x_1'], ['y']), 'ct_body', 3)).toEqual([]);
  });

  it('an elementwise scalar named i1, i2 or i3 reaches the body (was the unrolled index)', () => {
    for (const name of ['i1', 'i2', 'i3']) {
      const kernel = elementwise(`x: float32, ${name}: float32 -> y: float32`, `y = x + ${name}`);
      expect(
        problems(kernel.source(f32(), 7), elementwiseScopes(['x', name], ['y']), 'ct_body', 3),
      ).toEqual([]);
    }
  });

  it('reduction inputs named y, partials, vectors, block_reduce: no generated name is theirs', () => {
    for (const name of ['y', 'partials', 'vectors', 'block_reduce']) {
      const sum = reduction(`${name}: float32 -> out: float32`, {
        map: name,
        reduce: 'a + b',
        identity: '0',
        post: 'out = a',
      });
      expect(problems(sum.source(f32()), reductionScopes([name], 'out'), 'ct_map', 1)).toEqual([]);
    }
  });

  it("a kernel named after one of the source's helpers gets an entry point of its own", () => {
    const half = hostOnlyArray('float16', [4]);
    const body = elementwise('x: float16 -> y: float16', 'y = x', { name: 'body' }).source(half);
    expect(body).toMatch(/__global__ void ct_body_kernel\(/);
    expect(body.match(/\bct_body\(/g)).toHaveLength(6); // the body's definition and its 5 calls
    const sin = elementwise('x: float32 -> y: float32', 'y = sinf(x)', { name: 'map sin' });
    expect(sin.source(f32())).toMatch(/__global__ void ct_map_sin\(/);
  });

  it('a and b name reduction inputs (map does not see the accumulators)', () => {
    const dot = reduction('a: float32, b: float32 -> y: float32', {
      map: 'a * b',
      reduce: 'a + b',
      identity: '0',
    });
    expect(
      problems(dot.source(f32(), f32()), reductionScopes(['a', 'b'], 'y'), 'ct_map', 2),
    ).toEqual([]);
  });

  it('the ready-made sources keep the rule (their own code aside)', () => {
    const checks: [string, Scopes, string, number, string[]][] = [
      [
        unaryProgram('sin', 'float16').sourceFor([hostOnlyArray('float16', [4])]),
        elementwiseScopes(['x'], ['y']),
        'ct_body',
        2,
        ['sinf'],
      ],
      [
        reductionProgram('sum', 'float32').sourceFor([f32()]),
        reductionScopes(['x'], 'y'),
        'ct_map',
        1,
        [],
      ],
      [
        reductionProgram('argmax', 'float64').sourceFor([hostOnlyArray('float64', [4])]),
        reductionScopes(['x'], 'y'),
        'ct_map',
        1,
        [],
      ],
      [topkSource('float32', 100), {}, 'ct_better', 0, []],
      [topkSource('int32', 7, false), {}, 'ct_better', 0, []],
    ];
    for (const [source, scopes, callee, count, extra] of checks) {
      expect(problems(source, scopes, callee, count, extra)).toEqual([]);
    }
  });
});

describe('reserved names are refused with the rule, before anything native', () => {
  it.each([
    [
      'elementwise',
      () => elementwise('ct_x: float32 -> y: float32', 'y = ct_x'),
      /input ct_x: names starting with ct_ are reserved/,
    ],
    [
      'elementwise',
      () => elementwise('x: float32 -> ct_p0: float32', 'ct_p0 = x'),
      /output ct_p0: names starting with ct_/,
    ],
    [
      'elementwise',
      () => elementwise('float: float32 -> y: float32', 'y = 1'),
      /input float: a C\/C\+\+ keyword/,
    ],
    [
      'elementwise',
      () => elementwise('x: float32 -> concept: float32', 'concept = x'),
      /output concept: a C\/C\+\+ keyword/,
    ],
    [
      'elementwise',
      () => elementwise('threadIdx: float32 -> y: float32', 'y = 1'),
      /input threadIdx: a CUDA built-in/,
    ],
    [
      'elementwise',
      () => elementwise('i: float32 -> y: float32', 'y = i'),
      /input i: reserved, the body's element index is named i/,
    ],
    [
      'elementwise',
      () => elementwise('x: float32 -> n: float32', 'n = x'),
      /output n: reserved, the body's element count is named n/,
    ],
    [
      'reduction',
      () => reduction('i: float32 -> y: float32', { map: 'i', reduce: 'a + b', identity: '0' }),
      /input i: reserved, map's index is named i/,
    ],
    [
      'reduction',
      () => reduction('x: float32 -> a: float32', { map: 'x', reduce: 'a + b', identity: '0' }),
      /output a: reserved, post's result is named a/,
    ],
    [
      'reduction',
      () =>
        reduction('x: float32 -> n: float32', {
          map: 'x',
          reduce: 'a + b',
          identity: '0',
          post: 'n = a',
        }),
      /output n: reserved, post's count is named n/,
    ],
  ])('%s %#', (_kind, make, message) => {
    const error = thrown(make);
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toMatch(message);
  });

  it('names the user may take that the old scheme refused or mangled are accepted', () => {
    expect(() => elementwise('a: float32, b: float32 -> p0: float32', 'p0 = a + b')).not.toThrow();
    expect(() =>
      reduction('n: float32, a: float32 -> b: float32', {
        map: 'n * a',
        reduce: 'a + b',
        identity: '0',
        post: 'b = a',
      }),
    ).not.toThrow();
  });
});

describe('random signatures: the generated source binds every name to its own value', () => {
  it('elementwise (fast-check, fixed seed)', () => {
    fc.assert(
      fc.property(elementwiseCaseArbitrary, (c) => {
        expect(elementwiseProblems(c)).toEqual([]);
        const plain = renamed(c, (k, name) => ({
          ...k,
          inputs: k.inputs.map((input, j) => ({ ...input, name: name(j) })),
          outputs: k.outputs.map((output, j) => ({ ...output, name: name(k.inputs.length + j) })),
        }));
        const scopes = (k: ElementwiseCase) =>
          elementwiseScopes(
            k.inputs.map((input) => input.name),
            k.outputs.map((output) => output.name),
          );
        expect(kernelsOf(elementwiseSource(c), scopes(c))).toBe(
          kernelsOf(elementwiseSource(plain), scopes(plain)),
        );
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  it('reduction (fast-check, fixed seed)', () => {
    fc.assert(
      fc.property(reductionCaseArbitrary, (c) => {
        expect(reductionProblems(c)).toEqual([]);
        const plain = renamed(c, (k, name) => ({
          ...k,
          inputs: k.inputs.map((input, j) => ({ ...input, name: name(j) })),
          output: { ...k.output, name: name(k.inputs.length) },
        }));
        const scopes = (k: ReductionCase) =>
          reductionScopes(
            k.inputs.map((input) => input.name),
            k.output.name,
          );
        expect(kernelsOf(reductionSource(c), scopes(c))).toBe(
          kernelsOf(reductionSource(plain), scopes(plain)),
        );
      }),
      { seed: SEED, numRuns: 300 },
    );
  });
});

const haveNvcc = spawnSync('nvcc', ['--version'], { encoding: 'utf8' }).status === 0;

/** Compiles the sources to PTX in one nvcc run (each in a namespace); 'ok' or nvcc's errors. */
function compileAll(sources: readonly string[]): string {
  const unit = sources
    .map((source, index) => {
      const renamedEntries = source.replace(
        /extern "C" __global__ void (\w+)/g,
        `extern "C" __global__ void $1_${index}`,
      );
      return `namespace ct_names_${index} {\n${renamedEntries}}\n`;
    })
    .join('\n');
  const folder = mkdtempSync(join(tmpdir(), 'cuda-tasks-names-'));
  try {
    const path = join(folder, 'names.cu');
    writeFileSync(path, unit);
    const result = spawnSync('nvcc', ['-arch=sm_90', '-ptx', '-o', `${path}.ptx`, path], {
      encoding: 'utf8',
    });
    return result.status === 0 ? 'ok' : result.stderr.slice(0, 4000);
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

describe.runIf(haveNvcc)('the generated sources compile (nvcc -ptx, sm_90)', () => {
  it('the regressions: arrays x and x_1, inputs named y/partials/vectors/block_reduce, output stride, kernels named body', () => {
    const half = (n = 4) => hostOnlyArray('float16', [n]);
    const sources = [
      elementwise('x: float32, x_1: float32 -> y: float32', 'y = x + x_1').source(f32(), f32()),
      elementwise('x: float32, x_1: float32 -> y: float16', 'y = x * x_1').source(f32(), f32()),
      elementwise('x: float32, body: float32 -> stride: float32', 'stride = x + body').source(
        f32(),
        f32(),
      ),
      elementwise('x: float16 -> y: float16', 'y = x', { name: 'body' }).source(half()),
      elementwise('x: float16 -> y: float16', 'y = x', { name: 'f16_to_f32' }).source(half()),
      ...['y', 'partials', 'vectors', 'block_reduce', 'identity', 'acc'].flatMap((name) =>
        (['float32', 'float16'] as DType[]).map((dtype) =>
          reduction(`${name}: ${dtype}, s: float32 -> out: float32`, {
            map: `${name} * s`,
            reduce: 'a + b',
            identity: '0',
            post: 'out = a',
          }).source(hostOnlyArray(dtype, [4]), 2),
        ),
      ),
    ];
    expect(compileAll(sources)).toBe('ok');
  }, 120_000);

  it('random kernels (fast-check sample, fixed seed)', () => {
    const sources = [
      ...fc.sample(elementwiseCaseArbitrary, { seed: SEED, numRuns: 40 }).map(elementwiseSource),
      ...fc.sample(reductionCaseArbitrary, { seed: SEED, numRuns: 25 }).map(reductionSource),
    ];
    expect(compileAll(sources)).toBe('ok');
  }, 240_000);
});
