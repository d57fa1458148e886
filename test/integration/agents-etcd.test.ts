import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SchedulingAgent, type ConflictScope, type DecisionRecord } from '../../src/agent/agent.ts';
import { lastOfFreedRu, parseJson, type PlacedRuRecord, type PlacedTaskRecord } from '../../src/state/records.ts';
import { seedCluster, uniformServers } from '../../src/state/seed.ts';
import type { RuRecord } from '../../src/model/types.ts';
import { SimulatedRunner } from '../../src/monitor/sim-runner.ts';
import { openStore } from '../../src/store/index.ts';
import { Keys } from '../../src/state/keys.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { startEtcd, type EtcdProcess } from '../support/etcd.ts';
import { history } from '../support/audit.ts';
import { makeJob, pool, TEST_PROFILES } from '../support/jobs.ts';
import { taskRecords } from '../support/task-records.ts';

/**
 * The scheduling core on a real etcd: three agents, each with its own client and cache, place
 * 1,200 tasks (150 jobs × 8) on 100 servers × 8 RUs while a runner completes tasks. The cluster is
 * driven near saturation so agents collide. Afterwards everything is audited from etcd itself,
 * including a replay of every RU write in the store's history.
 */
const SERVERS = 100;
const RUS = 8;
const JOBS = 150;
const TASKS = 8;

let etcd: EtcdProcess;
beforeAll(async () => {
  // A private etcd: the audit replays history from the start, so nothing may compact it.
  etcd = await startEtcd({ bin: process.env.TARCIL_TEST_ETCD_BIN });
});
afterAll(async () => {
  await etcd?.stop();
});

function etcdUrl(): string {
  return etcd.endpoint.replace('http://', 'etcd://');
}

async function runScenario(scope: ConflictScope): Promise<{
  records: DecisionRecord[];
  agents: SchedulingAgent[];
  keys: Keys;
  audit: ClusterStore;
  startRev: number;
  runner: SimulatedRunner;
  cleanup: () => Promise<void>;
}> {
  const keys = new Keys(`/it-${scope}-${Date.now()}/`);
  const clock = new SystemClock();
  const log = createLogger('test');
  const audit = await openStore(etcdUrl());
  await seedCluster(audit, keys, uniformServers(SERVERS, RUS));
  const startRev = await audit.revision();
  const stores = await Promise.all([0, 1, 2, 3].map(() => openStore(etcdUrl())));
  const agents = [0, 1, 2].map(
    (i) =>
      new SchedulingAgent({
        id: `agent-${i}`,
        store: stores[i] as ClusterStore,
        keys,
        clock,
        rng: new SeededRng(1000 + i),
        log,
        config: { conflictScope: scope, recheckMs: 50 },
      }),
  );
  await Promise.all(agents.map((a) => a.start()));
  const runner = new SimulatedRunner({
    store: stores[3] as ClusterStore,
    keys,
    clock,
    log,
    durationOf: (rec) => 150 + ((rec.task * 37 + rec.job.length * 11) % 150),
  });
  await runner.start();

  const jobs = Array.from({ length: JOBS }, (_, i) => makeJob(`j${String(i).padStart(4, '0')}`, TEST_PROFILES[i % TEST_PROFILES.length]!, TASKS));
  // Round-robin over agents, many jobs in flight per agent: demand exceeds capacity at times.
  const records = await pool(jobs, 96, (job, i) => agents[i % 3]!.schedule(job));

  const deadline = Date.now() + 60_000;
  while (runner.stats.completed < JOBS * TASKS && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));

  return {
    records,
    agents,
    keys,
    audit,
    startRev,
    runner,
    cleanup: async () => {
      await runner.close();
      await Promise.all(agents.map((a) => a.close()));
      await Promise.all(stores.map((s) => s.close()));
      await audit.close();
    },
  };
}

describe.each<ConflictScope>(['ru', 'server'])('three agents on a real etcd (%s conflict scope)', (scope) => {
  it('place 1,200 tasks exactly once, resolve conflicts, never double-book an RU', async () => {
    const s = await runScenario(scope);
    try {
      const { records, agents, keys, audit } = s;

      // 1. Every task of every job was placed exactly once, as far as the agents know.
      const placedBy = new Map<string, number>();
      for (const r of records) for (const p of r.placements) placedBy.set(`${r.job}#${p.task}`, (placedBy.get(`${r.job}#${p.task}`) ?? 0) + 1);
      expect(placedBy.size).toBe(JOBS * TASKS);
      expect([...placedBy.values()].every((n) => n === 1)).toBe(true);

      // 2. Conflicts happened and were resolved (every job still completed).
      const conflicts = agents.reduce((a, g) => a + g.stats.conflicts, 0);
      expect(conflicts).toBeGreaterThan(0);
      expect(records.reduce((a, r) => a + r.conflicts, 0)).toBe(conflicts);
      // Group commit was at work: some requests to etcd carried several decisions of one agent, so the
      // audit below covers commits made alone and commits made together.
      expect(agents.some((a) => (a.groupCommitStats?.largestGroup ?? 0) > 1)).toBe(true);

      // 3. etcd agrees: one task record per task (its placement's chunk). Their successes are
      //    in the freed RUs alone (no job owner runs here to record them): one each, below.
      expect(s.runner.stats.completed).toBe(JOBS * TASKS);
      const taskRecs = await taskRecords<PlacedTaskRecord>(audit, keys);
      expect(taskRecs.length).toBe(JOBS * TASKS);

      // 4. Replay of every RU write: an RU only becomes busy from free, each task is put on an
      //    RU exactly once, and every RU ends free.
      const events = await history(audit, keys.rus(), s.startRev + 1);
      const stateOf = new Map<string, string>();
      const busyPuts = new Map<string, number>();
      let doubleBookings = 0;
      for (const ev of events) {
        const rec = parseJson<PlacedRuRecord>(ev.kv);
        const prev = stateOf.get(ev.kv.key) ?? 'free';
        if (rec && rec.state === 'busy') {
          if (prev !== 'free') doubleBookings++;
          const id = `${rec.job}#${rec.task}`;
          busyPuts.set(id, (busyPuts.get(id) ?? 0) + 1);
        }
        stateOf.set(ev.kv.key, rec?.state ?? 'deleted');
      }
      expect(doubleBookings).toBe(0);
      const succeeded = new Map<string, number>();
      for (const ev of events) {
        const last = ev.type === 'put' ? lastOfFreedRu(ev.kv.value) : undefined;
        if (last?.state === 'succeeded')
          succeeded.set(`${String(last.job)}#${String(last.index)}`, (succeeded.get(`${String(last.job)}#${String(last.index)}`) ?? 0) + 1);
      }
      expect(succeeded.size).toBe(JOBS * TASKS);
      expect([...succeeded.values()].every((n) => n === 1)).toBe(true);
      expect(busyPuts.size).toBe(JOBS * TASKS);
      expect([...busyPuts.values()].every((n) => n === 1)).toBe(true);
      const final = await audit.range(keys.rus());
      expect(final.kvs.length).toBe(SERVERS * RUS);
      expect(final.kvs.every((kv) => parseJson<RuRecord>(kv)?.state === 'free')).toBe(true);

      // 5. Under the server scope, placements scored against the same server neighbourhood
      //    (same epoch revision) all belong to one transaction.
      if (scope === 'server') {
        const commitsPerNeighbourhood = new Map<string, Set<string>>();
        for (const t of taskRecs) {
          const key = `${t.ru.server}@${t.basedOn}`;
          let set = commitsPerNeighbourhood.get(key);
          if (!set) commitsPerNeighbourhood.set(key, (set = new Set()));
          set.add(t.commitId);
        }
        const shared = [...commitsPerNeighbourhood.values()].filter((set) => set.size > 1);
        expect(shared).toEqual([]);
      }
    } finally {
      await s.cleanup();
    }
  }, 180_000);
});
