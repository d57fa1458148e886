import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdStore } from '../../src/store/etcd.ts';
import { openStore } from '../../src/store/index.ts';
import type { Op } from '../../src/store/types.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { findEtcd, freePort, startEtcd, type EtcdProcess } from '../support/etcd.ts';
import { Recorder, expectCode, sleep, storeContract, waitUntil } from './contract.ts';

const uniquePrefix = (): string => `/tarcil-test/store/${randomUUID()}/`;

// The contract checks exact revisions (a read or a refused write bumps none), which only an etcd
// that no other test file writes to at the same time can show: this file has its own.
let own: EtcdProcess | undefined;
beforeAll(async () => {
  own = await startEtcd();
}, 60_000);
afterAll(async () => {
  await own?.stop();
});
const ownEndpoint = (): string => {
  if (!own) throw new Error('the private etcd is not started');
  return own.endpoint;
};

// Compaction is server-wide: those tests get a second etcd, so that no other test, in this file
// or another, runs against a compacted history.
let isolated: Promise<EtcdProcess> | undefined;
afterAll(async () => {
  if (isolated) await (await isolated).stop();
});

storeContract('EtcdStore', async () => ({ store: await EtcdStore.connect({ endpoints: [ownEndpoint()] }), prefix: uniquePrefix() }), {
  makeIsolated: async () => {
    isolated ??= startEtcd();
    const etcd = await isolated;
    return { store: await EtcdStore.connect({ endpoints: [etcd.endpoint] }), prefix: uniquePrefix() };
  },
});

describe('EtcdStore specifics', () => {
  it("maps etcd's own too-many-operations refusal to TOO_MANY_OPS", async () => {
    // A client limit above the server's: the request reaches etcd, which refuses it.
    const store = await EtcdStore.connect({ endpoints: [ownEndpoint()], maxTxnOps: 1000 });
    try {
      const p = uniquePrefix();
      const puts: Op[] = Array.from({ length: 129 }, (_, i) => ({ type: 'put', key: `${p}${i}`, value: 'v' }));
      const err = await store.txn({ compare: [], success: puts }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TarcilError);
      expect((err as TarcilError).code).toBe('TOO_MANY_OPS');
      expect((err as TarcilError).message).toMatch(/too many operations/);
    } finally {
      await store.close();
    }
  });

  it('reads a large prefix in pages at one revision', async () => {
    const store = await EtcdStore.connect({ endpoints: [ownEndpoint()], rangePageSize: 3 });
    try {
      const p = uniquePrefix();
      const names = Array.from({ length: 10 }, (_, i) => `k${String(9 - i)}`);
      await store.txn({ compare: [], success: names.map((n) => ({ type: 'put' as const, key: `${p}${n}`, value: n })) });
      const rev = await store.revision();
      const all = await store.range(p);
      expect(all.revision).toBe(rev);
      expect(all.kvs.map((kv) => kv.value)).toEqual([...names].sort());
      const five = await store.range(p, { limit: 5 });
      expect(five.kvs.map((kv) => kv.value)).toEqual([...names].sort().slice(0, 5));
    } finally {
      await store.close();
    }
  });

  it('snapshots several prefixes in pages, all at one revision, while they change', async () => {
    const store = await EtcdStore.connect({ endpoints: [ownEndpoint()], rangePageSize: 3 });
    try {
      const p = uniquePrefix();
      const pair = (v: number): Op[] =>
        Array.from({ length: 8 }, (_, i) => [
          { type: 'put' as const, key: `${p}a/${i}`, value: String(v) },
          { type: 'put' as const, key: `${p}b/${i}`, value: String(v) },
        ]).flat();
      await store.txn({ compare: [], success: pair(0) });
      // Every write changes both prefixes together: a snapshot that read them at two revisions
      // would see different values in a/ and b/.
      let writing = true;
      const writer = (async () => {
        for (let v = 1; writing; v++) await store.txn({ compare: [], success: pair(v) });
      })();
      try {
        for (let i = 0; i < 20; i++) {
          const { revision, byPrefix } = await store.snapshot([`${p}a/`, `${p}b/`]);
          const [a = [], b = []] = byPrefix;
          expect(a).toHaveLength(8);
          expect(b).toHaveLength(8);
          expect(new Set([...a, ...b].map((kv) => kv.value)).size).toBe(1);
          for (const kv of [...a, ...b]) expect(kv.modRevision).toBeLessThanOrEqual(revision);
        }
      } finally {
        writing = false;
        await writer;
      }
    } finally {
      await store.close();
    }
  });

  it('catches a watch up over more than 1000 revisions (several etcd responses)', async () => {
    const store = await EtcdStore.connect({ endpoints: [ownEndpoint()] });
    try {
      const p = uniquePrefix();
      const from = (await store.revision()) + 1;
      for (let i = 0; i < 1200; i += 50) {
        await Promise.all(Array.from({ length: 50 }, (_, j) => store.put(`${p}${(i + j) % 7}`, String(i + j))));
      }
      const rec = new Recorder();
      const h = await store.watch({ prefix: p, fromRevision: from, onEvents: (b) => rec.batches.push(b), onError: (e) => rec.errors.push(e) });
      await rec.waitFor((b) => b.length >= 1200, 20_000);
      await h.close();
      const revs = rec.batches.map((b) => b.revision);
      expect(revs).toEqual([...revs].sort((a, b) => a - b));
      expect(new Set(revs).size).toBe(1200);
      expect(rec.errors).toEqual([]);
    } finally {
      await store.close();
    }
  }, 60_000);

  it('survives an etcd restart: calls fail UNAVAILABLE meanwhile, the watch resumes without gap or repeat', async () => {
    const etcd = await RestartableEtcd.start();
    const store = await EtcdStore.connect({ endpoints: [etcd.endpoint], requestTimeoutMs: 2000, dialTimeoutMs: 2000 });
    const writer = await EtcdStore.connect({ endpoints: [etcd.endpoint], requestTimeoutMs: 2000 });
    try {
      const p = uniquePrefix();
      const r1 = await writer.put(`${p}a`, '1');
      const rec = new Recorder();
      await store.watch({ prefix: p, fromRevision: r1, onEvents: (b) => rec.batches.push(b), onError: (e) => rec.errors.push(e) });
      await rec.waitFor((b) => b.length === 1);

      await etcd.stop();
      const err = await store.put(`${p}b`, 'lost').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TarcilError);
      expect((err as TarcilError).code).toBe('UNAVAILABLE');

      await etcd.restart();
      // The store needs no re-creation: its next calls succeed once etcd answers again.
      const end = Date.now() + 20_000;
      let r2 = 0;
      while (r2 === 0) {
        try {
          r2 = await writer.put(`${p}b`, '2');
        } catch (e) {
          if (!(e instanceof TarcilError) || e.code !== 'UNAVAILABLE' || Date.now() > end) throw e;
          await sleep(200);
        }
      }
      const r3 = await writer.put(`${p}c`, '3');
      await waitUntil(() => rec.batches.length >= 3 || rec.errors.length > 0, 20_000);
      expect(rec.errors).toEqual([]);
      expect(rec.batches.map((b) => b.revision)).toEqual([r1, r2, r3]);
      expect((await store.get(`${p}c`))?.value).toBe('3');
    } finally {
      await store.close();
      await writer.close();
      await etcd.destroy();
    }
  }, 90_000);

  it("reports etcd's own compaction cancel (a watch resuming into compacted history) as COMPACTED, once", async () => {
    const etcd = await RestartableEtcd.start();
    const store = await EtcdStore.connect({ endpoints: [etcd.endpoint] });
    try {
      const p = uniquePrefix();
      const r1 = await store.put(`${p}a`, '1');
      const rec = new Recorder();
      await store.watch({ prefix: p, fromRevision: r1 + 1, onEvents: (b) => rec.batches.push(b), onError: (e) => rec.errors.push(e) });

      // While the watch is disconnected, history moves on and is compacted through a port the
      // watch does not use; when it reconnects, etcd refuses its start revision.
      await etcd.stop();
      const altPort = await freePort();
      await etcd.restart(altPort);
      const other = await EtcdStore.connect({ endpoints: [`http://127.0.0.1:${altPort}`] });
      await other.put(`${p}b`, '2');
      const r3 = await other.put(`${p}c`, '3');
      await other.compact(r3);
      await other.close();
      await etcd.stop();
      await etcd.restart();

      await waitUntil(() => rec.errors.length > 0, 20_000);
      await sleep(200);
      expect(rec.errors.map((e) => e.code)).toEqual(['COMPACTED']);
      expect(rec.batches).toEqual([]);
    } finally {
      await store.close();
      await etcd.destroy();
    }
  }, 90_000);

  it('an election goes on after an etcd restart into compacted history: the waiting candidate leads when the leader resigns', async () => {
    const etcd = await RestartableEtcd.start();
    const a = await EtcdStore.connect({ endpoints: [etcd.endpoint], requestTimeoutMs: 2000 });
    const b = await EtcdStore.connect({ endpoints: [etcd.endpoint], requestTimeoutMs: 2000 });
    try {
      const p = uniquePrefix();
      const name = `${p}housekeeper`;
      const first = a.campaign(name, 'a', 10);
      await first.elected();
      const second = b.campaign(name, 'b', 10);
      let bLeads = false;
      let bLost: Error | undefined;
      void second.elected().then(
        () => (bLeads = true),
        () => undefined,
      );
      second.onLost((err) => (bLost = err));
      for (let i = 0; i < 100 && (await a.range(`election/${name}/`)).kvs.length < 2; i++) await sleep(50);
      await sleep(300);
      // History moves on past the revision b waits from, and is compacted, as the housekeeper does.
      for (let i = 0; i < 5; i++) await a.put(`${p}k`, String(i));
      await a.compact(await a.revision());
      // b's watch reconnects after the restart, from a revision etcd no longer has.
      await etcd.stop();
      await etcd.restart();
      for (let i = 0; i < 200 && (await a.revision().catch(() => 0)) === 0; i++) await sleep(100);
      await sleep(1000);
      expect(bLeads).toBe(false);
      expect(await a.leader(name)).toBe('a');

      await first.resign();
      await waitUntil(() => bLeads || bLost !== undefined, 15_000);
      expect(bLost).toBeUndefined();
      expect(await a.leader(name)).toBe('b');
      await second.resign();
    } finally {
      await a.close();
      await b.close();
      await etcd.destroy();
    }
  }, 90_000);

  it('openStore connects etcd:// URLs and reports an unreachable etcd as UNAVAILABLE', async () => {
    const store = await openStore(ownEndpoint().replace('http://', 'etcd://'));
    expect(store.kind).toBe('etcd');
    expect(await store.revision()).toBeGreaterThan(0);
    await store.close();
    const port = await freePort();
    await expectCode(openStore(`etcd://127.0.0.1:${port}`, { dialTimeoutMs: 600 }), 'UNAVAILABLE');
  });
});

/** An etcd that can be stopped and started again on the same ports and data. */
class RestartableEtcd {
  private child: ChildProcess | undefined;

  private constructor(
    private readonly bin: string,
    private readonly dataDir: string,
    private readonly clientPort: number,
    private readonly peerPort: number,
  ) {}

  get endpoint(): string {
    return `http://127.0.0.1:${this.clientPort}`;
  }

  static async start(): Promise<RestartableEtcd> {
    const bin = process.env.TARCIL_TEST_ETCD_BIN ?? findEtcd();
    if (!bin) throw new Error('etcd binary not found');
    const e = new RestartableEtcd(bin, mkdtempSync(join(tmpdir(), 'tarcil-etcd-restart-')), await freePort(), await freePort());
    await e.restart();
    return e;
  }

  /** Starts etcd on its own client port, or on another one (clients of the usual port stay cut off). */
  async restart(clientPort = this.clientPort): Promise<void> {
    const peer = `http://127.0.0.1:${this.peerPort}`;
    const url = `http://127.0.0.1:${clientPort}`;
    const child = spawn(
      this.bin,
      [
        '--name',
        'restartable',
        '--data-dir',
        this.dataDir,
        '--listen-client-urls',
        url,
        '--advertise-client-urls',
        url,
        '--listen-peer-urls',
        peer,
        '--initial-advertise-peer-urls',
        peer,
        '--initial-cluster',
        `restartable=${peer}`,
        '--log-level',
        'error',
        '--logger',
        'zap',
      ],
      { stdio: 'ignore' },
    );
    this.child = child;
    const end = Date.now() + 20_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`etcd exited with ${child.exitCode}`);
      try {
        if ((await fetch(`${url}/health`)).ok) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > end) throw new Error('etcd did not become healthy');
      await sleep(100);
    }
  }

  async stop(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), 3000).unref();
    });
  }

  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}
