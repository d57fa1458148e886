import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync, statSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A private etcd for tests: free ports, a temporary data dir, removed on stop. */
export interface EtcdProcess {
  endpoint: string;
  dataDir: string;
  stop(): Promise<void>;
}

/**
 * Where test etcds keep their data: /dev/shm (memory) where the machine has one, else the temp
 * dir; TARCIL_TEST_ETCD_DATA overrides. A shared machine's disk can stall an fsync for seconds, and
 * etcd answers a request that waited 7 s with "request timed out": a test would fail on the
 * disk, not on what it checks. The data survives a restart of etcd either way (fault tests rely on it).
 */
export function etcdDataParent(): string {
  const env = process.env.TARCIL_TEST_ETCD_DATA;
  if (env) return env;
  try {
    if (statSync('/dev/shm').isDirectory()) {
      accessSync('/dev/shm', constants.W_OK);
      return '/dev/shm';
    }
  } catch {
    // no /dev/shm here
  }
  return tmpdir();
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

/**
 * n distinct free ports: all n are bound at once, then released (freePort n times may give the
 * same port twice). Free only until someone binds them: a caller that starts a process on them
 * starts it again on new ones when it finds one taken (see addressInUse).
 */
export async function freePorts(n: number): Promise<number[]> {
  const servers = Array.from({ length: n }, () => createServer());
  try {
    return await Promise.all(
      servers.map(
        (srv) =>
          new Promise<number>((resolve, reject) => {
            srv.unref();
            srv.once('error', reject);
            srv.listen(0, '127.0.0.1', () => {
              const addr = srv.address();
              resolve(typeof addr === 'object' && addr ? addr.port : 0);
            });
          }),
      ),
    );
  } finally {
    await Promise.all(servers.map((srv) => new Promise<void>((resolve) => (srv.listening ? srv.close(() => resolve()) : resolve()))));
  }
}

/** Whether err (or its message) says a port was taken: EADDRINUSE, or etcd's "address already in use". */
export function addressInUse(err: unknown): boolean {
  return /EADDRINUSE|address already in use/i.test(err instanceof Error ? `${err.message} ${(err as NodeJS.ErrnoException).code ?? ''}` : String(err));
}

export function findEtcd(): string | undefined {
  const candidates = [process.env.ETCD_BIN, 'etcd', '/usr/bin/etcd', '/usr/local/bin/etcd'].filter((x): x is string => typeof x === 'string' && x.length > 0);
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
    throw new Error('etcd is not installed and this user cannot install it: run `sudo apt-get install -y etcd-server` or set ETCD_BIN');
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

/** etcd serving clients over TLS: its certificate, key, and the CA its clients' certificates must chain to. */
export interface EtcdTls {
  certFile: string;
  keyFile: string;
  /** With a CA, etcd requires client certificates signed by it (--client-cert-auth). */
  caFile?: string;
}

/** A private etcd that a test can also stop, pause and restart on the same port and data. */
export interface RestartableEtcdProcess extends EtcdProcess {
  clientPort: number;
  /** SIGTERM, then start again on the same ports and data dir (the data survives). */
  restart(opts?: { downMs?: number }): Promise<void>;
  /** Stops the process without removing the data dir (restart() brings it back). */
  halt(): Promise<void>;
  /** SIGSTOP: connections stay open but nothing answers, like a partition. */
  pause(): void;
  resume(): void;
}

export async function startEtcd(opts: { bin?: string; extraArgs?: string[]; dataDir?: string; tls?: EtcdTls } = {}): Promise<RestartableEtcdProcess> {
  const bin = opts.bin ?? findEtcd();
  if (!bin) throw new Error('etcd binary not found (set ETCD_BIN or install etcd-server)');
  const dataDir = opts.dataDir ?? mkdtempSync(join(etcdDataParent(), 'tarcil-etcd-'));
  const scheme = opts.tls ? 'https' : 'http';
  const tlsArgs = opts.tls
    ? [
        '--cert-file',
        opts.tls.certFile,
        '--key-file',
        opts.tls.keyFile,
        ...(opts.tls.caFile ? ['--trusted-ca-file', opts.tls.caFile, '--client-cert-auth'] : []),
      ]
    : [];
  const argsFor = (clientUrl: string, peerPort: number): string[] => [
    '--name',
    'tarcil-test',
    '--data-dir',
    dataDir,
    '--listen-client-urls',
    clientUrl,
    '--advertise-client-urls',
    clientUrl,
    '--listen-peer-urls',
    `http://127.0.0.1:${peerPort}`,
    '--initial-advertise-peer-urls',
    `http://127.0.0.1:${peerPort}`,
    '--initial-cluster',
    `tarcil-test=http://127.0.0.1:${peerPort}`,
    '--log-level',
    'error',
    '--logger',
    'zap',
    ...tlsArgs,
    ...(opts.extraArgs ?? []),
  ];
  let child: ChildProcess | undefined;
  let stderr = '';
  let endpoint = '';
  let clientPort = 0;
  let args: string[] = [];
  const launch = async (): Promise<void> => {
    stderr = '';
    const c = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    child = c;
    c.stderr?.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    await waitHealthy(endpoint, c, () => stderr, opts.tls);
  };
  const halt = async (): Promise<void> => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill('SIGCONT');
      c.kill('SIGTERM');
      setTimeout(() => c.kill('SIGKILL'), 3000).unref();
    });
  };
  // A free port is only free until someone binds it: another process (or an outgoing connection's
  // local port) may take it before etcd does. etcd then exits at once; it starts again on new ports.
  for (let attempt = 1; ; attempt++) {
    const [cp = 0, peerPort = 0] = await freePorts(2);
    clientPort = cp;
    endpoint = `${scheme}://127.0.0.1:${clientPort}`;
    args = argsFor(endpoint, peerPort);
    try {
      await launch();
      break;
    } catch (err) {
      if (attempt >= 5 || !addressInUse(err)) throw err;
    }
  }
  let stopped = false;
  return {
    endpoint,
    dataDir,
    clientPort,
    halt,
    restart: async (r = {}) => {
      await halt();
      if (r.downMs) await new Promise((res) => setTimeout(res, r.downMs));
      await launch();
    },
    pause: () => void child?.kill('SIGSTOP'),
    resume: () => void child?.kill('SIGCONT'),
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await halt();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function waitHealthy(endpoint: string, child: ChildProcess, err: () => string, tls?: EtcdTls): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`etcd exited early (${child.exitCode}): ${err()}`);
    // Over TLS (with client-cert auth) fetch cannot present a certificate: a TCP connect is enough,
    // and the caller's first request waits for etcd to answer anyway.
    if (tls ? await canConnect(endpoint) : await healthy(endpoint)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`etcd did not become healthy at ${endpoint}: ${err()}`);
}

async function healthy(endpoint: string): Promise<boolean> {
  try {
    return (await fetch(`${endpoint}/health`)).ok;
  } catch {
    return false; // not listening yet
  }
}

function canConnect(endpoint: string): Promise<boolean> {
  const url = new URL(endpoint);
  return new Promise((resolve) => {
    const sock = connect(Number(url.port), url.hostname, () => {
      sock.destroy();
      resolve(true);
    });
    sock.on('error', () => resolve(false));
  });
}
