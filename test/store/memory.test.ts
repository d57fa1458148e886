import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SortedKeys } from '../../src/store/sorted-keys.ts';
import { compareKeys } from '../../src/store/common.ts';
import { ManualClock } from '../../src/util/clock.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { Recorder, expectCode, storeContract, waitUntil } from './contract.ts';

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

storeContract('MemoryStore', () => {
  const clock = new ManualClock(1_700_000_000_000);
  const store = new MemoryStore({ clock });
  return Promise.resolve({
    store,
    prefix: `/t/${randomUUID()}/`,
    advance: async (ms) => {
      clock.advance(ms);
      await tick();
    },
  });
});

describe('MemoryStore specifics', () => {
  it('compacts history past historyLimit; a watch from before fails, one inside catches up', async () => {
    const store = new MemoryStore({ historyLimit: 10, clock: new ManualClock() });
    for (let i = 0; i < 30; i++) await store.put(`/k/${i % 3}`, String(i));
    const rev = await store.revision();
    expect(rev).toBe(31);
    expect(store.compactRevision).toBeGreaterThan(0);
    expect(rev - store.compactRevision).toBeGreaterThanOrEqual(10);

    const old = new Recorder();
    await store.watch({ prefix: '/k/', fromRevision: 2, onEvents: (b) => old.batches.push(b), onError: (e) => old.errors.push(e) });
    await old.waitForError();
    expect(old.errors.map((e) => e.code)).toEqual(['COMPACTED']);
    expect(old.errors[0]?.details).toMatchObject({ fromRevision: 2, compactRevision: store.compactRevision });

    const recent = new Recorder();
    await store.watch({ prefix: '/k/', fromRevision: rev - 9, onEvents: (b) => recent.batches.push(b), onError: (e) => recent.errors.push(e) });
    await recent.waitFor((b) => b.length >= 10);
    expect(recent.batches.map((b) => b.revision)).toEqual(Array.from({ length: 10 }, (_, i) => rev - 9 + i));
    await store.close();
  });

  it('keeps a lease alive on the manual clock until released; a released lease expires silently', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore({ clock });
    const lease = await store.grantLease(3);
    const lost: Error[] = [];
    lease.onLost((e) => lost.push(e));
    await store.put('/l/a', 'a', { lease: lease.id });
    clock.advance(60_000);
    expect((await store.get('/l/a'))?.lease).toBe(lease.id);
    lease.release();
    clock.advance(2_999);
    expect(await store.get('/l/a')).toBeDefined();
    clock.advance(2);
    expect(await store.get('/l/a')).toBeUndefined();
    await tick();
    expect(lost).toEqual([]);
    await store.close();
  });

  it('keepAliveOnce pushes the deadline of a lease without background keepalive', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore({ clock });
    const lease = await store.grantLease(2, { keepAlive: false });
    const lost: Error[] = [];
    lease.onLost((e) => lost.push(e));
    await store.put('/l/a', 'a', { lease: lease.id });
    clock.advance(1_500);
    await lease.keepAliveOnce();
    clock.advance(1_500);
    expect(await store.get('/l/a')).toBeDefined();
    clock.advance(600);
    expect(await store.get('/l/a')).toBeUndefined();
    await waitUntil(() => lost.length === 1, 1000);
    expect((lost[0] as TarcilError).code).toBe('LEASE_NOT_FOUND');
    await store.close();
  });

  it('close stops every timer and ends watches without calling them', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore({ clock });
    await store.grantLease(5);
    await store.grantLease(5, { keepAlive: false });
    expect(clock.pendingTimers()).toBeGreaterThan(0);
    const rec = new Recorder();
    await store.watch({ prefix: '/', fromRevision: 1, onEvents: (b) => rec.batches.push(b), onError: (e) => rec.errors.push(e) });
    await store.close();
    expect(clock.pendingTimers()).toBe(0);
    await tick();
    expect(rec.errors).toEqual([]);
  });

  it('keeps delivering after a callback throws', async () => {
    const store = new MemoryStore({ clock: new ManualClock() });
    const seen: number[] = [];
    await store.watch({
      prefix: '/',
      fromRevision: 2,
      onEvents: (b) => {
        seen.push(b.revision);
        throw new Error('consumer bug');
      },
      onError: () => {},
    });
    await store.put('/a', '1');
    await store.put('/b', '2');
    await waitUntil(() => seen.length === 2, 1000);
    expect(seen).toEqual([2, 3]);
    await store.close();
  });

  it('hands out immutable events shared with history', async () => {
    const store = new MemoryStore({ clock: new ManualClock() });
    const rec = new Recorder();
    await store.watch({ prefix: '/', fromRevision: 1, onEvents: (b) => rec.batches.push(b), onError: () => {} });
    await store.put('/a', '1');
    await rec.waitFor((b) => b.length === 1);
    const kv = rec.batches[0]?.events[0]?.kv;
    expect(Object.isFrozen(kv)).toBe(true);
    await store.close();
  });

  it('hands a watch the batch itself when all of it is under the prefix, only its part when some is, nothing when none is', async () => {
    const store = new MemoryStore({ clock: new ManualClock() });
    const rec = new Recorder();
    const all = new Recorder();
    await store.watch({ prefix: '/w/', fromRevision: 1, onEvents: (b) => rec.batches.push(b), onError: () => {} });
    await store.watch({ prefix: '', fromRevision: 1, onEvents: (b) => all.batches.push(b), onError: () => {} });
    await store.put('/elsewhere', 'x');
    const put = (key: string): { type: 'put'; key: string; value: string } => ({ type: 'put', key, value: key });
    await store.txn({ compare: [], success: [put('/w/a'), put('/w/b')] });
    await store.txn({ compare: [], success: [put('/v/a'), put('/w/c'), put('/x/a'), put('/w/d')] });
    await store.txn({ compare: [], success: [put('/v/b'), put('/x/b')] });
    await all.waitFor((b) => b.length === 4);
    await rec.waitFor((b) => b.length === 2);
    await store.put('/w/e', 'e');
    await rec.waitFor((b) => b.length === 3);
    expect(rec.batches.map((b) => [b.revision, b.events.map((e) => e.kv.key)])).toEqual([
      [3, ['/w/a', '/w/b']],
      [4, ['/w/c', '/w/d']],
      [6, ['/w/e']],
    ]);
    // Wholly under the prefix: the very batch every watcher and the history share.
    expect(rec.batches[0]).toBe(all.batches[1]);
    // Partly: a batch of its own, as immutable, the whole one left as it was.
    expect(rec.batches[1]).not.toBe(all.batches[2]);
    expect(Object.isFrozen(rec.batches[1]) && Object.isFrozen(rec.batches[1]?.events)).toBe(true);
    expect(all.batches[2]?.events).toHaveLength(4);
    await store.close();
  });

  it('ranges a prefix among 200k keys inserted in random order', async () => {
    const store = new MemoryStore({ clock: new ManualClock(), historyLimit: 1000 });
    const servers = 2000;
    const rus = 100;
    const keys: string[] = [];
    for (let s = 0; s < servers; s++) for (let r = 0; r < rus; r++) keys.push(`/c/rus/s${s}/${String(r).padStart(3, '0')}`);
    shuffle(keys);
    for (let i = 0; i < keys.length; i += 100) {
      await store.txn({ compare: [], success: keys.slice(i, i + 100).map((key) => ({ type: 'put' as const, key, value: 'free' })) });
    }
    expect(store.size).toBe(servers * rus);

    const one = await store.range('/c/rus/s1234/');
    expect(one.kvs).toHaveLength(rus);
    expect(one.kvs[0]?.key).toBe('/c/rus/s1234/000');
    expect(one.kvs.map((kv) => kv.key)).toEqual([...one.kvs.map((kv) => kv.key)].sort(compareKeys));
    const all = await store.range('/c/rus/');
    expect(all.kvs).toHaveLength(servers * rus);
    expect(await store.delete('/c/rus/s1', { prefix: true })).toBe(1111 * rus); // s1, s10-s19, s100-s199, s1000-s1999
    await store.close();
  }, 60_000);
});

describe('SortedKeys', () => {
  it('matches a sorted reference under random inserts and deletes', () => {
    const idx = new SortedKeys();
    const ref = new Set<string>();
    let seed = 42;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let i = 0; i < 20_000; i++) {
      const k = `k/${rand(5000).toString(36)}/${rand(7)}`;
      if (rand(3) === 0) expect(idx.delete(k)).toBe(ref.delete(k));
      else expect(idx.insert(k)).toBe(!ref.has(k) && ref.add(k) !== undefined);
    }
    const sorted = [...ref].sort(compareKeys);
    expect(idx.size).toBe(ref.size);
    expect(idx.withPrefix('')).toEqual(sorted);
    expect(idx.withPrefix('k/1')).toEqual(sorted.filter((k) => k.startsWith('k/1')));
    expect(idx.withPrefix('k/1', 5)).toEqual(sorted.filter((k) => k.startsWith('k/1')).slice(0, 5));
  });
});

describe('openStore', () => {
  it('opens a MemoryStore for memory://', async () => {
    const store = await openStore('memory://', { historyLimit: 50 });
    expect(store.kind).toBe('memory');
    expect(store).toBeInstanceOf(MemoryStore);
    expect(store.maxTxnOps).toBe(128);
    await store.close();
  });

  it.each(['', 'localhost:2379', 'redis://x:1', 'etcd://', 'etcd://host:99999', 'etcd://a:1,,b:2', 'memory://somewhere', 'etcd://user@h:1'])(
    'refuses %j with INVALID_ARGUMENT naming the flag',
    async (url) => {
      const p = openStore(url, { flag: '--cluster-store' });
      await expectCode(p, 'INVALID_ARGUMENT');
      const err = await p.catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TarcilError);
      expect((err as TarcilError).message).toContain('--cluster-store');
      expect((err as TarcilError).message).toContain(JSON.stringify(url).slice(1, -1));
      expect((err as TarcilError).field).toBe('--cluster-store');
    },
  );
});

function shuffle<T>(a: T[]): void {
  let seed = 7;
  for (let i = a.length - 1; i > 0; i--) {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    const j = seed % (i + 1);
    const x = a[i] as T;
    a[i] = a[j] as T;
    a[j] = x;
  }
}
