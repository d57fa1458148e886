import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error -- a plain ES module of the build (scripts/), without types
import { buildCli } from '../../scripts/build-cli.mjs';
import { compiledEntry } from '../../src/cli/entry.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('which tree the tarcil command runs', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tarcil-entry-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const at = (file: string, seconds: number): void => {
    mkdirSync(join(file, '..'), { recursive: true });
    writeFileSync(file, '');
    utimesSync(file, seconds, seconds);
  };

  it('the compiled one only when it was built after every source file changed, and never when told not to', () => {
    at(join(dir, 'src', 'cli', 'main.ts'), 1000);
    at(join(dir, 'src', 'store', 'deep', 'x.ts'), 1000);
    at(join(dir, 'src', 'cli', 'notes.md'), 5000); // not a source file
    // No build yet.
    expect(compiledEntry(dir, {})).toBeUndefined();
    at(join(dir, 'dist', 'src', 'cli', 'main.js'), 2000);
    expect(compiledEntry(dir, {})).toBeUndefined(); // compiled files but no stamp of a finished build
    at(join(dir, 'dist', '.built'), 2000);
    expect(compiledEntry(dir, {})).toBe(join(dir, 'dist', 'src', 'cli', 'main.js'));
    expect(compiledEntry(dir, { TARCIL_FROM_SOURCE: '1' })).toBeUndefined();
    // The bundle of the quick paths, when the build made one.
    at(join(dir, 'dist', 'cli', 'main.cjs'), 2000);
    expect(compiledEntry(dir, {})).toBe(join(dir, 'dist', 'cli', 'main.cjs'));
    expect(compiledEntry(dir, { TARCIL_FROM_SOURCE: '1' })).toBeUndefined();
    // A source file edited (or checked out) after the build, however deep: the sources run.
    at(join(dir, 'src', 'store', 'deep', 'x.ts'), 3000);
    expect(compiledEntry(dir, {})).toBeUndefined();
  });

  it('the compiled tree and its bundle run: help, the catalog and the protos are found from dist/', async () => {
    // Built into a scratch directory inside the package (so the package root is found above it),
    // as `npm run build` builds dist/.
    const out = join(ROOT, '.tarcil', `build-check-${process.pid}`);
    try {
      const tsc = spawnSync(
        process.execPath,
        [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', out],
        { encoding: 'utf8' },
      );
      expect(tsc.stdout + tsc.stderr).toBe('');
      await (buildCli as (outDir: string, tree: string) => Promise<string>)(join(out, 'cli'), out);
      const env = { ...process.env, TARCIL_LOG: 'silent' };
      // The bundle runs as bin.js runs it: through bundle.js, with its code cache.
      const loader = pathToFileURL(join(ROOT, 'src', 'cli', 'bundle.js')).href;
      const viaLoader = (args: string[]) =>
        spawnSync(
          process.execPath,
          [
            '--input-type=module',
            '-e',
            `import { runBundle } from ${JSON.stringify(loader)}; await runBundle(${JSON.stringify(join(out, 'cli'))}, [process.execPath, 'tarcil', ...${JSON.stringify(args)}]);`,
          ],
          { encoding: 'utf8', env },
        );
      const runners: [string, (args: string[]) => ReturnType<typeof viaLoader>][] = [
        [join(out, 'src', 'cli', 'main.js'), (args) => spawnSync(process.execPath, [join(out, 'src', 'cli', 'main.js'), ...args], { encoding: 'utf8', env })],
        [join(out, 'cli', 'main.cjs'), viaLoader],
      ];
      for (const [main, runner] of runners) {
        const run = (...args: string[]) => runner(args);
        const help = run('--help');
        expect(help.status, main).toBe(0);
        expect(help.stdout).toContain('Usage: tarcil');
        // The catalog (profiles/) from the package root; from the bundle, a command of the compiled tree.
        const prof = run('profile', 'spark-lr');
        expect(prof.status, main).toBe(0);
        expect(prof.stdout).toContain('spark-lr');
        // An error of the compiled tree's modules is the program's own: its message and exit code.
        const bench = run('bench', 'no-such-experiment');
        expect(bench.status, main).toBe(2);
        expect(bench.stderr).toMatch(/^error: .*no-such-experiment/);
        // The protos: a client call that loads them, against a port nothing listens on.
        const jobs = run('jobs', '--server', '127.0.0.1:1', '--timeout', '1000');
        expect(jobs.stderr).not.toMatch(/ENOENT|no such file/i);
        expect(jobs.stderr).toMatch(/unavailable|connect/i);
        expect(jobs.status, main).toBe(4);
      }
      // The bundle and the gRPC client's libraries come with V8's code cache; a cache V8 refuses is only slower.
      for (const f of ['main.cjs.cache', 'vendor.cjs.cache']) {
        const cache = join(out, 'cli', f);
        expect(existsSync(cache), f).toBe(true);
        writeFileSync(cache, 'not a code cache');
      }
      const refused = viaLoader(['jobs', '--server', '127.0.0.1:1', '--timeout', '1000']);
      expect(refused.stderr).toMatch(/unavailable|connect/i);
      expect(refused.status).toBe(4);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 120_000);
});
