import { afterEach, describe, expect, inject, it } from 'vitest';
import { SchedulingAgent } from '../../src/agent/agent.ts';
import { FreedWaiters, type WaitClass } from '../../src/agent/freed-waiters.ts';
import { JobManager } from '../../src/owner/manager.ts';
import { SharedView } from '../../src/agent/shared-view.ts';
import { agentConfig } from '../../src/agent/config.ts';
import { JobWatchHub } from '../../src/frontend/job-watch.ts';
import { RuIndex } from '../../src/sampling/ru-index.ts';
import { Keys } from '../../src/state/keys.ts';
import { FREE_RU_VALUE, parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { seedCluster, uniformServers } from '../../src/state/seed.ts';
import { MemoryStore, openStore } from '../../src/store/index.ts';
import type { ClusterStore, WatchBatch } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { wrapStore } from '../support/wrap-store.ts';

const clock = new SystemClock();
const log = createLogger('test');
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

function agentsOnOneView(store: ClusterStore, keys: Keys, n: number, config: Parameters<typeof agentConfig>[0] = {}) {
  const cfg = agentConfig(config);
  const view = new SharedView({ store, keys, clock, log, config: cfg });
  const agents = Array.from(
    { length: n },
    (_, i) => new SchedulingAgent({ id: `a${i}`, store, keys, clock, rng: new SeededRng(7 + i), log, config: cfg, view }),
  );
  return { view, agents };
}

describe('one view per process', () => {
  it('two agents sharing a view never pick the same RU: their in-flight claims are one set (real etcd)', async () => {
    const store = await openStore(inject('etcdEndpoint').replace('http://', 'etcd://'));
    const keys = new Keys(`/shared-claims-${Date.now()}/`);
    await seedCluster(store, keys, uniformServers(4, 4));
    const { view, agents } = agentsOnOneView(store, keys, 2, { groupCommit: 0 });
    await Promise.all(agents.map((a) => a.start()));
    closers.push(async () => {
      await Promise.all(agents.map((a) => a.close()));
      await view.close();
      await store.close();
    });
    expect(agents[0]!.state).toBe(agents[1]!.state);
    // Both decide before either commit is answered: the second sees the first's claims. Each
    // job fits in one transaction and together they fill the cell exactly, so any overlap would
    // show as a conflict (each agent's scores rank the same RUs first).
    const [a, b] = await Promise.all([agents[0]!.schedule(makeJob('ja', TEST_PROFILES[0]!, 8)), agents[1]!.schedule(makeJob('jb', TEST_PROFILES[0]!, 8))]);
    expect(a.conflicts + b.conflicts).toBe(0);
    expect(agents[0]!.stats.conflicts + agents[1]!.stats.conflicts).toBe(0);
    const placed = [...a.placements, ...b.placements].map((p) => `${p.ru.server}/${p.ru.index}`);
    expect(new Set(placed).size).toBe(16);
    const stored = (await store.range(keys.rus())).kvs.map((kv) => parseJson<PlacedRuRecord>(kv)!);
    expect(stored.filter((r) => r.state === 'busy')).toHaveLength(16);
    expect(view.state.claimCount).toBe(0);
  });

  it('a claim belongs to its claimer: another call can neither release nor keep it', () => {
    const state = new RuIndex();
    state.upsertServer({ id: 's0', platform: 'p', rack: 'r', rus: 2, speed: 1, attributes: {} });
    const mine = {};
    const theirs = {};
    const occ = { job: 'j', task: 0, caused: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1], priority: 0, state: 'busy' as const };
    expect(state.claim({ server: 's0', index: 0 }, occ, mine)).toBe(true);
    expect(state.claim({ server: 's0', index: 0 }, occ, theirs)).toBe(false);
    state.unclaim({ server: 's0', index: 0 }, theirs);
    expect(state.isClaimed({ server: 's0', index: 0 })).toBe(true);
    expect(state.isClaimed({ server: 's0', index: 0 }, theirs)).toBe(false);
    expect(state.server('s0')!.available(0)).toBe(false);
    state.unclaim({ server: 's0', index: 0 }, mine);
    expect(state.server('s0')!.available(0)).toBe(true);
  });

  it('the store watches of a front-end do not grow with its agents', async () => {
    const count = async (agents: number): Promise<{ watches: number; views: number }> => {
      const inner = new MemoryStore();
      let watches = 0;
      const store = wrapStore(inner, {
        watch: (o) => {
          watches++;
          return inner.watch(o);
        },
      });
      const keys = new Keys('/w/');
      await seedCluster(inner, keys, uniformServers(3, 2));
      const m = new JobManager({ process: `p${agents}`, store, keys, clock, rng: new SeededRng(1), log, agents });
      await m.start();
      const views = new Set(m.agents.map((a) => a.view)).size;
      await m.close();
      await inner.close();
      return { watches, views };
    };
    const one = await count(1);
    const four = await count(4);
    expect(four.views).toBe(1);
    expect(four.watches).toBe(one.watches);
  });

  it('WatchJob streams of many jobs share two store watches, each change reaching only its job', async () => {
    const store = new MemoryStore();
    closers.push(() => store.close());
    const keys = new Keys('/h/');
    const hub = new JobWatchHub(store, keys);
    const got = new Map<string, WatchBatch[]>();
    const offs: (() => void)[] = [];
    for (let j = 0; j < 10; j++) {
      const id = `j${j}`;
      got.set(id, []);
      offs.push(await hub.subscribe(id, { onBatch: (b) => got.get(id)!.push(b), onError: () => undefined }));
    }
    expect(hub.storeWatches).toBe(2);
    await store.put(keys.job('j3'), '{}');
    await store.put(keys.task('j3', 0), '{}');
    await store.put(keys.task('j30', 0), '{}');
    await new Promise((r) => setTimeout(r, 20));
    expect(got.get('j3')!.flatMap((b) => b.events.map((e) => e.kv.key))).toEqual([keys.job('j3'), keys.task('j3', 0)]);
    for (const [id, batches] of got) if (id !== 'j3') expect(batches).toHaveLength(0);
    for (const off of offs) off();
    expect(hub.storeWatches).toBe(0);
  });
});

describe('a freed RU wakes only the waiting calls that can use it', () => {
  const server = (id: string, platform: string, rus = 1) => ({ id, platform, rack: 'r', rus, speed: 1, attributes: {} });

  it('one waiter per freed RU: the first by priority then arrival among the classes that can use it', () => {
    const state = new RuIndex();
    const a = state.upsertServer(server('sa', 'pa'));
    const b = state.upsertServer(server('sb', 'pb'));
    const waiters = new FreedWaiters();
    const woken: string[] = [];
    const cls = (platform: string): WaitClass => ({ key: platform, canUse: (s) => s.spec.platform === platform });
    const add = (name: string, platform: string, priority = 0) =>
      waiters.add(cls(platform), { priority, seq: waiters.nextSeq(), wake: () => woken.push(name) });
    for (let i = 0; i < 50; i++) add(`a${i}`, 'pa');
    add('b0', 'pb');
    add('b1', 'pb');
    add('bHigh', 'pb', 5);
    waiters.freed(b, 0);
    expect(woken).toEqual(['bHigh']);
    waiters.freed(b, 0);
    expect(woken).toEqual(['bHigh', 'b0']);
    waiters.freed(a, 0);
    expect(woken).toEqual(['bHigh', 'b0', 'a0']);
    // Counted: three RUs freed, three calls woken, and no more class checks than classes per RU.
    expect(waiters.stats).toMatchObject({ freed: 3, woken: 3 });
    expect(waiters.stats.classChecks).toBeLessThanOrEqual(3 * 2);
    expect(waiters.size).toBe(50);
  });

  it('a class that is not ready (admission would still queue it) is not woken; readiness may judge the freed RU itself', () => {
    const state = new RuIndex();
    const s = state.upsertServer(server('s', 'p'));
    const waiters = new FreedWaiters();
    let ready = false;
    const woken: number[] = [];
    waiters.add({ key: 'adm', canUse: () => true, ready: () => ready }, { priority: 0, seq: waiters.nextSeq(), wake: () => woken.push(1) });
    waiters.freed(s, 0);
    expect(woken).toEqual([]);
    ready = true;
    waiters.freed(s, 0);
    expect(woken).toEqual([1]);
    // Ready only for RU 1 (as an admission class is for a freed RU acceptable to its job).
    const asked: string[] = [];
    const ru1 = (srv: { id: string }, i: number): boolean => {
      asked.push(`${srv.id}/${i}`);
      return i === 1;
    };
    waiters.add({ key: 'adm2', canUse: () => true, ready: ru1 }, { priority: 0, seq: waiters.nextSeq(), wake: () => woken.push(2) });
    waiters.freed(s, 0);
    expect(woken).toEqual([1]);
    waiters.freed(s, 1);
    expect(woken).toEqual([1, 2]);
    expect(asked).toEqual(['s/0', 's/1']);
  });

  it('a server whose load monitor lifts its block frees its free RUs to the waiters; one still blocked frees nothing', async () => {
    const store = new MemoryStore();
    const keys = new Keys('/unblock/');
    await seedCluster(store, keys, [server('sa', 'c3-large', 3), server('sb', 'c3-large', 2)]);
    await store.put(keys.ru({ server: 'sa', index: 1 }), JSON.stringify({ state: 'busy', job: 'x', task: 0, caused: TEST_PROFILES[0]!.caused }));
    const view = new SharedView({ store, keys, clock, log, config: agentConfig() });
    await view.start();
    closers.push(async () => {
      await view.close();
      await store.close();
    });
    const freed: string[] = [];
    view.cache.onFreed((s, i) => freed.push(`${s.id}/${i}`));
    const record = (id: string, rus: number, blocked: boolean) =>
      JSON.stringify({ id, platform: 'c3-large', rack: 'r', rus, speed: 1, attributes: {}, state: 'up', ...(blocked ? { blocked } : {}) });
    const settled = async (): Promise<void> => {
      const rev = (await store.get(keys.server('sa')))!.modRevision;
      while (view.cache.revision < rev) await new Promise((r) => setTimeout(r, 2));
    };
    await store.put(keys.server('sa'), record('sa', 3, true));
    await store.put(keys.server('sb'), record('sb', 2, true));
    await settled();
    expect(view.state.server('sa')!.blocked).toBe(true);
    expect(view.state.available.size).toBe(0);
    expect(freed).toEqual([]);
    await store.put(keys.server('sb'), record('sb', 2, true)); // rewritten, still blocked
    await store.put(keys.server('sa'), record('sa', 3, false));
    await settled();
    // The free RUs of sa take placements again: each wakes a waiter; the busy one does not.
    expect(freed).toEqual(['sa/0', 'sa/2']);
    await store.put(keys.server('sa'), record('sa', 3, false)); // rewritten, unchanged
    await settled();
    expect(freed).toEqual(['sa/0', 'sa/2']);
  });

  it('live agents: a freed RU of one platform wakes the one job waiting for that platform, not the others', async () => {
    const store = new MemoryStore();
    const keys = new Keys('/f/');
    await seedCluster(store, keys, [server('sa', 'c3-large'), server('sb', 'm3-large')]);
    const { view, agents } = agentsOnOneView(store, keys, 2, { admission: false, recheckMs: 600_000 });
    await Promise.all(agents.map((x) => x.start()));
    closers.push(async () => {
      await Promise.all(agents.map((x) => x.close()));
      await view.close();
      await store.close();
    });
    const p = TEST_PROFILES[0]!;
    // Fill both RUs.
    await agents[0]!.schedule(makeJob('fa', p, 1, { constraints: { platforms: ['c3-large'] } }));
    await agents[0]!.schedule(makeJob('fb', p, 1, { constraints: { platforms: ['m3-large'] } }));
    const waiting = Array.from({ length: 20 }, (_, i) => makeJob(`wa${i}`, p, 1, { constraints: { platforms: ['c3-large'] } }));
    const pending = waiting.map((j, i) => agents[i % 2]!.schedule(j).catch(() => undefined));
    const wb = agents[1]!.schedule(makeJob('wb', p, 1, { constraints: { platforms: ['m3-large'] } }));
    while (view.waiters.size < 21) await new Promise((r) => setTimeout(r, 5));
    const before = { ...view.waiters.stats };
    await store.put(keys.ru({ server: 'sb', index: 0 }), FREE_RU_VALUE);
    const rec = await wb;
    expect(rec.placements.map((x) => x.ru.server)).toEqual(['sb']);
    expect(view.waiters.stats.woken - before.woken).toBe(1);
    expect(view.waiters.size).toBe(20);
    for (const [i, j] of waiting.entries()) agents[i % 2]!.abort(j.id);
    await Promise.all(pending);
  });
});
