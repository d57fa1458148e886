/**
 * The live agent's short-task reserve (agent/short-reserve.ts), on a real etcd: on a cell of ten
 * RUs with two free and a reserve of two, a job of a long-running class waits (by the run times
 * its process saw, SharedView.runTimes) while a short one is placed at once; an RU freed back to
 * two free does not wake it, the next one does. Without the reserve it is placed at once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RESERVE_WHY } from '../../src/agent/short-reserve.ts';
import { Keys } from '../../src/state/keys.ts';
import { parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { releaseRu } from '../../src/state/release.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { oneAgent, type OneAgent } from '../support/one-agent.ts';
import { until } from '../support/until.ts';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const LONG = TEST_PROFILES[4]!;
const SHORT = TEST_PROFILES[0]!;

async function cell(shortReserve: number): Promise<OneAgent> {
  // By arrival, so that only the reserve can put the short job first.
  const one = await oneAgent(`short-reserve-${shortReserve}`, 1, 10, {
    shortReserve,
    waitOrder: 'arrival',
    groupCommit: 0,
    recheckMs: 60_000,
    admission: false,
  });
  closers.push(one.close);
  const { view, agent } = one;
  view.runTimes.observe(LONG.name, 600_000);
  view.runTimes.observe(SHORT.name, 1000);
  // Eight of the ten RUs held by a long job: two free.
  expect((await agent.schedule(makeJob('held', LONG, 8))).placements).toHaveLength(8);
  await until('two free in the view', () => view.state.available.size === 2, 5000, 10);
  return one;
}

/** Frees the RU held by `job`'s task `task`, as its monitor would when it ends. */
async function free(store: ClusterStore, keys: Keys, job: string, task: number): Promise<void> {
  const kv = (await store.range(keys.rus())).kvs.find((k) => {
    const r = parseJson<PlacedRuRecord>(k);
    return r?.state === 'busy' && r.job === job && r.task === task;
  });
  if (!kv) throw new Error(`no RU holds ${job}#${task}`);
  expect(await releaseRu(store, keys, keys.parseRu(kv.key)!, kv.modRevision, parseJson<PlacedRuRecord>(kv)!, { state: 'succeeded', endedAt: Date.now() })).toBe(
    true,
  );
}

describe('the live short-task reserve', () => {
  it('holds a long job at the reserve, places a short one that came after it, and places the long one once more is free', async () => {
    const { store, keys, view, agent } = await cell(0.2);
    let longPlaced = false;
    const long = agent.schedule(makeJob('long', LONG, 1, { maxQueueMs: 60_000 })).then((r) => {
      longPlaced = r.placements.length === 1;
    });
    await until('the long job waits', () => view.waiters.size === 1, 5000, 10);
    expect(agent.stats.reserveHolds).toBeGreaterThan(0);
    // What explain shows for it meanwhile.
    expect(agent.inflight.get('long')?.waiting).toBe(RESERVE_WHY);
    const short = await agent.schedule(makeJob('short', SHORT, 1));
    expect(short.placements).toHaveLength(1);
    // The short task ends: two free again, still the reserve.
    await free(store, keys, 'short', 0);
    await until('two free again', () => view.state.available.size === 2, 5000, 10);
    await new Promise((r) => setTimeout(r, 300));
    expect(longPlaced).toBe(false);
    expect(view.waiters.size).toBe(1);
    // A task of the held job ends: three free, above the reserve.
    await free(store, keys, 'held', 0);
    await long;
    expect(longPlaced).toBe(true);
  });

  it('without the reserve the long job takes a free RU at once', async () => {
    const { view, agent } = await cell(0);
    const r = await agent.schedule(makeJob('long', LONG, 1, { maxQueueMs: 60_000 }));
    expect(r.placements).toHaveLength(1);
    expect(agent.stats.reserveHolds).toBe(0);
    expect(view.waiters.size).toBe(0);
  });
});
