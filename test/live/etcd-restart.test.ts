import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import type { MonitorProcess } from '../../src/node/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { openStore } from '../../src/store/index.ts';
import { Keys } from '../../src/state/keys.ts';
import { isFreeRuValue } from '../../src/state/records.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { audit, waitAllFinal } from '../support/audit.ts';
import { startEtcd, type RestartableEtcdProcess } from '../support/etcd.ts';
import { startSimulatedMonitors, submit } from '../support/live.ts';
import { tcpProxy, type TcpProxy } from '../support/proxy.ts';

/**
 * Issue 3 §5: etcd restarts, or stops answering for a moment, while jobs run. A front-end with
 * two agents and three monitors, each component on its own etcd connection as separate processes
 * would be, through a TCP proxy. The network is cut for 2 s (etcd keeps running), then etcd is
 * paused (SIGSTOP), both shorter than the lease TTL, then restarted (SIGTERM, same port and data
 * dir), first quickly, then after more than a TTL. Everything must reconnect and resume, and etcd's history must show every
 * job finished once, no task run twice at once, no RU double-booked, nothing orphaned.
 */
const TTL = 5;
const PROFILES = ['spark-lr', 'hadoop-map', 'memcached', 'tpch-scan'];
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

let etcd: RestartableEtcdProcess;
const stores: ClusterStore[] = [];
let sched: SchedulerProcess | undefined;
const monitors: MonitorProcess[] = [];
let client: SchedulerClient | undefined;
let proxy: TcpProxy | undefined;

beforeAll(async () => {
  etcd = await startEtcd({ bin: process.env.TARCIL_TEST_ETCD_BIN });
});
afterAll(async () => {
  client?.close();
  await sched?.close().catch(() => undefined);
  await Promise.all(monitors.map((m) => m.close().catch(() => undefined)));
  await Promise.all(stores.map((s) => s.close()));
  await proxy?.close();
  await etcd?.stop();
});

describe('etcd restart and a brief partition', () => {
  it('agents and monitors reconnect and resume; every job finishes once; the audit is clean', async () => {
    // Components reach etcd through a proxy that can cut the network; the audit goes direct.
    proxy = await tcpProxy(etcd.clientPort);
    const url = `etcd://127.0.0.1:${proxy.port}`;
    const direct = etcd.endpoint.replace('http://', 'etcd://');
    const keys = new Keys(`/restart-${Date.now()}/`);
    const clock = new SystemClock();
    const log = createLogger('etcd-restart');
    const connect = async (to = url): Promise<ClusterStore> => {
      const s = await openStore(to);
      stores.push(s);
      return s;
    };
    const auditStore = await connect(direct);
    const startRev = await auditStore.revision();
    await startSimulatedMonitors(3, { connect: () => connect(), keys, clock, log, leaseTtlSeconds: TTL, into: monitors });
    sched = await startScheduler({
      name: 'fe',
      store: await connect(),
      keys,
      catalog: loadCatalog(),
      clock,
      rng: new SeededRng(11),
      log,
      agents: 2,
      host: '127.0.0.1',
      port: 0,
      leaseTtlSeconds: TTL,
    });
    client = schedulerClient(`127.0.0.1:${sched.port}`);
    const c = client;

    const acked: string[] = [];
    let refused = 0;
    let n = 0;
    const inflight: Promise<void>[] = [];
    const submitSome = (count: number): void => {
      for (let j = 0; j < count; j++) {
        const i = n++;
        const spec = { name: `r-${i}`, profile: PROFILES[i % PROFILES.length], tasks: 1 + (i % 3), durationMs: 400 + ((i * 53) % 900), maxQueueMs: 1000 };
        inflight.push(
          submit(c, { specJson: JSON.stringify(spec) }, 3000).then(
            (r) => void acked.push(r.jobId),
            () => void refused++,
          ),
        );
      }
    };

    submitSome(12);
    await sleep(700);
    const startedBefore = monitors.reduce((a, m) => a + m.monitor.stats.started, 0);
    expect(startedBefore).toBeGreaterThan(0);
    // A steady trickle of submissions across both disruptions: some land while etcd is away, and
    // some transactions are cut off mid-flight (stored, but the answer lost).
    let trickle = true;
    const trickling = (async (): Promise<void> => {
      while (trickle) {
        submitSome(1);
        await sleep(150);
      }
    })();

    // 1. A network partition shorter than the lease TTL: etcd keeps running, nothing gets through.
    proxy.partition();
    await sleep(2000);
    proxy.heal();
    await sleep(2000);

    // 2. etcd itself stops answering for a moment (SIGSTOP), also under the TTL.
    etcd.pause();
    await sleep(2000);
    etcd.resume();
    await sleep(1500);

    // Both were shorter than the lease TTL: no lease was given up, no task killed for it.
    const leaseBefore = sched.manager.leaseId;
    const fences = (): number => (sched?.manager.stats.fencedLeases ?? 0) + monitors.reduce((a, m) => a + m.monitor.stats.fenced, 0);
    expect(fences()).toBe(0);

    // 3. A restart on the same port and data: connections break, leases survive in the data dir.
    await etcd.restart({ downMs: 1500 });
    await sleep(2500);

    // 4. etcd away for longer than the TTL: every holder stops acting under its lease before
    //    anyone else could take over. etcd keeps the leases over its restart, so each holder takes
    //    up its work again under the same lease: the front-end keeps its jobs.
    await etcd.restart({ downMs: (TTL + 1) * 1000 });
    await sleep(1500);
    trickle = false;
    await trickling;
    const startedMid = monitors.reduce((a, m) => a + m.monitor.stats.started, 0);
    submitSome(12);
    await Promise.all(inflight);
    expect(acked.length).toBeGreaterThanOrEqual(24);

    const pending = await waitAllFinal(auditStore, keys, acked, 40_000);
    if (pending.length > 0) {
      const dump = await Promise.all(
        pending.map(async (id) => {
          const [job, tasks, owner] = await Promise.all([auditStore.get(keys.job(id)), auditStore.range(keys.tasks(id)), auditStore.get(keys.owner(id))]);
          return { job: job?.value, owner: owner?.value, ownerLease: owner?.lease, tasks: tasks.kvs.map((kv) => kv.value) };
        }),
      );
      const rus = await auditStore.range(keys.rus());
      process.stdout.write(
        `[etcd-restart] stuck:\n${JSON.stringify(dump, null, 1)}\nRUs: ${rus.kvs.map((kv) => `${kv.key}=${kv.value}`).join('\n')}\nscheduler lease ${sched.manager.leaseId}, owned ${sched.manager.ownedJobs().join(',')}\n`,
      );
    }
    expect(pending, `jobs not final`).toEqual([]);
    // Monitors resumed: tasks of jobs submitted after the restart ran on them.
    expect(monitors.reduce((a, m) => a + m.monitor.stats.started, 0)).toBeGreaterThan(startedMid);
    // The long outage left every lease unconfirmed for a while: the front-end paused its jobs and
    // the monitors went unconfirmed; the front-end's lease was never given up, so no job changed
    // owner (jobs taken up under its own lease are those whose submission answer was lost).
    expect(sched.manager.stats.leasePauses).toBeGreaterThan(0);
    expect(sched.manager.stats.fencedLeases).toBe(0);
    expect(sched.manager.leaseId).toBe(leaseBefore);
    for (const m of monitors) expect(m.monitor.stats.fenced).toBeGreaterThan(0);
    await sleep(300);

    const f = await audit(auditStore, keys, startRev);
    for (const id of acked) {
      expect(f.states.get(id)?.state, id).toBe('succeeded');
      expect(f.finals.get(id), id).toBe(1);
    }
    // A job persisted whose acknowledgement the client never saw must have finished too.
    for (const [id, j] of f.states) expect(j.state, id).toBe('succeeded');
    for (const [id, count] of f.finals) expect(count, id).toBe(1);
    expect(f.tasks.filter((t) => t.state !== 'succeeded')).toEqual([]);
    expect(f.doubleBooked).toBe(0);
    expect(f.heldTwice).toBe(0);
    expect(f.overlappingRuns).toBe(0);
    expect(f.orphanOwners).toEqual([]);
    expect(f.orphanQueue).toEqual([]);
    expect(f.orphanRus).toEqual([]);
    expect(f.strayRus).toEqual([]);
    // Every monitor is still registered (or registered again) and all 12 RUs are free.
    const [servers, rus] = await Promise.all([auditStore.range(keys.servers()), auditStore.range(keys.rus())]);
    expect(servers.kvs.length).toBe(3);
    expect(rus.kvs.map((kv) => kv.value).filter((v) => !isFreeRuValue(v))).toEqual([]);
    expect(rus.kvs.length).toBe(12);
    process.stdout.write(
      `[etcd-restart] acked ${acked.length}, refused ${refused}, stored ${f.states.size}; lease pauses / fences: scheduler ${sched.manager.stats.leasePauses} / ${sched.manager.stats.fencedLeases}, monitors ${monitors.map((m) => m.monitor.stats.fenced).join('/')}\n`,
    );
  }, 90_000);
});
