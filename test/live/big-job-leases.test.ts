import type * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { Cluster__Output } from '../../src/rpc/gen/tarcil/v1/Cluster.ts';
import type { Job__Output } from '../../src/rpc/gen/tarcil/v1/Job.ts';
import type { ListJobsResponse__Output } from '../../src/rpc/gen/tarcil/v1/ListJobsResponse.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { expandCluster, loadCatalog, resolveCluster } from '../../src/model/catalog.ts';
import { openStore } from '../../src/store/index.ts';
import { Keys } from '../../src/state/keys.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { submit } from '../support/live.ts';

/**
 * A job at the documented maximum (100,000 tasks) must not cost anyone their lease. What `tarcil
 * up` runs, in one process: the demo cell's 10 monitors (simulated executor, 24 RUs) and a
 * front-end with 3 agents, on the embedded store and on etcd. A few small jobs run; then a
 * 100,000-task incremental job is submitted over gRPC with a WatchJob stream open. For the next
 * 20 s no monitor may lose its lease or register again (its `servers/<id>` key keeps its lease)
 * and the front-end's owner lease is never fenced. Then the big job is cancelled: it must end
 * cancelled and every RU be free again.
 *
 * Leases: 5 s, what `tarcil up` gives its monitors and its front-end (src/cli/live.ts), not the
 * 10 s default. A holder fences itself when no keepalive has been confirmed for TTL − 1 s, sent
 * every TTL/4: an event-loop stall of about 2.75 s is enough to lose one.
 */
const TTL_S = 5;
const AGENTS = 3;
const WATCH_MS = 20_000;
const BIG_TASKS = 100_000;

const catalog = loadCatalog();
const servers = expandCluster(resolveCluster('demo', catalog), catalog.platforms);
const RUS = servers.reduce((a, s) => a + s.rus, 0);
const clock = new SystemClock();
const log = createLogger('test');

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const f of cleanup.reverse()) await f().catch(() => undefined);
  cleanup = [];
});

function unary<Res>(invoke: (opts: grpc.CallOptions, cb: grpc.requestCallback<Res>) => unknown, deadlineMs = 30_000): Promise<Res> {
  return new Promise((resolve, reject) => {
    invoke({ deadline: new Date(Date.now() + deadlineMs) }, (err, res) => (err || res === undefined ? reject(err ?? new Error('empty')) : resolve(res)));
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface LeaseView {
  monitors: { id: string; lease: string | undefined; registrations: number; fenced: number; lost: number; stored: string | undefined }[];
  frontEnd: { lease: string | undefined; fenced: number };
}

async function leaseView(store: ClusterStore, keys: Keys, monitors: MonitorProcess[], sched: SchedulerProcess): Promise<LeaseView> {
  const stored = await Promise.all(monitors.map((m) => store.get(keys.server(m.monitor.server.id))));
  return {
    monitors: monitors.map((m, i) => ({
      id: m.monitor.server.id,
      lease: m.monitor.leaseId,
      registrations: m.monitor.stats.registrations,
      fenced: m.monitor.stats.fenced,
      lost: m.monitor.stats.lost,
      stored: stored[i]?.lease,
    })),
    frontEnd: { lease: sched.manager.leaseId, fenced: sched.manager.stats.fencedLeases },
  };
}

async function scenario(store: ClusterStore, keys: Keys): Promise<void> {
  const monitors: MonitorProcess[] = [];
  cleanup.push(async () => {
    await Promise.all(monitors.map((m) => m.close()));
  });
  for (const s of servers) {
    monitors.push(await startMonitor({ store, keys, clock, log, server: s, executor: 'simulated', host: '127.0.0.1', port: 0, leaseTtlSeconds: TTL_S }));
  }
  const sched = await startScheduler({
    name: 'big-leases',
    store,
    keys,
    catalog,
    clock,
    rng: new SeededRng(3),
    log,
    agents: AGENTS,
    host: '127.0.0.1',
    port: 0,
    leaseTtlSeconds: TTL_S,
  });
  cleanup.push(() => sched.close());
  const c: SchedulerClient = schedulerClient(`127.0.0.1:${sched.port}`);
  cleanup.push(() => Promise.resolve(c.close()));

  // A few small jobs, running while the big one arrives (they finish within the watch window).
  const small: string[] = [];
  for (let i = 0; i < 4; i++) {
    const r = await submit(c, { specJson: JSON.stringify({ name: `small-${i}`, profile: 'memcached', tasks: 2, durationMs: 3000 + i * 500 }) });
    small.push(r.jobId);
  }
  await sleep(500);
  const before = await leaseView(store, keys, monitors, sched);
  for (const m of before.monitors) {
    expect(m.registrations, m.id).toBe(1);
    expect(m.stored, `servers/${m.id} is bound to the monitor's lease`).toBe(m.lease);
  }
  expect(before.frontEnd.fenced).toBe(0);

  // maxQueueMs 0: admission control places it at once instead of holding it, so it runs (and
  // changes) throughout the window.
  const big = await submit(c, { specJson: JSON.stringify({ name: 'big', profile: 'spark-lr', tasks: BIG_TASKS, durationMs: 20, maxQueueMs: 0 }) }, 60_000);
  const watch = { events: 0, state: '', end: undefined as string | undefined };
  const stream = c.WatchJob({ jobId: big.jobId });
  stream.on('data', (ev: { job: Job__Output | null }) => {
    watch.events++;
    if (ev.job?.state) watch.state = ev.job.state;
  });
  stream.on('error', (e: grpc.ServiceError) => {
    watch.end ??= `${e.code}: ${e.details}`;
  });
  stream.on('end', () => {
    watch.end ??= 'end';
  });
  cleanup.push(() => Promise.resolve(stream.cancel()));

  // The watch window: leases checked twice a second, and once more at the end (a stall delays the
  // checks, not the counters they read).
  const t0 = Date.now();
  const same = (now: LeaseView, when: string): void => {
    for (const [i, m] of now.monitors.entries()) {
      const was = before.monitors[i]!;
      expect(m.fenced, `${when}: monitor ${m.id} fenced its lease`).toBe(0);
      expect(m.registrations, `${when}: monitor ${m.id} registered again`).toBe(was.registrations);
      expect(m.lease, `${when}: monitor ${m.id} holds another lease`).toBe(was.lease);
      expect(m.stored, `${when}: servers/${m.id} is bound to another lease, or gone`).toBe(was.lease);
      // Not stats.killed: it also counts a task the monitor finished itself when the watch shows
      // the RU freed (by the monitor's own release) before that release has returned.
      expect(m.lost, `${when}: monitor ${m.id} recorded tasks lost`).toBe(0);
    }
    expect(now.frontEnd.fenced, `${when}: the front-end's owner lease was fenced`).toBe(0);
    expect(now.frontEnd.lease, `${when}: the front-end holds another owner lease`).toBe(before.frontEnd.lease);
  };
  while (Date.now() - t0 < WATCH_MS) {
    await sleep(500);
    same(await leaseView(store, keys, monitors, sched), `${Math.round((Date.now() - t0) / 1000)} s after the big submission`);
  }
  same(await leaseView(store, keys, monitors, sched), 'end of the watch window');
  expect(watch.events, 'the WatchJob stream delivered events').toBeGreaterThan(0);
  expect(watch.end, 'the WatchJob stream is still open').toBeUndefined();

  // The small jobs were not starved by the big one, and no task of the big one was lost.
  const jobs = await unary<ListJobsResponse__Output>((o, cb) => c.ListJobs({ states: [], limit: 0 }, o, cb));
  for (const id of small) expect(jobs.jobs.find((j) => j.id === id)?.state, `small job ${id}`).toBe('succeeded');
  const bigNow = jobs.jobs.find((j) => j.id === big.jobId);
  expect(bigNow?.state, 'the big job during the window').toBe('running');
  expect(bigNow?.taskStates.lost ?? 0, 'tasks of the big job recorded lost').toBe(0);
  expect(bigNow?.rescheduled ?? 0, 'tasks of the big job placed again').toBe(0);

  // Cancel: the job ends cancelled and every RU is free again.
  const tc = Date.now();
  await unary<Job__Output>((o, cb) => c.CancelJob({ jobId: big.jobId }, o, cb));
  let state = '';
  while (Date.now() - tc < 20_000) {
    const l = await unary<ListJobsResponse__Output>((o, cb) => c.ListJobs({ states: [], limit: 0 }, o, cb));
    state = l.jobs.find((j) => j.id === big.jobId)?.state ?? '';
    if (state === 'cancelled') break;
    await sleep(200);
  }
  expect(state, 'the big job after CancelJob').toBe('cancelled');
  let free = -1;
  while (Date.now() - tc < 25_000) {
    free = (await unary<Cluster__Output>((o, cb) => c.GetCluster({}, o, cb))).free;
    if (free === RUS) break;
    await sleep(200);
  }
  expect(free, 'free RUs after the cancellation').toBe(RUS);
  // The watcher learns that the job was cancelled, and its stream ends.
  while (Date.now() - tc < 27_000 && watch.end === undefined) await sleep(100);
  expect(watch.state, 'the last state the watcher saw').toBe('cancelled');
  expect(watch.end).toBe('end');
  // Nobody lost a lease through the cancellation either (the monitors killed the running tasks).
  const after = await leaseView(store, keys, monitors, sched);
  for (const [i, m] of after.monitors.entries()) {
    expect(m.fenced, `after the cancel: monitor ${m.id} fenced its lease`).toBe(0);
    expect(m.registrations, `after the cancel: monitor ${m.id} registered again`).toBe(before.monitors[i]!.registrations);
  }
  expect(after.frontEnd.fenced, "after the cancel: the front-end's owner lease was fenced").toBe(0);
}

describe('a 100,000-task job on `tarcil up` (demo cell, 5 s leases)', () => {
  it('costs no lease on the embedded store, and cancels cleanly', async () => {
    const store = await openStore('memory://');
    cleanup.push(() => store.close());
    await scenario(store, new Keys('/big-leases/'));
  }, 90_000);

  it('costs no lease on etcd, and cancels cleanly', async () => {
    const store = await openStore(inject('etcdEndpoint').replace('http://', 'etcd://'));
    const keys = new Keys(`/big-leases-${Date.now()}/`);
    cleanup.push(async () => {
      await store.delete(keys.prefix, { prefix: true }).catch(() => undefined);
      await store.close();
    });
    await scenario(store, keys);
  }, 90_000);
});
