/**
 * A task that succeeds is recorded by its node in the freed RU alone; its owner writes the
 * outcomes it learned into the job's outcome records (state/task-outcomes.ts) with the job
 * record. An owner that dies in between leaves them in the RUs' history, where its adopter finds
 * them, also once the RUs were placed again or their node went; if that history is compacted the
 * task fails, saying so, and never runs again. Embedded store, manual clock.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { loadCatalog, parseJobSpec } from '../../src/model/catalog.ts';
import type { RuRef } from '../../src/model/types.ts';
import type { LiveJobRecord, LiveTaskRecord } from '../../src/state/live-records.ts';
import { placementTxn } from '../../src/state/placement.ts';
import { lastJsonOfFreedRu, parseJson } from '../../src/state/records.ts';
import { OUTCOME_COMPACTED } from '../../src/state/ru-history.ts';
import { isDoneKey } from '../../src/state/task-outcomes.ts';
import { isChunkKey } from '../../src/state/task-chunks.ts';
import { audit } from '../support/audit.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import type { JobManager } from '../../src/owner/manager.ts';
import { DyingStore, OwnerCell } from '../support/owner-harness.ts';
import { taskRecords } from '../support/task-records.ts';

let cell: OwnerCell | undefined;
afterEach(async () => {
  await cell?.close();
  cell = undefined;
});

const catalog = loadCatalog();

/**
 * Places job `id`'s tasks on the job's freed RUs directly (a job no owner here follows), as another
 * front-end would; with `carry`, each placement carries the freed RU's outcome on (`prev`), as an
 * agent's does, else not (a placement of an older build).
 */
async function placeOver(c: OwnerCell, id: string, freed: { key: string }[], carry = false): Promise<void> {
  const job = parseJobSpec({ name: id, profile: 'spark-lr', tasks: freed.length, durationMs: 60_000 }, catalog, { id, now: c.clock.now() });
  const items = [];
  for (const [task, f] of freed.entries()) {
    const kv = (await c.store.get(f.key))!;
    const prevLast = carry ? lastJsonOfFreedRu(kv.value) : undefined;
    items.push({ ref: c.keys.parseRu(kv.key) as RuRef, task, attempt: 0, ruRev: kv.modRevision, basedOn: 0, ...(prevLast ? { prevLast } : {}) });
  }
  const { req } = placementTxn({ keys: c.keys, agent: 'other', commitId: `c-${id}`, now: c.clock.now(), job, items, scope: 'ru', ruState: 'busy' });
  expect((await c.store.txn(req)).succeeded).toBe(true);
}

/** A job of 4 tasks placed by owner A, whose store stops answering (`dying.dead`) when the test says. */
async function placedByA(c: OwnerCell, id: string): Promise<{ dying: DyingStore; job: string; rus: { key: string }[] }> {
  await c.seed(2, 2);
  const dying = new DyingStore(c.store, () => false);
  const a = await c.owner('A', dying);
  const job = makeJob(id, TEST_PROFILES[0]!, 4, { maxQueueMs: 0 });
  await a.accept(job);
  await c.until(async () => (await c.busy(job.id)).length === 4, 10_000);
  await c.until(async () => parseJson<LiveJobRecord>(await c.store.get(c.keys.job(job.id)))?.state === 'running', 10_000);
  return { dying, job: job.id, rus: await c.busy(job.id) };
}

/** Job `id`'s four tasks end (their nodes free the RUs) after owner A stopped answering: nobody recorded them. */
async function endedUnrecorded(c: OwnerCell, id: string): Promise<{ job: string; rus: { key: string }[] }> {
  const { dying, job, rus } = await placedByA(c, id);
  dying.dead = true;
  expect(await c.finishTasks(job)).toBe(4);
  return { job, rus };
}

/** Owner B, started now, once it has adopted A's job. */
async function adopter(c: OwnerCell): Promise<JobManager> {
  const b = await c.owner('B');
  await c.until(() => b.stats.adopted === 1, 10_000);
  return b;
}

describe('task outcomes recorded by their owner', () => {
  it('a live owner writes the successes it learns from the freed RUs into one outcome record, and no task record of their own', async () => {
    const c = (cell = new OwnerCell());
    const { job } = await placedByA(c, 'live-1');
    const startRev = await c.store.revision();
    expect(await c.finishTasks(job)).toBe(4);
    await c.until(async () => (await c.jobState(job)) === 'succeeded', 10_000);
    const keys = (await c.store.range(c.keys.tasks(job))).kvs.map((kv) => kv.key);
    // The placement's chunk record and the owner's outcome record; nothing per task.
    expect(keys.filter((k) => !isChunkKey(k) && !isDoneKey(k))).toEqual([]);
    expect(keys.filter((k) => isDoneKey(k))).toHaveLength(1);
    const tasks = await taskRecords<LiveTaskRecord>(c.store, c.keys, job);
    expect(tasks.map((t) => [t.state, t.agent, t.attempt, typeof t.endedAt])).toEqual(Array(4).fill(['succeeded', 'A/a1', 0, 'number']));
    const rec = parseJson<LiveJobRecord>(await c.store.get(c.keys.job(job)));
    expect(rec?.taskStates).toEqual({ succeeded: 4 });
    expect(rec?.seen).toBeGreaterThan(startRev);
    const f = await audit(c.store, c.keys, startRev);
    expect(f.finals.get(job)).toBe(1);
  });

  it('an owner that dies after its tasks ended, before it recorded them: its adopter finds the successes in the RU history, the RUs placed again meanwhile', async () => {
    const c = (cell = new OwnerCell());
    const { job, rus } = await endedUnrecorded(c, 'dies-1');
    // Another job takes the four RUs: their values no longer say how the first job's tasks ended.
    await placeOver(c, 'filler', rus);
    const b = await adopter(c);
    await c.until(async () => (await c.jobState(job)) === 'succeeded', 10_000);
    expect(b.stats.historyReads).toBeGreaterThanOrEqual(4);
    // Nothing was placed again: every task ended at its first attempt, where A placed it.
    const tasks = await taskRecords<LiveTaskRecord>(c.store, c.keys, job);
    expect(tasks.map((t) => [t.state, t.attempt, t.agent])).toEqual(Array(4).fill(['succeeded', 0, 'A/a1']));
    expect(await c.busy(job)).toEqual([]);
    expect(parseJson<LiveJobRecord>(await c.store.get(c.keys.job(job)))?.taskStates).toEqual({ succeeded: 4 });
  });

  it('the same when the tasks\u2019 node went after they ended (their RUs deleted with its lease)', async () => {
    const c = (cell = new OwnerCell());
    const { job, rus } = await endedUnrecorded(c, 'dies-2');
    const servers = new Set(rus.map((r) => c.keys.parseRu(r.key)!.server));
    for (const s of servers) {
      await c.store.txn({
        compare: [],
        success: [
          { type: 'delete', key: c.keys.server(s) },
          { type: 'delete', key: c.keys.serverRus(s), prefix: true },
        ],
      });
    }
    const b = await adopter(c);
    await c.until(async () => (await c.jobState(job)) === 'succeeded', 10_000);
    expect(b.stats.lost).toBe(0);
    const tasks = await taskRecords<LiveTaskRecord>(c.store, c.keys, job);
    expect(tasks.map((t) => [t.state, t.attempt])).toEqual(Array(4).fill(['succeeded', 0]));
  });

  it('an outcome compacted out of the history before anyone recorded it: the task fails, saying so, and is not run again', async () => {
    const c = (cell = new OwnerCell());
    const { job, rus } = await endedUnrecorded(c, 'dies-3');
    await placeOver(c, 'filler', rus);
    await c.store.compact(await c.store.revision());
    const b = await adopter(c);
    await c.until(async () => (await c.jobState(job)) === 'failed', 10_000);
    const tasks = await taskRecords<LiveTaskRecord>(c.store, c.keys, job);
    expect(tasks.map((t) => [t.state, t.attempt, t.message])).toEqual(Array(4).fill(['failed', 0, OUTCOME_COMPACTED]));
    // Counted once each (tarcil_task_outcomes_compacted).
    await c.advance(2000);
    expect(b.stats.outcomesCompacted).toBe(4);
    expect(b.stats.outcomesCarried).toBe(0);
    expect(await c.busy(job)).toEqual([]);
  });

  it('the same compaction after a placement that carried the outcomes on (as an agent places): the adopter finds the successes in the RUs as they are', async () => {
    const c = (cell = new OwnerCell());
    const { job, rus } = await endedUnrecorded(c, 'dies-4');
    await placeOver(c, 'filler', rus, true);
    await c.store.compact(await c.store.revision());
    const b = await adopter(c);
    await c.until(async () => (await c.jobState(job)) === 'succeeded', 10_000);
    const tasks = await taskRecords<LiveTaskRecord>(c.store, c.keys, job);
    expect(tasks.map((t) => [t.state, t.attempt, t.agent])).toEqual(Array(4).fill(['succeeded', 0, 'A/a1']));
    expect(b.stats.outcomesCarried).toBe(4);
    expect(b.stats.outcomesCompacted).toBe(0);
  });
});
