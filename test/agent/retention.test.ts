import { afterEach, describe, expect, it } from 'vitest';
import { Housekeeper } from '../../src/state/housekeeping.ts';
import { isFinalJob, LiveKeys, type LiveJobRecord } from '../../src/state/live-records.ts';
import { parseJson } from '../../src/state/records.ts';
import { REQUEST_RETAIN_FLOOR_MS } from '../../src/state/retention.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { DyingStore, OwnerCell } from '../support/owner-harness.ts';
import { wrapStore } from '../support/wrap-store.ts';
import { taskRecords } from '../support/task-records.ts';
import { isChunkKey } from '../../src/state/task-chunks.ts';
import { isDoneKey } from '../../src/state/task-outcomes.ts';

/**
 * Retention on the embedded store with a manual clock: an hour passes in a few advance() calls.
 * The housekeeper here runs retention only (compaction is tested on etcd, test/state).
 */
let cell: OwnerCell | undefined;
const keepers: Housekeeper[] = [];
afterEach(async () => {
  for (const h of keepers.splice(0)) {
    let done = false;
    void h.close().finally(() => (done = true));
    // One whose store died never hears back: leave its close() pending.
    for (let i = 0; i < 50 && cell && !done; i++) await cell.advance(20);
  }
  await cell?.close();
  cell = undefined;
});

const MIN = 60_000;

function keeper(c: OwnerCell, name: string, over: Partial<ConstructorParameters<typeof Housekeeper>[0]> = {}, store: ClusterStore = c.store): Housekeeper {
  const h = new Housekeeper({
    store,
    keys: c.keys,
    clock: c.clock,
    log: c.log,
    process: name,
    retainMs: 10 * MIN,
    compactMarginMs: 0,
    sweepEveryMs: 5000,
    electionTtlSeconds: 2,
    ...over,
  });
  keepers.push(h);
  h.start();
  return h;
}

/** Every key the store holds for a job: record, tasks, decision, reports. */
async function keysOf(c: OwnerCell, job: string): Promise<string[]> {
  const live = new LiveKeys(c.keys);
  const out: string[] = [];
  for (const k of [c.keys.job(job), c.keys.decision(job), c.keys.owner(job)]) if (await c.store.get(k)) out.push(k);
  for (const p of [c.keys.tasks(job), live.jobReports(job)]) for (const kv of (await c.store.range(p)).kvs) out.push(kv.key);
  for (const kv of (await c.store.range(c.keys.finished())).kvs) if (kv.key.endsWith(`-${job}`)) out.push(kv.key);
  return out;
}

describe('retention of finished jobs (embedded store, manual clock)', () => {
  it('deletes a finished job with its tasks, decision, index entry and (later) request id after its period, following no record; a running job never', async () => {
    cell = new OwnerCell();
    await cell.seed(2, 4);
    const m = await cell.owner('A');
    const live = new LiveKeys(cell.keys);
    // The housekeeper leads before the jobs finish: it learns of them from finished/, not from a watch.
    const watched: string[] = [];
    const counting = wrapStore(cell.store, {
      watch: (opts) => {
        watched.push(opts.prefix);
        return cell!.store.watch(opts);
      },
    });
    const h = keeper(cell, 'A', { retainMs: 10 * MIN }, counting);
    await cell.until(() => h.leading, 5000);
    const done = makeJob('ret-done', TEST_PROFILES[0]!, 3, { maxQueueMs: 0 });
    const running = makeJob('ret-running', TEST_PROFILES[1]!, 2, { maxQueueMs: 0 });
    await m.accept(done, { requestId: 'req-done' });
    await m.accept(running, { requestId: 'req-running' });
    await cell.until(async () => (await cell!.busy(done.id)).length === 3 && (await cell!.busy(running.id)).length === 2, 10_000);
    expect(await cell.finishTasks(done.id)).toBe(3);
    await cell.until(async () => (await cell!.jobState(done.id)) === 'succeeded', 10_000);
    const finishedAt = cell.clock.now();
    const before = await keysOf(cell, done.id);
    expect(before).toContain(cell.keys.decision(done.id));
    // The chunk record of the tasks its placement started, and the record of their outcomes (no task wrote one of its own).
    const taskKeys = before.filter((k) => k.startsWith(cell!.keys.tasks(done.id)));
    expect(taskKeys.map((k) => (isChunkKey(k) ? 'chunk' : isDoneKey(k) ? 'outcomes' : 'own')).sort()).toEqual(['chunk', 'outcomes']);
    const entries = (await cell.store.range(cell.keys.finished())).kvs;
    expect(entries.map((kv) => kv.key)).toEqual([cell.keys.finishedEntry(finishedAt, done.id)]);
    // The entry is written by the final transaction itself: the same revision as the final record.
    expect(entries[0]!.modRevision).toBe((await cell.store.get(cell.keys.job(done.id)))!.modRevision);
    // Nobody follows the job records or the request ids: retention reads finished/ when it sweeps.
    expect(watched.filter((p) => p.startsWith(cell!.keys.jobs()) || p.startsWith(live.request('')) || p === cell!.keys.prefix)).toEqual([]);
    // Within the period: everything stays.
    await cell.advance(9 * MIN, 1000);
    expect(await keysOf(cell, done.id)).toEqual(before);
    // Past it (plus at most one sweep period): the job and all its keys are gone.
    await cell.until(async () => (await cell!.store.get(cell!.keys.job(done.id))) === undefined, 2 * MIN, 1000);
    expect(cell.clock.now() - finishedAt).toBeGreaterThanOrEqual(10 * MIN);
    expect(await keysOf(cell, done.id)).toEqual([]);
    expect((await cell.store.range(cell.keys.finished())).kvs).toEqual([]);

    // Its request id outlives it until the floor (10 min after the request, here reached already
    // with a 10 min retention: the same sweep or the next one takes it).
    await cell.until(async () => (await cell!.store.get(live.request('req-done'))) === undefined, 2 * MIN, 1000);

    // The running job: hours later, it and its request id are all there.
    await cell.advance(2 * 60 * MIN, 10_000);
    expect(await cell.jobState(running.id)).toBe('running');
    expect(await taskRecords(cell.store, cell.keys, running.id)).toHaveLength(2);
    expect(await cell.store.get(live.request('req-running'))).toBeDefined();
    expect(h.retention.totals.raced).toBe(0);
  });

  it.each([
    ['found at its first sweep', false],
    ['leading before the job was submitted', true],
  ])('keeps a request id for at least the floor when the retention is shorter (housekeeper %s); a retry after the job aged out says so', async (_, early) => {
    cell = new OwnerCell();
    await cell.seed(2, 4);
    const m = await cell.owner('A');
    if (early) {
      const h = keeper(cell, 'A', { retainMs: 20_000, sweepEveryMs: 2000 });
      await cell.until(() => h.leading, 5000);
    }
    const live = new LiveKeys(cell.keys);
    const job = makeJob('ret-short', TEST_PROFILES[2]!, 1, { maxQueueMs: 0 });
    const submittedAt = cell.clock.now();
    await m.accept(job, { requestId: 'req-short' });
    await cell.until(async () => (await cell!.busy(job.id)).length === 1, 10_000);
    await cell.finishTasks(job.id);
    await cell.until(async () => (await cell!.jobState(job.id)) === 'succeeded', 10_000);
    if (!early) keeper(cell, 'A', { retainMs: 20_000, sweepEveryMs: 2000 });
    await cell.until(async () => (await cell!.store.get(cell!.keys.job(job.id))) === undefined, MIN);
    expect(await cell.store.get(live.request('req-short'))).toBeDefined();

    // A client retrying the same submission now is told what became of it, not given a new job.
    const err = await m.accept(job, { requestId: 'req-short' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TarcilError);
    expect((err as TarcilError).code).toBe('ALREADY_EXISTS');
    expect((err as TarcilError).message).toMatch(new RegExp(`job ${job.id}, which has finished and been deleted`));

    await cell.until(async () => (await cell!.store.get(live.request('req-short'))) === undefined, REQUEST_RETAIN_FLOOR_MS, 2000);
    expect(cell.clock.now() - submittedAt).toBeGreaterThanOrEqual(REQUEST_RETAIN_FLOOR_MS);
  });

  it('a job written between the sweep seeing it final and its delete (un-finished, adopted) is not deleted', async () => {
    cell = new OwnerCell();
    const c = cell;
    await c.seed(2, 4);
    const m = await c.owner('A');
    const jobs = [
      makeJob('race-unfinal', TEST_PROFILES[0]!, 1, { maxQueueMs: 0 }),
      makeJob('race-adopted', TEST_PROFILES[1]!, 1, { maxQueueMs: 0 }),
      makeJob('race-none', TEST_PROFILES[2]!, 1, { maxQueueMs: 0 }),
    ];
    for (const j of jobs) await m.accept(j);
    await c.until(async () => (await Promise.all(jobs.map((j) => c.busy(j.id)))).every((b) => b.length === 1), 10_000);
    for (const j of jobs) await c.finishTasks(j.id);
    await c.until(async () => (await Promise.all(jobs.map((j) => c.jobState(j.id)))).every((s) => s === 'succeeded'), 10_000);

    // Just before the deletes go out, two of the jobs change under the sweeper's feet: one record
    // is written back as not final, the other gets an owner key (as an adoption would create).
    const lease = await c.store.grantLease(60);
    let raced = false;
    const racing = wrapStore(c.store, {
      txns: async (reqs) => {
        if (!raced && reqs.some((r) => r.success.some((op) => op.type === 'delete' && op.key === c.keys.job(jobs[0]!.id)))) {
          raced = true;
          const kv = await c.store.get(c.keys.job(jobs[0]!.id));
          const rec = parseJson<LiveJobRecord>(kv)!;
          await c.store.put(kv!.key, JSON.stringify({ ...rec, state: 'running', finishedAt: undefined }));
          await c.store.put(c.keys.owner(jobs[1]!.id), JSON.stringify({ agent: 'B/a1', process: 'B', since: c.clock.now() }), { lease: lease.id });
        }
        return c.store.txns(reqs);
      },
    });
    const h = keeper(c, 'A', { retainMs: MIN, sweepEveryMs: 1000 }, racing);
    await c.until(() => h.leading, 5000);
    await c.until(async () => (await c.store.get(c.keys.job(jobs[2]!.id))) === undefined, 3 * MIN, 500);
    expect(raced).toBe(true);
    expect(h.retention.totals.raced).toBeGreaterThanOrEqual(2);
    // Both changed jobs are intact, with their tasks.
    for (const j of jobs.slice(0, 2)) {
      expect(await c.store.get(c.keys.job(j.id))).toBeDefined();
      expect(await taskRecords(c.store, c.keys, j.id)).toHaveLength(1);
    }
    expect(isFinalJob(parseJson<LiveJobRecord>(await c.store.get(c.keys.job(jobs[0]!.id)))?.state)).toBe(false);
    // The adopted one stays as long as it is owned, whatever its record says.
    await c.advance(10 * MIN, 5000);
    expect(await c.store.get(c.keys.job(jobs[1]!.id))).toBeDefined();
    await lease.revoke();
  });

  it('deletes a backlog of finished jobs in bounded batches, at most maxTxnOps operations per request', async () => {
    cell = new OwnerCell({ maxTxnOps: 32 });
    const c = cell;
    // Finished jobs written as their owners leave them (final record, tasks, decision).
    const n = 120;
    for (let i = 0; i < n; i++) {
      const id = `old-${i}`;
      const rec = {
        spec: makeJob(id, TEST_PROFILES[0]!, 2),
        state: 'succeeded',
        placed: 2,
        updatedAt: c.clock.now(),
        finishedAt: c.clock.now(),
        submittedAt: 0,
      };
      await c.store.txn({
        compare: [],
        success: [
          { type: 'put', key: c.keys.job(id), value: JSON.stringify(rec) },
          { type: 'put', key: c.keys.task(id, 0), value: '{}' },
          { type: 'put', key: c.keys.task(id, 1), value: '{}' },
          { type: 'put', key: c.keys.decision(id), value: '{}' },
        ],
      });
    }
    const sizes: number[] = [];
    const counting = wrapStore(c.store, {
      txns: (reqs) => {
        sizes.push(reqs.reduce((a, r) => a + r.compare.length + r.success.length, 0) + reqs.length);
        return c.store.txns(reqs);
      },
    });
    const h = keeper(c, 'A', { retainMs: MIN, sweepEveryMs: 1000 }, counting);
    await c.until(() => h.leading, 5000);
    await c.advance(MIN + 2000, 500);
    await c.until(() => h.retention.totals.jobs === n, 10_000, 500);
    expect((await c.store.range(c.keys.prefix)).kvs).toEqual([]);
    expect(sizes.length).toBeGreaterThan(1);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(c.store.maxTxnOps + 2 * 32);
  });
});

describe('the housekeeper election (embedded store, manual clock)', () => {
  it('one process leads at a time; when it dies another takes over after the lease TTL; on close at once', async () => {
    cell = new OwnerCell();
    const c = cell;
    const dying = new DyingStore(c.store, () => false);
    const a = keeper(c, 'A', {}, dying);
    await c.until(() => a.leading, 5000);
    const b = keeper(c, 'B');
    const d = keeper(c, 'D');
    await c.advance(5000);
    expect([a.leading, b.leading, d.leading]).toEqual([true, false, false]);
    expect(await c.store.leader(`${c.keys.prefix}housekeeper`)).toBe('A');

    // A dies (SIGKILL): its election lease is no longer kept alive and expires after 2 s.
    dying.dead = true;
    await c.until(() => b.leading || d.leading, 10_000);
    expect([b.leading, d.leading].filter(Boolean)).toHaveLength(1);
    const next = b.leading ? b : d;
    const other = next === b ? d : b;
    expect(await c.store.leader(`${c.keys.prefix}housekeeper`)).toBe(next === b ? 'B' : 'D');

    // The leader closes (resigns): the last one leads without waiting for a TTL.
    const closing = next.close();
    await c.until(() => other.leading, 200, 10);
    await closing;
    expect(next.leading).toBe(false);
  });
});
