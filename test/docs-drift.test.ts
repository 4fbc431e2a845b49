import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { createServer, type GpuHealth } from '../packages/examples/src/service/server.js';

// What the prose says and the code does, held together: the README's table of environment
// variables lists every one the packages read, and no one they do not; no page hand-writes a
// count of tests, which goes stale with the next test.

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const packagesDir = join(root, 'packages');

interface PackageSources {
  name: string;
  published: boolean;
  /** The non-test TypeScript modules under src/, as text. */
  files: { path: string; text: string }[];
}

function packageSources(): PackageSources[] {
  const result: PackageSources[] = [];
  for (const folder of readdirSync(packagesDir)) {
    const manifestPath = join(packagesDir, folder, 'package.json');
    if (!existsSync(manifestPath)) continue;
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as {
      name: string;
      private?: boolean;
    };
    const files: PackageSources['files'] = [];
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) {
          if (entry.name !== 'node_modules') walk(path);
        } else if (
          entry.name.endsWith('.ts') &&
          !entry.name.endsWith('.test.ts') &&
          !entry.name.endsWith('.d.ts')
        ) {
          files.push({ path: relative(root, path), text: readFileSync(path, 'utf8') });
        }
      }
    };
    walk(join(packagesDir, folder, 'src'));
    result.push({ name: manifest.name, published: manifest.private !== true, files });
  }
  return result;
}

/**
 * The environment variables a module reads: `process.env.X` and `process.env['X']` (and the
 * same through a parameter named `environment` or `env`, how the packages take the environment
 * for their tests), and every string literal that is a whole `CUDA_TASKS_...` name, which is how
 * a name read through a computed key (`process.env[spec.environmentVariable]`) is written.
 * Comments are not code: a name in a comment reads nothing.
 */
function variablesRead(text: string): Set<string> {
  const names = new Set<string>();
  const source = ts.createSourceFile('module.ts', text, ts.ScriptTarget.Latest, false);
  const isEnvironment = (node: ts.Expression) =>
    (ts.isIdentifier(node) && (node.text === 'environment' || node.text === 'env')) ||
    node.getText(source) === 'process.env';
  const visit = (node: ts.Node) => {
    if (ts.isPropertyAccessExpression(node) && isEnvironment(node.expression)) {
      names.add(node.name.text);
    } else if (
      ts.isElementAccessExpression(node) &&
      isEnvironment(node.expression) &&
      ts.isStringLiteralLike(node.argumentExpression)
    ) {
      names.add(node.argumentExpression.text);
    } else if (ts.isStringLiteralLike(node) && /^CUDA_TASKS_[A-Z0-9_]*[A-Z0-9]$/.test(node.text)) {
      names.add(node.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return names;
}

/** The variables of the README's table "Environment variables": each row's first column. */
function documentedVariables(): Map<string, string> {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const section = /^#+ Environment variables\n([\s\S]*?)(?=^#)/m.exec(readme)?.[1];
  if (section === undefined) throw new Error('README.md has no "Environment variables" section');
  const rows = new Map<string, string>();
  for (const line of section.split('\n')) {
    if (!line.startsWith('|') || /^\|\s*-/.test(line)) continue;
    const [first, readBy] = line
      .split('|')
      .slice(1)
      .map((cell) => cell.trim());
    for (const match of first!.matchAll(/`([A-Z_][A-Z0-9_]*)`/g)) rows.set(match[1]!, readBy!);
  }
  return rows;
}

describe('the environment variables table', () => {
  const sources = packageSources();
  const table = documentedVariables();

  it('lists every variable a published package reads, and every CUDA_TASKS_ variable any package reads', () => {
    const missing: string[] = [];
    let found = 0;
    for (const pkg of sources) {
      for (const file of pkg.files) {
        for (const name of variablesRead(file.text)) {
          // The private packages' own knobs (a test fixture's timings) are theirs to document.
          if (!pkg.published && !name.startsWith('CUDA_TASKS_')) continue;
          found++;
          if (!table.has(name)) missing.push(`${name} (${file.path})`);
        }
      }
    }
    // The scan itself works: the stream pool's variables are read through a helper.
    const pool = sources
      .find((pkg) => pkg.name === '@cuda-tasks/task-runtime')!
      .files.find((file) => file.path.endsWith('pool.ts'))!;
    expect([...variablesRead(pool.text)]).toEqual(
      expect.arrayContaining(['CUDA_TASKS_MAX_STREAMS', 'CUDA_TASKS_PREWARM_STREAMS']),
    );
    expect(found).toBeGreaterThan(15);
    expect(missing).toEqual([]);
  });

  it('lists no variable that nothing reads', () => {
    const read = new Set<string>();
    for (const pkg of sources) {
      for (const file of pkg.files) for (const name of variablesRead(file.text)) read.add(name);
    }
    // The test setup reads its own (vitest.config.ts sets CUDA_TASKS_GPU from its probe).
    for (const name of variablesRead(readFileSync(join(root, 'vitest.config.ts'), 'utf8'))) {
      read.add(name);
    }
    const stale = [...table.keys()].filter((name) => !read.has(name));
    expect(stale).toEqual([]);
  });
});

/** Markdown pages a reader takes for the present: READMEs, the guides, performance.md. */
function proseFiles(): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        // Decisions are dated records (their counts are of a run, said as such); changesets
        // and changelogs are release notes; the rest is not ours.
        if (['node_modules', 'decisions', '.changeset', '.git', 'dist', 'out'].includes(entry.name))
          continue;
        if (entry.name.startsWith('.') && entry.name !== '.github') continue;
        walk(path);
      } else if (entry.name.endsWith('.md') && entry.name !== 'CHANGELOG.md') {
        files.push(path);
      }
    }
  };
  walk(root);
  return files.sort();
}

/** Hand-written counts of tests: "35 files, 356 tests", "361 tests", "9 files, 125 passed". */
const TEST_COUNT =
  /\b\d[\d,]*\s+(?:(?:unit|GPU|test|regression)\s+)?(?:tests|test files|test cases|passed|skipped|expected fail(?:ures)?)\b|\(\d[\d,]*\s+(?:test\s+)?files?,/gi;

describe('prose', () => {
  it('finds the pages it reads', () => {
    const pages = proseFiles().map((path) => relative(root, path));
    expect(pages).toEqual(expect.arrayContaining(['README.md', 'packages/cudadrv/README.md']));
    expect(pages.some((path) => path.startsWith('docs/decisions/'))).toBe(false);
  });

  it('recognises a count of tests', () => {
    for (const text of [
      'The GPU tests (35 files, 356 tests) run',
      'the suite has 361 tests',
      'kernels unit suite: 9 files, 125 passed, 3 expected fail',
      '1,024 GPU tests',
    ]) {
      expect(text.match(TEST_COUNT), text).not.toBeNull();
    }
    for (const text of ['64 tasks', 'runs 2 files', '20 ms']) {
      expect(text.match(TEST_COUNT), text).toBeNull();
    }
  });

  it('hand-writes no count of tests: the test runner prints them', () => {
    const counts: string[] = [];
    for (const path of proseFiles()) {
      const lines = readFileSync(path, 'utf8').split('\n');
      lines.forEach((line, index) => {
        for (const match of line.matchAll(TEST_COUNT)) {
          counts.push(`${relative(root, path)}:${index + 1}: ${match[0]}`);
        }
      });
    }
    expect(counts).toEqual([]);
  });
});

/**
 * An object as the README writes it (`{ status: 'ok', gpu: { usable: true, devices } }`), as
 * key paths: a literal value, or `*` for a shorthand name (any value).
 */
function shapeOfDocumented(text: string): Record<string, unknown> {
  const source = ts.createSourceFile('shape.ts', `(${text})`, ts.ScriptTarget.Latest, true);
  const statement = source.statements[0] as ts.ExpressionStatement;
  const shape: Record<string, unknown> = {};
  const walk = (node: ts.Expression, path: string) => {
    if (ts.isParenthesizedExpression(node)) return walk(node.expression, path);
    if (!ts.isObjectLiteralExpression(node)) {
      shape[path] = JSON.parse(node.getText(source).replaceAll("'", '"'));
      return;
    }
    for (const property of node.properties) {
      const name = property.name!.getText(source);
      const at = path === '' ? name : `${path}.${name}`;
      if (ts.isShorthandPropertyAssignment(property)) shape[at] = '*';
      else walk((property as ts.PropertyAssignment).initializer, at);
    }
  };
  walk(statement.expression, '');
  return shape;
}

/** A JSON answer as key paths, each value kept (or `*` where the README names it only). */
function shapeOfAnswer(
  value: unknown,
  documented: Record<string, unknown>,
): Record<string, unknown> {
  const shape: Record<string, unknown> = {};
  const walk = (node: unknown, path: string) => {
    if (typeof node === 'object' && node !== null && !Array.isArray(node)) {
      for (const [key, inner] of Object.entries(node))
        walk(inner, path === '' ? key : `${path}.${key}`);
    } else {
      shape[path] = documented[path] === '*' ? '*' : node;
    }
  };
  walk(value, '');
  return shape;
}

describe("the examples README's GET /health", () => {
  it('says what the service answers, usable and not', async () => {
    const readme = readFileSync(join(root, 'packages/examples/README.md'), 'utf8');
    const row = readme.split('\n').find((line) => line.startsWith('| `GET /health`'));
    expect(row).toBeDefined();
    const answers = [...row!.matchAll(/\b(\d{3}) `(\{[^`]*\})`/g)].map((match) => ({
      status: Number(match[1]),
      shape: shapeOfDocumented(match[2]!),
    }));
    expect(answers.map((answer) => answer.status)).toEqual([200, 503]);
    const cases: GpuHealth[] = [
      { usable: true, devices: 2 },
      { usable: false, reason: 'no CUDA driver' },
    ];
    for (const [index, gpu] of cases.entries()) {
      const server = createServer({ checkGpu: () => gpu });
      await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
      try {
        const { port } = server.address() as AddressInfo;
        const response = await fetch(`http://127.0.0.1:${port}/health`);
        const documented = answers[index]!;
        expect(response.status).toBe(documented.status);
        expect(shapeOfAnswer(await response.json(), documented.shape)).toEqual(documented.shape);
      } finally {
        await server.shutdown({ graceMs: 0 });
      }
    }
  });
});
