/**
 * The job owner tells its agents how long each class's tasks ran (agent/wait-order.ts RunTimes,
 * read by the `ratio` wait order): a success it sees end counts once, from its placement to its
 * end; a failure does not count.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { OwnerCell } from '../support/owner-harness.ts';

let cell: OwnerCell | undefined;
afterEach(async () => {
  await cell?.close();
  cell = undefined;
});

describe('the run times an owner learns', () => {
  it("are its tasks' from placement to end, per workload class, successes only", async () => {
    const c = (cell = new OwnerCell());
    await c.seed(2, 4);
    const a = await c.owner('A');
    const profile = TEST_PROFILES[0]!;
    const other = TEST_PROFILES[1]!;
    expect(a.runTimes.expected(profile.name)).toBeUndefined();
    const job = makeJob('rt-1', profile, 2, { maxQueueMs: 0 });
    await a.accept(job);
    await c.until(async () => (await c.busy(job.id)).length === 2, 5000);
    await c.advance(3000);
    expect(await c.finishTasks(job.id)).toBe(2);
    await c.until(async () => (await c.jobState(job.id)) === 'succeeded', 5000);
    const ran = a.runTimes.expected(profile.name) as number;
    expect(ran).toBeGreaterThanOrEqual(3000);
    expect(ran).toBeLessThan(3500);
    // A failed task's time is not a run time of its class: the other class has none of its own yet.
    const failing = makeJob('rt-2', other, 1, { maxQueueMs: 0 });
    await a.accept(failing);
    await c.until(async () => (await c.busy(failing.id)).length === 1, 5000);
    await c.advance(20_000);
    expect(await c.finishTasks(failing.id, 'failed')).toBe(1);
    await c.until(async () => ['failed', 'queued', 'placed', 'running'].includes((await c.jobState(failing.id)) ?? ''), 5000);
    await c.advance(500);
    expect(a.runTimes.expected(other.name)).toBe(ran);
  });
});
