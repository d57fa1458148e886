import { afterEach, describe, expect, it } from 'vitest';
import { wrapStore } from '../support/wrap-store.ts';
import { OwnerCell } from '../support/owner-harness.ts';
import { expectSucceededNoneCompacted, jobOfDyingOwner, succeedAndForget } from '../support/orphans.ts';
import type { JobManager } from '../../src/owner/manager.ts';
import { RESCAN_MS } from '../../src/owner/adoption.ts';
import { TarcilError } from '../../src/util/errors.ts';

/**
 * A dead owner's job waits its turn for adoption (a large cell's adopters take a few jobs at a
 * time). Its tasks that end meanwhile are applied from the freed RUs the adopter's view saw, not
 * read later from the RUs' history, which compaction may have taken by then (embedded store,
 * manual clock).
 */
let cell: OwnerCell | undefined;
afterEach(async () => {
  await cell?.close();
  cell = undefined;
});

/** The job succeeds with no task failed as compacted, and its adopter found none. */
async function expectNoneCompacted(c: OwnerCell, job: string, adopter: JobManager): Promise<void> {
  await expectSucceededNoneCompacted(c, job);
  expect(adopter.stats.outcomesCompacted).toBe(0);
}

describe('a job waiting for adoption', () => {
  it('keeps the outcomes of tasks that end while it waits, though their RUs moved on and the history was compacted', async () => {
    cell = new OwnerCell();
    const { dying, job } = await jobOfDyingOwner(cell, 'orphan-1');
    await cell.advance(2000);
    // B's adoption of the job waits at its first read (its turn in the adoption queue).
    let release!: () => void;
    const turn = new Promise<void>((r) => (release = r));
    let waiting = false;
    const bStore = wrapStore(cell.store, {
      get: async (key) => {
        if (key === cell!.keys.job(job.id)) {
          waiting = true;
          await turn;
        }
        return await cell!.store.get(key);
      },
    });
    const b = await cell.owner('B', bStore);
    dying.dead = true;
    await cell.until(() => waiting, 10_000);
    // Meanwhile both tasks succeed and how they ended is compacted away.
    await succeedAndForget(cell, job.id);
    release();
    await cell.until(() => b.stats.adopted === 1, 10_000);
    await expectNoneCompacted(cell, job.id, b);
  });

  it('keeps the outcomes of tasks that ended before the scan found the job orphaned, from what its view saw then', async () => {
    cell = new OwnerCell();
    const { dying, job } = await jobOfDyingOwner(cell, 'orphan-2');
    const b = await cell.owner('B');
    await cell.advance(2000);
    // A stops reaching the store, its lease still alive: both tasks succeed before anyone could
    // adopt the job, and how they ended is compacted away.
    dying.dead = true;
    await succeedAndForget(cell, job.id);
    expect(b.stats.adopted).toBe(0);
    // A's lease runs out; B adopts the job and records both successes its view saw.
    await cell.until(() => b.stats.adopted === 1, 20_000);
    await expectNoneCompacted(cell, job.id, b);
    expect(b.stats.outcomesFromRecentEnds).toBe(2);
  });

  it('is found by a scan soon after one that failed, not at the next periodic scan', async () => {
    cell = new OwnerCell();
    const { dying } = await jobOfDyingOwner(cell, 'orphan-3');
    // B's reads of every owner record fail while `failing`, as they time out on an overloaded store.
    let failing = false;
    let failed = 0;
    const c0 = cell;
    const bStore = wrapStore(c0.store, {
      snapshot: async (prefixes) => {
        if (failing && prefixes.includes(c0.keys.owners())) {
          failed++;
          failing = false;
          throw new TarcilError('DEADLINE_EXCEEDED', 'range: deadline exceeded');
        }
        return await c0.store.snapshot(prefixes);
      },
    });
    const b = await cell.owner('B', bStore);
    await cell.advance(2000);
    failing = true;
    dying.dead = true;
    // A's lease runs out; B's scan fails; the next one finds the job.
    await cell.until(() => failed === 1, 20_000);
    const at = cell.clock.now();
    await cell.until(() => b.stats.adopted === 1, 30_000);
    expect(cell.clock.now() - at).toBeLessThan(RESCAN_MS + 2000);
  });

  it('keeps the ends it saw for the next adoption when one fails', async () => {
    cell = new OwnerCell();
    const { dying, job } = await jobOfDyingOwner(cell, 'orphan-4');
    // B's first read of the job record, its adoption's first step, fails.
    let reads = 0;
    const c0 = cell;
    const bStore = wrapStore(c0.store, {
      get: async (key) => {
        if (key === c0.keys.job(job.id) && reads++ === 0) throw new TarcilError('UNAVAILABLE', 'get: connection dropped');
        return await c0.store.get(key);
      },
    });
    const b = await cell.owner('B', bStore);
    await cell.advance(2000);
    dying.dead = true;
    await succeedAndForget(cell, job.id);
    await cell.until(() => b.stats.adopted === 1, 20_000);
    expect(reads).toBeGreaterThan(1);
    await expectNoneCompacted(cell, job.id, b);
  });
});
