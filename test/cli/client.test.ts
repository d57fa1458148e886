/**
 * The client commands against a running `tarcil up` (embedded store, process executor): a spec
 * read from stdin, the exit codes of a job that succeeds, one that fails, a job id that does not
 * exist and a spec that breaks a rule, `--server` without a port, and a reader that goes away.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/exit-codes.ts';
import { DEFAULT_PORT } from '../../src/frontend/options.ts';
import { tarcil as daemon, type TarcilProc } from '../support/procs.ts';

const BIN = fileURLToPath(new URL('../../src/cli/bin.js', import.meta.url));

interface Result {
  code: number | null;
  out: string;
  err: string;
}

/** Runs a client command to its end, with `stdin` as its standard input. */
function run(args: string[], opts: { stdin?: string; closedStdout?: boolean } = {}): Promise<Result> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, TARCIL_LOG: 'silent' } });
  let out = '';
  let err = '';
  if (opts.closedStdout) child.stdout.destroy();
  else child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  child.stdin.end(opts.stdin ?? '');
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out, err })));
}

const spec = (name: string, script: string, tasks = 1): string => JSON.stringify({ name, profile: 'spark-lr', tasks, command: { argv: ['sh', '-c', script] } });

describe('the client against tarcil up', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tarcil-client-'));
  let up: TarcilProc | undefined;
  /** The front-end's host: a loopback address of its own, listening on the default port. */
  let host = '';

  beforeAll(async () => {
    // The default port on an address of the 127/8 loopback net, so that `--server <host>` without
    // a port can be tried; another address if that one is taken.
    for (let i = 0; i < 5 && !up; i++) {
      const candidate = `127.0.${1 + ((process.pid + i) % 250)}.${2 + ((Date.now() + 37 * i) % 250)}`;
      const p = daemon([
        'up',
        '--host',
        candidate,
        '--port',
        String(DEFAULT_PORT),
        '--metrics-port',
        '0',
        '--http-port',
        '0',
        '--executor',
        'process',
        '--log-dir',
        join(dir, 'logs'),
      ]);
      try {
        await p.waitFor(/Scheduler gRPC/, 60_000);
        up = p;
        host = candidate;
      } catch (err) {
        await p.kill();
        if (!/EADDRINUSE|address already in use|No address added/i.test(p.output())) throw err;
      }
    }
    expect(up, 'tarcil up did not start').toBeDefined();
  }, 180_000);

  afterAll(async () => {
    await up?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it('--server without a port reaches the front-end on the default port', async () => {
    const r = await run(['jobs', '--server', host]);
    expect(r.err).toBe('');
    expect(r.code).toBe(EXIT.OK);
  });

  it('submit - reads the spec from stdin; --wait exits 0 when the job succeeds', async () => {
    const r = await run(['submit', '-', '--wait', '--server', host], { stdin: spec('from-stdin', 'exit 0', 2) });
    expect(r.err).toBe('');
    expect(r.code).toBe(EXIT.OK);
    expect(r.out).toMatch(/^submitted j-\S+\n/);
    expect(r.out).toMatch(/from-stdin {2}succeeded {2}\[2 succeeded\]/);
  });

  it('submit --wait prints a line only when it differs from the one before', async () => {
    // Four tasks that start, report and end at their own times: several events leave the line as it was.
    const r = await run(['submit', '-', '--wait', '--server', host], { stdin: spec('lines', 'sleep 0.3; exit 0', 4) });
    expect(r.code).toBe(EXIT.OK);
    const lines = r.out.trim().split('\n').slice(1);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.at(-1)).toMatch(/lines {2}succeeded {2}\[4 succeeded\]/);
    for (let i = 1; i < lines.length; i++) expect(lines[i], r.out).not.toBe(lines[i - 1]);
  });

  it('submit --wait exits 5 when the job fails', async () => {
    const r = await run(['submit', '-', '--wait', '--server', host], { stdin: spec('fails', 'exit 3') });
    expect(r.code).toBe(EXIT.JOB_FAILED);
    expect(r.out).toMatch(/fails {2}failed/);
  });

  it('a spec that breaks a rule exits 2 naming the field; an unknown job id exits 3', async () => {
    const bad = await run(['submit', '-', '--server', host], { stdin: JSON.stringify({ name: 'no tasks here', profile: 'spark-lr', tasks: 0 }) });
    expect(bad.code).toBe(EXIT.USAGE);
    expect(bad.err).toMatch(/^error: .*tasks/m);
    for (const cmd of ['status', 'explain', 'cancel']) {
      const r = await run([cmd, 'j-no-such-job', '--server', host]);
      expect(r.code, cmd).toBe(EXIT.NOT_FOUND);
      expect(r.err, cmd).toMatch(/^error: .*j-no-such-job/m);
    }
  });

  it('a reader that goes away ends status, jobs and cluster quietly with 0', async () => {
    const submitted = await run(['submit', '-', '--server', host], { stdin: spec('listed', 'exit 0') });
    const id = /submitted (\S+)/.exec(submitted.out)?.[1] ?? '';
    expect(id).not.toBe('');
    for (const args of [['status', id], ['status', id, '--json'], ['jobs'], ['cluster']]) {
      const r = await run([...args, '--server', host], { closedStdout: true });
      expect(r, args.join(' ')).toEqual({ code: EXIT.OK, out: '', err: '' });
    }
  });
});
