/**
 * What every command shares, as kubectl and nomad users expect it: --version, a suggestion for a
 * mistyped command or option, help for a bare `tarcil`, a quiet end when the reader of the output
 * goes away, distinct exit codes, environment defaults shown in --help, required options marked.
 * None of these needs a front-end or a store (client.test.ts runs the client against one).
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError } from 'commander';
import { describe, expect, it } from 'vitest';
import { EXIT, errorText } from '../../src/cli/exit-codes.ts';
import { frontEndAddress } from '../../src/cli/flags.ts';
import { freePort } from '../support/etcd.ts';

const BIN = fileURLToPath(new URL('../../src/cli/bin.js', import.meta.url));
const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

function tarcil(args: string[], env: Record<string, string> = {}): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, TARCIL_LOG: 'silent', ...env } });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** Runs tarcil with its stdout already closed by the reader, as `tarcil … | head` after head has gone. */
function withClosedStdout(args: string[]): Promise<{ code: number | null; signal: NodeJS.Signals | null; err: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TARCIL_LOG: 'silent' } });
  child.stdout.destroy();
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal, err })));
}

describe('tarcil --version, help and suggestions', () => {
  it('--version and -V print the version of package.json', () => {
    for (const flag of ['--version', '-V']) {
      const r = tarcil([flag]);
      expect(r.code).toBe(EXIT.OK);
      expect(r.out.trim()).toBe(VERSION);
    }
  });

  it('a bare tarcil prints the help, with the commands and the exit codes, and starts nothing', () => {
    const r = tarcil([]);
    expect(r.code).toBe(EXIT.OK);
    expect(r.out).toMatch(/^Usage: tarcil /);
    for (const cmd of ['up', 'server', 'monitor', 'submit', 'status', 'demo']) expect(r.out).toMatch(new RegExp(`^  ${cmd} `, 'm'));
    expect(r.out).toContain('Exit codes: 0 done, 1 failed, 2 usage');
    expect(r.out).not.toContain('cluster demo:'); // the demo's first line
  });

  it('a mistyped command or option is refused with a suggestion and exit code 2', () => {
    const cmd = tarcil(['sumbit', 'x.json']);
    expect(cmd.code).toBe(EXIT.USAGE);
    expect(cmd.err).toContain("error: unknown command 'sumbit'");
    expect(cmd.err).toContain('(Did you mean submit?)');
    const opt = tarcil(['jobs', '--limt', '3']);
    expect(opt.code).toBe(EXIT.USAGE);
    expect(opt.err).toContain("error: unknown option '--limt'");
    expect(opt.err).toContain('(Did you mean --limit?)');
  });
});

describe('a reader that goes away (tarcil … | head)', () => {
  it('ends the command quietly with exit code 0, for help and for a command that goes on after its write', async () => {
    for (const args of [['--help'], ['sample-size', '--quantile', '0.8'], ['profile', 'spark-lr', '--cluster', 'demo']]) {
      const r = await withClosedStdout(args);
      expect(r.err, args.join(' ')).toBe('');
      expect(r).toEqual({ code: EXIT.OK, signal: null, err: '' });
    }
  });
});

describe('exit codes', () => {
  it('usage errors exit 2: an unknown option, a missing argument, a bad value, a bad environment default, an unreadable spec', () => {
    expect(tarcil(['status']).code).toBe(EXIT.USAGE);
    expect(tarcil(['status']).err).toContain("missing required argument 'job-id'");
    expect(tarcil(['jobs', '--timeout', 'soon']).code).toBe(EXIT.USAGE);
    const env = tarcil(['jobs'], { TARCIL_SERVER: 'host:99999' });
    expect(env.code).toBe(EXIT.USAGE);
    expect(env.err).toContain("value 'host:99999' from env 'TARCIL_SERVER' is invalid");
    expect(env.err).toContain('--server must be host[:port]');
    const spec = tarcil(['submit', '/no/such/spec.json']);
    expect(spec.code).toBe(EXIT.USAGE);
    expect(spec.err).toContain("error: <spec.json>: cannot read '/no/such/spec.json' (ENOENT)");
  });

  it('a front-end that cannot be reached exits 4, naming the address dialled', async () => {
    const port = await freePort();
    const r = tarcil(['jobs', '--server', `127.0.0.1:${port}`, '--timeout', '2000']);
    expect(r.code).toBe(EXIT.UNAVAILABLE);
    expect(r.err).toContain(`running at 127.0.0.1:${port}?`);
    expect(r.err).not.toContain('Resolution note');
    // $TARCIL_SERVER is the default; --server wins over it.
    const env = tarcil(['jobs', '--timeout', '2000'], { TARCIL_SERVER: `127.0.0.1:${port}` });
    expect(env.code).toBe(EXIT.UNAVAILABLE);
    expect(env.err).toContain(`running at 127.0.0.1:${port}?`);
    const both = tarcil(['jobs', '--server', `127.0.0.1:${port + 1}`, '--timeout', '2000'], { TARCIL_SERVER: `127.0.0.1:${port}` });
    expect(both.err).toContain(`running at 127.0.0.1:${port + 1}?`);
  });

  it('maps an error to its code and prints it without gRPC’s empty resolution note', () => {
    expect(errorText(new Error('connect ECONNREFUSED 127.0.0.1:7070. Resolution note: '))).toBe('connect ECONNREFUSED 127.0.0.1:7070');
    expect(errorText(new Error('ECONNREFUSED 127.0.0.1:1. Resolution note:  (is it running?)'))).toBe('ECONNREFUSED 127.0.0.1:1 (is it running?)');
  });
});

describe('--server: the front-end, with the port it listens on by default', () => {
  const parse = frontEndAddress('--server', 7070);

  it('adds port 7070 to an address without one (gRPC would dial 443), keeps a given one', () => {
    expect(parse('127.0.0.1')).toBe('127.0.0.1:7070');
    expect(parse('sched1.example')).toBe('sched1.example:7070');
    expect(parse('[::1]')).toBe('[::1]:7070');
    expect(parse('sched1.example:7171')).toBe('sched1.example:7171');
    expect(parse('[::1]:7171')).toBe('[::1]:7171');
    expect(parse('dns:///sched.example:7070')).toBe('dns:///sched.example:7070');
  });

  it('refuses what is not host[:port], naming the flag and the rule', () => {
    for (const bad of ['', 'a b', 'h:0', 'h:65536', 'h:port', 'http://h:7070']) {
      expect(() => parse(bad), bad).toThrow(InvalidArgumentError);
      expect(() => parse(bad), bad).toThrow(`--server must be host[:port], the port in [1, 65535] and 7070 if left out (got '${bad}')`);
    }
  });

  it('dials 7070 when the command line gives no port', () => {
    // A loopback address of its own, where nothing listens (client.test.ts has a front-end answer there).
    const host = `127.0.${1 + (process.pid % 200)}.${2 + (Date.now() % 200)}`;
    const r = tarcil(['jobs', '--server', host, '--timeout', '1500']);
    expect(r.code).toBe(EXIT.UNAVAILABLE);
    expect(r.err).toContain(`ECONNREFUSED ${host}:7070`);
    expect(r.err).toContain(`running at ${host}:7070?`);
  });
});

describe('the help shows required options and environment defaults', () => {
  it('monitor lists --node and --platform under "Required options:", and no --server', () => {
    const r = tarcil(['monitor', '--help']);
    expect(r.code).toBe(EXIT.OK);
    const required = /Required options:\n((?: {2}.*\n)+)/.exec(r.out)?.[1] ?? '';
    expect(required).toMatch(/--node <id>/);
    expect(required).toMatch(/--platform <type>/);
    expect(r.out).not.toContain('--server');
    const missing = tarcil(['monitor', '--platform', 'r3-2xlarge']);
    expect(missing.code).toBe(EXIT.USAGE);
    expect(missing.err).toContain("required option '--node <id>' not specified");
  });

  it('monitor --server <id>, the old spelling, still names the node, with a deprecation warning', async () => {
    const port = await freePort();
    // It passes the required --node and gets as far as the store (nothing listens there).
    const r = tarcil(['monitor', '--server', 'n1', '--platform', 'r3-2xlarge', '--store', `etcd://127.0.0.1:${port}`, '--port', '0']);
    expect(r.err).toContain('warning: `tarcil monitor --server <id>` is deprecated, use --node <id>');
    expect(r.err).toContain('tarcil monitor cannot start');
    expect(r.code).toBe(EXIT.UNAVAILABLE);
    const both = tarcil(['monitor', '--server', 'n1', '--node', 'n2', '--platform', 'r3-2xlarge']);
    expect(both.code).toBe(EXIT.USAGE);
    expect(both.err).toContain("option '--server <id>' cannot be used with option '--node <id>'");
  });

  it('client and daemon commands name their environment variables, and a bad value from one is refused', () => {
    const client = tarcil(['jobs', '--help']).out.replace(/\s+/g, ' ');
    expect(client).toContain('(default: "127.0.0.1:7070", env: TARCIL_SERVER)');
    expect(client).toContain('env: TARCIL_TLS_CA');
    for (const cmd of ['server', 'monitor', 'up', 'hollow']) {
      const help = tarcil([cmd, '--help']).out.replace(/\s+/g, ' ');
      for (const v of ['TARCIL_STORE', 'TARCIL_PREFIX', 'TARCIL_LOG']) expect(help, `${cmd}: ${v}`).toContain(`env: ${v}`);
      expect(help).toContain('--wait-for-store [duration]');
    }
    const bad = tarcil(['server', '--store', 'memory://'], { TARCIL_LOG: 'loud' });
    expect(bad.code).toBe(EXIT.USAGE);
    expect(bad.err).toContain("option '--log-level <level>' value 'loud' from env 'TARCIL_LOG' is invalid");
    expect(bad.err).toContain('Allowed choices are trace, debug, info, warn, error, fatal, silent');
  });

  it('refuses a bad --wait-for-store naming the flag and the rule', () => {
    const r = tarcil(['server', '--wait-for-store', '500ms']);
    expect(r.code).toBe(EXIT.USAGE);
    expect(r.err).toContain('--wait-for-store must be a duration');
    expect(r.err).toContain('at least 1s');
  });
});
