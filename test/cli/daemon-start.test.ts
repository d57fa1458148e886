/**
 * Daemons that cannot start say why. Whose store does not answer at start: `tarcil server`,
 * `monitor` and `up` stop with a message naming the endpoint and exit code 4 (unavailable); with
 * --wait-for-store they say so and try again, until the store answers (a real etcd, the test
 * run's, appears behind the port) or the wait's limit passes. Whose port is taken: the message
 * names the address, without a stack trace.
 */
import { spawn } from 'node:child_process';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { EXIT } from '../../src/cli/exit-codes.ts';
import { openDaemonStore } from '../../src/cli/live.ts';
import { DEFAULT_MAX_TXN_OPS } from '../../src/store/index.ts';
import { freePort } from '../support/etcd.ts';

const BIN = fileURLToPath(new URL('../../src/cli/bin.js', import.meta.url));

interface Run {
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  out: () => string;
  err: () => string;
  /** Resolves once stderr (or stdout) has matched re. */
  waitFor: (re: RegExp, stream?: 'out' | 'err') => Promise<void>;
  kill: (sig?: NodeJS.Signals) => void;
}

const runs: Run[] = [];
afterEach(() => {
  for (const r of runs.splice(0)) r.kill('SIGKILL');
});

function tarcil(...args: string[]): Run {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TARCIL_LOG: 'silent' } });
  let out = '';
  let err = '';
  const waiters: (() => void)[] = [];
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    for (const w of waiters) w();
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
    for (const w of waiters) w();
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const run: Run = {
    exit,
    out: () => out,
    err: () => err,
    waitFor: (re, stream = 'err') =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          if (re.test(stream === 'err' ? err : out)) resolve();
        };
        waiters.push(check);
        check();
        void exit.then(({ code }) => reject(new Error(`tarcil ${args.join(' ')} exited (${code}) before ${re}:\n${out}\n${err}`)));
      }),
    kill: (sig = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    },
  };
  runs.push(run);
  return run;
}

/** A port nothing listens on. */
const closedPort = (): Promise<number> => freePort();

describe('a daemon whose store does not answer at start', () => {
  it('server, monitor and up stop with a message naming the endpoint and exit code 4', async () => {
    const port = await closedPort();
    const store = `etcd://127.0.0.1:${port}`;
    const server = tarcil('server', '--store', store, '--port', '0');
    const monitor = tarcil('monitor', '--store', store, '--node', 'n1', '--platform', 'r3-2xlarge', '--port', '0');
    const up = tarcil('up', '--store', store, '--port', '0', '--metrics-port', '0', '--http-port', '0');
    for (const [who, r] of [
      ['server', server],
      ['monitor', monitor],
      ['up', up],
    ] as const) {
      const { code } = await r.exit;
      expect(code, `${who}: ${r.err()}`).toBe(EXIT.UNAVAILABLE);
      const err = r.err();
      expect(err).toContain(`error: tarcil ${who} cannot start: cannot reach etcd at http://127.0.0.1:${port}`);
      // The cause as the etcd client saw it: refused, or (on a loaded machine) its connect deadline.
      expect(err).toMatch(/ECONNREFUSED|DEADLINE_EXCEEDED/);
      expect(err).toContain('--wait-for-store');
      expect(err).not.toMatch(/^\s+at /m); // a message, not a stack trace
      expect(err).not.toContain('Resolution note');
      expect(r.out()).not.toContain('listening');
    }
  });

  it('with --wait-for-store <limit>, says so on each try and stops when the limit has passed', async () => {
    const port = await closedPort();
    const r = tarcil('server', '--store', `etcd://127.0.0.1:${port}`, '--port', '0', '--wait-for-store', '8s');
    const { code } = await r.exit;
    expect(code).toBe(EXIT.UNAVAILABLE);
    expect(r.err()).toMatch(
      new RegExp(
        `tarcil server: waiting for the store: cannot reach etcd at http://127\\.0\\.0\\.1:${port}.*; trying again in 2 s \\(attempt 1, \\d+ s so far\\)`,
      ),
    );
    expect(r.err()).toContain('error: tarcil server cannot start');
    expect(r.err()).toMatch(/gave up after waiting \d+ s \(--wait-for-store 8s\)/);
  });

  it('with --wait-for-store, starts once the store answers', async () => {
    const etcd = new URL(inject('etcdEndpoint'));
    const port = await closedPort();
    const r = tarcil('server', '--store', `etcd://127.0.0.1:${port}`, '--prefix', `/store-down-${process.pid}/`, '--port', '0', '--wait-for-store');
    await r.waitFor(/waiting for the store: cannot reach etcd at http:\/\/127\.0\.0\.1:\d+.*trying again/);
    expect(r.out()).not.toContain('listening');
    // The store appears: the test run's etcd, reached through this port from now on.
    const sockets = new Set<Socket>();
    const forward: Server = createServer((c) => {
      const s = connect(Number(etcd.port), etcd.hostname);
      for (const x of [c, s]) {
        sockets.add(x);
        x.on('error', () => undefined);
      }
      c.pipe(s).pipe(c);
    });
    await new Promise<void>((resolve) => forward.listen(port, '127.0.0.1', resolve));
    try {
      await r.waitFor(/tarcil server listening on 127\.0\.0\.1:\d+/, 'out');
      expect(r.err()).toMatch(/tarcil server: the store answers \(etcd:\/\/127\.0\.0\.1:\d+\), after \d+ s of waiting/);
      r.kill('SIGTERM');
      expect(await r.exit).toEqual({ code: 0, signal: null });
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => forward.close(resolve));
    }
  });
});

describe('a daemon whose port is taken', () => {
  it('server and monitor stop with the address in the message and exit code 1, without a stack trace', async () => {
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = String((taken.address() as { port: number }).port);
    try {
      const grpc = tarcil('server', '--store', 'memory://', '--port', port);
      const metrics = tarcil('server', '--store', 'memory://', '--port', '0', '--metrics-port', port);
      const monitor = tarcil('monitor', '--store', 'memory://', '--node', 'n1', '--platform', 'r3-2xlarge', '--port', port);
      for (const [who, r] of [
        ['server', grpc],
        ['server', metrics],
        ['monitor', monitor],
      ] as const) {
        const { code } = await r.exit;
        expect(code, r.err()).toBe(EXIT.FAILURE);
        expect(r.err()).toMatch(new RegExp(`error: tarcil ${who} cannot start: .*EADDRINUSE.*127\\.0\\.0\\.1:${port}`));
        expect(r.err()).not.toMatch(/^\s+at /m);
      }
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});

describe("a daemon told etcd's transaction limit (--etcd-max-txn-ops)", () => {
  it('sizes its transactions to it: the store takes a transaction past the default and still refuses one past the limit', async () => {
    const url = inject('etcdEndpoint').replace('http://', 'etcd://');
    const plain = await openDaemonStore('server', { store: url, prefix: '/txn-ops/' });
    const wide = await openDaemonStore('server', { store: url, prefix: '/txn-ops/', etcdMaxTxnOps: 512 });
    try {
      expect(plain.maxTxnOps).toBe(DEFAULT_MAX_TXN_OPS);
      expect(wide.maxTxnOps).toBe(512);
      const puts = (n: number) => ({
        compare: [],
        success: Array.from({ length: n }, (_, i) => ({ type: 'put' as const, key: `/txn-ops/k${i}`, value: 'x' })),
      });
      // Checked against the limit it was told before anything is sent (this etcd runs with the default).
      await expect(plain.txn(puts(200))).rejects.toThrow(/200 operations|128/);
      await expect(wide.txn(puts(600))).rejects.toThrow(/600 operations|512/);
    } finally {
      await plain.close();
      await wide.close();
    }
  });
});
