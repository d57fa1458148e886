/**
 * Orphaned jobs for the adoption tests (test/owner): a job placed by an owner that can die, and
 * its tasks' ends made unfindable in the store, so that only what an adopter kept can tell them.
 */
import { expect } from 'vitest';
import type { JobSpec } from '../../src/model/types.ts';
import type { JobManager } from '../../src/owner/manager.ts';
import type { LiveJobRecord } from '../../src/state/live-records.ts';
import { parseJson } from '../../src/state/records.ts';
import { OUTCOME_COMPACTED } from '../../src/state/ru-history.ts';
import { makeJob, TEST_PROFILES } from './jobs.ts';
import { DyingStore, type OwnerCell } from './owner-harness.ts';

/** On a cell of 2 servers × 2 RUs: owner A, on a store that dies when told, with job `id` of 2 tasks placed. */
export async function jobOfDyingOwner(c: OwnerCell, id: string): Promise<{ dying: DyingStore; a: JobManager; job: JobSpec }> {
  await c.seed(2, 2);
  const dying = new DyingStore(c.store, () => false);
  const a = await c.owner('A', dying);
  const job = makeJob(id, TEST_PROFILES[0]!, 2, { maxQueueMs: 0 });
  await a.accept(job);
  await c.until(async () => (await c.busy(job.id)).length === 2, 10_000);
  return { dying, a, job };
}

/**
 * Both of the job's tasks succeed, other work takes their RUs, and the store's history is
 * compacted: nothing in the store says any more how the tasks ended.
 */
export async function succeedAndForget(c: OwnerCell, job: string): Promise<void> {
  const placed = await c.busy(job);
  expect(await c.finishTasks(job)).toBe(2);
  await c.flush();
  for (const [i, p] of placed.entries()) {
    await c.store.put(p.key, JSON.stringify({ state: 'busy', job: 'other', task: i, caused: Array(10).fill(10), priority: 100, agent: 'C/a1' }));
  }
  await c.store.compact(await c.store.revision());
}

/** The job succeeds, and its record holds no task failed as compacted. */
export async function expectSucceededNoneCompacted(c: OwnerCell, job: string): Promise<void> {
  await c.until(async () => (await c.jobState(job)) === 'succeeded', 10_000);
  const rec = parseJson<LiveJobRecord>(await c.store.get(c.keys.job(job)));
  expect(JSON.stringify(rec)).not.toContain(OUTCOME_COMPACTED);
}
