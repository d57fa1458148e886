// Which tree the `tarcil` command runs: the compiled one (dist/, made by `npm run build`, which
// `npm install` runs) when it was built after the last change to any source file, else the
// TypeScript sources through tsx's loader (a fresh clone without a build, a tree being edited).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, sep } from 'node:path';
import process from 'node:process';

/**
 * The latest modification time (ms) of the .ts files under dir. Run at every start of the command:
 * paths are joined by hand (path.join normalises each of some 200 paths, several milliseconds
 * of a cold start).
 */
export function newestSource(dir) {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = dir + sep + e.name;
    if (e.isDirectory()) {
      const n = newestSource(p);
      if (n > newest) newest = n;
    } else if (e.name.endsWith('.ts')) {
      const m = statSync(p).mtimeMs;
      if (m > newest) newest = m;
    }
  }
  return newest;
}

/**
 * The compiled entry when dist/.built is at least as new as every .ts file under src/ and
 * TARCIL_FROM_SOURCE is not set: the bundle of the command line's quick paths (dist/cli/main.cjs,
 * scripts/build-cli.mjs; bin.js runs it through bundle.js), else the compiled tree's
 * dist/src/cli/main.js; undefined when the sources must run.
 */
export function compiledEntry(root, env = process.env) {
  if (env.TARCIL_FROM_SOURCE !== undefined && env.TARCIL_FROM_SOURCE !== '') return undefined;
  const stamp = join(root, 'dist', '.built');
  const tree = join(root, 'dist', 'src', 'cli', 'main.js');
  if (!existsSync(stamp) || !existsSync(tree)) return undefined;
  if (statSync(stamp).mtimeMs < newestSource(join(root, 'src'))) return undefined;
  const bundle = join(root, 'dist', 'cli', 'main.cjs');
  return existsSync(bundle) ? bundle : tree;
}
