/**
 * The run-time loop's move, live on etcd: a migratable task slowed by a heavy neighbour is moved to
 * a free RU elsewhere once its wait is over, and the two copies never run at once (the new copy's
 * RU is released for start only after the old copy's RU was freed by its node). A job that does
 * not allow it stays where it is. Two servers of two RUs each; the simulated executor slows a task
 * by the shared performance model.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import type { ServerSpec } from '../../src/model/types.ts';
import { Keys } from '../../src/state/keys.ts';
import type { LiveJobRecord, LiveTaskRecord } from '../../src/state/live-records.ts';
import { parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore, WatchHandle } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { startEtcd, type EtcdProcess } from '../support/etcd.ts';
import { getJob, submit, waitFinal } from '../support/live.ts';
import { taskRecord } from '../support/task-records.ts';

const catalog = loadCatalog();
const clock = new SystemClock();
const log = createLogger('test');
const platform = Object.keys(catalog.platforms)[0] as string;
const servers: ServerSpec[] = [
  { id: 'a0', platform, rack: 'r0', rus: 2, speed: 1, attributes: { zone: 'a' } },
  { id: 'b0', platform, rack: 'r0', rus: 2, speed: 1, attributes: { zone: 'b' } },
];
const perf = Object.fromEntries(Object.keys(catalog.platforms).map((p) => [p, 1]));
/** Tolerates little on the first two resources (t_i = 99 − c_i = 9). */
const sensitive = { name: 'sensitive', family: 'test', caused: [90, 90, 0, 0, 0, 0, 0, 0, 0, 0], platformPerf: perf };
/** Presses hard on exactly those. */
const heavy = { name: 'heavy', family: 'test', caused: [99, 99, 0, 0, 0, 0, 0, 0, 0, 0], platformPerf: perf };
const quiet = { name: 'quiet', family: 'test', caused: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0], platformPerf: perf };

let etcd: EtcdProcess;
beforeAll(async () => {
  etcd = await startEtcd({ bin: process.env.TARCIL_TEST_ETCD_BIN });
});
afterAll(async () => {
  await etcd?.stop();
});

interface Cell {
  store: ClusterStore;
  keys: Keys;
  sched: SchedulerProcess;
  monitors: Map<string, MonitorProcess>;
  c: SchedulerClient;
  /** Every RU record write since the cell started, in order. */
  ruEvents: { key: string; rev: number; rec: PlacedRuRecord | undefined; free: boolean }[];
  close(): Promise<void>;
}

async function startCell(prefix: string, runtime: Record<string, number> = {}): Promise<Cell> {
  const store = await openStore(etcd.endpoint.replace('http://', 'etcd://'));
  const keys = new Keys(prefix);
  const ruEvents: Cell['ruEvents'] = [];
  const watch: WatchHandle = await store.watch({
    prefix: keys.rus(),
    fromRevision: (await store.revision()) + 1,
    onEvents: (b) => {
      for (const e of b.events) {
        const rec = e.type === 'put' ? parseJson<PlacedRuRecord>(e.kv) : undefined;
        ruEvents.push({ key: e.kv.key, rev: e.kv.modRevision, rec, free: e.type === 'delete' || (rec?.state as string | undefined) === 'free' });
      }
    },
    onError: () => undefined,
  });
  const monitors = new Map<string, MonitorProcess>();
  for (const s of servers)
    monitors.set(s.id, await startMonitor({ store, keys, clock, log, server: s, executor: 'simulated', host: '127.0.0.1', port: 0, leaseTtlSeconds: 3 }));
  const sched = await startScheduler({
    name: prefix.replace(/\W/g, ''),
    store,
    keys,
    catalog,
    clock,
    rng: new SeededRng(3),
    log,
    agents: 1,
    host: '127.0.0.1',
    port: 0,
    leaseTtlSeconds: 3,
    housekeeping: false,
    runtime: { moveAfterMs: 2500, movesPerSecond: 5, ...runtime },
  });
  const c = schedulerClient(`127.0.0.1:${sched.port}`);
  return {
    store,
    keys,
    sched,
    monitors,
    c,
    ruEvents,
    close: async () => {
      c.close();
      await sched.close();
      await Promise.all([...monitors.values()].map((m) => m.close()));
      await watch.close();
      await store.close();
    },
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until(what: string, ms: number, f: () => Promise<boolean>): Promise<void> {
  const end = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

async function taskRec(cell: Cell, job: string, t = 0): Promise<LiveTaskRecord | undefined> {
  return taskRecord(cell.store, cell.keys, job, t);
}

/**
 * A filler holds b0 for a while, so the sensitive job lands on a0; then a heavy job is put on a0
 * (its constraint allows nothing else) and slows it to about a third of its expected rate.
 */
async function slowedOnA0(cell: Cell, migratable: boolean, extra: Record<string, unknown> = {}): Promise<string> {
  const filler = await submit(cell.c, {
    specJson: JSON.stringify({ name: 'filler', profile: quiet, tasks: 2, durationMs: 3000, constraints: { attributes: { zone: 'b' } } }),
  });
  await until('the filler running on b0', 10_000, async () => (await getJob(cell.c, filler.jobId)).state === 'running');
  const victim = await submit(cell.c, { specJson: JSON.stringify({ name: 'victim', profile: sensitive, tasks: 1, durationMs: 9000, migratable, ...extra }) });
  await until('the sensitive task running', 10_000, async () => (await taskRec(cell, victim.jobId))?.state === 'running');
  expect((await taskRec(cell, victim.jobId))?.ru?.server).toBe('a0');
  await submit(cell.c, {
    specJson: JSON.stringify({ name: 'heavy', profile: heavy, tasks: 1, durationMs: 20_000, maxQueueMs: 0, constraints: { attributes: { zone: 'a' } } }),
  });
  return victim.jobId;
}

describe('moving a slow task (run-time loop, live)', () => {
  it('moves a migratable task off the server that slows it, stops the old copy before the new one starts, and explains it', { timeout: 60_000 }, async () => {
    const cell = await startCell('/mig1/');
    try {
      const job = await slowedOnA0(cell, true);
      const done = await waitFinal(cell.c, job, 40_000);
      expect(done.state).toBe('succeeded');
      const rec = await taskRec(cell, job);
      // It ended on b0, as its second attempt, after one move; the first attempt says why it ended.
      expect(rec?.ru?.server).toBe('b0');
      expect(rec?.attempt).toBe(1);
      expect(rec?.previous?.[0]?.ru?.server).toBe('a0');
      expect(rec?.previous?.[0]?.message).toMatch(/^moved: ran at 0\.\d\d of its expected rate on a0/);
      // The old copy was stopped by a0's monitor, and nothing else was stopped.
      expect(cell.monitors.get('a0')?.monitor.snapshot().stats.movedOut).toBe(1);
      expect(cell.monitors.get('b0')?.monitor.snapshot().stats.movedOut).toBe(0);
      expect(cell.sched.manager.moveStats.moved).toBe(1);
      expect(cell.sched.manager.moveStats.completed).toBe(1);

      // Never two copies: the new copy's record loses its hold (the only write that lets it
      // start) only after the old copy's RU was freed.
      const mine = cell.ruEvents.filter((e) => e.rec?.job === job || e.free);
      const held = mine.find((e) => e.rec?.job === job && e.rec.hold);
      const stop = mine.find((e) => e.rec?.job === job && e.rec.stop !== undefined);
      expect(held).toBeDefined();
      expect(stop).toBeDefined();
      expect(stop?.rev).toBe(held?.rev); // one transaction
      const released = mine.find((e) => e.key === held?.key && e.rec?.job === job && !e.rec.hold && e.rev > (held?.rev ?? 0));
      const freed = mine.find((e) => e.key === stop?.key && e.free && e.rev > (stop?.rev ?? 0));
      expect(released).toBeDefined();
      expect(freed).toBeDefined();
      expect(freed?.rev).toBeLessThan(released?.rev ?? 0);

      // explain shows the move.
      const ex = await new Promise<{ text: string }>((resolve, reject) =>
        cell.c.ExplainJob({ jobId: job }, (err, res) => (err || !res ? reject(err ?? new Error('no answer')) : resolve(res))),
      );
      expect(ex.text).toMatch(/task 0 → b0\/\d .*moved from a0\/\d \(ran at 0\.\d\d of its expected rate\)/);
    } finally {
      await cell.close();
    }
  });

  it('leaves a task of a job that is not migratable where it is (slow, and reported)', { timeout: 60_000 }, async () => {
    const cell = await startCell('/mig2/');
    try {
      const job = await slowedOnA0(cell, false);
      // Well past the wait and past the filler's end: still on a0, first attempt, reported slow.
      await sleep(4500);
      const rec = await taskRec(cell, job);
      expect(rec?.state).toBe('running');
      expect(rec?.ru?.server).toBe('a0');
      expect(rec?.attempt).toBe(0);
      expect((await cell.store.range(`${cell.keys.prefix}reports/${job}/`)).kvs.length).toBe(1);
      expect(cell.sched.manager.moveStats.moved).toBe(0);
      expect(cell.monitors.get('a0')?.monitor.snapshot().stats.movedOut).toBe(0);
    } finally {
      await cell.close();
    }
  });

  it('adds tasks to a scale-out job whose task runs slow, one per wait, up to its limit', { timeout: 60_000 }, async () => {
    const cell = await startCell('/mig3/');
    try {
      const job = await slowedOnA0(cell, false, { durationMs: 30_000, scaleOut: { maxTasks: 3 } });
      const jobRec = async (): Promise<LiveJobRecord | undefined> => parseJson<LiveJobRecord>(await cell.store.get(cell.keys.job(job)));
      await until('two tasks added', 20_000, async () => (await jobRec())?.spec.tasks === 3);
      const rec = await jobRec();
      expect(rec?.scaledOut).toBe(2);
      expect(rec?.spec.scaleOut).toEqual({ maxTasks: 3 });
      // The added tasks are scheduled like any other.
      await until('the added tasks placed', 15_000, async () => {
        const [a, b] = await Promise.all([taskRec(cell, job, 1), taskRec(cell, job, 2)]);
        return !!a && !!b && ['placed', 'running'].includes(a.state) && ['placed', 'running'].includes(b.state);
      });
      // Task 0 stays slow, but the limit holds: another wait adds nothing.
      await sleep(3000);
      expect((await jobRec())?.spec.tasks).toBe(3);
      expect(cell.sched.manager.moveStats.scaledOut).toBe(2);
      expect((await getJob(cell.c, job)).scaledOut).toBe(2);
      // Not migratable: nothing moved.
      expect(cell.sched.manager.moveStats.moved).toBe(0);
      await new Promise<void>((resolve, reject) => cell.c.CancelJob({ jobId: job }, (err) => (err ? reject(err) : resolve())));
    } finally {
      await cell.close();
    }
  });

  it('does not grow a scale-out job when the cell has no room (too few RUs free), and counts why', { timeout: 60_000 }, async () => {
    // The job's own task is busy, so the free share is below 99% however large the cell.
    const cell = await startCell('/mig5/', { growHeadroom: 0.99 });
    try {
      const job = await slowedOnA0(cell, false, { durationMs: 30_000, scaleOut: { maxTasks: 3 } });
      await until('a scale-out declined for want of room', 20_000, () => Promise.resolve(cell.sched.manager.moveStats.declined['no-room'] > 0));
      await sleep(3000);
      expect(parseJson<LiveJobRecord>(await cell.store.get(cell.keys.job(job)))?.spec.tasks).toBe(1);
      expect(cell.sched.manager.moveStats.scaledOut).toBe(0);
      await new Promise<void>((resolve, reject) => cell.c.CancelJob({ jobId: job }, (err) => (err ? reject(err) : resolve())));
    } finally {
      await cell.close();
    }
  });

  it("refuses a scale-out limit below the job's tasks, and scale-out for a gang, naming the field", async () => {
    const cell = await startCell('/mig4/');
    try {
      const bad = (spec: Record<string, unknown>) =>
        new Promise<{ code?: number; details?: string }>((resolve) => cell.c.SubmitJob({ specJson: JSON.stringify(spec) }, (err) => resolve(err ?? {})));
      const low = await bad({ name: 'x', profile: quiet, tasks: 4, durationMs: 100, scaleOut: { maxTasks: 2 } });
      expect(low.code).toBe(3);
      expect(low.details).toContain('scaleOut.maxTasks: must be at least tasks');
      const gang = await bad({ name: 'x', profile: quiet, tasks: 2, mode: 'gang', durationMs: 100, scaleOut: { maxTasks: 4 } });
      expect(gang.code).toBe(3);
      expect(gang.details).toContain("scaleOut: is not allowed with mode 'gang'");
      expect((await cell.store.range(cell.keys.jobs())).kvs).toHaveLength(0);
    } finally {
      await cell.close();
    }
  });
});
