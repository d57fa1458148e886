import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { commandFrom, nextSteps, packageRoot, pathFrom } from '../../src/cli/banner-hints.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');

describe("tarcil up's banner: what to run next, from wherever the package is", () => {
  const base = mkdtempSync(join(tmpdir(), 'tarcil-banner-'));
  afterAll(() => rmSync(base, { recursive: true, force: true }));
  const put = (file: string, text = ''): void => {
    mkdirSync(join(file, '..'), { recursive: true });
    writeFileSync(file, text);
  };
  const pkg = (dir: string): void => {
    put(join(dir, 'package.json'), JSON.stringify({ name: 'tarcil' }));
    put(join(dir, 'profiles', 'jobs', 'spark-lr.json'), '{}');
  };

  it('finds the package from any of its files, and only a package named tarcil', () => {
    expect(packageRoot(join(ROOT, 'src', 'cli'))).toBe(ROOT);
    const other = join(base, 'other');
    put(join(other, 'package.json'), JSON.stringify({ name: 'not-tarcil' }));
    mkdirSync(join(other, 'src'), { recursive: true });
    expect(packageRoot(join(other, 'src'))).not.toBe(other);
  });

  it('gives the example job file by a path that exists from the current directory', () => {
    const installed = join(base, 'global', 'lib', 'node_modules', 'tarcil');
    pkg(installed);
    const empty = join(base, 'empty');
    mkdirSync(empty, { recursive: true });
    const [submit] = nextSteps(installed, empty);
    expect(submit).toBe(`tarcil submit ${join(installed, 'profiles', 'jobs', 'spark-lr.json')} --wait`);
    // The path printed is one that exists from there.
    const file = (submit ?? '').split(' ')[2] ?? '';
    expect(existsSync(resolve(empty, file))).toBe(true);
    // From the package's own directory, the short relative path.
    expect(nextSteps(installed, installed)[0]).toBe('tarcil submit profiles/jobs/spark-lr.json --wait');
    expect(pathFrom(join(installed, 'profiles'), join(installed, 'profiles', 'jobs', 'x.json'))).toBe(join('jobs', 'x.json'));
  });

  it('names the command as this installation runs it: the clone’s linked bin, npm run without it, npx for a dependency, tarcil when global', () => {
    const clone = join(base, 'clone');
    pkg(clone);
    put(join(clone, 'src', 'cli', 'main.ts'));
    put(join(clone, 'src', 'cli', 'bin.js'));
    expect(commandFrom(clone, clone)).toBe('npm run -s tarcil --');
    const elsewhere = join(base, 'elsewhere');
    mkdirSync(elsewhere, { recursive: true });
    expect(commandFrom(clone, elsewhere)).toBe(`node ${join(clone, 'src', 'cli', 'bin.js')}`);
    expect(commandFrom(clone, base)).toBe(`node ${join('clone', 'src', 'cli', 'bin.js')}`);
    mkdirSync(join(clone, 'node_modules', '.bin'), { recursive: true });
    symlinkSync(join('..', '..', 'src', 'cli', 'bin.js'), join(clone, 'node_modules', '.bin', 'tarcil'));
    expect(commandFrom(clone, clone)).toBe(join('node_modules', '.bin', 'tarcil'));
    expect(nextSteps(clone, clone)).toEqual([
      'node_modules/.bin/tarcil submit profiles/jobs/spark-lr.json --wait',
      'node_modules/.bin/tarcil jobs',
      'node_modules/.bin/tarcil cluster',
      'node_modules/.bin/tarcil explain <job-id>',
    ]);
    expect(commandFrom(clone, elsewhere)).toBe(join(clone, 'node_modules', '.bin', 'tarcil'));

    const project = join(base, 'project');
    const dep = join(project, 'node_modules', 'tarcil');
    pkg(dep);
    put(join(project, 'node_modules', '.bin', 'tarcil'));
    expect(commandFrom(dep, project)).toBe('npx tarcil');
    expect(nextSteps(dep, project)[0]).toBe('npx tarcil submit node_modules/tarcil/profiles/jobs/spark-lr.json --wait');

    const global = join(base, 'global', 'lib', 'node_modules', 'tarcil');
    expect(commandFrom(global, base)).toBe('tarcil');
  });
});
