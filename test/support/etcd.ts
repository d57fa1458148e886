import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A private etcd for tests: free ports, a temporary data dir, removed on stop. */
export interface EtcdProcess {
  endpoint: string;
  dataDir: string;
  stop(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export function findEtcd(): string | undefined {
  const candidates = [process.env.ETCD_BIN, 'etcd', '/usr/bin/etcd', '/usr/local/bin/etcd'].filter(
    (x): x is string => typeof x === 'string' && x.length > 0,
  );
  for (const c of candidates) {
    const r = spawnSync(c, ['--version'], { encoding: 'utf8' });
    if (r.status === 0) return c;
  }
  return undefined;
}

/** Installs etcd from Debian when it is missing and we are root (a fresh CI machine). */
export function ensureEtcd(say: (msg: string) => void): string {
  const found = findEtcd();
  if (found) return found;
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (!isRoot) {
    throw new Error(
      'etcd is not installed and this user cannot install it: run `sudo apt-get install -y etcd-server` or set ETCD_BIN',
    );
  }
  say('etcd not found: installing Debian package etcd-server (apt-get) ...');
  const upd = spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit' });
  const inst = spawnSync('apt-get', ['install', '-y', '-qq', 'etcd-server'], {
    stdio: 'inherit',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  const again = findEtcd();
  if (upd.status !== 0 || inst.status !== 0 || !again) {
    throw new Error('could not install etcd-server with apt-get; install it by hand or set ETCD_BIN');
  }
  return again;
}

export async function startEtcd(opts: { bin?: string; extraArgs?: string[] } = {}): Promise<EtcdProcess> {
  const bin = opts.bin ?? findEtcd();
  if (!bin) throw new Error('etcd binary not found (set ETCD_BIN or install etcd-server)');
  const dataDir = mkdtempSync(join(tmpdir(), 'tarcil-etcd-'));
  const clientPort = await freePort();
  const peerPort = await freePort();
  const endpoint = `http://127.0.0.1:${clientPort}`;
  const args = [
    '--name', 'tarcil-test',
    '--data-dir', dataDir,
    '--listen-client-urls', endpoint,
    '--advertise-client-urls', endpoint,
    '--listen-peer-urls', `http://127.0.0.1:${peerPort}`,
    '--initial-advertise-peer-urls', `http://127.0.0.1:${peerPort}`,
    '--initial-cluster', `tarcil-test=http://127.0.0.1:${peerPort}`,
    '--log-level', 'error',
    '--logger', 'zap',
    ...(opts.extraArgs ?? []),
  ];
  const child: ChildProcess = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  await waitHealthy(endpoint, child, () => stderr);
  let stopped = false;
  return {
    endpoint,
    dataDir,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 3000).unref();
      });
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function waitHealthy(endpoint: string, child: ChildProcess, err: () => string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`etcd exited early (${child.exitCode}): ${err()}`);
    try {
      const res = await fetch(`${endpoint}/health`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`etcd did not become healthy at ${endpoint}: ${err()}`);
}
