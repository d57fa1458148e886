/**
 * Debian's Chromium for the browser tests (playwright-core drives it): found on the machine, or
 * installed with apt-get as the etcd of the tests is (see etcd.ts). The real binary is
 * /usr/lib/chromium/chromium (/usr/bin/chromium is a wrapper script). When none can be found or
 * installed, the browser tests are skipped and the test setup says so in capitals.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const CANDIDATES = ['/usr/lib/chromium/chromium', '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

export function findChromium(): string | undefined {
  const env = process.env.CHROMIUM_BIN;
  if (env) return existsSync(env) ? env : undefined;
  return CANDIDATES.find((p) => existsSync(p));
}

/** The Chromium binary, installing Debian's package when it is missing and this user may; undefined when there is none. */
export function ensureChromium(say: (msg: string) => void): string | undefined {
  const found = findChromium();
  if (found) return found;
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (!isRoot || process.env.CHROMIUM_BIN) return undefined;
  say('chromium not found: installing Debian package chromium (apt-get) ...');
  const upd = spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit' });
  const inst = spawnSync('apt-get', ['install', '-y', '-qq', 'chromium'], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  if (upd.status !== 0 || inst.status !== 0) return undefined;
  return findChromium();
}
