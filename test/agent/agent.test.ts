import { afterEach, describe, expect, it } from 'vitest';
import { SchedulingAgent, type AgentConfig } from '../../src/agent/agent.ts';
import { KEPT_PLACEMENTS } from '../../src/state/decisions.ts';
import { parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { seedCluster, uniformServers } from '../../src/state/seed.ts';
import type { RuRecord, TaskRecord } from '../../src/model/types.ts';
import { SimulatedRunner } from '../../src/monitor/sim-runner.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/index.ts';
import type { ClusterStore, WatchHandle, WatchOptions } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { HOME_TURN_MS } from '../../src/agent/handoff.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { makeJob, profile, TEST_PROFILES } from '../support/jobs.ts';
import { taskRecords } from '../support/task-records.ts';

const clock = new SystemClock();
const log = createLogger('test');
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

async function setup(opts: { servers?: number; rus?: number; config?: Partial<AgentConfig>; agents?: number; store?: ClusterStore } = {}) {
  const store = opts.store ?? new MemoryStore();
  const keys = new Keys('/t/');
  await seedCluster(store, keys, uniformServers(opts.servers ?? 20, opts.rus ?? 8));
  const agents = Array.from(
    { length: opts.agents ?? 1 },
    (_, i) => new SchedulingAgent({ id: `a${i}`, store, keys, clock, rng: new SeededRng(50 + i), log, config: { recheckMs: 30, ...opts.config } }),
  );
  await Promise.all(agents.map((a) => a.start()));
  closers.push(async () => {
    await Promise.all(agents.map((a) => a.close()));
    await store.close();
  });
  return { store, keys, agents, agent: agents[0]! };
}

async function rus(store: ClusterStore, keys: Keys): Promise<RuRecord[]> {
  return (await store.range(keys.rus())).kvs.map((kv) => parseJson<RuRecord>(kv)!);
}

async function until(cond: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('scheduling agent on the embedded store', () => {
  it('records why it placed a job: R, candidates, quality, stage times', async () => {
    const { agent, store, keys } = await setup();
    const rec = await agent.submit(makeJob('j1', TEST_PROFILES[0]!, 4));
    expect(rec.placements).toHaveLength(4);
    expect(rec.samples[0]!.R).toBeGreaterThanOrEqual(8);
    expect(rec.samples[0]!.candidates).toBe(rec.samples[0]!.R * 4);
    // The agent's own counters (tarcil_samples, tarcil_candidates_scored) sum every round.
    expect(agent.stats.samples).toBe(rec.samples.length);
    expect(agent.stats.candidates).toBe(rec.samples.reduce((n, s) => n + s.candidates, 0));
    // Admission control is off by default: the record says so once, with the buckets' count.
    expect(rec.admission).toHaveLength(1);
    expect(rec.admission[0]!.action).toBe('admit');
    expect(rec.admission[0]!.reason).toMatch(/^admission control is off/);
    expect(rec.admission[0]!.needed).toBe(4);
    expect(rec.admission[0]!.totalFree).toBeGreaterThanOrEqual(4);
    expect(rec.placements.every((p) => p.acceptable && p.Q > 0)).toBe(true);
    expect(rec.stageMs.select).toBeGreaterThan(0);
    expect(rec.stageMs.commit).toBeGreaterThan(0);
    const job = parseJson<{ state: string }>(await store.get(keys.job('j1')));
    expect(job?.state).toBe('placed');
  });

  it('splits an incremental job larger than one transaction into several commits', async () => {
    const { agent, store, keys } = await setup();
    expect(agent.picksPerTxn).toBe(42); // (128 − 2) / 3 with etcd's default --max-txn-ops
    const before = agent.stats.commits;
    const rec = await agent.submit(makeJob('big', TEST_PROFILES[4]!, 100));
    expect(rec.placements).toHaveLength(100);
    expect(agent.stats.commits - before).toBe(3);
    const busy = (await rus(store, keys)).filter((r) => r.state === 'busy');
    expect(busy).toHaveLength(100);
  });

  it('keeps the first placements of a large call in its record and counts the rest; every placement is reported', async () => {
    const { store, keys } = await setup({ servers: 40, rus: 8 });
    const reported: number[] = [];
    const agent = new SchedulingAgent({
      id: 'big',
      store,
      keys,
      clock,
      rng: new SeededRng(7),
      log,
      config: { recheckMs: 30 },
      onCommitted: (_job, ps) => reported.push(...ps.map((p) => p.task)),
    });
    await agent.start();
    closers.push(() => agent.close());
    const rec = await agent.submit(makeJob('many', TEST_PROFILES[4]!, 300));
    expect(rec.placements.map((p) => p.task)).toEqual(Array.from({ length: KEPT_PLACEMENTS }, (_, i) => i));
    expect(rec.omittedPlacements).toBe(300 - KEPT_PLACEMENTS);
    expect(reported.sort((x, y) => x - y)).toEqual(Array.from({ length: 300 }, (_, i) => i));
    expect((await rus(store, keys)).filter((r) => r.state === 'busy')).toHaveLength(300);
  });

  it('commits a gang larger than one transaction all or nothing, through reservations', async () => {
    const { agent, store, keys } = await setup();
    const rec = await agent.submit(makeJob('gang', TEST_PROFILES[4]!, 100, { mode: 'gang' }));
    expect(rec.placements).toHaveLength(100);
    const all = await rus(store, keys);
    expect(all.filter((r) => r.state === 'busy')).toHaveLength(100);
    expect(all.filter((r) => r.state === 'reserved')).toHaveLength(0);
  });

  it('releases every reservation when a gang cannot be completed, and places it once RUs free up', async () => {
    const { agent, store, keys } = await setup({ servers: 15 }); // 120 RUs
    // 30 RUs busy with a filler job: a gang of 100 fits the cluster but not the free RUs.
    const filler = await agent.submit(makeJob('filler', TEST_PROFILES[4]!, 30));
    const gang = agent.submit(makeJob('gang', TEST_PROFILES[4]!, 100, { mode: 'gang', maxQueueMs: 0 }));
    // While it cannot complete, no reservation is left standing between attempts.
    await until(() => agent.stats.readmissions > 0);
    await until(async () => (await rus(store, keys)).every((r) => r.state !== 'reserved'));
    // Free the filler's RUs (as a monitor would when its tasks end).
    for (const p of filler.placements) {
      await store.put(keys.ru(p.ru), JSON.stringify({ state: 'free' }));
    }
    const rec = await gang;
    expect(rec.placements).toHaveLength(100);
    expect(rec.readmissions).toBeGreaterThan(0);
    const all = await rus(store, keys);
    expect(all.filter((r) => r.state === 'busy' && (r as PlacedRuRecord).job === 'gang')).toHaveLength(100);
  });

  it('refuses a gang larger than every RU eligible for it (FAILED_PRECONDITION)', async () => {
    const { agent } = await setup({ servers: 2 });
    await expect(agent.submit(makeJob('huge', TEST_PROFILES[0]!, 17, { mode: 'gang' }))).rejects.toMatchObject({
      code: 'FAILED_PRECONDITION',
      field: 'tasks',
    } satisfies Partial<TarcilError>);
  });

  it('queues a job durably while acceptable RUs are scarce, then places it when they free up', async () => {
    const { agent, store, keys } = await setup({ servers: 2 }); // 16 RUs
    await agent.submit(makeJob('fill', TEST_PROFILES[4]!, 16));
    const queued = agent.submit(makeJob('waiting', TEST_PROFILES[0]!, 2, { maxQueueMs: 60_000 }));
    await until(async () => (await store.range(keys.queue())).kvs.length === 1);
    const entry = (await store.range(keys.queue())).kvs[0]!;
    expect(entry.key).toContain('/waiting');
    await store.put(keys.ru({ server: 's0000', index: 0 }), JSON.stringify({ state: 'free' }));
    await store.put(keys.ru({ server: 's0001', index: 0 }), JSON.stringify({ state: 'free' }));
    const rec = await queued;
    expect(rec.placements).toHaveLength(2);
    expect(rec.queuedMs).toBeGreaterThan(0);
    expect((await store.range(keys.queue())).kvs).toHaveLength(0);
  });

  it('preempts lower-priority tasks for a high-priority job and reschedules every victim', async () => {
    const { agents, store, keys } = await setup({ servers: 4, agents: 2 }); // 32 RUs
    const [a0, a1] = agents as [SchedulingAgent, SchedulingAgent];
    await a0.submit(makeJob('batch', TEST_PROFILES[4]!, 32, { priority: 10 }));
    const urgent = await a1.submit(makeJob('urgent', profile('quiet', [5, 1, 1, 1, 1, 1, 1, 1, 1, 1]), 3, { priority: 500 }));
    expect(urgent.placements).toHaveLength(3);
    const victims = urgent.placements.map((p) => p.preempted);
    expect(victims.every((v) => v?.job === 'batch')).toBe(true);
    // Victims are back in the queue or already being rescheduled; once the urgent job ends
    // (its RUs free), every batch task runs again: nothing is lost.
    for (const p of urgent.placements) await store.put(keys.ru(p.ru), JSON.stringify({ state: 'free' }));
    await until(async () => {
      const busy = (await rus(store, keys)).filter((r) => r.state === 'busy') as PlacedRuRecord[];
      return busy.filter((r) => r.job === 'batch').length === 32;
    });
    const tasks = await taskRecords<TaskRecord>(store, keys, 'batch');
    expect(tasks).toHaveLength(32);
    // The victims, placed again, wait for their monitors to record them running; the others' first
    // placement recorded them running.
    expect(tasks.filter((t) => t.attempt > 0).map((t) => t.state)).toEqual(['placed', 'placed', 'placed']);
    expect(tasks.filter((t) => t.attempt === 0).every((t) => t.state === 'running')).toBe(true);
    expect(a0.stats.rescheduled + a1.stats.rescheduled).toBe(3);
    expect((await store.range(keys.queue())).kvs).toHaveLength(0);
  });

  it('one agent with many decisions in flight never conflicts with itself', async () => {
    const { agent } = await setup({ servers: 10 });
    const recs = await Promise.all(Array.from({ length: 16 }, (_, i) => agent.submit(makeJob(`f${i}`, TEST_PROFILES[i % 6]!, 4))));
    expect(recs.flatMap((r) => r.placements)).toHaveLength(64);
    expect(new Set(recs.flatMap((r) => r.placements.map((p) => `${p.ru.server}/${p.ru.index}`))).size).toBe(64);
    expect(agent.stats.conflicts).toBe(0);
  });

  it('under the server scope, one agent chains its own commits on a server instead of conflicting', async () => {
    const { agent, store, keys } = await setup({ servers: 4, config: { conflictScope: 'server' } });
    const recs = await Promise.all(Array.from({ length: 8 }, (_, i) => agent.submit(makeJob(`s${i}`, TEST_PROFILES[4]!, 3))));
    expect(recs.flatMap((r) => r.placements)).toHaveLength(24);
    expect(agent.stats.conflicts).toBe(0);
    // Each commit on a server was based on the epoch the previous one produced.
    const tasks = await taskRecords<{ ru: { server: string }; basedOn: number; commitId: string }>(store, keys);
    const commitsPerBase = new Map<string, Set<string>>();
    for (const t of tasks) {
      const k = `${t.ru.server}@${t.basedOn}`;
      if (!commitsPerBase.has(k)) commitsPerBase.set(k, new Set());
      commitsPerBase.get(k)!.add(t.commitId);
    }
    expect([...commitsPerBase.values()].every((set) => set.size === 1)).toBe(true);
  });

  it('three agents sharing the embedded store never double-book, with tasks completing', async () => {
    const { agents, store, keys } = await setup({ servers: 10, agents: 3 });
    const runner = new SimulatedRunner({ store, keys, clock, log, durationOf: () => 20 });
    await runner.start();
    closers.push(() => runner.close());
    const jobs = Array.from({ length: 60 }, (_, i) => makeJob(`m${i}`, TEST_PROFILES[i % 6]!, 4));
    const recs = await Promise.all(jobs.map((j, i) => agents[i % 3]!.submit(j)));
    expect(recs.flatMap((r) => r.placements)).toHaveLength(240);
    await until(() => runner.stats.completed === 240);
    expect((await rus(store, keys)).every((r) => r.state === 'free')).toBe(true);
  });
});

/** A real MemoryStore whose watches the test can cancel, as an etcd server may. */
class CancellableStore extends MemoryStore {
  readonly live: { opts: WatchOptions; handle: WatchHandle }[] = [];
  override async watch(opts: WatchOptions): Promise<WatchHandle> {
    const handle = await super.watch(opts);
    this.live.push({ opts, handle });
    return handle;
  }
  readonly ranged: string[] = [];
  override range(prefix: string, opts?: Parameters<MemoryStore['range']>[1]): ReturnType<MemoryStore['range']> {
    this.ranged.push(prefix);
    return super.range(prefix, opts);
  }
  /** Ends the watches whose prefix passes `which` (all by default), as etcd would. */
  async cancelAll(which: (prefix: string) => boolean = () => true): Promise<number> {
    const ending = this.live.filter((w) => which(w.opts.prefix));
    this.live.splice(0, this.live.length, ...this.live.filter((w) => !ending.includes(w)));
    for (const w of ending) {
      await w.handle.close();
      w.opts.onError(new TarcilError('COMPACTED', 'watch on a prefix from a compacted revision'));
    }
    return ending.length;
  }
}

/** A real MemoryStore where a rival takes one compared RU right before the first placement commit. */
class RivalStore extends MemoryStore {
  readonly commits: string[][] = [];
  stolen: string | undefined;
  /** `sameTime`: the rival's placement names the time the stolen commit was built (its RU records' `since`). */
  constructor(
    private readonly rival: { agent?: string; since?: number } = { agent: 'fe2/a1' },
    private readonly sameTime = false,
  ) {
    super();
  }
  override async txn(req: Parameters<MemoryStore['txn']>[0]): ReturnType<MemoryStore['txn']> {
    const ruCompares = req.compare.filter((c) => c.key.includes('/rus/')).map((c) => c.key);
    if (ruCompares.length > 0 && req.success.some((o) => o.type === 'put' && o.key.includes('/tasks/'))) {
      this.commits.push(ruCompares);
      if (!this.stolen) {
        this.stolen = ruCompares[3];
        const built = (JSON.parse((req.success.find((o) => o.type === 'put' && o.key === this.stolen) as { value: string }).value) as { since: number }).since;
        const at = this.sameTime ? { since: built } : {};
        await super.put(
          this.stolen!,
          JSON.stringify({ state: 'busy', job: 'rival', task: 0, caused: TEST_PROFILES[0]!.caused, priority: 100, ...this.rival, ...at }),
        );
      }
    }
    return super.txn(req);
  }
}

describe('incremental commit', () => {
  it('keeps the picks that did not conflict and resamples only the one that did', async () => {
    const store = new RivalStore();
    const { agent } = await setup({ servers: 10, store, config: { consumeQueue: false } });
    const rec = await agent.submit(makeJob('inc', TEST_PROFILES[4]!, 8));
    expect(rec.placements).toHaveLength(8);
    expect(rec.conflicts).toBe(1);
    expect(store.commits).toHaveLength(2);
    const [first, second] = store.commits as [string[], string[]];
    const kept = first.filter((k) => k !== store.stolen);
    expect(kept).toHaveLength(7);
    // The second transaction re-commits the seven untouched picks plus one new RU.
    for (const k of kept) expect(second).toContain(k);
    expect(second).not.toContain(store.stolen);
    expect(second).toHaveLength(8);
    expect(agent.stats.conflictCauses).toEqual({ 'front-end': 1, sibling: 0, stale: 0, other: 0 });
    // The rival's record names no time: the race is not counted.
    expect(agent.stats.frontEndRaces).toEqual({ turn: 0, split: 0, unsplit: 0 });
  });

  it('counts a front-end conflict by race: a rival placement from before the server changed home, or from the same home', async () => {
    const old = new RivalStore({ agent: 'fe2/a1', since: Date.now() - 3 * HOME_TURN_MS });
    const a1 = (await setup({ servers: 10, store: old, config: { consumeQueue: false } })).agent;
    await a1.submit(makeJob('race-turn', TEST_PROFILES[4]!, 8));
    expect(a1.stats.frontEndRaces).toEqual({ turn: 1, split: 0, unsplit: 0 });
    expect(a1.stats.frontEndLagMs).toBeGreaterThanOrEqual(3 * HOME_TURN_MS - 1);
    // A rival placing at the very time this commit was built: no home changed in between, and this lone agent never splits its sampling.
    const now = new RivalStore({ agent: 'fe2/a1' }, true);
    const a2 = (await setup({ servers: 10, store: now, config: { consumeQueue: false } })).agent;
    await a2.submit(makeJob('race-now', TEST_PROFILES[4]!, 8));
    expect(a2.stats.frontEndRaces).toEqual({ turn: 0, split: 0, unsplit: 1 });
    expect(a2.stats.frontEndLagMs).toBe(0);
  });

  it('counts a pick taken by a placement that names no agent, or rewritten and still free, as stale', async () => {
    const store = new RivalStore({});
    const { agent } = await setup({ servers: 10, store, config: { consumeQueue: false } });
    await agent.submit(makeJob('inc-anon', TEST_PROFILES[4]!, 8));
    const jostled = new JostlingStore();
    jostled.remaining = 1;
    const second = await setup({ servers: 10, store: jostled, config: { consumeQueue: false, backoffMaxMs: 20 } });
    await second.agent.submit(makeJob('jostled-once', TEST_PROFILES[4]!, 4));
    for (const a of [agent, second.agent]) expect(a.stats.conflictCauses).toEqual({ 'front-end': 0, sibling: 0, stale: 1, other: 0 });
  });
});

/** A real MemoryStore where a rival rewrites every RU a placement compares, just before it commits. */
class JostlingStore extends MemoryStore {
  remaining = 0;
  override async txn(req: Parameters<MemoryStore['txn']>[0]): ReturnType<MemoryStore['txn']> {
    const ruCompares = req.compare.filter((c) => c.key.includes('/rus/')).map((c) => c.key);
    if (this.remaining > 0 && ruCompares.length > 0 && req.success.some((o) => o.type === 'put' && o.key.includes('/tasks/'))) {
      this.remaining--;
      for (const key of ruCompares) {
        const kv = await super.get(key);
        if (kv) await super.put(key, kv.value);
      }
    }
    return super.txn(req);
  }
}

describe('conflicts', () => {
  it('a job that keeps losing free RUs to rivals backs off and retries, without waiting for an RU to free up', async () => {
    const store = new JostlingStore();
    // Waiting for a freed RU would outlast the test: nothing frees up here.
    const { agent } = await setup({ servers: 10, store, config: { consumeQueue: false, recheckMs: 600_000, backoffMaxMs: 20 } });
    store.remaining = agent.config.maxRetries + 1;
    const rec = await agent.submit(makeJob('jostled', TEST_PROFILES[4]!, 4));
    expect(rec.placements).toHaveLength(4);
    expect(rec.conflicts).toBe(agent.config.maxRetries + 1);
    expect(rec.readmissions).toBe(1);
  });

  it('a request above bypassAbove that loses a race waits for the next freed RU instead of backing off; one at the default priority backs off', async () => {
    for (const priority of [500, 100]) {
      const store = new JostlingStore();
      // A backoff of 60 s would outlast the test; a freed RU comes at once.
      const { agent, keys } = await setup({ servers: 2, rus: 1, store, config: { consumeQueue: false, backoffBaseMs: 60_000, backoffMaxMs: 60_000 } });
      const filler = await agent.submit(makeJob(`filler-${priority}`, TEST_PROFILES[4]!, 1));
      store.remaining = 1;
      const placed = agent.submit(makeJob(`urgent-${priority}`, TEST_PROFILES[4]!, 1, { priority }));
      let done = false;
      void placed.then(
        () => (done = true),
        () => (done = true),
      );
      await until(() => store.remaining === 0);
      if (priority > agent.config.bypassAbove) {
        // It lost the race for the free RU and waits among the waiters, woken by the next one freed.
        await until(() => agent.view.waiters.size === 1);
        await store.put(keys.ru(filler.placements[0]!.ru), JSON.stringify({ state: 'free' }));
        const rec = await placed;
        expect(rec.conflicts).toBe(1);
        expect(rec.placements).toHaveLength(1);
      } else {
        await store.put(keys.ru(filler.placements[0]!.ru), JSON.stringify({ state: 'free' }));
        await new Promise((r) => setTimeout(r, 300));
        // Backing off: no waiter, and the freed RU does not bring it back.
        expect(agent.view.waiters.size).toBe(0);
        expect(done).toBe(false);
      }
      for (const c of closers.splice(0).reverse()) await c();
    }
  });
});

describe('agent cache', () => {
  it('re-lists and re-watches when its watch is cancelled, missing nothing written meanwhile', async () => {
    const store = new CancellableStore();
    const { agent, keys } = await setup({ servers: 4, store, config: { consumeQueue: false } });
    const ended = await store.cancelAll();
    // Written while the agent has no watch.
    await store.put(
      keys.ru({ server: 's0001', index: 3 }),
      JSON.stringify({ state: 'busy', job: 'x', task: 0, caused: TEST_PROFILES[0]!.caused, priority: 100 }),
    );
    // Each prefix is listed again on its own.
    await until(() => agent.cache.relists === ended);
    await until(() => agent.state.server('s0001')!.occupants[3]?.job === 'x');
    // And the new watch is live.
    await store.put(
      keys.ru({ server: 's0002', index: 1 }),
      JSON.stringify({ state: 'busy', job: 'y', task: 0, caused: TEST_PROFILES[1]!.caused, priority: 100 }),
    );
    await until(() => agent.state.server('s0002')!.occupants[1]?.job === 'y');
    expect(agent.state.usage().busy).toBe(2);
  });

  it('lists only the prefix whose watch ended: the RUs go on being watched, every change of theirs seen in order', async () => {
    const store = new CancellableStore();
    const { agent, keys } = await setup({ servers: 4, store, config: { consumeQueue: false } });
    const seen: string[] = [];
    agent.cache.onRu((kv, _deleted, rec, prev) =>
      seen.push(`${kv.key.slice(-7)} ${prev?.job ?? '-'}→${rec?.state === 'busy' ? (rec as { job: string }).job : 'free'}`),
    );
    const listedBefore = store.ranged.length;
    // A quiet prefix's watch ends (its start revision compacted away, as after etcd restarts).
    expect(await store.cancelAll((p) => p === keys.cordons())).toBe(1);
    const ru = keys.ru({ server: 's0001', index: 3 });
    const busy = (job: string): string => JSON.stringify({ state: 'busy', job, task: 0, caused: TEST_PROFILES[0]!.caused, priority: 100 });
    // The RU changes three times meanwhile: each change reaches the listeners, in order.
    await store.put(ru, busy('x'));
    await store.put(ru, JSON.stringify({ state: 'free' }));
    await store.put(ru, busy('y'));
    await store.put(keys.cordon('s0002'), JSON.stringify({ reason: 'test' }));
    await until(() => agent.cache.relists === 1);
    await until(() => seen.length === 3 && agent.state.cordoned().has('s0002'));
    expect(seen.map((x) => x.split(' ')[1])).toEqual(['-→x', 'x→free', '-→y']);
    expect(store.ranged.slice(listedBefore)).toEqual([keys.cordons()]);
    // Both watches are live.
    await store.delete(keys.cordon('s0002'));
    await store.put(ru, JSON.stringify({ state: 'free' }));
    await until(() => !agent.state.cordoned().has('s0002') && agent.state.server('s0001')!.occupants[3] === null);
    expect(agent.cache.relists).toBe(1);
  });

  it('keeps admission counters in step with the cluster it caches', async () => {
    const { agent, store, keys } = await setup({ servers: 4, config: { consumeQueue: false } });
    expect(agent.admission.totalFree()).toBe(32);
    await store.put(
      keys.ru({ server: 's0000', index: 0 }),
      JSON.stringify({ state: 'busy', job: 'x', task: 0, caused: TEST_PROFILES[0]!.caused, priority: 100 }),
    );
    await until(() => agent.admission.totalFree() === 31);
    await store.delete(keys.server('s0003'));
    await until(() => agent.admission.totalFree() === 23);
  });
});
