/**
 * A task that succeeded is recorded in its freed RU alone until its owner writes it into the
 * job's records; `findOutcome` finds it in the RU's history once the RU has been placed again,
 * and tells a success from a task that left its RU otherwise. On etcd and on the embedded store.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { loadCatalog, parseJobSpec } from '../../src/model/catalog.ts';
import type { RuRef } from '../../src/model/types.ts';
import { Keys } from '../../src/state/keys.ts';
import { placementTxn } from '../../src/state/placement.ts';
import { isFreeRuValue, parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { releaseRu } from '../../src/state/release.ts';
import { findOutcome, HISTORY_READS } from '../../src/state/ru-history.ts';
import { seedCluster, uniformServers } from '../../src/state/seed.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore, KeyValue } from '../../src/store/types.ts';

const catalog = loadCatalog();
const stores: ClusterStore[] = [];
afterAll(async () => {
  for (const s of stores) await s.close();
});

describe.each(['etcd', 'memory'] as const)('a task outcome from the RU history (%s)', (kind) => {
  async function cell(): Promise<{ store: ClusterStore; keys: Keys; ru: KeyValue; ref: RuRef }> {
    const store = await openStore(kind === 'memory' ? 'memory://' : inject('etcdEndpoint').replace('http://', 'etcd://'));
    stores.push(store);
    const keys = new Keys(`/history-${randomUUID()}/`);
    await seedCluster(store, keys, uniformServers(1, 12));
    // RU 1: its key is a prefix of RU 10's and RU 11's, whose changes must not be taken for its own.
    const ru = (await store.range(keys.rus())).kvs.find((kv) => keys.parseRu(kv.key)?.index === 1 && isFreeRuValue(kv.value)) as KeyValue;
    return { store, keys, ru, ref: keys.parseRu(ru.key) as RuRef };
  }

  /**
   * Places task 0 of job `id` on the RU as it is now; returns the placed record and its revision.
   * It carries no `prev` (as a placement of an older build wrote it): the history alone answers
   * here; the agent's copy of a freed RU's outcome is test/agent/prev-outcome.test.ts.
   */
  async function place(store: ClusterStore, keys: Keys, kv: KeyValue, id: string): Promise<{ rec: PlacedRuRecord; rev: number }> {
    const job = parseJobSpec({ name: id, profile: 'spark-lr', tasks: 1, durationMs: 60_000 }, catalog, { id, now: Date.now() });
    const { req } = placementTxn({
      keys,
      agent: 't',
      commitId: `c-${id}`,
      now: Date.now(),
      job,
      items: [{ ref: keys.parseRu(kv.key) as RuRef, task: 0, attempt: 0, ruRev: kv.modRevision, basedOn: 0 }],
      scope: 'ru',
      ruState: 'busy',
    });
    const res = await store.txn(req);
    expect(res.succeeded).toBe(true);
    const now = (await store.get(kv.key)) as KeyValue;
    return { rec: parseJson<PlacedRuRecord>(now) as PlacedRuRecord, rev: now.modRevision };
  }

  async function touchNeighbours(store: ClusterStore, keys: Keys, ref: RuRef): Promise<void> {
    for (const index of [10, 11]) {
      const kv = (await store.get(keys.ru({ server: ref.server, index }))) as KeyValue;
      await store.put(kv.key, kv.value);
    }
  }

  it('held, ended and still free, ended and placed again (found in the history), never mixed up with another RU', async () => {
    const { store, keys, ru, ref } = await cell();
    const a = await place(store, keys, ru, 'a');
    const who = { job: 'a', task: 0, commitId: a.rec.commitId };
    expect((await findOutcome(store, keys, ref, who, a.rev)).kind).toBe('held');
    await touchNeighbours(store, keys, ref);
    expect(await releaseRu(store, keys, ref, a.rev, a.rec, { state: 'succeeded', endedAt: 1234 })).toBe(true);
    // Nothing but the freed RU records the success.
    expect(await store.get(keys.task('a', 0))).toBeUndefined();
    const freed = await findOutcome(store, keys, ref, who, a.rev);
    expect(freed).toMatchObject({ kind: 'ended', last: { job: 'a', index: 0, state: 'succeeded', endedAt: 1234 } });
    const freedRev = (freed as { rev: number }).rev;
    // Placed again for job b, and b's task ended too: a's success is in the history only.
    await touchNeighbours(store, keys, ref);
    const b = await place(store, keys, (await store.get(ru.key)) as KeyValue, 'b');
    expect(await releaseRu(store, keys, ref, b.rev, b.rec, { state: 'succeeded', endedAt: 5678 })).toBe(true);
    expect(await findOutcome(store, keys, ref, who, a.rev)).toMatchObject({ kind: 'ended', rev: freedRev, last: { job: 'a', state: 'succeeded' } });
    // Asked from after the success (the job record's `seen` moved past it): it left before then.
    expect(await findOutcome(store, keys, ref, who, freedRev)).toEqual({ kind: 'departed', rev: freedRev });
  });

  /** The store, counting the watches asked of it (each one from an old revision makes etcd scan every revision since). */
  function counting(store: ClusterStore): { store: ClusterStore; watches: () => number } {
    let n = 0;
    const wrapped = new Proxy(store, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver) as unknown;
        if (prop === 'watch') return (...args: Parameters<ClusterStore['watch']>) => (n++, target.watch(...args));
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    return { store: wrapped, watches: () => n };
  }

  it('reads the versions of the RU back, without a watch, when they are few and none was a delete; asks a watch when they are many', async () => {
    const { store, keys, ru, ref } = await cell();
    const a = await place(store, keys, ru, 'a');
    const who = { job: 'a', task: 0, commitId: a.rec.commitId };
    await touchNeighbours(store, keys, ref);
    expect(await releaseRu(store, keys, ref, a.rev, a.rec, { state: 'succeeded', endedAt: 42 })).toBe(true);
    const freedRev = (await store.get(ru.key))!.modRevision;
    const b = await place(store, keys, (await store.get(ru.key)) as KeyValue, 'b');
    expect(await releaseRu(store, keys, ref, b.rev, b.rec, { state: 'succeeded', endedAt: 43 })).toBe(true);
    const c = counting(store);
    expect(await findOutcome(c.store, keys, ref, who, a.rev)).toEqual({
      kind: 'ended',
      rev: freedRev,
      last: expect.objectContaining({ job: 'a', index: 0, state: 'succeeded', endedAt: 42 }) as unknown,
    });
    expect(c.watches()).toBe(0);
    // More versions since than HISTORY_READS: the same answer, from a watch.
    const freed = (await store.get(ru.key)) as KeyValue;
    for (let i = 0; i < HISTORY_READS + 2; i++) await store.put(ru.key, freed.value);
    const many = counting(store);
    expect(await findOutcome(many.store, keys, ref, who, a.rev)).toMatchObject({ kind: 'ended', rev: freedRev, last: { endedAt: 42 } });
    expect(many.watches()).toBe(1);
  });

  it('a task whose RU was taken away without an outcome (its node gone, a loss): departed, at the revision it left', async () => {
    const { store, keys, ru, ref } = await cell();
    const a = await place(store, keys, ru, 'a');
    const who = { job: 'a', task: 0, commitId: a.rec.commitId };
    await touchNeighbours(store, keys, ref);
    // The delete's own revision: other test files write to the same etcd, so the store's latest may be later.
    const gone = (await store.txn({ compare: [], success: [{ type: 'delete', key: ru.key }] })).revision;
    await store.put(ru.key, JSON.stringify({ state: 'free' }));
    // A release fenced on the placement's revision cannot land any more.
    expect(await releaseRu(store, keys, ref, a.rev, a.rec, { state: 'succeeded', endedAt: 1 })).toBe(false);
    // A delete in between: its revision is not read back, so a watch replays the history.
    const c = counting(store);
    expect(await findOutcome(c.store, keys, ref, who, a.rev)).toEqual({ kind: 'departed', rev: gone });
    expect(c.watches()).toBe(1);
    // Another placement of the same task (a later commit) is not this attempt.
    expect((await findOutcome(store, keys, ref, { ...who, commitId: 'another' }, a.rev)).kind).toBe('departed');
  });

  it('history compacted past where the task was last known held: compacted (not taken for a loss)', async () => {
    const { store, keys, ru, ref } = await cell();
    const a = await place(store, keys, ru, 'a');
    expect(await releaseRu(store, keys, ref, a.rev, a.rec, { state: 'succeeded', endedAt: 1 })).toBe(true);
    await place(store, keys, (await store.get(ru.key)) as KeyValue, 'b');
    await store.compact(await store.revision());
    expect(await findOutcome(store, keys, ref, { job: 'a', task: 0, commitId: a.rec.commitId }, a.rev)).toEqual({ kind: 'compacted' });
  });

  it('history compacted past where the task was last known held, but kept from a revision at which it still held its RU: its outcome is found there', async () => {
    const { store, keys, ru, ref } = await cell();
    const a = await place(store, keys, ru, 'a');
    // Other writes, then a compaction while the task still runs: the revision its owner knew is gone.
    await touchNeighbours(store, keys, ref);
    await store.compact(await store.revision());
    await touchNeighbours(store, keys, ref);
    expect(await releaseRu(store, keys, ref, a.rev, a.rec, { state: 'succeeded', endedAt: 7 })).toBe(true);
    await place(store, keys, (await store.get(ru.key)) as KeyValue, 'b');
    await expect(store.getAt(ru.key, a.rev)).rejects.toMatchObject({ code: 'COMPACTED' });
    const got = await findOutcome(store, keys, ref, { job: 'a', task: 0, commitId: a.rec.commitId }, a.rev);
    expect(got).toMatchObject({ kind: 'ended', last: { job: 'a', index: 0, state: 'succeeded', endedAt: 7 } });
    // Another task that had left its RU before the oldest revision kept stays unknown.
    const c = await place(store, keys, (await store.get(keys.ru({ server: ref.server, index: 2 }))) as KeyValue, 'c');
    const cRef = { server: ref.server, index: 2 };
    expect(await releaseRu(store, keys, cRef, c.rev, c.rec, { state: 'succeeded', endedAt: 8 })).toBe(true);
    await place(store, keys, (await store.get(keys.ru(cRef))) as KeyValue, 'd');
    await store.compact(await store.revision());
    expect(await findOutcome(store, keys, cRef, { job: 'c', task: 0, commitId: c.rec.commitId }, c.rev)).toEqual({ kind: 'compacted' });
  });
});
