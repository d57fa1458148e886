/**
 * A command loads what it runs and nothing else: help, the client commands and sample-size do not
 * load the simulator (and vega), the store (and etcd3), the daemons' wiring, the validation
 * library (zod: the flags read their defaults from modules without it) or the gRPC server's
 * reflection and health services. Recorded by a
 * module loader hook that lists every module the process loads. The command line's bundle
 * (dist/cli/main.cjs, scripts/build-cli.mjs) is not loaded through the module loader but by
 * src/cli/bundle.js, with V8's code cache: when the hook sees bundle.js, the process counts as
 * having loaded every module the bundle holds (dist/cli.meta.json), and vendor.cjs's too.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/etcd.ts';

const BIN = fileURLToPath(new URL('../../src/cli/bin.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'tarcil-lazy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const hooks = join(dir, 'hooks.mjs');
writeFileSync(
  hooks,
  `import { appendFileSync } from 'node:fs';
export async function load(url, context, next) {
  appendFileSync(process.env.TARCIL_LOADED_LIST, url + '\\n');
  return next(url, context);
}
`,
);
const register = join(dir, 'register.mjs');
writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);

/** A bundle file's modules (as URLs), from the metafile next to its directory. */
function bundled(file: string): string[] {
  const bundleDir = dirname(file);
  const meta = JSON.parse(readFileSync(`${bundleDir}.meta.json`, 'utf8')) as { outputs: Record<string, { inputs: Record<string, unknown> }> };
  const root = fileURLToPath(new URL('../..', import.meta.url)); // esbuild's working directory (absWorkingDir)
  const inputs = (f: string): string[] => {
    const out = Object.entries(meta.outputs).find(([o]) => join(root, o) === f);
    if (!out) throw new Error(`${f} is not in ${bundleDir}.meta.json`);
    // The chunk with the vendor loader loads vendor.cjs (not through the module loader: with V8's code cache).
    return Object.keys(out[1].inputs).flatMap((i) => (i.startsWith('vendor-loader:') ? inputs(join(bundleDir, 'vendor.cjs')) : i.includes(':') ? [] : [i]));
  };
  return inputs(file).map((i) => pathToFileURL(join(root, i)).href);
}

/** The modules `tarcil args` loads, as URLs. */
function loaded(args: string[]): { code: number | null; modules: string[] } {
  const list = join(dir, `loaded-${args.join('_').replace(/[^a-z0-9_-]/gi, '')}.txt`);
  writeFileSync(list, '');
  const r = spawnSync(process.execPath, ['--import', register, BIN, ...args], {
    encoding: 'utf8',
    env: { ...process.env, TARCIL_LOG: 'silent', TARCIL_LOADED_LIST: list },
  });
  const urls = readFileSync(list, 'utf8').split('\n').filter(Boolean);
  const bundle = fileURLToPath(new URL('../../dist/cli/main.cjs', import.meta.url));
  return { code: r.status, modules: urls.flatMap((u) => (/\/src\/cli\/bundle\.js$/.test(u) ? [u, ...bundled(bundle)] : [u])) };
}

/** What a command that neither schedules, stores nor simulates must not load. */
const HEAVY = [
  /\/node_modules\/vega/,
  /\/node_modules\/zod\//,
  /\/node_modules\/@grpc\/reflection\//,
  /\/node_modules\/grpc-health-check\//,
  /\/node_modules\/etcd3\//,
  /\/src\/sim\/(?!experiments\/names\.)/,
  /\/src\/store\/etcd/,
  /\/src\/frontend\/runtime\./,
  /\/src\/node\/runtime\./,
  /\/src\/agent\/agent\./,
  /\/src\/monitor\/monitor\./,
];

describe('lazy imports', () => {
  it('help and sample-size load neither the simulator, the store nor the daemons', () => {
    for (const args of [['--help'], ['jobs', '--help'], ['server', '--help'], ['bench', '--help'], ['sample-size', '--quantile', '0.8']]) {
      const r = loaded(args);
      expect(r.code, args.join(' ')).toBe(0);
      expect(
        r.modules.some((m) => /\/src\/cli\/program\./.test(m)),
        'the hook sees the modules',
      ).toBe(true);
      for (const re of HEAVY)
        expect(
          r.modules.filter((m) => re.test(m)),
          `${args.join(' ')}: ${re}`,
        ).toEqual([]);
    }
  });

  it('a client call loads the gRPC client, not the store, the simulator or the daemons', async () => {
    const port = await freePort();
    const r = loaded(['jobs', '--server', `127.0.0.1:${port}`, '--timeout', '1000']);
    expect(r.code).toBe(4); // nothing listens there
    expect(r.modules.some((m) => /\/node_modules\/@grpc\/grpc-js\//.test(m))).toBe(true);
    expect(r.modules.some((m) => /\/src\/cli\/client\./.test(m))).toBe(true);
    for (const re of HEAVY)
      expect(
        r.modules.filter((m) => re.test(m)),
        String(re),
      ).toEqual([]);
    // node:crypto is for submit's request id only.
    expect(r.modules).not.toContain('node:crypto');
    const spec = join(dir, 'spec.json');
    writeFileSync(spec, JSON.stringify({ name: 'x', profile: 'spark-lr', tasks: 1 }));
    const submit = loaded(['submit', spec, '--server', `127.0.0.1:${port}`, '--timeout', '500', '--retries', '0']);
    expect(submit.modules).toContain('node:crypto');
  });

  it('a daemon loads what it runs', () => {
    // A bad flag value found once the action runs (the monitor's platform): the daemon's modules are loaded by then.
    const r = loaded(['monitor', '--node', 'n1', '--platform', 'no-such-platform']);
    expect(r.code).toBe(2);
    expect(r.modules.some((m) => /\/src\/cli\/live\./.test(m))).toBe(true);
    expect(r.modules.some((m) => /\/src\/node\/runtime\./.test(m))).toBe(true);
  });
});
