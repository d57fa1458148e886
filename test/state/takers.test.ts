import { describe, expect, inject, it } from 'vitest';
import { Keys } from '../../src/state/keys.ts';
import { freedRuValue, handedTo, isFreeRuValue, jobOfFreedRu, lastOfFreedRu } from '../../src/state/records.ts';
import { outcomeSummary, releaseRu } from '../../src/state/release.ts';
import { Follower } from '../../src/state/follow.ts';
import { chooseTaker, Takers } from '../../src/state/takers.ts';
import { openStore } from '../../src/store/index.ts';
import type { PlacedRuRecord } from '../../src/state/records.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { until } from '../support/until.ts';

describe('the taker a node names as it frees an RU', () => {
  const ruKeys = Array.from({ length: 3000 }, (_, i) => `/t/rus/s${Math.floor(i / 16)}/${String(i % 16).padStart(3, '0')}`);

  it('is the same whatever order the takers are seen in, and shares the RUs about evenly', () => {
    const takers = ['7587869542127693824', '7587869542127693901', '7587869542127694017'];
    const counts = new Map<string, number>();
    for (const k of ruKeys) {
      const t = chooseTaker(k, takers);
      expect(chooseTaker(k, [...takers].reverse())).toBe(t);
      counts.set(t!, (counts.get(t!) ?? 0) + 1);
    }
    expect([...counts.keys()].sort()).toEqual([...takers].sort());
    for (const n of counts.values()) {
      expect(n).toBeGreaterThan(800);
      expect(n).toBeLessThan(1200);
    }
    expect(chooseTaker(ruKeys[0]!, [])).toBeUndefined();
  });

  it('moves only the RUs of a taker that leaves', () => {
    const takers = ['101', '202', '303', '404'];
    const rest = takers.filter((t) => t !== '303');
    for (const k of ruKeys) {
      const before = chooseTaker(k, takers);
      const after = chooseTaker(k, rest);
      if (before !== '303') expect(after).toBe(before);
    }
  });

  it('rides at the end of the freed record, which every other reader still reads as before', () => {
    const last = JSON.stringify(outcomeSummary({ job: 'ns/j-1', index: 3, state: 'succeeded', attempt: 0, commitId: 'a:1', observed: { rate: 0.9, for: 2 } }));
    const named = freedRuValue(last, '7587869542127693824');
    expect(handedTo(named)).toBe('7587869542127693824');
    expect(JSON.parse(named)).toMatchObject({ state: 'free', for: '7587869542127693824', last: { job: 'ns/j-1', index: 3 } });
    expect(isFreeRuValue(named)).toBe(true);
    expect(jobOfFreedRu(named)).toBe('ns/j-1');
    expect(lastOfFreedRu(named)).toMatchObject({ job: 'ns/j-1', state: 'succeeded' });
    expect(handedTo(freedRuValue(last))).toBeUndefined();
    expect(handedTo('{"state":"free"}')).toBeUndefined();
    expect(handedTo(JSON.stringify({ state: 'busy', job: 'x', agent: 'for' }))).toBeUndefined();
  });
});

describe('takers followed on a real etcd', () => {
  it('names a front-end whose takers key is there, none once it is deleted or its lease is gone', async () => {
    const store = await openStore(inject('etcdEndpoint').replace('http://', 'etcd://'));
    const keys = new Keys(`/takers-${process.pid}-${Date.now()}`);
    const takers = new Takers(keys);
    // As a node process follows them: with its RUs, one watch.
    const follower = new Follower({
      store,
      clock: new SystemClock(),
      log: createLogger('test', 'silent'),
      prefix: [keys.rus(), takers.prefix],
      onSnapshot: (_kvs, _rev, [, t = []]) => takers.reset(t),
      onEvent: (kv, deleted) => void takers.apply(kv, deleted),
    });
    try {
      const a = await store.grantLease(30);
      const b = await store.grantLease(30);
      await store.put(keys.taker(a.id), '{}', { lease: a.id });
      await follower.start();
      const ref = { server: 's1', index: 0 };
      expect(takers.to(ref)).toBe(a.id);
      await store.put(keys.taker(b.id), '{}', { lease: b.id });
      await until('two takers', () => takers.size === 2, 5000);
      expect(takers.to(ref)).toBe(chooseTaker(keys.ru(ref), [a.id, b.id]));
      await store.delete(keys.taker(a.id));
      await until('one taker', () => takers.size === 1, 5000);
      expect(takers.to(ref)).toBe(b.id);
      await b.revoke();
      await until('no taker', () => takers.size === 0, 5000);
      expect(takers.to(ref)).toBeUndefined();

      // The release names it: the freed record carries the taker the node chose.
      const c = await store.grantLease(30);
      await store.put(keys.taker(c.id), '{}', { lease: c.id });
      await until('taker c', () => takers.size === 1, 5000);
      const placed: PlacedRuRecord = { state: 'busy', job: 'j', task: 0, caused: [], priority: 0, agent: 'a', since: 1, attempt: 0, basedOn: 0, commitId: 'a:1' };
      const rev = await store.put(keys.ru(ref), JSON.stringify(placed));
      expect(takers.apply({ key: keys.ru(ref), value: '', createRevision: rev, modRevision: rev, version: 1, lease: '0' }, false)).toBe(false);
      expect(await releaseRu(store, keys, ref, rev, placed, { state: 'succeeded', endedAt: 2 }, { to: takers.to(ref) })).toBe(true);
      expect(handedTo((await store.get(keys.ru(ref)))!.value)).toBe(c.id);
      await c.revoke();
      await a.revoke();
    } finally {
      await follower.close();
      await store.delete(keys.rus(), { prefix: true });
      await store.close();
    }
  });
});
