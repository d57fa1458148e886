// What dist/ was built from. `npm run build` ends with `node scripts/build-stamp.mjs --write`: it
// writes dist/.built (the time; src/cli/entry.js compares its mtime with the sources') and
// dist/.inputs (a SHA-256 of every file the build reads: src/, web/, proto/, scripts/, the
// tsconfigs, package.json, package-lock.json, and the Node version, whose V8 reads the code caches).
// `prepare` (scripts/prepare.mjs) builds only when dist/ was not built from exactly the files there
// are now (staleReason), so `npm install`, `npm pack` and npm's own install of the package (npx)
// never rebuild, nor rewrite, a dist/ that is up to date.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const DIRS = ['src', 'web', 'proto', 'scripts'];
const FILES = ['tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json'];
/** What the build writes that a run of the command needs (bin.js, the dashboard, the descriptor). */
const OUTPUTS = ['dist/src/cli/main.js', 'dist/cli/main.cjs', 'dist/cli/vendor.cjs', 'dist/dashboard/index.html', 'dist/proto/descriptor.json'];

/** The files under dir, appended to out. */
export function filesUnder(dir, out) {
  if (!existsSync(dir)) return out;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) filesUnder(p, out);
    else if (e.isFile()) out.push(p);
  }
  return out;
}

/** The SHA-256 (hex) of the build's inputs under root: each file's path and content, in path order. */
export function buildInputs(dir = root) {
  const files = [];
  for (const d of DIRS) filesUnder(join(dir, d), files);
  for (const f of FILES) if (existsSync(join(dir, f))) files.push(join(dir, f));
  const names = files.map((f) => relative(dir, f).split('\\').join('/')).sort();
  const hash = createHash('sha256').update(`node ${process.versions.node}\n`);
  for (const name of names) {
    hash.update(`${name}\n`);
    hash.update(readFileSync(join(dir, name)));
    hash.update('\n');
  }
  return hash.digest('hex');
}

/** Why dist/ under dir must be built, or undefined when it was built from the files there are now. */
export function staleReason(dir = root) {
  const stamp = join(dir, 'dist', '.inputs');
  if (!existsSync(join(dir, 'dist', '.built')) || !existsSync(stamp)) return 'dist/ holds no finished build';
  const missing = OUTPUTS.find((f) => !existsSync(join(dir, f)));
  if (missing !== undefined) return `${missing} is missing`;
  if (readFileSync(stamp, 'utf8').trim() !== buildInputs(dir)) return 'the sources changed since dist/ was built';
  return undefined;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv[2] !== '--write') {
    process.stderr.write('usage: node scripts/build-stamp.mjs --write\n');
    process.exit(2);
  }
  writeFileSync(join(root, 'dist', '.built'), new Date().toISOString());
  writeFileSync(join(root, 'dist', '.inputs'), `${buildInputs()}\n`);
}
