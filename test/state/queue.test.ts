/**
 * The durable queue's layout: a job's entries (waiting and preempted) share the prefix
 * `queue/<job>/`, so a final write deletes exactly that job's entries by prefix, without reading
 * the queue, and leaves those of a job whose id merely starts with the same characters. On etcd
 * and on the embedded store.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Keys } from '../../src/state/keys.ts';
import { parseQueueEntry, queueDeletesOf, queuePut } from '../../src/state/queue.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';

const stores: ClusterStore[] = [];
afterAll(async () => {
  for (const s of stores) await s.close();
});

describe.each(['etcd', 'memory'] as const)('queue entries per job (%s)', (kind) => {
  it('a job’s final delete takes its own entries and no other job’s', async () => {
    const store = await openStore(kind === 'memory' ? 'memory://' : inject('etcdEndpoint').replace('http://', 'etcd://'));
    stores.push(store);
    const keys = new Keys(`/q-${randomUUID()}/`);
    const puts = [
      queuePut(keys, 1000, { reason: 'waiting', job: 'j1', agent: 'a0', needed: 2, since: 1000 }),
      queuePut(keys, 1001, { reason: 'preempted', job: 'j1', tasks: [3], by: 'urgent' }),
      queuePut(keys, 1002, { reason: 'preempted', job: 'j1', tasks: [3], by: 'urgent-2' }),
      queuePut(keys, 1000, { reason: 'waiting', job: 'j10', agent: 'a1', needed: 1, since: 1000 }),
      queuePut(keys, 1003, { reason: 'preempted', job: 'j10', tasks: [0], by: 'urgent' }),
    ];
    await store.txn({ compare: [], success: puts });
    // Two preemptions of the same task at different times are two entries.
    expect(new Set(puts.map((p) => p.key)).size).toBe(5);
    const mine = await store.range(keys.jobQueue('j1'));
    expect(mine.kvs.map((kv) => parseQueueEntry(kv)?.job)).toEqual(['j1', 'j1', 'j1']);

    await store.txn({ compare: [], success: [queueDeletesOf(keys, 'j1')] });
    const left = (await store.range(keys.queue())).kvs.map((kv) => parseQueueEntry(kv));
    expect(left.map((e) => `${e?.job}:${e?.reason}`)).toEqual(['j10:waiting', 'j10:preempted']);
  });
});
