/**
 * The live agent's order among jobs waiting for a freed RU, on a real etcd: by arrival by
 * default, by response ratio with `waitOrder=ratio`, reading the run times its process saw its
 * tasks' classes take (SharedView.runTimes, which the job owner feeds).
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { WaitOrder } from '../../src/agent/wait-order.ts';
import { parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { releaseRu } from '../../src/state/release.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { oneAgent } from '../support/one-agent.ts';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const LONG = TEST_PROFILES[4]!;
const SHORT = TEST_PROFILES[0]!;

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** One RU, held; a job of a long-running class waits for it, then one of a short class; the RU is freed. Which one gets it? */
async function firstPlaced(waitOrder: WaitOrder): Promise<string> {
  const { store, keys, view, agent, close } = await oneAgent(`wait-order-${waitOrder}`, 1, 1, {
    waitOrder,
    groupCommit: 0,
    recheckMs: 60_000,
    admission: false,
  });
  closers.push(close);
  view.runTimes.observe(LONG.name, 600_000);
  view.runTimes.observe(SHORT.name, 1000);
  const held = await agent.schedule(makeJob('held', LONG, 1));
  expect(held.placements).toHaveLength(1);
  const placed: string[] = [];
  const wait = (id: string, p: typeof LONG) =>
    agent
      .schedule(makeJob(id, p, 1, { maxQueueMs: 60_000 }))
      .then((r) => {
        if (r.placements.length > 0) placed.push(id);
      })
      // The one still waiting is stopped at the end.
      .catch(() => undefined);
  void wait('long', LONG);
  await until(() => view.waiters.size === 1);
  // The short job waits a little less than the long one: by arrival the long one is first.
  await new Promise((r) => setTimeout(r, 200));
  void wait('short', SHORT);
  await until(() => view.waiters.size === 2);
  const kv = (await store.range(keys.rus())).kvs[0]!;
  expect(await releaseRu(store, keys, keys.parseRu(kv.key)!, kv.modRevision, parseJson<PlacedRuRecord>(kv)!, { state: 'succeeded', endedAt: Date.now() })).toBe(
    true,
  );
  await until(() => placed.length === 1);
  agent.abort('long');
  agent.abort('short');
  return placed[0] as string;
}

describe('live waiters for a freed RU', () => {
  it('by arrival: the job that waited first takes the freed RU', async () => {
    expect(await firstPlaced('arrival')).toBe('long');
  });

  it('by response ratio: the job of the short class takes it, although it waited less', async () => {
    expect(await firstPlaced('ratio')).toBe('short');
  });
});
