import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type * as grpc from '@grpc/grpc-js';
import { expandCluster, loadCatalog, resolveCluster, scaleCluster } from '../../src/model/catalog.ts';
import type { ServerSpec } from '../../src/model/types.ts';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { Job__Output } from '../../src/rpc/gen/tarcil/v1/Job.ts';
import { simulateDeaths, startHollow, type HollowProcess } from '../../src/node/hollow.ts';
import { GrpcNodeLink } from '../../src/frontend/node-link.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor } from '../../src/node/runtime.ts';
import { FREE_RU_VALUE, isFreeRuValue, parseJson } from '../../src/state/records.ts';
import type { LiveServerRecord, LiveTaskRecord } from '../../src/state/live-records.ts';
import { Keys } from '../../src/state/keys.ts';
import { openStore } from '../../src/store/index.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { submit, waitFinal } from '../support/live.ts';
import { wrapStore } from '../support/wrap-store.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { until as pollUntil } from '../support/until.ts';
import { JobManager } from '../../src/owner/manager.ts';
import { HollowNodes } from '../../src/monitor/hollow.ts';
import { parseJobSpec } from '../../src/model/catalog.ts';
import { taskRecords } from '../support/task-records.ts';

/**
 * Hollow nodes on the suite's real etcd, used by a real front-end over gRPC: 120 nodes of the
 * heterogeneous hetero-400 cell (scaled) in one process under one lease, one watch, one
 * NodeMonitor endpoint.
 */
const NODES = 120;
const GRACE_MS = 1000;
const clock = new SystemClock();
const log = createLogger('test', 'warn');
const catalog = loadCatalog();
const servers: ServerSpec[] = expandCluster(scaleCluster(resolveCluster('hetero-400', catalog), NODES), catalog.platforms);
const keys = new Keys(`/hollow-${Date.now()}/`);
let store: ClusterStore;
let hollow: HollowProcess;
let sched: SchedulerProcess;
let c: SchedulerClient;

beforeAll(async () => {
  store = await openStore(inject('etcdEndpoint').replace('http://', 'etcd://'));
  hollow = await startHollow({
    store,
    keys,
    clock,
    log,
    servers,
    host: '127.0.0.1',
    port: 0,
    leaseTtlSeconds: 5,
    disconnectGraceMs: GRACE_MS,
    rng: new SeededRng(5),
  });
  sched = await startScheduler({ name: 'hollow-fe', store, keys, catalog, clock, rng: new SeededRng(9), log, agents: 2, host: '127.0.0.1', port: 0 });
  c = schedulerClient(`127.0.0.1:${sched.port}`);
});
afterAll(async () => {
  c?.close();
  await sched?.close();
  await hollow?.close();
  await store?.delete(keys.prefix, { prefix: true });
  await store?.close();
});

const until = (what: string, cond: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> => pollUntil(what, cond, ms, 50);

const tasksOf = async (job: string): Promise<LiveTaskRecord[]> => await taskRecords<LiveTaskRecord>(store, keys, job);

async function submitAll(specs: Record<string, unknown>[]): Promise<string[]> {
  return Promise.all(specs.map(async (s) => (await submit(c, { specJson: JSON.stringify(s) })).jobId));
}

describe('hollow nodes', () => {
  it('registers every node of the cluster spec, with its platform, rack and attributes, under one lease and one endpoint', async () => {
    expect(new Set(servers.map((s) => s.platform)).size).toBeGreaterThan(5);
    const recs = (await store.range(keys.servers())).kvs;
    expect(recs).toHaveLength(NODES);
    const lease = hollow.hollow.leaseId;
    const endpoint = `127.0.0.1:${hollow.port}`;
    const byId = new Map(servers.map((s) => [s.id, s]));
    for (const kv of recs) {
      const rec = parseJson<LiveServerRecord>(kv);
      const spec = byId.get(rec?.id ?? '');
      expect(spec, kv.key).toBeDefined();
      expect(rec).toMatchObject({
        platform: spec?.platform,
        rack: spec?.rack,
        rus: spec?.rus,
        attributes: spec?.attributes,
        state: 'up',
        endpoint,
        executor: 'simulated',
        disconnectGraceMs: GRACE_MS,
      });
      expect(kv.lease).toBe(lease);
    }
    const rus = (await store.range(keys.rus())).kvs;
    expect(rus).toHaveLength(servers.reduce((n, s) => n + s.rus, 0));
    expect(rus.every((kv) => kv.value === FREE_RU_VALUE && kv.lease === lease)).toBe(true);
    expect(hollow.hollow.snapshot()).toMatchObject({ live: NODES, dead: 0, connected: true, stats: { registrations: NODES } });
  });

  it('a registration cut short by a store timeout keeps the nodes it registered and registers only the others again', async () => {
    const k = new Keys(`/hollow-partial-${Date.now()}/`);
    const some = servers.slice(0, 60);
    let calls = 0;
    let registrations = 0;
    const registered = new Set<string>();
    // The third request of the batched registration times out (and is not applied).
    // Requests of at most 24 operations, so the registration takes several.
    const flaky: ClusterStore = Object.assign(
      wrapStore(store, {
        txns: async (reqs) => {
          if (++calls === 3) throw new TarcilError('DEADLINE_EXCEEDED', 'txn: deadline exceeded (injected)');
          const res = await store.txns(reqs);
          reqs.forEach((r, i) => {
            if (!res[i]?.succeeded) return;
            for (const op of r.success) {
              if (op.type === 'put' && op.key.startsWith(k.epochs()) && op.value.startsWith('register:')) {
                registrations++;
                registered.add(op.value.slice('register:'.length));
              }
            }
          });
          return res;
        },
      }),
      { maxTxnOps: 24 },
    );
    const h = await startHollow({
      store: flaky,
      keys: k,
      clock,
      log,
      servers: some,
      host: '127.0.0.1',
      port: 0,
      leaseTtlSeconds: 5,
      disconnectGraceMs: GRACE_MS,
      rng: new SeededRng(6),
    });
    try {
      expect(calls).toBeGreaterThan(3);
      expect(registered.size).toBe(some.length);
      // Each node's registration transaction was applied once: the retry did not start over.
      expect(registrations).toBe(some.length);
      const recs = (await store.range(k.servers())).kvs;
      expect(recs).toHaveLength(some.length);
      expect(new Set(recs.map((kv) => kv.lease))).toEqual(new Set([h.hollow.leaseId]));
    } finally {
      await h.close();
      await store.delete(k.prefix, { prefix: true });
    }
  });

  it('routes NodeMonitor calls by server id: a hollow node answers for itself, an unknown or missing id is refused', async () => {
    const link = new GrpcNodeLink();
    const endpoint = `127.0.0.1:${hollow.port}`;
    const id = servers[3]?.id ?? '';
    try {
      await expect(link.launch(endpoint, { server: id, job: 'nope', task: 0, ruIndex: 0, revision: 1 })).resolves.toBeUndefined();
      expect(await link.kill(endpoint, { server: id, job: 'nope', task: 0, reason: 'cancelled' })).toBe(false);
      await expect(link.launch(endpoint, { server: 'no-such', job: 'x', task: 0, ruIndex: 0, revision: 1 })).rejects.toMatchObject({ code: 5 });
      await expect(link.launch(endpoint, { server: '', job: 'x', task: 0, ruIndex: 0, revision: 1 })).rejects.toMatchObject({
        code: 3,
        details: expect.stringContaining('server') as unknown,
      });
      await expect(link.launch(endpoint, { server: id, job: 'x', task: 0, ruIndex: 999, revision: 1 })).rejects.toMatchObject({ code: 3 });
    } finally {
      link.close();
    }
  });

  it('a single-node monitor refuses a request for another server and takes one that names it or none', async () => {
    const mem = new MemoryStore();
    const mon = await startMonitor({
      store: mem,
      keys: new Keys('/solo/'),
      clock,
      log,
      server: { id: 'solo', platform: 'r3-xlarge', rack: 'r0', rus: 2, speed: 1, attributes: {} },
      executor: 'simulated',
      host: '127.0.0.1',
      port: 0,
    });
    const link = new GrpcNodeLink();
    const endpoint = `127.0.0.1:${mon.port}`;
    try {
      const err = (await link.launch(endpoint, { server: 'other', job: 'j', task: 0, ruIndex: 0, revision: 1 }).catch((e: unknown) => e)) as grpc.ServiceError;
      expect(err.code).toBe(9); // FAILED_PRECONDITION
      expect(err.details).toContain("serves server 'solo', not 'other'");
      await expect(link.kill(endpoint, { server: 'other', job: 'j', task: 0, reason: 'cancelled' })).rejects.toMatchObject({ code: 9 });
      await expect(link.launch(endpoint, { server: 'solo', job: 'j', task: 0, ruIndex: 0, revision: 1 })).resolves.toBeUndefined();
      await expect(link.launch(endpoint, { server: '', job: 'j', task: 0, ruIndex: 0, revision: 1 })).resolves.toBeUndefined();
    } finally {
      link.close();
      await mon.close();
      await mem.close();
    }
  });

  it('runs jobs a real front-end places on hollow nodes for their duration, honouring attributes, and frees every RU', async () => {
    const specs = [
      ...Array.from({ length: 8 }, (_, i) => ({
        name: `h${i}`,
        profile: ['spark-lr', 'memcached', 'hadoop-map', 'spec-mcf'][i % 4],
        tasks: 25,
        durationMs: 300,
      })),
      { name: 'no-ssd', profile: 'spark-lr', tasks: 10, durationMs: 300, constraints: { attributes: { ssd: 'false' } } },
    ];
    const ids = await submitAll(specs);
    const jobs: Job__Output[] = await Promise.all(ids.map((id) => waitFinal(c, id, 30_000)));
    expect(jobs.map((j) => j.state)).toEqual(ids.map(() => 'succeeded'));
    const hosts = new Set(servers.map((s) => s.id));
    const noSsd = new Set(servers.filter((s) => s.attributes.ssd === 'false').map((s) => s.id));
    const used = new Set<string>();
    for (const [i, id] of ids.entries()) {
      const tasks = await tasksOf(id);
      expect(tasks).toHaveLength(specs[i]?.tasks ?? -1);
      for (const t of tasks) {
        expect(t.state).toBe('succeeded');
        expect(hosts.has(t.ru?.server ?? '')).toBe(true);
        expect(t.server).toBe(t.ru?.server);
        // Ran for at least its duration (the interference slowdown only stretches it).
        expect((t.endedAt ?? 0) - (t.startedAt ?? 0)).toBeGreaterThanOrEqual(290);
        if (specs[i]?.name === 'no-ssd') expect(noSsd.has(t.ru?.server ?? '')).toBe(true);
        used.add(t.ru?.server ?? '');
      }
    }
    expect(used.size).toBeGreaterThan(20);
    const snap = hollow.hollow.snapshot();
    expect(snap.stats.completed).toBeGreaterThanOrEqual(210);
    // Each start and each outcome is a transaction of its own node; those written at the same
    // moment left together, in fewer requests.
    expect(snap.writes.transactions).toBeGreaterThanOrEqual(2 * 210);
    expect(snap.writes.requests).toBeLessThan(snap.writes.transactions);
    await until('every RU free again', async () => (await store.range(keys.rus())).kvs.every((kv) => isFreeRuValue(kv.value)));
  });

  it('dropped nodes leave the cell as a dead monitor does, and their tasks are placed again elsewhere and finish', async () => {
    const ids = await submitAll(Array.from({ length: 4 }, (_, i) => ({ name: `long${i}`, profile: 'spark-lr', tasks: 30, durationMs: 2500 })));
    await until('every task running', async () => (await Promise.all(ids.map(tasksOf))).flat().filter((t) => t.state === 'running').length === 120);
    const running = (await Promise.all(ids.map(tasksOf))).flat();
    const hostsOf = [...new Set(running.map((t) => t.ru?.server ?? ''))];
    const victims = await hollow.hollow.kill({ ids: hostsOf.slice(0, Math.ceil(hostsOf.length / 3)) });
    expect(victims.length).toBeGreaterThan(0);
    const dead = new Set(victims);
    const onVictims = running.filter((t) => dead.has(t.ru?.server ?? '')).map((t) => `${t.job}#${t.index}`);
    expect(onVictims.length).toBeGreaterThan(0);
    // Gone at once from the cell: server records and free RUs, as a lease expiry takes them.
    const left = new Set((await store.range(keys.servers())).kvs.map((kv) => parseJson<LiveServerRecord>(kv)?.id));
    for (const v of victims) expect(left.has(v)).toBe(false);
    expect((await store.range(keys.rus())).kvs.filter((kv) => dead.has(keys.parseRu(kv.key)?.server ?? '') && isFreeRuValue(kv.value))).toEqual([]);
    expect(hollow.hollow.snapshot()).toMatchObject({ live: NODES - victims.length, dead: victims.length });

    const jobs = await Promise.all(ids.map((id) => waitFinal(c, id, 40_000)));
    expect(jobs.map((j) => j.state)).toEqual(ids.map(() => 'succeeded'));
    const after = new Map((await Promise.all(ids.map(tasksOf))).flat().map((t) => [`${t.job}#${t.index}`, t]));
    for (const key of onVictims) {
      const t = after.get(key);
      expect(t?.state).toBe('succeeded');
      expect(dead.has(t?.ru?.server ?? '')).toBe(false);
      expect(t?.attempt).toBeGreaterThanOrEqual(1);
      const before = t?.previous?.at(-1);
      expect(before?.state).toBe('lost');
      expect(dead.has(before?.ru?.server ?? '')).toBe(true);
    }
    // Nothing of the dead nodes is left: owners deleted the RUs they held when they recorded the tasks lost.
    expect((await store.range(keys.rus())).kvs.filter((kv) => dead.has(keys.parseRu(kv.key)?.server ?? ''))).toEqual([]);
    // A launch for a dropped node is refused as unavailable.
    const link = new GrpcNodeLink();
    try {
      await expect(link.launch(`127.0.0.1:${hollow.port}`, { server: victims[0] ?? '', job: 'x', task: 0, ruIndex: 0, revision: 1 })).rejects.toMatchObject({
        code: 14,
      });
    } finally {
      link.close();
    }
  });

  it('a hollow node drained with a deadline of 0 stops its task at once; the task runs again on another node', async () => {
    const [job] = await submitAll([{ name: 'drained', profile: 'spark-lr', tasks: 1, durationMs: 120_000 }]);
    let first: LiveTaskRecord | undefined;
    await until('the task running', async () => {
      first = (await tasksOf(job!))[0];
      return first?.state === 'running';
    });
    const node = first!.ru!.server;
    // The node writes its disconnect grace with the running record, for owners that never saw it.
    expect(first!.nodeGraceMs).toBe(GRACE_MS);
    await new Promise<void>((resolve, reject) =>
      c.SetNodeScheduling({ server: node, action: 'drain', deadlineMs: 0, reason: 'test' }, (err) => (err ? reject(err) : resolve())),
    );
    let again: LiveTaskRecord | undefined;
    await until('the task running again elsewhere', async () => {
      again = (await tasksOf(job!))[0];
      return again?.state === 'running' && again.attempt === 1;
    });
    expect(again!.ru!.server).not.toBe(node);
    expect(again!.previous?.[0]).toMatchObject({ state: 'lost', message: `node ${node} drained: the deadline passed before the task ended` });
    await new Promise<void>((resolve, reject) =>
      c.SetNodeScheduling({ server: node, action: 'uncordon', reason: '' }, (err) => (err ? reject(err) : resolve())),
    );
    await new Promise<void>((resolve, reject) => c.CancelJob({ jobId: job! }, (err) => (err ? reject(err) : resolve())));
    expect((await waitFinal(c, job!)).state).toBe('cancelled');
  });

  it('SIGUSR2 drops the configured fraction of the live nodes', async () => {
    const live = hollow.hollow.snapshot().live;
    const dropped: string[][] = [];
    const stop = simulateDeaths(hollow, log, { fraction: 0.1, onKilled: (ids) => dropped.push(ids) });
    try {
      process.kill(process.pid, 'SIGUSR2');
      await until('nodes dropped', () => dropped.length === 1);
    } finally {
      stop();
    }
    expect(dropped[0]).toHaveLength(Math.round(live * 0.1));
    expect(hollow.hollow.snapshot().live).toBe(live - Math.round(live * 0.1));
    const left = new Set((await store.range(keys.servers())).kvs.map((kv) => parseJson<LiveServerRecord>(kv)?.id));
    expect(left.size).toBe(live - Math.round(live * 0.1));
    for (const v of dropped[0] ?? []) expect(left.has(v)).toBe(false);
  });
});

describe('hollow nodes and the blocks of slow servers', () => {
  it('a node with blocks off reports a slow task but never blocks its server; with them on it does', async () => {
    for (const block of [true, false]) {
      const k = new Keys(`/hollow-block-${block}-${Date.now()}/`);
      const one = [{ ...servers[0]!, rus: 2 }];
      // Every task runs at a third of its rate: well below the threshold.
      const h = new HollowNodes({ store, keys: k, clock, log, servers: one, leaseTtlSeconds: 5, slowdown: () => 3, block });
      await h.start();
      const mgr = new JobManager({ process: `hb-${block}`, store, keys: k, clock, rng: new SeededRng(7), log, agents: 1, leaseTtlSeconds: 5 });
      await mgr.start();
      try {
        const spec = parseJobSpec({ name: 'slow', profile: 'memcached', tasks: 1, durationMs: 60_000 }, catalog, { id: `hb-${block}`, now: Date.now() });
        await mgr.accept(spec);
        // The look that writes the report has decided the block already (node-load.ts).
        await until('reported', async () => (await store.range(`${k.prefix}reports/${spec.id}/`)).kvs.length === 1);
        expect(h.snapshot().blocked).toBe(block ? 1 : 0);
        if (block) await until('server record blocked', async () => parseJson<LiveServerRecord>(await store.get(k.server(one[0]!.id)))?.blocked === true);
        expect(parseJson<LiveServerRecord>(await store.get(k.server(one[0]!.id)))?.blocked ?? false).toBe(block);
        await mgr.cancel(spec.id);
      } finally {
        await mgr.close();
        await h.close();
        await store.delete(k.prefix, { prefix: true });
      }
    }
  });
});
