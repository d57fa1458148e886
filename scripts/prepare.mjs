// The package's `prepare` (run by `npm install` in a clone, by `npm pack`, and by npm when npx
// installs the clone into its cache):
// - builds dist/ (`npm run build`) only when it was not built from exactly the files there are now
//   (scripts/build-stamp.mjs), so an up-to-date dist/ is never rebuilt nor rewritten, even while
//   `npm start` serves from it;
// - links the command into the clone's node_modules/.bin (npm links the bins of dependencies, never
//   the package's own), so that `node_modules/.bin/tarcil`, or `tarcil` with that folder on PATH,
//   runs the clone's command directly. `npx tarcil` in the clone itself does not: npm 11 installs a
//   package whose own bin is asked for into its npx cache, and checks that install at every run.
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readlinkSync, statSync, symlinkSync, utimesSync } from 'node:fs';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { filesUnder, staleReason } from './build-stamp.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN_TARGET = join('..', '..', 'src', 'cli', 'bin.js');

/** Links node_modules/.bin/tarcil to src/cli/bin.js when node_modules/.bin exists; what it did, for the log. */
function linkBin() {
  const binDir = join(root, 'node_modules', '.bin');
  if (!existsSync(binDir)) return undefined;
  const link = join(binDir, 'tarcil');
  let present = false;
  try {
    present = lstatSync(link) !== undefined;
  } catch {
    present = false;
  }
  if (present) {
    let target;
    try {
      target = readlinkSync(link);
    } catch {
      target = undefined;
    }
    return target === BIN_TARGET ? undefined : `node_modules/.bin/tarcil exists (not a link to src/cli/bin.js); left as it is`;
  }
  try {
    symlinkSync(BIN_TARGET, link);
    return 'linked node_modules/.bin/tarcil to src/cli/bin.js';
  } catch (err) {
    return `could not link node_modules/.bin/tarcil: ${err instanceof Error ? err.message : String(err)}`;
  }
}

const reason = staleReason(root);
if (reason === undefined) {
  // Same content, yet a source touched since (a checkout back and forth): only the stamp's time, so
  // that src/cli/entry.js runs the compiled tree rather than the sources.
  const built = join(root, 'dist', '.built');
  const newest = Math.max(
    0,
    ...filesUnder(join(root, 'src'), [])
      .filter((f) => f.endsWith('.ts'))
      .map((f) => statSync(f).mtimeMs),
  );
  if (statSync(built).mtimeMs < newest) {
    const now = new Date();
    utimesSync(built, now, now);
  }
  process.stderr.write('tarcil: dist/ is up to date (built from these sources); not rebuilt\n');
} else {
  process.stderr.write(`tarcil: building dist/ (${reason})\n`);
  const npm = process.env.npm_execpath;
  const run =
    npm !== undefined && npm.endsWith('.js')
      ? spawnSync(process.execPath, [npm, 'run', '-s', 'build'], { cwd: root, stdio: 'inherit' })
      : spawnSync('npm', ['run', '-s', 'build'], { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
  if (run.status !== 0) process.exit(run.status ?? 1);
}
const linked = linkBin();
if (linked !== undefined) process.stderr.write(`tarcil: ${linked}\n`);
