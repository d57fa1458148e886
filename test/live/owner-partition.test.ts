import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import type { MonitorProcess } from '../../src/node/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { openStore } from '../../src/store/index.ts';
import { Keys } from '../../src/state/keys.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { audit, waitAllFinal } from '../support/audit.ts';
import { startEtcd, type RestartableEtcdProcess } from '../support/etcd.ts';
import { startSimulatedMonitors, submit } from '../support/live.ts';
import { tcpProxy, type TcpProxy } from '../support/proxy.ts';

/**
 * An owner that cannot confirm its lease pauses its jobs and keeps them (an etcd restart keeps
 * leases: see etcd-restart.test.ts). Here etcd keeps running while one front-end is cut off from
 * it for longer than its lease TTL: etcd expires the lease, the other front-end adopts the jobs,
 * and when the network heals the cut-off front-end learns that its lease is gone, gives the jobs
 * up without writing anything for them, and takes a new lease. Every job finishes once.
 */
const TTL = 3;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

let etcd: RestartableEtcdProcess;
const stores: ClusterStore[] = [];
const scheds: SchedulerProcess[] = [];
const monitors: MonitorProcess[] = [];
const clients: SchedulerClient[] = [];
const proxies: TcpProxy[] = [];

beforeAll(async () => {
  etcd = await startEtcd({ bin: process.env.TARCIL_TEST_ETCD_BIN });
});
afterAll(async () => {
  for (const c of clients) c.close();
  await Promise.all(scheds.map((s) => s.close().catch(() => undefined)));
  await Promise.all(monitors.map((m) => m.close().catch(() => undefined)));
  await Promise.all(stores.map((s) => s.close()));
  await Promise.all(proxies.map((p) => p.close()));
  await etcd?.stop();
});

describe('a front-end cut off from etcd past its lease TTL', () => {
  it('pauses, loses its lease, and its jobs finish once under the other front-end', async () => {
    const keys = new Keys(`/owner-partition-${Date.now()}/`);
    const clock = new SystemClock();
    const log = createLogger('owner-partition');
    const direct = etcd.endpoint.replace('http://', 'etcd://');
    const connect = async (url = direct): Promise<ClusterStore> => {
      const s = await openStore(url);
      stores.push(s);
      return s;
    };
    const auditStore = await connect();
    const startRev = await auditStore.revision();
    await startSimulatedMonitors(2, { connect: () => connect(), keys, clock, log, leaseTtlSeconds: TTL, into: monitors });
    // fe0 reaches etcd through a proxy that can cut it off; fe1 goes direct.
    const proxy = await tcpProxy(etcd.clientPort);
    proxies.push(proxy);
    for (let i = 0; i < 2; i++) {
      const s = await startScheduler({
        name: `fe${i}`,
        store: await connect(i === 0 ? `etcd://127.0.0.1:${proxy.port}` : direct),
        keys,
        catalog: loadCatalog(),
        clock,
        rng: new SeededRng(20 + i),
        log,
        agents: 2,
        host: '127.0.0.1',
        port: 0,
        leaseTtlSeconds: TTL,
      });
      scheds.push(s);
      clients.push(schedulerClient(`127.0.0.1:${s.port}`));
    }
    const [fe0, fe1] = scheds as [SchedulerProcess, SchedulerProcess];
    const [c0] = clients as [SchedulerClient];

    // Jobs owned by fe0, long enough to be running when it is cut off: 16 tasks on 8 RUs.
    const acked: string[] = [];
    for (let i = 0; i < 8; i++) {
      const r = await submit(c0, { specJson: JSON.stringify({ name: `p-${i}`, profile: 'memcached', tasks: 2, durationMs: 2500 + i * 200 }) });
      acked.push(r.jobId);
    }
    await sleep(500);
    expect(fe0.manager.ownedJobs().length).toBeGreaterThan(0);
    const leaseBefore = fe0.manager.leaseId;

    proxy.partition();
    // Past the TTL: fe0 pauses first (it cannot confirm its lease), then etcd expires the lease
    // and fe1 adopts what fe0 owned.
    await sleep(TTL * 1000 + 3000);
    expect(fe0.manager.stats.leasePauses).toBeGreaterThan(0);
    expect(fe0.manager.stats.fencedLeases).toBe(0);
    expect(fe1.manager.stats.adopted).toBeGreaterThan(0);
    proxy.heal();

    const pending = await waitAllFinal(auditStore, keys, acked, 40_000);
    expect(pending, 'jobs not final').toEqual([]);
    // Back in touch, fe0 heard that its lease was gone: it gave its jobs up and took a new lease.
    for (let i = 0; i < 50 && fe0.manager.stats.fencedLeases === 0; i++) await sleep(100);
    expect(fe0.manager.stats.fencedLeases).toBe(1);
    expect(fe0.manager.leaseId).not.toBe(leaseBefore);
    expect(fe0.manager.ownedJobs()).toEqual([]);
    await sleep(300);

    const f = await audit(auditStore, keys, startRev);
    for (const id of acked) {
      expect(f.states.get(id)?.state, id).toBe('succeeded');
      expect(f.finals.get(id), id).toBe(1);
    }
    expect(f.doubleBooked).toBe(0);
    expect(f.heldTwice).toBe(0);
    expect(f.overlappingRuns).toBe(0);
    expect(f.orphanOwners).toEqual([]);
    expect(f.orphanRus).toEqual([]);
    expect(f.strayRus).toEqual([]);
  }, 90_000);
});
