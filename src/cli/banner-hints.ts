/**
 * What `tarcil up`'s banner tells a user to type next, so that it works where they are: the
 * command as this installation runs it, and the example job file by a path that exists from the
 * current directory (the package's own `profiles/jobs/`, wherever the package is).
 *
 * - In a clone (the TypeScript sources are there): `node_modules/.bin/tarcil`, which `prepare`
 *   links to `src/cli/bin.js`, or `npm run -s tarcil --` without that link. Not `npx tarcil`: in
 *   the package's own directory npm installs the package into its npx cache before running its
 *   bin, and checks that install at every run (about a second each time).
 * - Installed as a dependency of a project (`<project>/node_modules/tarcil`): `npx tarcil`.
 * - Installed globally: `tarcil`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, sep } from 'node:path';

/** The directory of the tarcil package that holds `from` (a file or directory), or undefined. */
export function packageRoot(from: string): string | undefined {
  let dir = from;
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        if ((JSON.parse(readFileSync(pkg, 'utf8')) as { name?: unknown }).name === 'tarcil') return dir;
      } catch {
        // not a package.json of ours: look further up
      }
    }
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

/** A path to `file` (absolute) as typed from cwd: relative when it is under cwd, else absolute. */
export function pathFrom(cwd: string, file: string): string {
  const rel = relative(cwd, file);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel) ? rel : file;
}

/** How a user in cwd runs this installation's command. */
export function commandFrom(root: string, cwd: string): string {
  if (existsSync(join(root, 'src', 'cli', 'main.ts'))) {
    const linked = join(root, 'node_modules', '.bin', 'tarcil');
    if (existsSync(linked)) return pathFrom(cwd, linked);
    return cwd === root ? 'npm run -s tarcil --' : `node ${pathFrom(cwd, join(root, 'src', 'cli', 'bin.js'))}`;
  }
  const parent = dirname(root);
  // A dependency of a project: its node_modules/.bin links the bin, which npx finds at once.
  if (parent.endsWith(`${sep}node_modules`) && existsSync(join(parent, '.bin', 'tarcil'))) return 'npx tarcil';
  return 'tarcil';
}

/** The banner's lines of what to run next (without the leading "In another terminal:"). */
export function nextSteps(root: string | undefined, cwd: string): string[] {
  const cmd = root === undefined ? 'tarcil' : commandFrom(root, cwd);
  const example = root === undefined ? 'profiles/jobs/spark-lr.json' : pathFrom(cwd, join(root, 'profiles', 'jobs', 'spark-lr.json'));
  return [`${cmd} submit ${example} --wait`, `${cmd} jobs`, `${cmd} cluster`, `${cmd} explain <job-id>`];
}
