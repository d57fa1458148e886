import { afterEach, describe, expect, it } from 'vitest';
import type { JobManager } from '../../src/agent/lifecycle.ts';
import type { LiveJobRecord, LiveTaskRecord } from '../../src/state/live-records.ts';
import { parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { audit } from '../support/audit.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { DyingStore, nth, OwnerCell, PausingStore, putsRu } from '../support/owner-harness.ts';

/**
 * The job owner's adoption, fencing and gang reconciliation, on the embedded store with a manual
 * clock: leases expire when the test moves time, so nothing here waits on the wall clock.
 */
let cell: OwnerCell | undefined;
afterEach(async () => {
  await cell?.close();
  cell = undefined;
});

async function tasksOf(c: OwnerCell, job: string): Promise<LiveTaskRecord[]> {
  return (await c.store.range(c.keys.tasks(job))).kvs.map((kv) => parseJson<LiveTaskRecord>(kv) as LiveTaskRecord);
}

describe('job owner (embedded store, manual clock)', () => {
  it('a job whose owner dies before placing it is adopted by another process and runs once', async () => {
    cell = new OwnerCell();
    await cell.seed(2, 4);
    const startRev = await cell.store.revision();
    const dying = new DyingStore(cell.store, (req) => putsRu(req, 'busy'));
    const a = await cell.owner('A', dying);
    const b = await cell.owner('B');
    const job = makeJob('adopt-1', TEST_PROFILES[0]!, 4, { maxQueueMs: 0 });
    await a.submit(job);
    await cell.until(() => dying.dead, 2000);
    // A's placement never arrived; once its lease expires (2 s), B takes the job up.
    await cell.until(() => b.stats.adopted === 1, 10_000);
    await cell.until(async () => (await cell!.busy(job.id)).length === 4, 10_000);
    expect(await cell.finishTasks(job.id)).toBe(4);
    await cell.until(async () => (await cell!.jobState(job.id)) === 'succeeded', 10_000);
    const f = await audit(cell.store, cell.keys, startRev);
    expect(f.finals.get(job.id)).toBe(1);
    expect(f.doubleBooked).toBe(0);
    expect(f.heldTwice).toBe(0);
    expect([...f.orphanOwners, ...f.orphanQueue, ...f.orphanRus, ...f.strayRus]).toEqual([]);
    // Every task was placed by B's agent, at its first attempt.
    const tasks = await tasksOf(cell, job.id);
    expect(tasks.map((t) => [t.state, t.agent, t.attempt])).toEqual(Array(4).fill(['succeeded', 'B/a1', 0]));
  });

  it('an owner paused past its lease writes nothing once its successor has taken over', async () => {
    cell = new OwnerCell();
    await cell.seed(4, 2);
    // A pauses as it sends its placement: the transaction is held, and goes out late.
    const paused = new PausingStore(cell.store, (req) => putsRu(req, 'busy'));
    const a: JobManager = await cell.owner('A', paused);
    const b = await cell.owner('B');
    const job = makeJob('fence-1', TEST_PROFILES[1]!, 1, { maxQueueMs: 0 });
    await a.submit(job);
    await cell.until(() => paused.isPaused, 2000);
    const held = paused.heldTxns[0]!;
    const aServer = held.success.map((op) => cell!.keys.parseRu(op.key)).find((r) => r !== undefined)!.server;
    // B places the task elsewhere, so that only the owner fence can stop A's late write.
    b.agents[0]!.state.setBlocked(aServer, true);
    await cell.until(() => b.stats.adopted === 1, 10_000);
    await cell.until(async () => (await cell!.busy(job.id)).length === 1, 10_000);
    const bRu = (await cell.busy(job.id))[0]!;
    expect(cell.keys.parseRu(bRu.key)?.server).not.toBe(aServer);
    // Without its owner-lease compare, A's held placement would still apply now.
    const unfenced = held.compare.filter((c) => c.target !== 'lease');
    expect(unfenced.length).toBeLessThan(held.compare.length);
    expect((await cell.store.txn({ compare: unfenced, success: [] })).succeeded).toBe(true);
    const before = (await cell.store.range(cell.keys.rus())).kvs.map((kv) => kv.value).sort();
    // A wakes up: its held placement reaches the store after B's, and must change nothing.
    paused.resume();
    await cell.advance(3000);
    expect(paused.lateResults.length).toBeGreaterThanOrEqual(1);
    expect(paused.lateResults.every((r) => !r.succeeded)).toBe(true);
    const after = (await cell.store.range(cell.keys.rus())).kvs.map((kv) => kv.value).sort();
    expect(after).toEqual(before);
    const rec = parseJson<LiveJobRecord>(await cell.store.get(cell.keys.job(job.id)));
    expect(rec?.owner).toBe('B/a1');
    // A has dropped the job (its lease was fenced) and owns nothing.
    expect(a.ownedJobs()).toEqual([]);
  });

  it.each([
    // Chunk 1 reserved, chunk 2 in flight: the adopter gives every reservation back and places the gang whole.
    { when: 'mid-reservation', dieAt: nth((r) => putsRu(r, 'reserved'), 2), confirmed: false },
    // Chunk 1 confirmed, the rest reserved: part of the gang may run, so the adopter confirms the rest.
    { when: 'mid-confirmation', dieAt: nth((r) => putsRu(r, 'busy'), 2), confirmed: true },
  ])('a gang whose owner dies $when is settled all or nothing by the adopter', async ({ dieAt, confirmed }) => {
    // 14 ops per transaction: 4 placements each, so a gang of 10 takes three transactions.
    cell = new OwnerCell({ maxTxnOps: 14 });
    await cell.seed(4, 4);
    const startRev = await cell.store.revision();
    const dying = new DyingStore(cell.store, dieAt);
    const a = await cell.owner('A', dying);
    const b = await cell.owner('B');
    expect(a.agents[0]?.picksPerTxn).toBe(4);
    const job = makeJob('gang-h', TEST_PROFILES[4]!, 10, { mode: 'gang', maxQueueMs: 0 });
    await a.submit(job);
    await cell.until(() => dying.dead, 2000);
    const reserved = (await cell.store.range(cell.keys.rus())).kvs.filter((kv) => parseJson<PlacedRuRecord>(kv)?.state === 'reserved');
    expect(reserved.length).toBeGreaterThanOrEqual(4);
    await cell.until(() => b.stats.adopted === 1, 10_000);
    await cell.until(async () => (await cell!.busy(job.id)).length === 10, 15_000);
    expect(await cell.finishTasks(job.id)).toBe(10);
    await cell.until(async () => (await cell!.jobState(job.id)) === 'succeeded', 10_000);
    const f = await audit(cell.store, cell.keys, startRev);
    expect(f.doubleBooked).toBe(0);
    expect(f.heldTwice).toBe(0);
    expect([...f.orphanOwners, ...f.orphanQueue, ...f.orphanRus, ...f.strayRus]).toEqual([]);
    const agents = new Set((await tasksOf(cell, job.id)).map((t) => t.agent));
    // Given back: B placed the whole gang again. Completed: A's reservations stand, confirmed by B.
    if (confirmed) expect(agents.has('A/a1')).toBe(true);
    else expect([...agents]).toEqual(['B/a1']);
  });
});
