import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { startEtcd, type RestartableEtcdProcess } from '../support/etcd.ts';
import { tarcil, type TarcilProc } from '../support/procs.ts';
import { makePki, type TestPki } from '../support/tls.ts';

/**
 * TLS end to end with a throwaway PKI made by openssl: gRPC between the CLI and `tarcil up` /
 * `tarcil server`, gRPC between the front-end and the monitors, and etcd over TLS with client
 * certificates (`etcds://`).
 */
const BIN = join(import.meta.dirname, '..', '..', 'src', 'cli', 'bin.js');
let pki: TestPki;
let spec: string;
const procs: TarcilProc[] = [];

beforeAll(() => {
  pki = makePki();
  spec = join(pki.dir, 'job.json');
  writeFileSync(spec, JSON.stringify({ name: 'tls-job', profile: 'spark-lr', tasks: 2, durationMs: 200 }));
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.kill('SIGTERM')));
  pki?.remove();
});

/** Runs a tarcil client command to completion. */
function run(args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TARCIL_LOG: 'silent' } });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', (code) => resolve({ code, out }));
  });
}

describe('TLS', () => {
  it('tarcil up serves gRPC over TLS: a client trusting the CA submits and waits; others are refused', async () => {
    const up = tarcil(['up', '--port', '0', '--metrics-port', '0', '--http-port', '0', '--tls-cert', pki.serverCert, '--tls-key', pki.serverKey]);
    procs.push(up);
    const addr = (await up.waitFor(/Scheduler gRPC\s+(127\.0\.0\.1:\d+)/))[1] ?? '';
    const ok = await run(['submit', spec, '--server', addr, '--tls-ca', pki.ca, '--wait', '--timeout', '5000']);
    expect(ok.out).toMatch(/submitted j-/);
    expect(ok.out).toMatch(/succeeded/);
    expect(ok.code).toBe(0);
    // Plain text to a TLS port, and TLS trusting the wrong CA: no job goes through.
    const plain = await run(['jobs', '--server', addr, '--timeout', '2000']);
    expect(plain.code).not.toBe(0);
    const wrongCa = await run(['submit', spec, '--server', addr, '--tls-ca', pki.otherCa, '--timeout', '2000', '--retries', '0']);
    expect(wrongCa.code).not.toBe(0);
    expect(wrongCa.out).not.toMatch(/submitted/);
    // The same request id twice (a script retrying): one job, the same id printed both times.
    const again = ['submit', spec, '--server', addr, '--tls-ca', pki.ca, '--request-id', 'script-run-42'];
    const [r1, r2] = [await run(again), await run(again)];
    const id1 = /submitted (j-\S+)/.exec(r1.out)?.[1];
    expect(id1).toBeDefined();
    expect(/submitted (j-\S+)/.exec(r2.out)?.[1]).toBe(id1);
    const list = await run(['jobs', '--server', addr, '--tls-ca', pki.ca]);
    expect(list.out.match(/tls-job/g)?.length).toBe(2);
    await up.kill('SIGTERM');
  }, 60_000);

  it('etcd over TLS with client certificates, and front-end ↔ monitor gRPC over mutual TLS', async () => {
    let etcd: RestartableEtcdProcess | undefined;
    try {
      etcd = await startEtcd({ bin: process.env.TARCIL_TEST_ETCD_BIN, tls: { certFile: pki.serverCert, keyFile: pki.serverKey, caFile: pki.ca } });
      const url = etcd.endpoint.replace('https://', 'etcds://');
      // Without a client certificate etcd refuses the connection.
      const refused = await openStore(url, { tls: { caFile: pki.ca }, dialTimeoutMs: 1500 }).then(
        async (s) => {
          await s.close();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(refused).toBeInstanceOf(TarcilError);
      const etcdFlags = [
        '--store',
        url,
        '--prefix',
        '/tls/',
        '--etcd-ca',
        pki.ca,
        '--etcd-cert',
        pki.clientCert,
        '--etcd-key',
        pki.clientKey,
        '--lease-ttl',
        '3',
      ];
      const serverTls = ['--tls-cert', pki.serverCert, '--tls-key', pki.serverKey, '--tls-ca', pki.ca];
      const monitor = tarcil(['monitor', ...etcdFlags, ...serverTls, '--node', 'tls0', '--platform', 'r3-2xlarge', '--rus', '4']);
      procs.push(monitor);
      await monitor.waitFor(/listening on/);
      // --launch-after 0: every placement is also sent to the monitor at once, so the call is made.
      const server = tarcil(
        ['server', ...etcdFlags, '--tls-cert', pki.serverCert, '--tls-key', pki.serverKey, '--monitor-ca', pki.ca, '--port', '0', '--launch-after', '0'],
        { TARCIL_LOG: 'debug' },
      );
      procs.push(server);
      const port = (await server.waitFor(/listening on [\d.]+:(\d+)/))[1] ?? '';
      const res = await run(['submit', spec, '--server', `127.0.0.1:${port}`, '--tls-ca', pki.ca, '--wait', '--timeout', '5000']);
      expect(res.out).toMatch(/succeeded/);
      expect(res.code).toBe(0);
      // The fast path to the monitor (LaunchTask over mutual TLS) worked: no launch RPC failed.
      expect(server.output()).not.toMatch(/launch RPC failed/);
      const store = await openStore(url, { tls: { caFile: pki.ca, certFile: pki.clientCert, keyFile: pki.clientKey } });
      const jobs = await store.range('/tls/jobs/');
      expect(jobs.kvs.map((kv) => (JSON.parse(kv.value) as { state: string }).state)).toEqual(['succeeded']);
      await store.close();
      await Promise.all([server.kill('SIGTERM'), monitor.kill('SIGTERM')]);
    } finally {
      await etcd?.stop();
    }
  }, 60_000);
});
