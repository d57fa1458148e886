// Runs the command line's bundle (dist/cli/main.cjs, made by scripts/build-cli.mjs) compiled with
// V8's code cache of it (main.cjs.cache, written by the build from one run of a client command):
// the program, commander and the client commands are then neither parsed nor compiled at start.
// A cache that V8 refuses (another Node version, other V8 flags) is ignored and the file compiled
// as usual. Plain JavaScript, as bin.js and entry.js: it runs before any TypeScript loader exists.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { pathToFileURL, URL } from 'node:url';
import { Script } from 'node:vm';

/**
 * Modules the bundle takes from the compiled tree with a static import (the build's SHARED list):
 * one copy for the bundle and the daemons it imports, so that an error a daemon throws is a
 * TarcilError to the program's handler. Loaded here as ES modules and handed to the bundle's
 * `require` by the path it asks for (relative to dist/cli).
 */
export const SHARED_FROM_TREE = ['../src/util/errors.js'];

/** The file's V8 code cache, when there is one. */
function cacheOf(file) {
  try {
    return readFileSync(`${file}.cache`);
  } catch {
    return undefined;
  }
}

/**
 * Loads the bundle at `file` as Node loads a CommonJS module, compiled with its code cache, and
 * returns its exports. Its dynamic imports (the daemons, from the compiled tree) go through
 * `import()` here, resolved against the bundle's own location. With TARCIL_WRITE_CODE_CACHE set to
 * the bundle's directory, the code cache is written at exit (the build does that once).
 */
export async function loadBundle(file) {
  const url = pathToFileURL(file).href;
  const shared = new Map();
  for (const p of SHARED_FROM_TREE) shared.set(p, await import(new URL(p, url).href));
  const req = createRequire(file);
  const bundleRequire = (id) => (shared.has(id) ? shared.get(id) : req(id));
  bundleRequire.resolve = req.resolve;
  const source = `(function (exports, require, module, __filename, __dirname, __tarcilUrl, __tarcilImport) { ${readFileSync(file, 'utf8')}\n});`;
  const script = new Script(source, { filename: file, cachedData: cacheOf(file) });
  if (process.env.TARCIL_WRITE_CODE_CACHE === dirname(file)) process.on('exit', () => writeFileSync(`${file}.cache`, script.createCachedData()));
  const mod = { exports: {} };
  const load = (spec) => import(spec.startsWith('.') ? new URL(spec, url).href : spec);
  script.runInThisContext()(mod.exports, bundleRequire, mod, file, dirname(file), url, load);
  return mod.exports;
}

/** Runs the command line of the bundle in `distCli` (dist/cli) on `argv` (default process.argv). */
export async function runBundle(distCli, argv = process.argv) {
  const { runCli } = await loadBundle(join(distCli, 'main.cjs'));
  await runCli(argv);
}
