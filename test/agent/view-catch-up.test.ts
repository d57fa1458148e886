/**
 * After a conflicting commit, an agent whose view lags behind the store waits for its view to see
 * the commits that took its picks before it samples again (src/agent/commit.ts catchUp), rather
 * than picking, at once, another RU its view still shows free but the store had given away as
 * long ago. On the embedded store; the lag is a watch whose deliveries the test holds back.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SchedulingAgent } from '../../src/agent/agent.ts';
import { AgentCache } from '../../src/agent/cache.ts';
import { RuIndex } from '../../src/sampling/ru-index.ts';
import { Keys } from '../../src/state/keys.ts';
import { FREE_RU_VALUE } from '../../src/state/records.ts';
import { seedCluster, uniformServers } from '../../src/state/seed.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import type { WatchBatch } from '../../src/store/types.ts';
import { ManualClock, SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { wrapStore } from '../support/wrap-store.ts';

const keys = new Keys('/v/');
const log = createLogger('test', 'silent');
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const rival = (task: number): string => JSON.stringify({ state: 'busy', job: 'rival', task, caused: Array(10).fill(10), priority: 100, agent: 'fe2/a0' });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe("an agent's view after a conflict", () => {
  it('caughtUp resolves once the view has applied a revision, false after its bound', async () => {
    const clock = new ManualClock(1_000);
    const store = new MemoryStore({ clock });
    await seedCluster(store, keys, uniformServers(1, 2));
    const cache = new AgentCache({ store, keys, state: new RuIndex(), clock, log });
    await cache.start();
    closers.push(async () => {
      await cache.close();
      await store.close();
    });
    const at = cache.revision;
    expect(await cache.caughtUp(at, 10)).toBe(true);
    const next = cache.caughtUp(at + 1, 1000);
    await store.put(keys.ru({ server: 's0000', index: 0 }), rival(0));
    expect(await next).toBe(true);
    expect(cache.revision).toBeGreaterThan(at);
    const far = cache.caughtUp(cache.revision + 100, 1000);
    clock.advance(999);
    await sleep(5);
    let settled: boolean | undefined;
    void far.then((v) => (settled = v));
    await sleep(5);
    expect(settled).toBeUndefined();
    clock.advance(1);
    expect(await far).toBe(false);
  });

  it('a resample waits for the view to see the rival commit: one conflict, not one per RU the view wrongly shows free', async () => {
    const store = new MemoryStore();
    await seedCluster(store, keys, uniformServers(1, 2));
    let lagging = false;
    const held: (() => void)[] = [];
    const lagged = wrapStore(store, {
      watch: (opts) =>
        store.watch({
          ...opts,
          onEvents: (b: WatchBatch) => (lagging ? held.push(() => opts.onEvents(b)) : opts.onEvents(b)),
        }),
    });
    const agent = new SchedulingAgent({ id: 'fe1/a0', store: lagged, keys, clock: new SystemClock(), rng: new SeededRng(5), log, config: { recheckMs: 30 } });
    await agent.start();
    closers.push(async () => {
      await agent.close();
      await store.close();
    });
    // Another front-end takes both RUs, one commit each; this agent's view does not see them yet.
    lagging = true;
    const refs = [0, 1].map((index) => ({ server: 's0000', index }));
    for (const [i, ref] of refs.entries()) await store.put(keys.ru(ref), rival(i));
    const scheduled = agent.schedule(makeJob('j', TEST_PROFILES[0]!, 1, { maxQueueMs: 60_000 }));
    const deadline = Date.now() + 5000;
    while (agent.stats.conflicts === 0 && Date.now() < deadline) await sleep(5);
    expect(agent.stats.conflicts).toBe(1);
    // Waiting for its view (well within the bound): it does not commit on the other RU meanwhile.
    await sleep(100);
    expect([agent.stats.commits, agent.stats.conflicts, agent.stats.viewWaits]).toEqual([1, 1, 1]);
    // The view catches up: both RUs are busy, so the job waits for one to free, then takes it.
    lagging = false;
    for (const deliver of held.splice(0)) deliver();
    await sleep(50);
    expect(agent.stats.conflicts).toBe(1);
    await store.put(keys.ru(refs[1]!), FREE_RU_VALUE);
    const rec = await scheduled;
    expect(rec.placements.map((p) => p.ru)).toEqual([refs[1]]);
    expect([agent.stats.conflicts, agent.stats.viewWaits]).toEqual([1, 1]);
  });
});
