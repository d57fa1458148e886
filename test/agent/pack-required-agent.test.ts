/**
 * A required pack through the scheduling agent on etcd, where the live cell's tests do not reach:
 * a gang larger than one transaction reserves its chunks on one server, and a task placed again
 * after its RU was lost goes back on the server of the job's other tasks, not on an emptier one.
 * The cell: one server of 64 RUs and eight of 16.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { SchedulingAgent } from '../../src/agent/agent.ts';
import type { RuRecord, ServerSpec } from '../../src/model/types.ts';
import { Keys } from '../../src/state/keys.ts';
import { parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { releaseRu } from '../../src/state/release.ts';
import { seedCluster, uniformServers } from '../../src/state/seed.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { until } from '../support/until.ts';

const SERVERS: ServerSpec[] = [{ id: 'big', platform: 'r3-2xlarge', rack: 'r-big', rus: 64, speed: 1, attributes: {} }, ...uniformServers(8, 16)];
const job = makeJob('packed', TEST_PROFILES[0]!, 50, { mode: 'gang', locality: { mode: 'pack', scope: 'server', required: true } });

describe('a required pack through the agent (etcd)', () => {
  const keys = new Keys(`/pack-required-agent-${Date.now()}/`);
  let store: ClusterStore;
  let agent: SchedulingAgent;

  beforeAll(async () => {
    store = await openStore(inject('etcdEndpoint').replace('http://', 'etcd://'));
    await seedCluster(store, keys, SERVERS);
    agent = new SchedulingAgent({
      id: 'a0',
      store,
      keys,
      clock: new SystemClock(),
      rng: new SeededRng(5),
      log: createLogger('test', 'silent'),
      config: { recheckMs: 50 },
    });
    await agent.start();
  });
  afterAll(async () => {
    await agent?.close();
    await store?.close();
  });

  const busy = async (): Promise<{ rec: PlacedRuRecord; rev: number; server: string; index: number }[]> =>
    (await store.range(keys.rus())).kvs
      .map((kv) => ({ kv, rec: parseJson<RuRecord>(kv) }))
      .filter((x): x is { kv: typeof x.kv; rec: PlacedRuRecord } => x.rec?.state === 'busy' && (x.rec as PlacedRuRecord).job === job.id)
      .map(({ kv, rec }) => ({ rec, rev: kv.modRevision, ...keys.parseRu(kv.key)! }));

  it('a gang of 50 (two transactions of reservations) lands on the one server of 64', async () => {
    expect(agent.picksPerTxn).toBeLessThan(50);
    const rec = await agent.submit(job);
    expect(rec.placements).toHaveLength(50);
    const held = await busy();
    expect(held).toHaveLength(50);
    expect(new Set(held.map((h) => h.server))).toEqual(new Set(['big']));
  });

  it('a task placed again after its RU was lost goes back on the job server, though others are emptier', async () => {
    const held = await busy();
    // Two tasks end (as when their RU is lost): the RUs they held are free again.
    const gone = held.slice(0, 2);
    for (const g of gone)
      expect(await releaseRu(store, keys, { server: g.server, index: g.index }, g.rev, g.rec, { state: 'failed', endedAt: Date.now(), exitCode: 1 })).toBe(
        true,
      );
    await until('the agent seeing the two RUs free', () => agent.state.jobRus(job.id) === 48);
    const rec = await agent.schedule(
      job,
      gone.map((g) => g.rec.task),
    );
    expect(rec.placements).toHaveLength(2);
    expect(new Set(rec.placements.map((p) => p.ru.server))).toEqual(new Set(['big']));
  });
});
