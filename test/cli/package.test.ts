/**
 * The package as a user gets it: `npm pack` ships the compiled tree, the assets it reads (proto/,
 * profiles/), the job spec's JSON Schema (schema/), the bin, the deploy examples, README and LICENSE, and nothing else; the tarball,
 * installed globally into a temporary prefix (dependencies from the npm registry or its cache),
 * runs `tarcil up` and a `tarcil submit --wait` against it.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { compiledEntry } from '../../src/cli/entry.js';
import { EXIT } from '../../src/cli/exit-codes.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** The environment of the npm and tarcil children: none of the npm_config_* an `npm test` run sets, but its cache. */
function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^npm_config_/i.test(k) && !/^npm_config_(cache|registry|userconfig)$/i.test(k)) continue;
    e[k] = v;
  }
  return { ...e, TARCIL_LOG: 'silent', ...extra };
}

function npm(args: string[], cwd = ROOT): { code: number | null; out: string; err: string } {
  const r = spawnSync(NPM, args, { cwd, encoding: 'utf8', env: env(), maxBuffer: 64 * 1024 * 1024 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** Where every packed file must come from. */
const SHIPPED = [
  /^package\.json$/,
  /^dist\/dashboard\/(app\.js|app\.css|index\.html)$/,
  /^dist\/proto\/descriptor\.json$/,
  /^README\.md$/,
  /^LICENSE$/,
  /^dist\/\.built$/,
  /^dist\/src\/.+\.js$/,
  /^dist\/cli\/[^/]+\.(js|cjs|cjs\.cache)$/,
  /^src\/cli\/(bin|entry|bundle)\.js$/,
  /^src\/monitor\/supervisor\.js$/,
  /^proto\/.+\.proto$/,
  /^profiles\//,
  /^deploy\//,
  /^schema\/jobspec\.schema\.json$/,
];

describe('the package', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tarcil-pack-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('npm pack lists only what a user needs', () => {
    const r = npm(['pack', '--dry-run', '--json', '--ignore-scripts']);
    expect(r.code, r.err).toBe(0);
    const files = (JSON.parse(r.out) as { files: { path: string }[] }[])[0]?.files.map((f) => f.path) ?? [];
    expect(files.filter((f) => !SHIPPED.some((re) => re.test(f)))).toEqual([]);
    for (const f of [
      'LICENSE',
      'README.md',
      'dist/.built',
      'dist/dashboard/app.js',
      'dist/dashboard/index.html',
      'dist/proto/descriptor.json',
      'dist/src/cli/main.js',
      'dist/cli/main.cjs',
      'dist/cli/main.cjs.cache',
      'dist/cli/vendor.cjs',
      'src/cli/bin.js',
      'src/cli/entry.js',
      'src/cli/bundle.js',
      'src/monitor/supervisor.js',
      'proto/tarcil/v1/scheduler.proto',
      'proto/tarcil/v1/monitor.proto',
      'profiles/platforms.json',
      'profiles/jobs/spark-lr.json',
      'schema/jobspec.schema.json',
    ]) {
      expect(files, f).toContain(f);
    }
    expect(files.filter((f) => /^(test|bench|\.ci|scripts)\//.test(f) || f.endsWith('.ts') || f.startsWith('dist/src/rpc/gen/'))).toEqual([]);
  });

  it('LICENSE is the Apache License 2.0, as package.json says', () => {
    const text = readFileSync(join(ROOT, 'LICENSE'), 'utf8');
    // The MD5 of https://www.apache.org/licenses/LICENSE-2.0.txt.
    expect(createHash('md5').update(text).digest('hex')).toBe('3b83ef96387f14655fc854ddc3c6bd57');
    expect(text).toContain('Version 2.0, January 2004');
    expect(text).toContain('END OF TERMS AND CONDITIONS');
    expect((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { license: string }).license).toBe('Apache-2.0');
  });

  it('the packed tarball, installed globally in a temporary prefix, runs tarcil up and a submit --wait', async () => {
    // npm pack builds dist/ first (prepare) unless it is up to date.
    const packed = npm(['pack', '--json', '--pack-destination', dir, ...(compiledEntry(ROOT) ? ['--ignore-scripts'] : [])]);
    expect(packed.code, packed.err).toBe(0);
    const tarball = join(dir, (JSON.parse(packed.out.slice(packed.out.indexOf('['))) as { filename: string }[])[0]?.filename ?? '');
    expect(existsSync(tarball)).toBe(true);
    const prefix = join(dir, 'prefix');
    const installed = npm(['install', '--global', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', tarball], dir);
    expect(installed.code, installed.err).toBe(0);
    const bin = join(prefix, 'bin', 'tarcil');
    const pkg = join(prefix, 'lib', 'node_modules', 'tarcil');
    // The compiled tree, without the TypeScript sources or tsx.
    expect(existsSync(join(pkg, 'src', 'cli', 'main.ts'))).toBe(false);
    expect(existsSync(join(pkg, 'node_modules', 'tsx'))).toBe(false);
    const version = spawnSync(bin, ['--version'], { cwd: dir, encoding: 'utf8', env: env() });
    expect(version.stdout.trim()).toBe((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version);
    const fromSource = spawnSync(bin, ['--version'], { cwd: dir, encoding: 'utf8', env: env({ TARCIL_FROM_SOURCE: '1' }) });
    expect(fromSource.status).toBe(1);
    expect(fromSource.stderr).toContain('which this installation does not have');

    const up = spawn(bin, ['up', '--port', '0', '--metrics-port', '0', '--http-port', '0'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: env() });
    let out = '';
    up.stdout.on('data', (d: Buffer) => (out += d.toString()));
    up.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => up.on('exit', (code) => resolve(code)));
    try {
      const port = await new Promise<string>((resolve, reject) => {
        const check = (): void => {
          const m = /Scheduler gRPC +127\.0\.0\.1:(\d+)/.exec(out);
          if (m?.[1]) resolve(m[1]);
        };
        up.stdout.on('data', check);
        void exited.then((code) => reject(new Error(`tarcil up exited (${code}): ${out}`)));
      });
      const submit = spawnSync(bin, ['submit', join(pkg, 'profiles', 'jobs', 'spark-lr.json'), '--wait', '--server', `127.0.0.1:${port}`], {
        cwd: dir,
        encoding: 'utf8',
        env: env(),
      });
      expect(submit.stderr).toBe('');
      expect(submit.status).toBe(EXIT.OK);
      expect(submit.stdout).toMatch(/spark-lr-20 {2}succeeded {2}\[20 succeeded\]/);
    } finally {
      up.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  }, 240_000);
});
