// Bundles the command line's quick paths into dist/cli/main.cjs: the program, its flags and help,
// the client commands (jobs, status, submit, cluster, explain, cancel, cordon, drain, logs,
// profile --learned) and sample-size, with the libraries they use (commander, cli-table3), as one
// CommonJS file that src/cli/bundle.js loads with V8's code cache of it; @grpc/grpc-js and
// protobufjs are bundled apart in vendor.cjs, loaded the same way when a client command first
// needs them, with protobufjs's functions for the messages of proto/ generated now
// (scripts/proto-codegen.mjs). Node then reads two files and compiles almost nothing at start,
// instead of resolving, reading and compiling several hundred modules, which was most of a short
// command's time. Run by `npm run build`, after tsc; src/cli/entry.js picks dist/cli/main.cjs when
// it exists.
//
// Every other command (up, server, monitor, hollow, demo, bench, validate, profile) is imported
// from the compiled tree (dist/src) as it is without the bundle, so the daemons run one copy of
// each module and library; util/errors is also taken from there (src/cli/bundle.js hands it to the
// bundle), so that an error a daemon throws is a TarcilError to the program's handler. The
// bundle's dynamic imports go through the loader's import() (a script compiled with a code cache
// has none of its own). dist/cli.meta.json lists what each file holds (paths from the package root;
// a file holding vendor-loader:loader loads vendor.cjs).
import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { SHARED_FROM_TREE } from '../src/cli/bundle.js';
import { protoCodegenSource } from './proto-codegen.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The modules a command imports when it runs that go into the bundle (src/ paths). */
const BUNDLED = ['src/cli/client.ts', 'src/cli/node-commands.ts', 'src/cli/sample-size.ts', 'src/rpc/proto-root.ts'];
/**
 * Modules always taken from the compiled tree: one copy shared with the modules loaded from there.
 * The loader hands them to the bundle (SHARED_FROM_TREE, as paths from dist/cli); here, their sources.
 */
const SHARED = SHARED_FROM_TREE.map((p) => p.replace(/^\.\.\//, '').replace(/\.js$/, '.ts'));
/** The libraries of the gRPC client, bundled apart into vendor.cjs and loaded with V8's code cache (see VENDOR_LOADER). */
const VENDOR = { '@grpc/grpc-js': 'grpc', protobufjs: 'protobuf' };

/**
 * Loads vendor.cjs as Node loads a CommonJS module, but compiled with V8's code cache of it
 * (vendor.cjs.cache, written at the end of the build by a run of a client command): most of
 * grpc-js's and protobufjs's compile time at start. A cache V8 refuses (another Node version, other
 * V8 flags) is ignored and the file compiled as usual.
 */
const VENDOR_LOADER = `
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { Script } from 'node:vm';
const file = fileURLToPath(new URL('./vendor.cjs', import.meta.url));
const cacheFile = file + '.cache';
let cachedData;
try { cachedData = readFileSync(cacheFile); } catch {}
const wrapped = '(function (exports, require, module, __filename, __dirname) { ' + readFileSync(file, 'utf8') + '\\n});';
const script = new Script(wrapped, { filename: file, cachedData });
const mod = { exports: {} };
script.runInThisContext()(mod.exports, createRequire(file), mod, file, dirname(file));
if (process.env.TARCIL_WRITE_CODE_CACHE === dirname(file)) process.on('exit', () => writeFileSync(cacheFile, script.createCachedData()));
export const vendor = mod.exports;
`;

/** Writes the bundle to outDir, its imports of the compiled tree pointing into tree (dist/ of `npm run build`). */
export async function buildCli(outDir = join(root, 'dist', 'cli'), tree = join(root, 'dist')) {
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const bundled = new Set(BUNDLED.map((p) => join(root, p)));
  const shared = new Set(SHARED.map((p) => join(root, p)));
  /** The compiled module of a source file, as an import from dist/cli (every output file is in it, none below). */
  const compiled = (file) =>
    relative(outDir, join(tree, relative(root, file).replace(/\.ts$/, '.js')))
      .split('\\')
      .join('/');
  const toCompiledTree = {
    name: 'to-compiled-tree',
    setup(b) {
      b.onResolve({ filter: /^\.\.?\// }, (args) => {
        if (!args.resolveDir.startsWith(join(root, 'src'))) return undefined;
        const file = resolve(args.resolveDir, args.path);
        if (shared.has(file) || (args.kind === 'dynamic-import' && !bundled.has(file))) {
          const path = compiled(file);
          return { path: path.startsWith('../') ? path : `./${path}`, external: true };
        }
        return undefined;
      });
      // A library imported when a command runs (yaml for -o yaml, the server's reflection and
      // health services) is loaded from node_modules: esbuild's chunk of a CommonJS library
      // imported so would not give its named exports.
      b.onResolve({ filter: /^[^./]/ }, (args) =>
        args.kind === 'dynamic-import' && !args.path.startsWith('node:') ? { path: args.path, external: true } : undefined,
      );
    },
  };
  const vendor = {
    name: 'vendor',
    setup(b) {
      b.onResolve({ filter: /^(@grpc\/grpc-js|protobufjs)$/ }, (args) => ({ path: args.path, namespace: 'vendor' }));
      b.onResolve({ filter: /^vendor-loader$/, namespace: 'vendor' }, () => ({ path: 'loader', namespace: 'vendor-loader' }));
      b.onLoad({ filter: /.*/, namespace: 'vendor' }, (args) => ({
        contents: `module.exports = require('vendor-loader').vendor.${VENDOR[args.path]};`,
        loader: 'js',
        resolveDir: root,
      }));
      b.onLoad({ filter: /.*/, namespace: 'vendor-loader' }, () => ({ contents: VENDOR_LOADER, loader: 'js', resolveDir: root }));
    },
  };
  // What both bundles share: Node 20, minified with names kept (errors and stacks stay readable).
  const common = {
    bundle: true,
    platform: 'node',
    target: ['node20'],
    minify: true,
    keepNames: true,
    legalComments: 'none',
    logLevel: 'error',
    metafile: true,
    absWorkingDir: root,
  };
  // protobufjs's functions for the messages of proto/, generated now (scripts/proto-codegen.mjs)
  // and installed on vendor.cjs's protobufjs.
  const codegen = join(outDir, 'proto-codegen.cjs');
  writeFileSync(codegen, protoCodegenSource(join(root, 'proto')));
  const vendorBuild = await build({
    ...common,
    stdin: {
      contents: `require(${JSON.stringify(codegen)})(require('protobufjs'));\nmodule.exports = { ${Object.entries(VENDOR)
        .map(([pkg, name]) => `${name}: require('${pkg}')`)
        .join(', ')} };`,
      resolveDir: root,
      sourcefile: 'vendor.cjs',
      loader: 'js',
    },
    format: 'cjs',
    outfile: join(outDir, 'vendor.cjs'),
  });
  rmSync(codegen);
  const result = await build({
    ...common,
    stdin: { contents: "export { runCli } from './src/cli/program.ts';", resolveDir: root, sourcefile: 'main.cjs', loader: 'ts' },
    format: 'cjs',
    outfile: join(outDir, 'main.cjs'),
    // The bundle's location as a URL (package-root.ts finds the package from it): set by the
    // banner below, from the loader or from __filename.
    define: { 'import.meta.url': '__tarcil_url' },
    plugins: [toCompiledTree, vendor],
  });
  // A script compiled with a code cache (src/cli/bundle.js) has no import() of its own: the
  // bundle's dynamic imports, all of modules outside it, go through the loader's.
  // Its static imports of the compiled tree are handed to it by the loader, which must know them.
  const fromTree = Object.values(result.metafile.outputs)
    .flatMap((o) => o.imports)
    .filter((i) => i.external && i.kind !== 'dynamic-import' && i.path.startsWith('.'))
    .map((i) => i.path);
  const unknown = fromTree.filter((p) => !SHARED_FROM_TREE.includes(p));
  if (unknown.length > 0)
    throw new Error(`build-cli: main.cjs imports ${unknown.join(', ')} from the compiled tree; add them to SHARED_FROM_TREE (src/cli/bundle.js)`);
  const mainFile = join(outDir, 'main.cjs');
  const DYNAMIC = /\bimport\((?=["'`])/g;
  const code = readFileSync(mainFile, 'utf8');
  const external = Object.values(result.metafile.outputs)
    .flatMap((o) => o.imports)
    .filter((i) => i.kind === 'dynamic-import' && i.external).length;
  const rewritten = code.replace(DYNAMIC, '__tarcil_import(');
  if ((code.match(DYNAMIC) ?? []).length !== external || /\bimport\(/.test(rewritten)) {
    throw new Error(
      `build-cli: main.cjs has ${(code.match(DYNAMIC) ?? []).length} import() of a literal path and ${external} external dynamic imports; every import() must be one of them`,
    );
  }
  const banner = [
    'var __tarcil_url = typeof __tarcilUrl === "string" ? __tarcilUrl : require("node:url").pathToFileURL(__filename).href;',
    'var __tarcil_import = typeof __tarcilImport === "function" ? __tarcilImport : (s) => import(s.startsWith(".") ? new URL(s, __tarcil_url).href : s);',
  ].join('\n');
  writeFileSync(mainFile, `${banner}\n${rewritten}`);
  const meta = {
    inputs: { ...vendorBuild.metafile.inputs, ...result.metafile.inputs },
    outputs: { ...vendorBuild.metafile.outputs, ...result.metafile.outputs },
  };
  writeFileSync(`${outDir}.meta.json`, JSON.stringify(meta));
  // The code caches of main.cjs and vendor.cjs, from a client command run once (against a port
  // nothing listens on), through the loader the tarcil command uses.
  const loader = pathToFileURL(join(root, 'src', 'cli', 'bundle.js')).href;
  const argv = [process.execPath, 'tarcil', 'jobs', '--server', '127.0.0.1:1', '--timeout', '300'];
  spawnSync(
    process.execPath,
    ['--input-type=module', '-e', `import { runBundle } from ${JSON.stringify(loader)}; await runBundle(${JSON.stringify(outDir)}, ${JSON.stringify(argv)});`],
    {
      stdio: 'ignore',
      env: { ...process.env, TARCIL_WRITE_CODE_CACHE: outDir, TARCIL_LOG: 'silent' },
    },
  );
  return outDir;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildCli();
