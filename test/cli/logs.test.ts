/**
 * The daemons' logs as an operator gets them: on stderr, never on stdout (which keeps the banner),
 * one JSON object per line when stderr is not a terminal, every line without a key written twice
 * (pino writes a key bound by a child logger and repeated in a call, or bound again by a child of
 * the child, twice), and TARCIL_LOG choosing the level. Real processes: `tarcil up` running a job,
 * and a `tarcil monitor` on the test etcd.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import { submit, waitFinal } from '../support/live.ts';
import { duplicateKeys } from '../support/json-keys.ts';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { LOG_LEVELS } from '../../src/util/log.ts';

const BIN = join(import.meta.dirname, '..', '..', 'src', 'cli', 'bin.js');

interface Run {
  stdout(): string;
  stderr(): string;
  waitStdout(re: RegExp): Promise<RegExpMatchArray>;
  waitStderr(re: RegExp): Promise<RegExpMatchArray>;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
  /** The exit code, once it exits by itself. */
  exited: Promise<number | null>;
}

const running: Run[] = [];
afterAll(async () => {
  await Promise.all(running.map((r) => r.stop()));
});

/**
 * Starts `tarcil args` as an operator would: without the test runner's VITEST variables (under
 * which a process without TARCIL_LOG logs nothing) and without TARCIL_LOG unless `env` sets it.
 */
function run(args: string[], env: Record<string, string>): Run {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VITEST') && k !== 'TARCIL_LOG' && k !== 'TARCIL_LOG_FORMAT'));
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...base, ...env } });
  let out = '';
  let err = '';
  const waiters = new Set<() => void>();
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    for (const w of waiters) w();
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
    for (const w of waiters) w();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const wait = (read: () => string, re: RegExp): Promise<RegExpMatchArray> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        const m = re.exec(read());
        if (m) {
          waiters.delete(check);
          resolve(m);
        }
      };
      void exited.then((code) => reject(new Error(`tarcil ${args.join(' ')} exited (${code}) before ${re}:\n${out}\n${err}`)));
      waiters.add(check);
      check();
    });
  const r: Run = {
    stdout: () => out,
    stderr: () => err,
    waitStdout: (re) => wait(() => out, re),
    waitStderr: (re) => wait(() => err, re),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
    exited,
  };
  running.push(r);
  return r;
}

const lines = (s: string): string[] => s.split('\n').filter((l) => l.trim() !== '');

/** Every line parses as one JSON object, and none writes a key twice. */
function expectCleanJson(stderr: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const l of lines(stderr)) {
    let parsed: unknown;
    expect(() => {
      parsed = JSON.parse(l) as unknown;
    }, `not JSON: ${l}`).not.toThrow();
    expect(typeof parsed, l).toBe('object');
    expect(duplicateKeys(l), `keys written twice in ${l}`).toEqual([]);
    out.push(parsed as Record<string, unknown>);
  }
  return out;
}

describe('daemon logs', () => {
  it('tarcil up at TARCIL_LOG=debug: the banner alone on stdout, JSON lines with debug ones on stderr, no key written twice', async () => {
    const up = run(['up', '--port', '0', '--metrics-port', '0', '--http-port', '0'], { TARCIL_LOG: 'debug' });
    const [, addr] = await up.waitStdout(/Scheduler gRPC\s+(\S+)/);
    const c = schedulerClient(addr!);
    try {
      const { jobId } = await submit(c, { specJson: readFileSync('profiles/jobs/spark-lr.json', 'utf8') });
      expect((await waitFinal(c, jobId)).state).toBe('succeeded');
    } finally {
      c.close();
    }
    // The monitors' debug lines for the job's tasks have been written once it succeeded.
    await up.waitStderr(/"msg":"job finished"/);
    expect(await up.stop()).toBe(0);

    for (const l of lines(up.stdout())) expect(l.startsWith('{'), `a log line on stdout: ${l}`).toBe(false);
    expect(up.stdout()).toContain('tarcil up: cluster demo');
    const logs = expectCleanJson(up.stderr());
    const levels = new Set(logs.map((l) => l.level));
    expect(levels.has(20), 'debug lines').toBe(true);
    expect(levels.has(30), 'info lines').toBe(true);
    // The lines the duplicate keys were found in: a monitor's, with its server named once.
    const registered = logs.filter((l) => l.msg === 'registered');
    expect(registered).toHaveLength(10);
    for (const l of registered) expect(l).toMatchObject({ component: 'monitor', server: expect.stringMatching(/^s\d{4}$/) as unknown });
    expect(logs.filter((l) => l.msg === 'task started')).toHaveLength(20);
    expect(logs.some((l) => l.msg === 'scheduling call done' && typeof l.agent === 'string')).toBe(true);
  }, 90_000);

  it('tarcil up at its default level (warn) writes no info or debug lines; TARCIL_LOG_FORMAT=pretty writes readable lines', async () => {
    const quiet = run(['up', '--port', '0', '--metrics-port', '0', '--http-port', '0'], {});
    await quiet.waitStdout(/Ctrl-C stops everything/);
    expect(await quiet.stop()).toBe(0);
    // The monitors registered (an info line the monitor below writes at its default level): not shown here.
    expect(quiet.stderr()).not.toContain('"msg":"registered"');
    for (const l of expectCleanJson(quiet.stderr())) expect(l.level as number).toBeGreaterThanOrEqual(40);

    const pretty = run(['up', '--port', '0', '--metrics-port', '0', '--http-port', '0'], { TARCIL_LOG: 'info', TARCIL_LOG_FORMAT: 'pretty' });
    await pretty.waitStdout(/Ctrl-C stops everything/);
    await pretty.waitStderr(/INFO.*registered/);
    expect(await pretty.stop()).toBe(0);
    const first = lines(pretty.stderr())[0]!;
    expect(() => JSON.parse(first) as unknown).toThrow();
    expect(first).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO \(tarcil\): registered \{.*"server":"s0000"/);
  }, 90_000);

  it('a tarcil monitor on etcd at its default level (info): its lines name the server once, and none is a debug line', async () => {
    const store = inject('etcdEndpoint').replace('http://', 'etcd://');
    const mon = run(
      [
        'monitor',
        '--store',
        store,
        '--journal-dir',
        mkdtempSync(join(tmpdir(), 'tarcil-logs-')),
        '--prefix',
        `/logs-${process.pid}/`,
        '--node',
        'lg0',
        '--platform',
        'r3-2xlarge',
        '--rus',
        '2',
        '--executor',
        'simulated',
        '--port',
        '0',
        '--lease-ttl',
        '2',
      ],
      {},
    );
    await mon.waitStdout(/tarcil monitor lg0 .* listening on/);
    await mon.stop();
    const logs = expectCleanJson(mon.stderr());
    expect(logs.find((l) => l.msg === 'registered')).toMatchObject({ level: 30, component: 'monitor', server: 'lg0', rus: 2 });
    for (const l of logs) expect(l.level as number).toBeGreaterThanOrEqual(30);
    expect(lines(mon.stdout())).toHaveLength(1);
  }, 60_000);

  it('a TARCIL_LOG that is no level is refused, naming the variable and the levels', async () => {
    const bad = run(['up', '--port', '0', '--metrics-port', '0', '--http-port', '0'], { TARCIL_LOG: 'loud' });
    const code = await bad.exited;
    expect(code).not.toBe(0);
    // Refused where the command line is read (TARCIL_LOG feeds --log-level), naming both and the levels.
    expect(bad.stderr()).toContain(`value 'loud' from env 'TARCIL_LOG' is invalid. Allowed choices are ${LOG_LEVELS.join(', ')}`);
  }, 30_000);
});
