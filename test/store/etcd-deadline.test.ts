/**
 * EtcdStore against an etcd that does not answer (SIGSTOP: connections stay open, nothing is
 * answered, as in a partition or a leader election) or that refuses connections: every call ends
 * within its deadline, reads ride out a short pause, and a call etcd never received is sent to
 * another endpoint.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LEASE_TTL_S } from '../../src/state/lease.ts';
import { DEFAULT_REQUEST_TIMEOUT_MS, EtcdStore } from '../../src/store/etcd.ts';
import { TarcilError, isTransient } from '../../src/util/errors.ts';
import { freePort, startEtcd, type RestartableEtcdProcess } from '../support/etcd.ts';
import { sleep } from './contract.ts';

const DEADLINE_MS = 1000;

let etcd: RestartableEtcdProcess;
const stores: EtcdStore[] = [];
beforeAll(async () => {
  etcd = await startEtcd();
});
afterEach(async () => {
  etcd.resume();
  for (const s of stores.splice(0)) await s.close();
});
afterAll(async () => {
  await etcd.stop();
});

async function connect(endpoints = [etcd.endpoint]): Promise<EtcdStore> {
  const s = await EtcdStore.connect({ endpoints, requestTimeoutMs: DEADLINE_MS, dialTimeoutMs: DEADLINE_MS });
  stores.push(s);
  return s;
}

/**
 * SIGSTOPs etcd and returns once it has stopped answering: a stop signal reaches a busy process's
 * threads a moment after kill() returns, and a request that slips in before would be answered.
 */
async function pause(): Promise<void> {
  etcd.pause();
  for (let i = 0; i < 100; i++) {
    const answered = await fetch(`${etcd.endpoint}/health`, { signal: AbortSignal.timeout(300) }).then(
      () => true,
      () => false,
    );
    if (!answered) return;
    await sleep(20);
  }
  throw new Error('etcd still answers after SIGSTOP');
}

const prefix = (): string => `/tarcil-test/deadline/${randomUUID()}/`;

/** How a call ended and after how long. */
async function outcome(p: Promise<unknown>): Promise<{ ms: number; code: string }> {
  const start = Date.now();
  try {
    await p;
    return { ms: Date.now() - start, code: 'OK' };
  } catch (err) {
    return { ms: Date.now() - start, code: err instanceof TarcilError ? err.code : `not a TarcilError: ${String(err)}` };
  }
}

describe('EtcdStore deadlines', () => {
  it('a write to a paused etcd fails DEADLINE_EXCEEDED after its deadline, not when etcd answers', async () => {
    const s = await connect();
    const p = prefix();
    await s.put(`${p}a`, '1');
    await pause();
    const r = await outcome(s.put(`${p}a`, '2'));
    expect(r.code).toBe('DEADLINE_EXCEEDED');
    expect(r.ms).toBeGreaterThanOrEqual(DEADLINE_MS - 50);
    expect(r.ms).toBeLessThan(5 * DEADLINE_MS);
  });

  it('with the default deadline, a write to a paused etcd ends well within the default lease TTL', async () => {
    expect(DEFAULT_REQUEST_TIMEOUT_MS).toBeLessThanOrEqual((DEFAULT_LEASE_TTL_S * 1000) / 4);
    const s = await EtcdStore.connect({ endpoints: [etcd.endpoint] });
    stores.push(s);
    const key = `${prefix()}a`;
    await s.put(key, '1');
    await pause();
    const r = await outcome(s.txn({ compare: [{ key, target: 'version', op: '==', value: 1 }], success: [{ type: 'put', key, value: '2' }] }));
    expect(r.code).toBe('DEADLINE_EXCEEDED');
    expect(r.ms).toBeGreaterThanOrEqual(DEFAULT_REQUEST_TIMEOUT_MS - 50);
    expect(r.ms).toBeLessThan(DEFAULT_LEASE_TTL_S * 1000);
  });

  it('every kind of call to a paused etcd ends within a few deadlines, each with a transient code', async () => {
    const s = await connect();
    const p = prefix();
    await s.put(`${p}a`, '1');
    const lease = await s.grantLease(30, { keepAlive: false });
    const rev = await s.revision();
    await pause();
    const calls: Record<string, Promise<unknown>> = {
      get: s.get(`${p}a`),
      range: s.range(p),
      revision: s.revision(),
      put: s.put(`${p}b`, '2'),
      delete: s.delete(`${p}a`),
      txn: s.txn({ compare: [{ key: `${p}c`, target: 'version', op: '==', value: 0 }], success: [{ type: 'put', key: `${p}c`, value: '3' }] }),
      readOnlyTxn: s.txn({ compare: [], success: [{ type: 'get', key: p, prefix: true }] }),
      txns: s.txns([{ compare: [], success: [{ type: 'put', key: `${p}d`, value: '4' }] }]),
      compact: s.compact(rev),
      grantLease: s.grantLease(30, { keepAlive: false }),
      keepAliveOnce: lease.keepAliveOnce(),
      watch: s.watch({ prefix: p, fromRevision: 0, onEvents: () => undefined, onError: () => undefined }),
    };
    const names = Object.keys(calls);
    const results = await Promise.all(Object.values(calls).map(outcome));
    const ended = Object.fromEntries(names.map((n, i) => [n, results[i]]));
    for (const [name, r] of Object.entries(ended)) {
      // Reads are tried twice (max(2, endpoints)); nothing may wait for etcd to come back.
      expect(r?.ms, name).toBeLessThan(2 * DEADLINE_MS + 3000);
      expect(['DEADLINE_EXCEEDED', 'UNAVAILABLE'], `${name}: ${r?.code}`).toContain(r?.code);
    }
    // Each of these reached etcd before anything failed: nothing but the deadline ended them.
    expect(ended.put?.code).toBe('DEADLINE_EXCEEDED');
    expect(ended.get?.code).toBe('DEADLINE_EXCEEDED');
    expect(ended.keepAliveOnce?.code).toBe('DEADLINE_EXCEEDED');
    expect(ended.watch?.code).toBe('DEADLINE_EXCEEDED');
  });

  it('a read retries a DEADLINE_EXCEEDED and succeeds once etcd answers again', async () => {
    const s = await connect();
    const p = prefix();
    await s.put(`${p}a`, 'kept');
    await pause();
    const started = Date.now();
    const read = s.get(`${p}a`);
    // Resumed after the first attempt's deadline and before the second one's.
    await sleep(DEADLINE_MS + 300);
    etcd.resume();
    const kv = await read;
    expect(kv?.value).toBe('kept');
    expect(Date.now() - started).toBeGreaterThanOrEqual(DEADLINE_MS + 300);
  });

  it('a guarded write retried after DEADLINE_EXCEEDED is applied exactly once', async () => {
    const s = await connect();
    const key = `${prefix()}once`;
    const req = { compare: [{ key, target: 'version' as const, op: '==' as const, value: 0 }], success: [{ type: 'put' as const, key, value: 'mine' }] };
    await pause();
    const first = await s.txn(req).catch((e: unknown) => e);
    expect(isTransient(first)).toBe(true);
    etcd.resume();
    // The first attempt may still have been applied when etcd woke up: its retry is guarded, so
    // it either lands or finds the first one's write, never writes twice.
    let retried: boolean | undefined;
    for (let i = 0; i < 20 && retried === undefined; i++) {
      retried = await s.txn(req).then(
        (r) => r.succeeded,
        (e: unknown) => {
          if (!isTransient(e)) throw e;
          return undefined;
        },
      );
      if (retried === undefined) await sleep(200);
    }
    expect(retried).toBeDefined();
    const kv = await s.get(key);
    expect(kv?.value).toBe('mine');
    expect(kv?.version).toBe(1);
  });

  it('a lease kept alive across a pause: the keepalive fails DEADLINE_EXCEEDED, the next one succeeds', async () => {
    const s = await connect();
    const lease = await s.grantLease(30, { keepAlive: false });
    await pause();
    const r = await outcome(lease.keepAliveOnce());
    expect(r.code).toBe('DEADLINE_EXCEEDED');
    expect(r.ms).toBeLessThan(5 * DEADLINE_MS);
    etcd.resume();
    let ok = false;
    for (let i = 0; i < 20 && !ok; i++) {
      ok = await lease.keepAliveOnce().then(
        () => true,
        () => false,
      );
      if (!ok) await sleep(200);
    }
    expect(ok).toBe(true);
    await lease.revoke();
  });

  it('sends a call that etcd never received to another endpoint: writes and leases through a dead endpoint all succeed', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const s = await connect([dead, etcd.endpoint]);
    const p = prefix();
    // Each call picks an endpoint at random; the dead one refuses the connection every time its
    // circuit lets a call through, and that call goes on to the live one.
    for (let i = 0; i < 30; i++) {
      await s.put(`${p}${i % 3}`, String(i));
      await s.txn({ compare: [], success: [{ type: 'put', key: `${p}t`, value: String(i) }] });
      if (i % 10 === 0) {
        const lease = await s.grantLease(5, { keepAlive: false });
        await lease.keepAliveOnce();
        await lease.revoke();
      }
      if (i % 5 === 0) await sleep(300); // let the dead endpoint's circuit half-open again
    }
    expect((await s.get(`${p}t`))?.value).toBe('29');
  }, 60_000);

  it('a keepalive on request through a dead endpoint, which the circuit breaker does not count (a stream), succeeds every time', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const s = await connect([dead, etcd.endpoint]);
    const lease = await s.grantLease(30, { keepAlive: false });
    // Each keepalive picks an endpoint at random, and a stream refused by the dead one is not
    // counted by its circuit: without enough runs, about one keepalive in 128 missed the live one.
    for (let i = 0; i < 500; i++) await lease.keepAliveOnce();
    await lease.revoke();
  }, 60_000);
});
