/**
 * The placement that takes a freed RU copies the outcome the freed RU carried (`prev`), through the
 * scheduling agent's view and commit, so that an owner looking for that task's outcome after a
 * compaction still finds it in the RU as it is now. A freed value whose outcome is not a JSON
 * object is placed on without one. On etcd and on the embedded store; the cell is one RU.
 */
import { afterAll, describe, expect, inject, it } from 'vitest';
import { SchedulingAgent } from '../../src/agent/agent.ts';
import { Keys } from '../../src/state/keys.ts';
import { parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { releaseRu } from '../../src/state/release.ts';
import { findOutcome } from '../../src/state/ru-history.ts';
import { seedCluster, uniformServers } from '../../src/state/seed.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore, KeyValue } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { until } from '../support/until.ts';

const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of closers.reverse()) await c();
});

describe.each(['etcd', 'memory'] as const)('the next placement carries a freed RU outcome (%s)', (kind) => {
  it('copied by the agent, found after the history is compacted; an outcome that is not JSON is left out', async () => {
    const store: ClusterStore = await openStore(kind === 'memory' ? 'memory://' : inject('etcdEndpoint').replace('http://', 'etcd://'));
    closers.push(() => store.close());
    const keys = new Keys(`/prev-outcome-${kind}-${Date.now()}/`);
    await seedCluster(store, keys, uniformServers(1, 1));
    const agent = new SchedulingAgent({ id: 'a0', store, keys, clock: new SystemClock(), rng: new SeededRng(3), log: createLogger('test', 'silent') });
    closers.push(() => agent.close());
    await agent.start();
    const ruKey = (await store.range(keys.rus())).kvs[0]!.key;
    const ref = keys.parseRu(ruKey)!;
    const held = async (): Promise<{ rec: PlacedRuRecord; kv: KeyValue }> => {
      const kv = (await store.get(ruKey))!;
      return { rec: parseJson<PlacedRuRecord>(kv)!, kv };
    };

    const a = makeJob('a', TEST_PROFILES[0]!, 1);
    expect((await agent.submit(a)).placements).toHaveLength(1);
    const first = await held();
    expect(first.rec).toMatchObject({ state: 'busy', job: a.id });
    expect(first.rec.prev).toBeUndefined();
    expect(await releaseRu(store, keys, ref, first.kv.modRevision, first.rec, { state: 'succeeded', endedAt: 4242, exitCode: 0 })).toBe(true);
    await until('the agent seeing the RU free', () => agent.state.available.size === 1);

    const b = makeJob('b', TEST_PROFILES[0]!, 1);
    expect((await agent.submit(b)).placements).toHaveLength(1);
    const second = await held();
    expect(second.rec).toMatchObject({
      state: 'busy',
      job: b.id,
      prev: { job: a.id, index: 0, state: 'succeeded', endedAt: 4242, commitId: first.rec.commitId },
    });

    // The free is compacted out of the history: the RU as it is now still answers for a's task.
    await store.compact(await store.revision());
    await expect(store.getAt(ruKey, first.kv.modRevision)).rejects.toMatchObject({ code: 'COMPACTED' });
    const who = { job: a.id, task: 0, commitId: first.rec.commitId };
    expect(await findOutcome(store, keys, ref, who, first.kv.modRevision)).toEqual({
      kind: 'ended',
      rev: second.kv.modRevision,
      carried: true,
      last: expect.objectContaining({ job: a.id, index: 0, state: 'succeeded', endedAt: 4242 }) as unknown,
    });
    // Another attempt of the same task is not answered by it.
    expect(await findOutcome(store, keys, ref, { ...who, commitId: 'another' }, first.kv.modRevision)).toEqual({ kind: 'compacted' });

    // A freed value whose outcome does not parse (any process may write the RU): placed on, with no `prev`.
    expect(await releaseRu(store, keys, ref, second.kv.modRevision, second.rec, { state: 'succeeded', endedAt: 1 })).toBe(true);
    await store.put(ruKey, '{"state":"free","last":{"job":"x",oops}}');
    await until('the agent seeing the RU free again', () => agent.state.available.size === 1);
    const c = makeJob('c', TEST_PROFILES[0]!, 1);
    expect((await agent.submit(c)).placements).toHaveLength(1);
    const third = await held();
    expect(third.rec).toMatchObject({ state: 'busy', job: c.id });
    expect(third.rec.prev).toBeUndefined();
  });
});
