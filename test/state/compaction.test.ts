/**
 * Compaction under load: while writers change keys, the elected housekeeper compacts the store's
 * history behind them; Followers (one whose watch stream breaks and resumes from history that is
 * compacted meanwhile, one left alone) end up with exactly what the store holds. On a private
 * etcd (compaction is server-wide) and on the embedded store. Then the election on etcd: one
 * housekeeper leads, another takes over when its process dies.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Follower } from '../../src/state/follow.ts';
import { Housekeeper } from '../../src/state/housekeeping.ts';
import { Keys } from '../../src/state/keys.ts';
import { EtcdStore } from '../../src/store/etcd.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import type { ClusterStore, KeyValue, WatchHandle, WatchOptions } from '../../src/store/types.ts';
import { ManualClock, SystemClock } from '../../src/util/clock.ts';
import type { TarcilError } from '../../src/util/errors.ts';
import { createLogger } from '../../src/util/log.ts';
import { startEtcd, type EtcdProcess } from '../support/etcd.ts';
import { wrapStore } from '../support/wrap-store.ts';
import { until as pollUntil } from '../support/until.ts';

const log = createLogger('test', 'silent');

let etcd: EtcdProcess | undefined;
afterAll(async () => {
  await etcd?.stop();
});

const until = (what: string, cond: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> => pollUntil(what, cond, ms, 20);

/**
 * A store whose watch streams can be cut and later resumed from the next revision not yet
 * delivered, as EtcdStore resumes a watch after a broken connection: if that revision was
 * compacted meanwhile, the resumed watch fails with COMPACTED. A cut stream delivers nothing
 * more; its server-side watch is cancelled only on resume.
 */
function interruptible(inner: ClusterStore): { store: ClusterStore; cut(): void; resume(): Promise<void>; delivered(): number } {
  type W = { opts: WatchOptions; next: number; inner: WatchHandle | undefined; closed: boolean; cut: boolean };
  const ws = new Set<W>();
  const open = async (w: W): Promise<void> => {
    w.cut = false;
    w.inner = await inner.watch({
      prefix: w.opts.prefix,
      fromRevision: w.next,
      onEvents: (b) => {
        if (w.cut) return;
        w.next = b.revision + 1;
        w.opts.onEvents(b);
      },
      onError: (e: TarcilError) => {
        if (!w.cut) w.opts.onError(e);
      },
    });
  };
  const store = wrapStore(inner, {
    watch: async (opts) => {
      const w: W = { opts, next: opts.fromRevision, inner: undefined, closed: false, cut: false };
      await open(w);
      ws.add(w);
      return {
        close: async () => {
          w.closed = true;
          ws.delete(w);
          await w.inner?.close();
        },
      };
    },
  });
  return {
    store,
    cut: () => {
      for (const w of ws) w.cut = true;
    },
    resume: async () => {
      for (const w of [...ws]) {
        if (w.closed) continue;
        await w.inner?.close();
        await open(w);
      }
    },
    delivered: () => Math.max(0, ...[...ws].map((w) => w.next - 1)),
  };
}

/** A Follower mirroring a prefix into a map. */
function mirror(store: ClusterStore, prefix: string): { f: Follower; map: Map<string, string> } {
  const map = new Map<string, string>();
  const f = new Follower({
    store,
    clock: new SystemClock(),
    log,
    prefix,
    onSnapshot: (kvs: KeyValue[]) => {
      map.clear();
      for (const kv of kvs) map.set(kv.key, kv.value);
    },
    onEvent: (kv, deleted) => {
      if (deleted) map.delete(kv.key);
      else map.set(kv.key, kv.value);
    },
  });
  return { f, map };
}

const STORES: Array<{ name: string; open: () => Promise<ClusterStore> }> = [
  {
    name: 'etcd',
    open: async () => {
      etcd ??= await startEtcd();
      return EtcdStore.connect({ endpoints: [etcd.endpoint] });
    },
  },
  { name: 'embedded', open: () => Promise.resolve(new MemoryStore()) },
];

describe.each(STORES)('compaction under load ($name store)', (s) => {
  const open = s.open;
  it('Followers see exactly the store after compactions ran under concurrent writes, one of them after a COMPACTED re-list', async () => {
    const store = await open();
    const keys = new Keys(`/compact/${randomUUID()}/`);
    const p = `${keys.prefix}data/`;
    // The broken Follower on a connection of its own, as another process would be.
    const own = store instanceof EtcdStore ? await open() : store;
    const cutOne = interruptible(own);
    const broken = mirror(cutOne.store, p);
    const steady = mirror(store, p);
    await broken.f.start();
    await steady.f.start();
    const clock = new ManualClock(1_000_000);
    const hk = new Housekeeper({ store, keys, clock, log, process: 'hk', retainMs: 60_000, compactMarginMs: 1000, compactEveryMs: 100, electionTtlSeconds: 5 });
    hk.start();
    await until('elected', () => hk.leading);

    // Writers: puts and deletes over a small key space, all the while.
    let writing = true;
    let writes = 0;
    const writer = async (w: number): Promise<void> => {
      for (let i = 0; writing; i++) {
        const key = `${p}${w}/${i % 25}`;
        if (i % 7 === 3) await store.delete(key);
        else await store.put(key, `${w}:${i}`);
        writes++;
        // The embedded store answers at once: let timers run between writes.
        await new Promise((r) => setImmediate(r));
      }
    };
    const writers = [0, 1, 2, 3].map((w) => writer(w));
    // Virtual time moves while they write: samples every 100 ms, compaction 1 s behind.
    const tick = async (ms: number): Promise<void> => {
      for (let t = 0; t < ms; t += 100) {
        clock.advance(100);
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    await tick(1500);
    // Virtual time goes on while it waits: on a busy machine the samples of the first 1.5 s can
    // land late, and a clock that stood still would leave the margin never reached.
    await until('a first compaction', async () => {
      if (hk.stats.compactions > 0) return true;
      await tick(100);
      return false;
    });

    // One Follower's stream breaks; compaction moves past what it has seen, under the writes.
    cutOne.cut();
    const seen = cutOne.delivered();
    await until('compaction past the broken watch', async () => {
      await tick(200);
      return hk.stats.compactedTo > seen + 1;
    });
    await tick(1000);
    // On a loaded machine the writers may have done few writes by now: the check below is of
    // compactions under a stream of writes, so the stream goes on until it has been one.
    await until('a hundred writes', () => writes > 100);
    writing = false;
    await Promise.all(writers);
    // Its stream comes back and resumes from where it was: that history is gone; it re-lists.
    await cutOne.resume();
    await until('the re-list after COMPACTED', () => broken.f.relists > 0);

    const compactions = hk.stats.compactions;
    expect(compactions).toBeGreaterThanOrEqual(2);
    expect(writes).toBeGreaterThan(100);
    // History before the compacted revision is gone: a watch from there fails COMPACTED.
    const errors: string[] = [];
    const old = await store.watch({ prefix: p, fromRevision: 2, onEvents: () => undefined, onError: (e) => errors.push(e.code) });
    await until('COMPACTED', () => errors.length > 0);
    await old.close();
    expect(errors).toEqual(['COMPACTED']);

    const truth = async (): Promise<string> => JSON.stringify((await store.range(p)).kvs.map((kv) => [kv.key, kv.value]));
    const view = (m: Map<string, string>): string => JSON.stringify([...m].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)));
    const diff = async (): Promise<string> => {
      const t = new Map((await store.range(p)).kvs.map((kv) => [kv.key, kv.value]));
      const d = (name: string, m: Map<string, string>): string => {
        const wrong = [...new Set([...t.keys(), ...m.keys()])].filter((k) => t.get(k) !== m.get(k));
        return `${name}: ${wrong.length} keys differ (${wrong
          .slice(0, 3)
          .map((k) => `${k}: store ${t.get(k)} / follower ${m.get(k)}`)
          .join('; ')}), relists ${name === 'broken' ? broken.f.relists : steady.f.relists}`;
      };
      return `${d('broken', broken.map)}; ${d('steady', steady.map)}`;
    };
    try {
      await until('both followers to match the store', async () => view(broken.map) === (await truth()) && view(steady.map) === (await truth()));
    } catch (err) {
      throw new Error(`${(err as Error).message}: ${await diff()}`);
    }
    expect(broken.map.size).toBeGreaterThan(0);

    await hk.close();
    await broken.f.close();
    await steady.f.close();
    if (own !== store) await own.close();
    await store.close();
  }, 120_000);
});

describe('the housekeeper election on etcd', () => {
  it('one of two front-ends leads and sweeps; when its process dies the other takes over and sweeps', async () => {
    // The shared test etcd: no compaction here (margin 0), only the election and retention.
    const endpoint = inject('etcdEndpoint');
    const keys = new Keys(`/hk/${randomUUID()}/`);
    const [s1, s2, admin] = await Promise.all([0, 1, 2].map(() => EtcdStore.connect({ endpoints: [endpoint] })));
    const clock = new SystemClock();
    const mk = (store: ClusterStore, name: string): Housekeeper =>
      new Housekeeper({ store, keys, clock, log, process: name, retainMs: 1000, sweepEveryMs: 200, compactMarginMs: 0, electionTtlSeconds: 2 });
    const a = mk(s1!, 'A');
    a.start();
    await until('A leads', () => a.leading);
    const b = mk(s2!, 'B');
    b.start();
    const finished = async (id: string): Promise<void> => {
      const rec = { spec: { id }, state: 'succeeded', placed: 1, updatedAt: Date.now(), finishedAt: Date.now(), submittedAt: 0 };
      await admin!.txn({
        compare: [],
        success: [
          { type: 'put', key: keys.job(id), value: JSON.stringify(rec) },
          { type: 'put', key: keys.task(id, 0), value: '{}' },
        ],
      });
    };
    await finished('first');
    await until('A deletes the first job', async () => (await admin!.range(keys.prefix)).kvs.length === 0 && a.retention.totals.jobs === 1);
    expect([a.leading, b.leading]).toEqual([true, false]);
    expect(a.retention.totals.jobs).toBe(1);
    expect(b.retention.totals.sweeps).toBe(0);
    expect(await admin!.leader(`${keys.prefix}housekeeper`)).toBe('A');

    // A's process dies: its connection closes, its election lease is no longer kept alive.
    await s1!.close();
    await until('B leads', () => b.leading, 15_000);
    expect(await admin!.leader(`${keys.prefix}housekeeper`)).toBe('B');
    await finished('second');
    await until('B deletes the second job', async () => (await admin!.range(keys.prefix)).kvs.length === 0 && b.retention.totals.jobs === 1);
    expect(b.retention.totals.jobs).toBe(1);

    await b.close();
    expect(await admin!.leader(`${keys.prefix}housekeeper`)).toBeUndefined();
    await a.close().catch(() => undefined);
    await s2!.close();
    await admin!.close();
  }, 60_000);
});

describe('a housekeeper whose wait in the election hangs', () => {
  /**
   * The first campaign of `inner` puts its key, as a candidate does, keeps its lease alive and
   * then never says anything (neither elected nor lost): the hang of a wait whose watch stopped
   * without a word. Later campaigns are the store's own.
   */
  function firstCampaignHangs(inner: ClusterStore): { store: ClusterStore; hung: () => boolean } {
    let first = true;
    let hungKey: string | undefined;
    const store: ClusterStore = {
      ...wrapStore(inner, {}),
      campaign: (name, value, ttl) => {
        if (!first) return inner.campaign(name, value, ttl);
        first = false;
        const lease = inner.grantLease(ttl);
        const put = lease.then(async (l) => {
          hungKey = `election/${name}/${l.id}`;
          await inner.put(hungKey, value, { lease: l.id });
        });
        return {
          elected: () => new Promise<void>(() => undefined),
          onLost: () => undefined,
          resign: async () => {
            await put;
            await (await lease).revoke();
          },
          key: () => hungKey,
        };
      },
      leader: (name) => inner.leader(name),
    };
    return { store, hung: () => hungKey !== undefined };
  }

  it('stands again once it finds the election led by nobody else, and leads', async () => {
    const inner = new MemoryStore();
    const keys = new Keys(`/hk-stuck/${randomUUID()}/`);
    const { store, hung } = firstCampaignHangs(inner);
    const hk = new Housekeeper({
      store,
      keys,
      clock: new SystemClock(),
      log,
      process: 'A',
      retainMs: 1000,
      sweepEveryMs: 200,
      compactMarginMs: 0,
      electionTtlSeconds: 1,
    });
    hk.start();
    await until('the first campaign hung', hung);
    await new Promise((r) => setTimeout(r, 1500));
    expect(hk.leading).toBe(false);
    // Three checks a TTL (1 s) apart find its own key oldest: it resigns and stands again.
    await until('A leads', () => hk.leading, 15_000);
    expect(hk.stats.stuck).toBe(1);
    expect(await inner.leader(`${keys.prefix}housekeeper`)).toBe('A');
    await hk.close();
    await inner.close();
  }, 30_000);

  it('a candidate waiting behind a live leader is not taken for stuck', async () => {
    const inner = new MemoryStore();
    const keys = new Keys(`/hk-stuck/${randomUUID()}/`);
    const mk = (name: string): Housekeeper =>
      new Housekeeper({
        store: inner,
        keys,
        clock: new SystemClock(),
        log,
        process: name,
        retainMs: 1000,
        sweepEveryMs: 200,
        compactMarginMs: 0,
        electionTtlSeconds: 1,
      });
    const a = mk('A');
    a.start();
    await until('A leads', () => a.leading);
    const b = mk('B');
    b.start();
    // Five checks' worth of waiting behind A.
    await new Promise((r) => setTimeout(r, 5500));
    expect([a.leading, b.leading]).toEqual([true, false]);
    expect(b.stats.stuck).toBe(0);
    expect(a.stats.elected).toBe(1);
    await a.close();
    await until('B leads once A resigns', () => b.leading, 5000);
    expect(b.stats.stuck).toBe(0);
    await b.close();
    await inner.close();
  }, 30_000);
});
