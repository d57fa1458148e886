/**
 * A job of a namespace with an RU quota whose owner goes away: the front-end that takes it up
 * recomputes the job's allotment from its live tasks (a token of a placement that ended unseen is
 * dropped, a live placement missing one is counted), then gives it back as the tasks end.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { Keys } from '../../src/state/keys.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { putNamespace } from '../../src/tenancy/namespaces.ts';
import { parseUsage, quotaToken } from '../../src/tenancy/quota.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { submit, waitFinal } from '../support/live.ts';
import { taskRecords } from '../support/task-records.ts';

const clock = new SystemClock();
const log = createLogger('quota-adopt', 'silent');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('quota allotment across an adoption (etcd)', () => {
  const keys = new Keys(`/quota-adopt-${Date.now()}/`);
  const endpoint = (): string => inject('etcdEndpoint').replace('http://', 'etcd://');
  let nodeStore: ClusterStore;
  let storeA: ClusterStore;
  let storeB: ClusterStore;
  let a: SchedulerProcess | undefined;
  let b: SchedulerProcess | undefined;
  let ca: SchedulerClient | undefined;
  let cb: SchedulerClient | undefined;
  let monitor: MonitorProcess;

  const start = (name: string, store: ClusterStore, seed: number): Promise<SchedulerProcess> =>
    startScheduler({
      name,
      store,
      keys,
      catalog: loadCatalog(),
      clock,
      rng: new SeededRng(seed),
      log,
      agents: 1,
      host: '127.0.0.1',
      port: 0,
      leaseTtlSeconds: 2,
      housekeeping: false,
      agentConfig: { recheckMs: 200 },
    });

  beforeAll(async () => {
    nodeStore = await openStore(endpoint());
    storeA = await openStore(endpoint());
    storeB = await openStore(endpoint());
    monitor = await startMonitor({
      store: nodeStore,
      keys,
      clock,
      log,
      server: { id: 's0', platform: 'r3-2xlarge', rack: 'r0', rus: 4, speed: 1, attributes: {} },
      executor: 'simulated',
      host: '127.0.0.1',
      port: 0,
      leaseTtlSeconds: 5,
    });
  });
  afterAll(async () => {
    ca?.close();
    cb?.close();
    await a?.close();
    await b?.close();
    await monitor?.close();
    for (const s of [storeA, storeB, nodeStore]) await s?.close();
  });

  it('the new owner recomputes the job tokens from its live tasks and gives them back at the end', async () => {
    await putNamespace(nodeStore, keys, 'qa', { maxRus: 3 }, Date.now());
    a = await start('fe-a', storeA, 1);
    ca = schedulerClient(`127.0.0.1:${a.port}`);
    const job = await submit(ca, { specJson: JSON.stringify({ name: 'held', profile: 'spark-lr', tasks: 3, durationMs: 7000 }), namespace: 'qa' });
    const liveTokens = async (): Promise<string[]> =>
      (await taskRecords(nodeStore, keys, job.jobId))
        .filter((t) => t.state === 'placed' || t.state === 'running')
        .map((t) => quotaToken(t.index, t.commitId ?? ''))
        .sort();
    for (const t0 = Date.now(); (await liveTokens()).length < 3; await sleep(50)) if (Date.now() - t0 > 10_000) throw new Error('the job did not start');
    const live = await liveTokens();
    expect(parseUsage(await nodeStore.get(keys.usage('qa')))).toEqual({ total: 3, jobs: { [job.jobId]: live } });

    // The owner goes away; while nobody owns the job, its allotment is made wrong both ways: a
    // token of a placement that no longer exists, and a live placement without its token.
    ca.close();
    ca = undefined;
    await a.close();
    a = undefined;
    const wrong = [live[0] as string, live[1] as string, '7/gone:1'];
    await nodeStore.put(keys.usage('qa'), JSON.stringify({ total: 3, jobs: { [job.jobId]: wrong } }));

    b = await start('fe-b', storeB, 2);
    cb = schedulerClient(`127.0.0.1:${b.port}`);
    const client = cb;
    let usage = parseUsage(undefined);
    for (const t0 = Date.now(); Date.now() - t0 < 10_000; await sleep(50)) {
      usage = parseUsage(await nodeStore.get(keys.usage('qa')));
      if (!(usage.jobs[job.jobId] ?? []).includes('7/gone:1')) break;
    }
    expect(b.manager.stats.adopted).toBe(1);
    // Recomputed from the live tasks while they still run: the stale token gone, the missing one back.
    expect([...(usage.jobs[job.jobId] ?? [])].sort()).toEqual(live);
    expect(usage.total).toBe(3);
    expect(await liveTokens()).toEqual(live);
    expect((await waitFinal(client, job.jobId, 25_000)).state).toBe('succeeded');
    expect(parseUsage(await nodeStore.get(keys.usage('qa')))).toEqual({ total: 0, jobs: {} });
  }, 45_000);
});
