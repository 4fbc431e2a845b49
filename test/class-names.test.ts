import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { inspect } from 'node:util';
import { build } from 'tsup';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classNames } from '../tsup.config.base';

// Classes that name themselves in their own body, as ours do: esbuild writes them as
// `var X = class _X`, whose names the class-names plugin of tsup.config.base.ts sets back.
const SOURCE = `
function mark(errorClass: Function, key: string) {
  const marker = Symbol.for(key);
  Object.defineProperty(errorClass.prototype, marker, { value: true });
  return (value: unknown) => typeof value === 'object' && value !== null && marker in value;
}
export class BaseFailure extends Error {
  static readonly isInstance = mark(BaseFailure, 'test/BaseFailure');
  constructor(message: string) {
    super(message);
    this.name = 'BaseFailure';
  }
}
export class DeviceMissing extends BaseFailure {
  static override readonly isInstance = mark(DeviceMissing, 'test/DeviceMissing');
  constructor() {
    super('no device');
    this.name = 'DeviceMissing';
  }
}
export class Box {
  static readonly boxes = new Map<number, Box>();
  constructor(readonly id: number) {}
  static of(id: number): Box {
    return Box.boxes.get(id) ?? new Box(id);
  }
  /** Names the nested one by a property called _Box, which stays as it is. */
  get label(): string {
    return { _Box: 'box' }._Box + this.id;
  }
}
export const plain = () => 'not renamed';
`;

let folder: string;
let built: string;
let module: Record<string, any>;

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), 'class-names-'));
  writeFileSync(join(folder, 'entry.ts'), SOURCE);
  await build({
    entry: { entry: join(folder, 'entry.ts') },
    outDir: join(folder, 'dist'),
    format: ['esm'],
    target: 'node20',
    sourcemap: true,
    silent: true,
    config: false,
    plugins: [classNames],
  });
  built = readFileSync(join(folder, 'dist', 'entry.js'), 'utf8');
  module = await import(pathToFileURL(join(folder, 'dist', 'entry.js')).href);
}, 60_000);

afterAll(() => rmSync(folder, { recursive: true, force: true }));

describe('tsup class-names plugin', () => {
  it('esbuild wrote the classes as var X = class _X; one statement at the end names them', () => {
    expect(built).toMatch(/^var BaseFailure = class _BaseFailure extends Error/m);
    expect(built).toMatch(/^var Box = class _Box/m);
    const fix = built
      .split('\n')
      .filter((line) => line.includes('Object.defineProperty(c, "name"'));
    expect(fix).toEqual([
      'for (const c of [BaseFailure, DeviceMissing, Box]) Object.defineProperty(c, "name", { value: c.name.slice(1), configurable: true });',
    ]);
    // Before the source map comment, which stays the last line.
    expect(built.trimEnd().split('\n').at(-1)).toBe('//# sourceMappingURL=entry.js.map');
  });

  it('constructor names, error names and what inspect prints are the source names', () => {
    expect(module.BaseFailure.name).toBe('BaseFailure');
    expect(module.DeviceMissing.name).toBe('DeviceMissing');
    expect(module.Box.name).toBe('Box');
    const error = new module.DeviceMissing();
    expect(error.name).toBe('DeviceMissing');
    expect(error.constructor.name).toBe('DeviceMissing');
    expect(inspect(error).split('\n')[0]).toBe('DeviceMissing: no device');
    expect(inspect(module.Box.of(3))).toBe('Box { id: 3 }');
  });

  it('the classes still work: markers, statics, a property named like the old inner name', () => {
    const error = new module.DeviceMissing();
    expect(module.BaseFailure.isInstance(error)).toBe(true);
    expect(module.DeviceMissing.isInstance(new module.BaseFailure('x'))).toBe(false);
    expect(module.Box.of(2)).toBeInstanceOf(module.Box);
    expect(module.Box.of(2).label).toBe('box2');
    expect(module.plain()).toBe('not renamed');
  });

  it('every line above the added one is what esbuild wrote (the source map stays right)', () => {
    const again = classNames.renderChunk!.call({} as never, 'var A = class _A {}\nvar b = 1;\n', {
      type: 'chunk',
      code: '',
      path: 'a.js',
    });
    expect(again).toEqual({
      code: 'var A = class _A {}\nvar b = 1;\n\nfor (const c of [A]) Object.defineProperty(c, "name", { value: c.name.slice(1), configurable: true });\n',
    });
  });

  it('leaves a chunk without such classes alone', () => {
    expect(classNames.renderChunk!.call({} as never, 'var a = class {};', {} as never)).toBe(
      undefined,
    );
    // A class expression inside a function is not the chunk's to name.
    expect(
      classNames.renderChunk!.call(
        {} as never,
        'function f() {\n  var A = class _A {};\n}',
        {} as never,
      ),
    ).toBe(undefined);
  });
});
