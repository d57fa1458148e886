/**
 * Server epochs (`epochs/<server>`) are read only by the `server` conflict scope, so only its
 * placements write them: a placement under the default `ru` scope, and a task's release, write
 * none. A `server`-scope commit therefore also compares its picks, so that a pick taken meanwhile
 * by an `ru`-scope placement (which leaves the epoch alone) still fails it. On etcd and on the
 * embedded store.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { loadCatalog, parseJobSpec } from '../../src/model/catalog.ts';
import type { RuRef } from '../../src/model/types.ts';
import { Keys } from '../../src/state/keys.ts';
import { placementTxn, type PlacementTxnInput } from '../../src/state/placement.ts';
import { isFreeRuValue, lastOfFreedRu, parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { releaseRu } from '../../src/state/release.ts';
import { seedCluster, uniformServers } from '../../src/state/seed.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore, KeyValue } from '../../src/store/types.ts';

const catalog = loadCatalog();
const stores: ClusterStore[] = [];
afterAll(async () => {
  for (const s of stores) await s.close();
});

describe.each(['etcd', 'memory'] as const)('server epochs (%s)', (kind) => {
  async function cell(): Promise<{ store: ClusterStore; keys: Keys; free: KeyValue[] }> {
    const store = await openStore(kind === 'memory' ? 'memory://' : inject('etcdEndpoint').replace('http://', 'etcd://'));
    stores.push(store);
    const keys = new Keys(`/epochs-${randomUUID()}/`);
    await seedCluster(store, keys, uniformServers(1, 4));
    const free = (await store.range(keys.rus())).kvs.filter((kv) => isFreeRuValue(kv.value));
    return { store, keys, free };
  }
  const place = (keys: Keys, scope: 'ru' | 'server', id: string, picks: { kv: KeyValue; basedOn: number }[]): PlacementTxnInput => ({
    keys,
    agent: 't',
    commitId: `c-${id}`,
    now: Date.now(),
    job: parseJobSpec({ name: id, profile: 'spark-lr', tasks: picks.length, durationMs: 60_000 }, catalog, { id, now: Date.now() }),
    items: picks.map(({ kv, basedOn }, task) => ({ ref: keys.parseRu(kv.key) as RuRef, task, attempt: 0, ruRev: kv.modRevision, basedOn })),
    scope,
    ruState: 'busy',
  });

  it('a placement under the ru scope and its release leave the epoch alone; one under the server scope bumps it', async () => {
    const { store, keys, free } = await cell();
    const server = keys.parseRu(free[0]!.key)!.server;
    const epochRev = async (): Promise<number | undefined> => (await store.get(keys.epoch(server)))?.modRevision;
    const seeded = await epochRev();
    expect(seeded).toBeDefined();

    const ru = placementTxn(place(keys, 'ru', 'j-ru', [{ kv: free[0]!, basedOn: seeded! }]));
    expect(ru.epochKeys).toEqual([]);
    // A placement goes ahead of the process's other requests waiting for the store.
    expect(ru.req.urgent).toBe(true);
    expect((await store.txn(ru.req)).succeeded).toBe(true);
    expect(await epochRev()).toBe(seeded);

    const placed = (await store.get(free[0]!.key))!;
    const rec = parseJson<PlacedRuRecord>(placed)!;
    expect(await releaseRu(store, keys, keys.parseRu(placed.key)!, placed.modRevision, rec, { state: 'succeeded', endedAt: Date.now(), exitCode: 0 })).toBe(
      true,
    );
    // Free again, carrying the outcome, which only the freed RU records (its owner writes it into the job's records).
    const freed = (await store.get(free[0]!.key))!.value;
    expect(isFreeRuValue(freed)).toBe(true);
    expect(await store.get(keys.task('j-ru', rec.task))).toBeUndefined();
    expect(lastOfFreedRu(freed)).toMatchObject({ job: 'j-ru', index: rec.task, state: 'succeeded', attempt: rec.attempt, commitId: rec.commitId });
    expect(lastOfFreedRu(freed)?.endedAt).toEqual(expect.any(Number));
    expect(await epochRev()).toBe(seeded);

    const sv = placementTxn(place(keys, 'server', 'j-server', [{ kv: free[1]!, basedOn: seeded! }]));
    expect(sv.epochKeys).toEqual([keys.epoch(server)]);
    const res = await store.txn(sv.req);
    expect(res.succeeded).toBe(true);
    expect(await epochRev()).toBe(res.revision);
  });

  it('under the server scope, a pick taken meanwhile under the ru scope fails the commit though the epoch did not move', async () => {
    const { store, keys, free } = await cell();
    const server = keys.parseRu(free[0]!.key)!.server;
    const seeded = (await store.get(keys.epoch(server)))!.modRevision;
    // Both decided on the same view: the ru-scope agent commits first.
    const first = placementTxn(place(keys, 'ru', 'j-first', [{ kv: free[0]!, basedOn: seeded }]));
    const second = placementTxn(place(keys, 'server', 'j-second', [{ kv: free[0]!, basedOn: seeded }]));
    expect((await store.txn(first.req)).succeeded).toBe(true);
    expect((await store.get(keys.epoch(server)))?.modRevision).toBe(seeded);
    expect((await store.txn(second.req)).succeeded).toBe(false);
    expect(parseJson<PlacedRuRecord>(await store.get(free[0]!.key))?.job).toBe('j-first');
    // A pick nobody took still commits under the server scope on the same view.
    const third = placementTxn(place(keys, 'server', 'j-third', [{ kv: free[1]!, basedOn: seeded }]));
    expect((await store.txn(third.req)).succeeded).toBe(true);
  });
});
