/**
 * The RU quota under racing placements: three front-ends, each on its own connection to one etcd
 * with three agents, flood one namespace (quota 6 RUs) with short jobs on a cell of 32 RUs. The
 * etcd history of the RU keys, replayed revision by revision, must never show the namespace
 * holding more than 6 RUs; every job must finish, and every allotment be given back.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { Keys } from '../../src/state/keys.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore, WatchBatch } from '../../src/store/types.ts';
import { parseUsage } from '../../src/tenancy/quota.ts';
import { putNamespace } from '../../src/tenancy/namespaces.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { submit, waitFinal } from '../support/live.ts';

const clock = new SystemClock();
const log = createLogger('quota-race', 'silent');
const NS = 'flood';
const QUOTA = 6;
const FRONTENDS = 3;
const JOBS_PER_FRONTEND = 20;

describe('namespace RU quota under racing front-ends (etcd)', () => {
  const keys = new Keys(`/quota-race-${Date.now()}/`);
  const endpoint = (): string => inject('etcdEndpoint').replace('http://', 'etcd://');
  let nodeStore: ClusterStore;
  const stores: ClusterStore[] = [];
  const scheds: SchedulerProcess[] = [];
  const clients: SchedulerClient[] = [];
  let monitors: MonitorProcess[] = [];

  beforeAll(async () => {
    nodeStore = await openStore(endpoint());
    monitors = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        startMonitor({
          store: nodeStore,
          keys,
          clock,
          log,
          server: { id: `n${i}`, platform: 'r3-2xlarge', rack: `r${i % 2}`, rus: 4, speed: 1, attributes: {} },
          executor: 'simulated',
          host: '127.0.0.1',
          port: 0,
          leaseTtlSeconds: 5,
        }),
      ),
    );
    for (let f = 0; f < FRONTENDS; f++) {
      const store = await openStore(endpoint());
      stores.push(store);
      const s = await startScheduler({
        name: `fe${f}`,
        store,
        keys,
        catalog: loadCatalog(),
        clock,
        rng: new SeededRng(11 + f),
        log,
        agents: 3,
        host: '127.0.0.1',
        port: 0,
        leaseTtlSeconds: 5,
        housekeeping: false,
        agentConfig: { recheckMs: 200 },
      });
      scheds.push(s);
      clients.push(schedulerClient(`127.0.0.1:${s.port}`));
    }
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    for (const s of scheds) await s.close();
    for (const m of monitors) await m.close();
    for (const s of stores) await s.close();
    await nodeStore?.close();
  });

  it(`never holds more than ${QUOTA} RUs at any revision, and every job finishes`, async () => {
    await putNamespace(nodeStore, keys, NS, { maxRus: QUOTA }, Date.now());
    const start = await nodeStore.range(keys.rus());
    expect(start.kvs.length).toBe(32);

    // Follow the RU keys revision by revision from the revision the cell was read at (etcd's
    // event history, in order), folding every batch into the RUs held at that revision.
    const state = new Map(start.kvs.map((kv) => [kv.key, kv.value]));
    const heldNow = (): number => {
      let n = 0;
      for (const v of state.values()) {
        if (v === '') continue;
        const r = JSON.parse(v) as { state?: string; job?: string };
        if ((r.state === 'busy' || r.state === 'reserved') && r.job?.startsWith(`${NS}/`)) n++;
      }
      return n;
    };
    let most = 0;
    let worst = 0;
    let placements = 0;
    let seen = start.revision;
    let failed: Error | undefined;
    const watch = await nodeStore.watch({
      prefix: keys.rus(),
      fromRevision: start.revision + 1,
      onEvents: (b: WatchBatch) => {
        for (const e of b.events) {
          if (e.type === 'delete') state.delete(e.kv.key);
          else {
            const r = JSON.parse(e.kv.value) as { state?: string; job?: string };
            if (r.state === 'busy' && r.job?.startsWith(`${NS}/`) && state.get(e.kv.key) !== e.kv.value) placements++;
            state.set(e.kv.key, e.kv.value);
          }
        }
        const h = heldNow();
        if (h > most) {
          most = h;
          worst = b.revision;
        }
        seen = b.revision;
      },
      onError: (err) => (failed = err),
    });

    const rng = new SeededRng(99);
    const submissions = clients.flatMap((c, f) =>
      Array.from({ length: JOBS_PER_FRONTEND }, (_, i) => {
        const tasks = 1 + Math.floor(rng.next() * 3);
        const durationMs = 100 + Math.floor(rng.next() * 150);
        return submit(c, { specJson: JSON.stringify({ name: `f${f}-${i}`, profile: 'spark-lr', tasks, durationMs }), namespace: NS }).then((r) => ({
          c,
          id: r.jobId,
          tasks,
        }));
      }),
    );
    const jobs = await Promise.all(submissions);
    for (const j of jobs) expect((await waitFinal(j.c, j.id, 45_000)).state).toBe('succeeded');
    const totalTasks = jobs.reduce((a, j) => a + j.tasks, 0);
    // Every change of an RU up to now delivered.
    const end = await nodeStore.range(keys.rus());
    const lastChange = Math.max(...end.kvs.map((kv) => kv.modRevision));
    for (const t0 = Date.now(); seen < lastChange && !failed; await new Promise((r) => setTimeout(r, 20)))
      if (Date.now() - t0 > 10_000) throw new Error(`the watch stopped at revision ${seen}, before ${lastChange}`);
    await watch.close();
    expect(failed).toBeUndefined();

    expect(most, `${most} RUs held at revision ${worst}`).toBeLessThanOrEqual(QUOTA);
    // The flood did fill the quota (else the check above proves nothing) and placed every task.
    expect(most).toBeGreaterThanOrEqual(QUOTA - 1);
    expect(placements).toBeGreaterThanOrEqual(totalTasks);
    // Every allotment was given back.
    const usage = parseUsage(await nodeStore.get(keys.usage(NS)));
    expect(usage).toEqual({ total: 0, jobs: {} });
  }, 60_000);
});
