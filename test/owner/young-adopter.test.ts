import { afterEach, describe, expect, it } from 'vitest';
import { RECENT_ENDS_MS } from '../../src/owner/recent-ends.ts';
import { OLDER_MEMBERS_FIRST_MS } from '../../src/owner/adoption.ts';
import type { Lease } from '../../src/store/types.ts';
import { wrapStore } from '../support/wrap-store.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { OwnerCell } from '../support/owner-harness.ts';
import { expectSucceededNoneCompacted, jobOfDyingOwner, succeedAndForget } from '../support/orphans.ts';

/**
 * A front-end keeps the task ends its view saw only from its own start (recent-ends.ts). One that
 * started after an older member leaves to it the orphans of leases that went before it kept a
 * whole window of ends, and adopts them itself after OLDER_MEMBERS_FIRST_MS, or at once when no
 * older member lives; the orphans of a lease that goes later it adopts like any member. And a
 * front-end fenced after a pause, adopting its own former job back, has that job's ends too
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

describe('a front-end younger than its window of kept ends', () => {
  it('leaves an orphaned job to an older member, and adopts it itself once it has left it long enough', async () => {
    cell = new OwnerCell();
    const { dying, job } = await jobOfDyingOwner(cell, 'orphan-y1');
    // B is older than C; its adoption of the job never gets past its first read.
    const held = heldJobReads(cell, job.id);
    release = held.release;
    const b = await cell.owner('B', held.store);
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
    await cell.advance(RECENT_ENDS_MS, 250);
    expect(c.stats.adopted).toBe(0);
    // B never gets there: C adopts the job after all (its ends, older than C's window, are gone
    // from every memory by then) and sees it to a final state.
    await cell.until(() => c.stats.adopted === 1, OLDER_MEMBERS_FIRST_MS, 250);
    expect(cell.clock.now() - cStart).toBeGreaterThanOrEqual(OLDER_MEMBERS_FIRST_MS);
    await cell.until(async () => ['succeeded', 'failed'].includes((await cell!.jobState(job.id)) ?? ''), 10_000);
  });

  it('adopts at once when no older member lives', async () => {
    cell = new OwnerCell();
    const { dying, job } = await jobOfDyingOwner(cell, 'orphan-y2');
    await cell.advance(30_000);
    const c = await cell.owner('C');
    const cStart = cell.clock.now();
    dying.dead = true;
    await succeedAndForget(cell, job.id);
    await cell.until(() => c.stats.adopted === 1, 20_000);
    expect(cell.clock.now() - cStart).toBeLessThan(RECENT_ENDS_MS);
    await expectSucceededNoneCompacted(cell, job.id);
  });

  it('adopts at once the orphans of a lease that went after it kept a whole window of ends', async () => {
    cell = new OwnerCell();
    const { dying, job } = await jobOfDyingOwner(cell, 'orphan-y3');
    const held = heldJobReads(cell, job.id);
    release = held.release;
    await cell.owner('B', held.store);
    await cell.advance(30_000);
    const c = await cell.owner('C');
    await cell.advance(RECENT_ENDS_MS + 1000, 250);
    const died = cell.clock.now();
    dying.dead = true;
    await succeedAndForget(cell, job.id);
    await cell.until(() => c.stats.adopted === 1, 20_000);
    expect(cell.clock.now() - died).toBeLessThan(20_000);
    await expectSucceededNoneCompacted(cell, job.id);
  });

  it('a front-end fenced after a pause adopts its own former job back with the ends it saw but had not recorded', async () => {
    cell = new OwnerCell();
    await cell.seed(2, 2);
    const job = makeJob('orphan-y4', TEST_PROFILES[0]!, 2, { maxQueueMs: 0 });
    // A's leases are kept so that the test can end them; A's writes of the job record hang while `stall`.
    const leases: Lease[] = [];
    let stall = false;
    const stalled: (() => void)[] = [];
    const c0 = cell;
    const aStore = wrapStore(c0.store, {
      grantLease: async (ttl, opts) => {
        const l = await c0.store.grantLease(ttl, opts);
        leases.push(l);
        return l;
      },
      txn: async (req) => {
        if (stall && req.success.some((op) => op.type === 'put' && op.key === c0.keys.job(job.id))) await new Promise<void>((r) => stalled.push(r));
        return await c0.store.txn(req);
      },
    });
    const a = await cell.owner('A', aStore);
    const held = heldJobReads(cell, job.id);
    release = held.release;
    const b = await cell.owner('B', held.store);
    await a.accept(job);
    await cell.until(async () => (await cell!.busy(job.id)).length === 2, 10_000);
    await cell.advance(2000);
    // Both tasks succeed; A's view sees it but A cannot record it; the history is compacted.
    stall = true;
    await succeedAndForget(cell, job.id);
    await cell.advance(1000);
    // A's lease ends: B queues the job (and is stuck at its read); A takes a new lease and adopts its job back.
    const before = a.leaseId;
    await Promise.all(leases.map((l) => l.revoke().catch(() => undefined)));
    await cell.until(() => held.reached(), 20_000);
    await cell.until(() => a.leaseId !== undefined && a.leaseId !== before, 20_000);
    stall = false;
    for (const go of stalled.splice(0)) go();
    await cell.until(() => a.stats.adopted === 1, 20_000);
    expect(b.stats.adopted).toBe(0);
    await expectSucceededNoneCompacted(cell, job.id);
    expect(a.stats.outcomesFromRecentEnds).toBe(2);
  });
});
