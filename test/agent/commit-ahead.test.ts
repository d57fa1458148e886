/**
 * Commit-ahead (AgentConfig.commitAhead): the chunks of a job larger than one transaction are
 * decided and sent while the earlier ones are still committing. Checked on the embedded store with
 * commits that take a while to answer: how many are in flight at once, that every task is placed
 * once on an RU of its own, that a conflict in one chunk resamples only that chunk, and that a job
 * the free RUs cannot hold places what fits and waits for the rest.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SchedulingAgent, type AgentConfig } from '../../src/agent/agent.ts';
import { SimulatedRunner } from '../../src/monitor/sim-runner.ts';
import { parseJson, type PlacedRuRecord, type PlacedTaskRecord } from '../../src/state/records.ts';
import { seedCluster, uniformServers } from '../../src/state/seed.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/index.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { taskRecords } from '../support/task-records.ts';
import { MemberDemand } from '../../src/agent/handoff.ts';

const clock = new SystemClock();
const log = createLogger('test');
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

/**
 * A real MemoryStore whose placement commits take `delayMs` to answer (a store across a network),
 * counting how many are in flight at once; `stealAt`: before that placement commit (0-based), a
 * rival takes one of the RUs it compares.
 */
class SlowStore extends MemoryStore {
  delayMs = 20;
  inFlight = 0;
  maxInFlight = 0;
  placements = 0;
  stealAt = -1;
  stolen: string | undefined;
  override async txn(req: Parameters<MemoryStore['txn']>[0]): ReturnType<MemoryStore['txn']> {
    const placing = req.compare.some((c) => c.key.includes('/rus/')) && req.success.some((o) => o.type === 'put' && o.key.includes('/tasks/'));
    if (!placing) return super.txn(req);
    const n = this.placements++;
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      if (n === this.stealAt) {
        this.stolen = req.compare.find((c) => c.key.includes('/rus/'))!.key;
        await super.put(
          this.stolen,
          JSON.stringify({ state: 'busy', job: 'rival', task: 0, caused: TEST_PROFILES[0]!.caused, priority: 100, since: Date.now() }),
        );
      }
      await new Promise((r) => setTimeout(r, this.delayMs));
      return await super.txn(req);
    } finally {
      this.inFlight--;
    }
  }
}

/** A job owner's agent (it keeps no job record itself, as in a front-end). */
async function setup(config: Partial<AgentConfig>, servers = 40, rus = 8) {
  const store = new SlowStore();
  const keys = new Keys('/t/');
  await seedCluster(store, keys, uniformServers(servers, rus));
  const agent = new SchedulingAgent({
    id: 'a0',
    store,
    keys,
    clock,
    rng: new SeededRng(11),
    log,
    config: { recheckMs: 30, recordJob: false, consumeQueue: false, ...config },
  });
  await agent.start();
  closers.push(async () => {
    await agent.close();
    await store.close();
  });
  return { store, keys, agent };
}

/** Every task of `job` placed exactly once, each on an RU that names it and no other task. */
async function expectPlacedOnce(store: MemoryStore, keys: Keys, job: string, tasks: number): Promise<void> {
  const recs = await taskRecords<PlacedTaskRecord>(store, keys, job);
  expect(recs.map((t) => t.index).sort((x, y) => x - y)).toEqual(Array.from({ length: tasks }, (_, i) => i));
  expect(recs.every((t) => t.state === 'placed' || t.state === 'running')).toBe(true);
  const onRus = (await store.range(keys.rus())).kvs.map((kv) => parseJson<PlacedRuRecord>(kv)!).filter((r) => r.job === job);
  expect(onRus).toHaveLength(tasks);
  expect(new Set(onRus.map((r) => r.task)).size).toBe(tasks);
}

describe('commit-ahead', () => {
  it('keeps up to commitAhead chunks of one job in flight, and one at a time with commitAhead 1', async () => {
    for (const [commitAhead, most] of [
      [4, 4],
      [1, 1],
    ] as const) {
      const { store, keys, agent } = await setup({ commitAhead, groupCommit: 0 });
      const rec = await agent.schedule(makeJob(`ahead${commitAhead}`, TEST_PROFILES[4]!, 200));
      // 200 tasks are five chunks of at most 42.
      expect(store.placements, `commitAhead ${commitAhead}`).toBe(5);
      expect(store.maxInFlight, `commitAhead ${commitAhead}`).toBe(most);
      expect(rec.conflicts).toBe(0);
      await expectPlacedOnce(store, keys, `ahead${commitAhead}`, 200);
    }
  });

  it("full chunks go straight to the store, not held back by group commit's two requests", async () => {
    const { store, keys, agent } = await setup({ groupCommit: 2, commitAhead: 4 });
    await agent.schedule(makeJob('grouped', TEST_PROFILES[4]!, 200));
    expect(store.maxInFlight).toBe(4);
    await expectPlacedOnce(store, keys, 'grouped', 200);
  });

  it('a standalone agent, which writes the job record with its last chunk, commits chunk after chunk', async () => {
    const { store, agent } = await setup({ recordJob: true, groupCommit: 0 });
    await agent.submit(makeJob('standalone', TEST_PROFILES[4]!, 200));
    expect(store.maxInFlight).toBe(1);
  });

  it('a conflict in one chunk resamples that chunk; the chunks in flight with it stand', async () => {
    const { store, keys, agent } = await setup({ groupCommit: 0 });
    store.stealAt = 1;
    const rec = await agent.schedule(makeJob('jostled', TEST_PROFILES[4]!, 200));
    expect(store.stolen).toBeDefined();
    expect(rec.conflicts).toBe(1);
    // Five chunks, and the one that conflicted once more.
    expect(store.placements).toBe(6);
    await expectPlacedOnce(store, keys, 'jostled', 200);
    const stolen = parseJson<PlacedRuRecord>(await store.get(store.stolen!));
    expect(stolen?.job).toBe('rival');
  });

  it('a chunk the free RUs cannot fill is sent as found, from one decision, and the rest waits for freed RUs', async () => {
    // 20 servers × 8 = 160 RUs; a filler holds 130 of them: 30 free, fewer than a chunk (42).
    const { store, keys, agent } = await setup({ groupCommit: 0, admission: false, recheckMs: 60_000 }, 20, 8);
    await agent.schedule(makeJob('filler', TEST_PROFILES[4]!, 130));
    const call = agent.schedule(makeJob('short', TEST_PROFILES[4]!, 100)).catch(() => undefined);
    let rec = agent.inflight.get('short');
    for (let i = 0; i < 500 && rec?.waiting === undefined; i++) {
      await new Promise((r) => setTimeout(r, 10));
      rec = agent.inflight.get('short');
    }
    expect(rec?.waiting).toBeDefined();
    expect(rec?.placements).toHaveLength(30);
    // One sampling round found the 30 free RUs and placed them: none decided a second time.
    expect(rec?.samples).toHaveLength(1);
    expect(rec?.conflicts).toBe(0);
    const onRus = (await store.range(keys.rus())).kvs.map((kv) => parseJson<PlacedRuRecord>(kv)!).filter((r) => r.job === 'short');
    expect(onRus).toHaveLength(30);
    agent.abort('short');
    await call;
  });

  it('a job larger than the free RUs places what fits and the rest as RUs free up', async () => {
    // 20 servers × 8 = 160 RUs; a filler holds 40 of them for a moment.
    const { store, keys, agent } = await setup({ groupCommit: 0, admission: false }, 20, 8);
    const runner = new SimulatedRunner({ store, keys, clock, log, durationOf: (r) => (r.job === 'filler' ? 300 : 600_000) });
    await runner.start();
    closers.push(() => runner.close());
    await agent.schedule(makeJob('filler', TEST_PROFILES[4]!, 40));
    const rec = await agent.schedule(makeJob('wide', TEST_PROFILES[4]!, 150));
    expect(rec.queuedMs).toBeGreaterThan(0);
    await expectPlacedOnce(store, keys, 'wide', 150);
  });
});

describe('survivors of a conflict on a nearly full cell', () => {
  it("a kept pick on a server that is no longer this front-end's to sample (the homes turned) is resampled, not committed again", async () => {
    // Sampling split among two front-ends (this one "A", another "B"); one chunk of 8 tasks.
    const { store, agent } = await setup({ groupCommit: 0, commitAhead: 1, handoffMs: 250, partitionBelow: 1 }, 40, 1);
    // One RU busy: fewer free than all of them, so the sampling splits.
    await agent.schedule(makeJob('filler', TEST_PROFILES[4]!, 1));
    const handoff = agent.view.handoff;
    const members = new MemberDemand();
    members.set('A', true);
    members.set('B', true);
    handoff.setDemand(members);
    handoff.setSelf('A');
    const commits: string[][] = [];
    // Whether each commit's RUs were this front-end's to sample as it was sent: the homes turn
    // with the clock (every HOME_TURN_MS), so asked after the test they may have turned again.
    const homeWhenSent: boolean[] = [];
    const homeOfB = (key: string): boolean => handoff.isHome(agent.view.state.server(key.split('/rus/')[1]!.split('/')[0]!)!);
    const inner = store.txn.bind(store);
    store.stealAt = 1;
    store.txn = async (req) => {
      const rus = req.compare.filter((c) => c.key.includes('/rus/')).map((c) => c.key);
      if (rus.length > 0 && req.success.some((o) => o.type === 'put' && o.key.includes('/tasks/'))) {
        commits.push(rus);
        homeWhenSent.push(rus.every(homeOfB));
        // As the first commit is answered, the servers change home: they are B's to sample now.
        if (commits.length === 1) setTimeout(() => handoff.setSelf('B'), 0);
      }
      return inner(req);
    };
    const rec = await agent.schedule(makeJob('turned', TEST_PROFILES[4]!, 8));
    expect(rec.placements).toHaveLength(8);
    const [first, second] = commits as [string[], string[]];
    expect(first).toHaveLength(8);
    expect(store.stolen).toBeDefined();
    // Seven picks were unchanged, but on A's servers: none is committed again.
    expect(second.filter((k) => first.includes(k))).toEqual([]);
    expect(homeWhenSent[1]).toBe(true);
  });
});
