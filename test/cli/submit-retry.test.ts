/**
 * `tarcil submit` against a front-end that is down when the submission starts: it keeps trying
 * until its deadline, so a front-end SIGKILLed and started again on the same port within the
 * deadline gets the submission, stored once for its request id; a front-end that never comes
 * back makes it fail after the deadline, saying what it tried and for how long.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { EXIT } from '../../src/cli/exit-codes.ts';
import { LiveKeys } from '../../src/state/live-records.ts';
import { Keys } from '../../src/state/keys.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { freePort } from '../support/etcd.ts';
import { tarcil, type TarcilProc } from '../support/procs.ts';

const BIN = fileURLToPath(new URL('../../src/cli/bin.js', import.meta.url));

interface Result {
  code: number | null;
  out: string;
  err: string;
}

/** Runs `tarcil args` to its end with `stdin` as its standard input. */
function run(args: string[], stdin: string): Promise<Result> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, TARCIL_LOG: 'silent' } });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  child.stdin.end(stdin);
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out, err })));
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const spec = (name: string): string => JSON.stringify({ name, profile: 'spark-lr', tasks: 1, command: { argv: ['true'] } });

describe('tarcil submit while the front-end is down', () => {
  const prefix = `/submit-retry-${process.pid}-${Date.now()}/`;
  const url = inject('etcdEndpoint').replace('http://', 'etcd://');
  const procs: TarcilProc[] = [];
  let store: ClusterStore;

  beforeAll(async () => {
    store = await openStore(url);
  });

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.kill('SIGKILL')));
    await store?.close();
  });

  async function frontEnd(port: number): Promise<TarcilProc> {
    const p = tarcil([
      'server',
      '--store',
      url,
      '--prefix',
      prefix,
      '--agents',
      '1',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--name',
      'fe',
      '--lease-ttl',
      '3',
    ]);
    procs.push(p);
    await p.waitFor(/listening on/, 30_000);
    return p;
  }

  it('a front-end SIGKILLed and started again on its port within the deadline gets the submission, once', async () => {
    const port = await freePort();
    const first = await frontEnd(port);
    await first.kill('SIGKILL');

    const requestId = `retry-${process.pid}-${Date.now()}`;
    // The default deadline (1 min): the front-end is back about 8 s after the first try.
    const submitted = run(['submit', '-', '--server', `127.0.0.1:${port}`, '--request-id', requestId], spec('comes-back'));
    await sleep(8000);
    await frontEnd(port);
    const r = await submitted;
    expect(r.err).toBe('');
    expect(r.code).toBe(EXIT.OK);
    const jobId = /^submitted (\S+)$/m.exec(r.out)?.[1];
    expect(jobId, r.out).toBeDefined();

    // One job in the cell, the one the request id names.
    const keys = new Keys(prefix);
    const jobs = await store.range(keys.jobs());
    expect(jobs.kvs.map((kv) => kv.key)).toEqual([keys.job(jobId ?? '')]);
    const req = await store.get(new LiveKeys(keys).request(requestId));
    expect(req && JSON.parse(req.value)).toMatchObject({ job: jobId });
  });

  it('a front-end that never comes back: the submission fails after its deadline, naming it', async () => {
    const port = await freePort();
    const t0 = Date.now();
    const r = await run(['submit', '-', '--server', `127.0.0.1:${port}`, '--deadline', '4s'], spec('never-back'));
    expect(r.code).toBe(EXIT.UNAVAILABLE);
    expect(r.err).toMatch(new RegExp(`^error: .*127\\.0\\.0\\.1:${port}`, 'm'));
    expect(r.err).toMatch(/gave up after 4s/);
    // It kept trying until its deadline rather than a number of tries.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(4000);
  });
});
