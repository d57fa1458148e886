import { afterEach, describe, expect, it } from 'vitest';
import type { LiveJobRecord } from '../../src/state/live-records.ts';
import { parseJson } from '../../src/state/records.ts';
import { OUTCOME_COMPACTED } from '../../src/state/ru-history.ts';
import { RECENT_ENDS_MS } from '../../src/owner/recent-ends.ts';
import { wrapStore } from '../support/wrap-store.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { DyingStore, OwnerCell } from '../support/owner-harness.ts';

/**
 * A front-end keeps the ends of jobs it does not own only from its own start (recent-ends.ts).
 * One that started after an older member leaves the orphaned jobs to that member for its first
 * window, and adopts them itself once its window is whole, or at once when no older member lives
 * (embedded store, manual clock).
 */
let cell: OwnerCell | undefined;
let release: (() => void) | undefined;
afterEach(async () => {
  release?.();
  release = undefined;
  await cell?.close();
  cell = undefined;
});

/** A store whose reads of `job`'s record wait until the returned release is called. */
function heldJobReads(c: OwnerCell, job: string): { store: ReturnType<typeof wrapStore>; release: () => void; reached: () => boolean } {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  let reached = false;
  const store = wrapStore(c.store, {
    get: async (key) => {
      if (key === c.keys.job(job)) {
        reached = true;
        await gate;
      }
      return await c.store.get(key);
    },
  });
  return { store, release: open, reached: () => reached };
}

async function succeedAndForget(c: OwnerCell, job: string): Promise<void> {
  const placed = await c.busy(job);
  expect(await c.finishTasks(job)).toBe(placed.length);
  await c.flush();
  for (const [i, p] of placed.entries()) {
    await c.store.put(p.key, JSON.stringify({ state: 'busy', job: 'other', task: i, caused: Array(10).fill(10), priority: 100, agent: 'X/a1' }));
  }
  await c.store.compact(await c.store.revision());
}

async function expectSucceededNoneCompacted(c: OwnerCell, job: string): Promise<void> {
  await c.until(async () => (await c.jobState(job)) === 'succeeded', 10_000);
  const rec = parseJson<LiveJobRecord>(await c.store.get(c.keys.job(job)));
  expect(JSON.stringify(rec)).not.toContain(OUTCOME_COMPACTED);
}

describe('a front-end younger than its window of kept ends', () => {
  it('leaves an orphaned job to an older member, and adopts it itself once its window is whole', async () => {
    cell = new OwnerCell();
    await cell.seed(2, 2);
    const dying = new DyingStore(cell.store, () => false);
    const a = await cell.owner('A', dying);
    const job = makeJob('orphan-y1', TEST_PROFILES[0]!, 2, { maxQueueMs: 0 });
    // B is older than C; its adoption of the job never gets past its first read.
    const held = heldJobReads(cell, job.id);
    release = held.release;
    const b = await cell.owner('B', held.store);
    await a.accept(job);
    await cell.until(async () => (await cell!.busy(job.id)).length === 2, 10_000);
    await cell.advance(30_000);
    const c = await cell.owner('C');
    const cStart = cell.clock.now();
    dying.dead = true;
    await succeedAndForget(cell, job.id);
    // A's lease runs out: B takes the job up (and is stuck), C leaves it to B.
    await cell.until(() => held.reached(), 20_000);
    await cell.advance(30_000);
    expect(c.stats.adopted).toBe(0);
    expect(b.stats.adopted).toBe(0);
    // Once C keeps a whole window of ends it adopts the job, with the ends its view saw.
    await cell.until(() => c.stats.adopted === 1, RECENT_ENDS_MS + 30_000, 250);
    expect(cell.clock.now() - cStart).toBeGreaterThanOrEqual(RECENT_ENDS_MS);
    await expectSucceededNoneCompacted(cell, job.id);
    expect(c.stats.outcomesFromRecentEnds).toBe(2);
  });

  it('adopts at once when no older member lives', async () => {
    cell = new OwnerCell();
    await cell.seed(2, 2);
    const dying = new DyingStore(cell.store, () => false);
    const a = await cell.owner('A', dying);
    const job = makeJob('orphan-y2', TEST_PROFILES[0]!, 2, { maxQueueMs: 0 });
    await a.accept(job);
    await cell.until(async () => (await cell!.busy(job.id)).length === 2, 10_000);
    await cell.advance(30_000);
    const c = await cell.owner('C');
    const cStart = cell.clock.now();
    dying.dead = true;
    await succeedAndForget(cell, job.id);
    await cell.until(() => c.stats.adopted === 1, 20_000);
    expect(cell.clock.now() - cStart).toBeLessThan(RECENT_ENDS_MS);
    await expectSucceededNoneCompacted(cell, job.id);
  });
});
