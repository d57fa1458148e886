import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const OUTPUTS = ['dist/src/cli/main.js', 'dist/cli/main.cjs', 'dist/cli/vendor.cjs', 'dist/dashboard/index.html', 'dist/proto/descriptor.json'];

/** A tree shaped like a clone after a build: sources, the build's outputs, the stamps, the scripts. */
function tree(dir: string): void {
  const put = (file: string, text: string): void => {
    mkdirSync(join(dir, file, '..'), { recursive: true });
    writeFileSync(join(dir, file), text);
  };
  put('src/cli/main.ts', 'export const a = 1;\n');
  put('web/dashboard/app.js', 'export {};\n');
  put('proto/tarcil/v1/x.proto', 'syntax = "proto3";\n');
  // `npm run build` would fail in this tree (no compiler): a prepare that builds shows as an exit code.
  put('package.json', JSON.stringify({ name: 'tarcil', scripts: { build: 'node -e "process.exit(7)"' } }));
  for (const f of OUTPUTS) put(f, 'built\n');
  for (const s of ['build-stamp.mjs', 'prepare.mjs']) {
    mkdirSync(join(dir, 'scripts'), { recursive: true });
    copyFileSync(join(ROOT, 'scripts', s), join(dir, 'scripts', s));
  }
  mkdirSync(join(dir, 'node_modules', '.bin'), { recursive: true });
  const stamp = spawnSync(process.execPath, [join(dir, 'scripts', 'build-stamp.mjs'), '--write'], { encoding: 'utf8' });
  expect(stamp.status, stamp.stderr).toBe(0);
}

const prepare = (dir: string): { status: number | null; err: string } => {
  const env = { ...process.env };
  delete env.npm_execpath;
  const r = spawnSync(process.execPath, [join(dir, 'scripts', 'prepare.mjs')], { cwd: dir, encoding: 'utf8', env });
  return { status: r.status, err: r.stderr };
};

describe('prepare: dist/ is built only when it is not up to date', () => {
  const base = mkdtempSync(join(tmpdir(), 'tarcil-prepare-'));
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it('an up-to-date dist/ is left as it is, the own bin is linked into node_modules/.bin, and a touched but unchanged source re-dates only the stamp', () => {
    const dir = join(base, 'fresh');
    tree(dir);
    const old = 1_000_000;
    for (const f of OUTPUTS) utimesSync(join(dir, f), old, old);
    const inputs = readFileSync(join(dir, 'dist', '.inputs'), 'utf8');
    const first = prepare(dir);
    expect(first.status, first.err).toBe(0);
    expect(first.err).toContain('dist/ is up to date');
    for (const f of OUTPUTS) {
      expect(statSync(join(dir, f)).mtimeMs).toBe(old * 1000);
      expect(readFileSync(join(dir, f), 'utf8')).toBe('built\n');
    }
    expect(readFileSync(join(dir, 'dist', '.inputs'), 'utf8')).toBe(inputs);
    expect(readlinkSync(join(dir, 'node_modules', '.bin', 'tarcil'))).toBe(join('..', '..', 'src', 'cli', 'bin.js'));
    // Again: nothing to do, the link is kept.
    const again = prepare(dir);
    expect(again.status, again.err).toBe(0);
    expect(again.err).not.toContain('linked');

    // The stamp older than a source whose content did not change (a checkout back and forth).
    utimesSync(join(dir, 'dist', '.built'), old, old);
    const touched = prepare(dir);
    expect(touched.status, touched.err).toBe(0);
    expect(statSync(join(dir, 'dist', '.built')).mtimeMs).toBeGreaterThanOrEqual(statSync(join(dir, 'src', 'cli', 'main.ts')).mtimeMs);
    expect(statSync(join(dir, OUTPUTS[0] ?? '')).mtimeMs).toBe(old * 1000);
  });

  it.each([
    ['a source changed', (dir: string): void => writeFileSync(join(dir, 'src', 'cli', 'main.ts'), 'export const a = 2;\n'), 'the sources changed'],
    ['a dashboard file changed', (dir: string): void => writeFileSync(join(dir, 'web', 'dashboard', 'app.js'), 'export const b = 1;\n'), 'the sources changed'],
    ['a source added', (dir: string): void => writeFileSync(join(dir, 'src', 'cli', 'new.ts'), ''), 'the sources changed'],
    ['an output missing', (dir: string): void => rmSync(join(dir, 'dist', 'cli', 'main.cjs')), 'dist/cli/main.cjs is missing'],
    ['no stamp of a finished build', (dir: string): void => rmSync(join(dir, 'dist', '.built')), 'dist/ holds no finished build'],
    ['a stamp of the older build (no inputs)', (dir: string): void => rmSync(join(dir, 'dist', '.inputs')), 'dist/ holds no finished build'],
  ])('builds when %s', (name, change, reason) => {
    const dir = join(base, name.replace(/\W+/g, '-'));
    tree(dir);
    change(dir);
    const r = prepare(dir);
    expect(r.err).toContain(`building dist/ (${reason}`);
    expect(r.status).toBe(7); // the tree's `npm run build` ran
    expect(existsSync(join(dir, 'node_modules', '.bin', 'tarcil'))).toBe(false); // not linked after a failed build
  });
});
