import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The script's help is its header comment: asked for, it prints it and exits 0 before looking
// for compute-sanitizer (this machine may have none); an unknown argument exits 2 with it.

const script = join(dirname(fileURLToPath(import.meta.url)), 'sanitize.sh');

/** The header comment as the script's own text has it, without the `#` marks. */
function header(): string {
  const lines = readFileSync(script, 'utf8').split('\n');
  const comment: string[] = [];
  for (const line of lines.slice(1)) {
    if (!line.startsWith('#')) break;
    comment.push(line.replace(/^# ?/, ''));
  }
  return comment.join('\n');
}

function run(...args: string[]) {
  return runWith({}, ...args);
}

function runWith(variables: Record<string, string>, ...args: string[]) {
  return spawnSync('bash', [script, ...args], {
    encoding: 'utf8',
    // No sanitizer anywhere: --help and the checks of the variables must not need one.
    env: {
      ...process.env,
      ...variables,
      COMPUTE_SANITIZER: '/nonexistent/compute-sanitizer',
      PATH: '/usr/bin:/bin',
    },
    timeout: 20_000,
  });
}

describe('sanitize.sh', () => {
  it.each(['--help', '-h'])('%s prints the header comment and exits 0', (flag) => {
    const result = run(flag);
    expect(result.status).toBe(0);
    expect(result.stderr).toBe('');
    expect(result.stdout.trim()).toBe(header().trim());
    // The help names what the script reads.
    for (const name of [
      'SANITIZE_QUICK',
      'SANITIZE_ONLY',
      'SANITIZE_TOOL',
      'SANITIZE_ENGINE_TIMEOUT',
      'COMPUTE_SANITIZER',
    ]) {
      expect(result.stdout).toContain(name);
    }
  });

  it('refuses an unknown argument with exit 2, naming it, and the help on stderr', () => {
    const result = run('--quick');
    expect(result.status).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain("unknown argument '--quick'");
    expect(result.stderr).toContain('SANITIZE_QUICK');
  });

  it('refuses an unknown SANITIZE_ONLY with exit 2, listing the targets, before looking for the sanitizer', () => {
    const result = runWith({ SANITIZE_ONLY: 'engines' });
    expect(result.status).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr.trim()).toBe(
      "sanitize: SANITIZE_ONLY must be demo, tests, stress or engine, got 'engines'",
    );
  });

  it('refuses an unknown SANITIZE_TOOL with exit 2, naming both tools', () => {
    const result = runWith({ SANITIZE_ONLY: 'engine', SANITIZE_TOOL: 'synccheck' });
    expect(result.status).toBe(2);
    expect(result.stderr.trim()).toBe(
      "sanitize: SANITIZE_TOOL must be memcheck or racecheck, got 'synccheck'",
    );
  });

  it('with a valid choice, gets past the checks to the missing sanitizer (exit 2, named)', () => {
    const result = runWith({ SANITIZE_ONLY: 'engine', SANITIZE_TOOL: 'racecheck' });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('compute-sanitizer not found');
  });
});
