import { afterEach, describe, expect, it } from 'vitest';
import type { JobManager } from '../../src/owner/manager.ts';
import { DEFAULT_LAUNCH_AFTER_MS } from '../../src/owner/context.ts';
import type { JobSpec } from '../../src/model/types.ts';
import type { LiveJobRecord } from '../../src/state/live-records.ts';
import { FREE_RU_VALUE, parseJson } from '../../src/state/records.ts';
import { outcomeTaskRecord } from '../../src/state/release.ts';
import { newRun, startTxn } from '../../src/monitor/run.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { OwnerCell } from '../support/owner-harness.ts';
import { wrapStore } from '../support/wrap-store.ts';
import { taskRecord } from '../support/task-records.ts';
import { RECHECK_TICK_MS, SWEEP_MS } from '../../src/owner/ru-events.ts';
import type { ClusterStore, TxnRequest, WatchBatch } from '../../src/store/types.ts';
import { TarcilError } from '../../src/util/errors.ts';

/** The job owner learns what happens to its tasks from the RU records it follows anyway. */
describe('a job owner that follows no task record', () => {
  let cell: OwnerCell | undefined;
  afterEach(async () => {
    await cell?.close();
    cell = undefined;
  });

  /** A cell of 2 servers × 4 RUs, one owner, and `job` submitted and placed whole. */
  async function placed(job: JobSpec, opts: { maxTxnOps?: number } = {}): Promise<{ c: OwnerCell; m: JobManager; job: JobSpec }> {
    const c = (cell = new OwnerCell(opts));
    await c.seed(2, 4);
    const m = await c.owner('A');
    await m.accept(job);
    await c.until(async () => (await c.busy(job.id)).length === job.tasks, 5000);
    return { c, m, job };
  }

  /** A store whose transactions of task-record gets are counted (their sizes), and fail while `failing.on`. */
  function countingReads(c: OwnerCell, failing: { on: boolean }): { store: ClusterStore; reads: number[] } {
    const reads: number[] = [];
    const isTaskRead = (req: TxnRequest): boolean =>
      req.success.length > 0 && req.success.every((op) => op.type === 'get' && op.key.startsWith(c.keys.allTasks()));
    const store = wrapStore(c.store, {
      txn: (req) => {
        if (!isTaskRead(req)) return c.store.txn(req);
        if (failing.on) return Promise.reject(new TarcilError('UNAVAILABLE', 'the store is overloaded: the request was not sent'));
        reads.push(req.success.length);
        return c.store.txn(req);
      },
    });
    return { store, reads };
  }

  /** Frees the jobs' busy RUs as a node of an older version does (the outcome on the task record only), all in one transaction. */
  async function freeWithoutOutcome(c: OwnerCell, jobs: readonly string[]): Promise<void> {
    const compare: TxnRequest['compare'] = [];
    const success: TxnRequest['success'] = [];
    for (const job of jobs) {
      for (const b of await c.busy(job)) {
        const ref = c.keys.parseRu(b.key)!;
        const rec = outcomeTaskRecord(ref, b.rev, b.rec, { state: 'succeeded', endedAt: c.clock.now(), exitCode: 0 }, { server: ref.server });
        compare.push({ key: b.key, target: 'mod', op: '==', value: b.rev });
        success.push({ type: 'put', key: b.key, value: FREE_RU_VALUE }, { type: 'put', key: c.keys.task(job, b.rec.task), value: JSON.stringify(rec) });
      }
    }
    expect((await c.store.txn({ compare, success })).succeeded).toBe(true);
  }

  it('task records of several jobs read again in one turn go out in one transaction', async () => {
    const c = (cell = new OwnerCell());
    await c.seed(2, 4);
    const { store, reads } = countingReads(c, { on: false });
    const m = await c.owner('A', store);
    const jobs = [0, 1, 2].map((i) => makeJob(`packed-${i}`, TEST_PROFILES[0]!, 2, { maxQueueMs: 0 }));
    for (const job of jobs) await m.accept(job);
    await c.until(async () => (await Promise.all(jobs.map((j) => c.busy(j.id)))).every((b) => b.length === 2), 5000);
    await freeWithoutOutcome(
      c,
      jobs.map((j) => j.id),
    );
    for (const job of jobs) await c.until(async () => (await c.jobState(job.id)) === 'succeeded', 5000);
    // Six tasks of three jobs, freed at one revision: one read of six, not one read per job.
    expect(reads).toEqual([6]);
  });

  it('tasks whose read failed are read again on a shared tick, together, not each on its own timer', async () => {
    const c = (cell = new OwnerCell());
    await c.seed(2, 4);
    const failing = { on: false };
    const { store, reads } = countingReads(c, failing);
    const m = await c.owner('A', store);
    const [a, b] = [0, 1].map((i) => makeJob(`tick-${i}`, TEST_PROFILES[0]!, 1, { maxQueueMs: 0 }));
    for (const job of [a!, b!]) await m.accept(job);
    await c.until(async () => (await c.busy(a!.id)).length === 1 && (await c.busy(b!.id)).length === 1, 5000);
    // 40 ms apart, in the same tick: a's read fails 200 ms into a tick, b's 40 ms later.
    c.clock.advance(RECHECK_TICK_MS - (c.clock.now() % RECHECK_TICK_MS) + 200);
    failing.on = true;
    await freeWithoutOutcome(c, [a!.id]);
    await c.flush();
    c.clock.advance(40);
    await freeWithoutOutcome(c, [b!.id]);
    await c.flush();
    failing.on = false;
    expect(reads).toEqual([]);
    // In 10-ms steps, so that two timers 40 ms apart would fire in turns of their own.
    await c.advance(1000, 10);
    expect(await c.jobState(a!.id)).toBe('succeeded');
    expect(await c.jobState(b!.id)).toBe('succeeded');
    expect(reads).toEqual([2]);
  });

  it('a task whose end its owner missed (the job was not in its map as the RU was freed) is found by the periodic check and ends', async () => {
    const { c, m, job } = await placed(makeJob('missed', TEST_PROFILES[0]!, 1, { maxQueueMs: 0 }));
    await c.flush();
    const o = m.owned.get(job.id)!;
    expect(o.tasks.get(0)?.rec.state).toBe('running');
    // The owner does not have the job at the moment its task's RU is freed with the outcome.
    m.owned.delete(job.id);
    expect(await c.finishTasks(job.id)).toBe(1);
    await c.flush();
    m.owned.set(job.id, o);
    await c.advance(SWEEP_MS / 2);
    // Nothing told the owner: it still believes the task running.
    expect(o.tasks.get(0)?.rec.state).toBe('running');
    expect(await c.jobState(job.id)).not.toBe('succeeded');
    await c.until(async () => (await c.jobState(job.id)) === 'succeeded', SWEEP_MS + 2000);
    expect(m.stats.sweptTasks).toBe(1);
    // Found from the freed RU: the success, not a failure for want of a history.
    expect(m.stats.outcomesCompacted).toBe(0);
  });

  it('the periodic check asks about a task once while neither its record nor its RU moves', async () => {
    const c = (cell = new OwnerCell());
    await c.seed(2, 4);
    const { store: counting, reads } = countingReads(c, { on: false });
    // The view's RU watch, captured so that the test can show the view a change the store never made.
    let toView: ((b: WatchBatch) => void) | undefined;
    const store = wrapStore(counting, {
      watch: (opts) => {
        if (opts.prefix === c.keys.rus()) toView = (b) => opts.onEvents(b);
        return counting.watch(opts);
      },
    });
    const m = await c.owner('A', store);
    const job = makeJob('asked-once', TEST_PROFILES[0]!, 1, { maxQueueMs: 0 });
    await m.accept(job);
    await c.until(async () => (await c.busy(job.id)).length === 1, 5000);
    await c.flush();
    const b = (await c.busy(job.id))[0]!;
    const o = m.owned.get(job.id)!;
    // The view (not the store) shows the RU freed at a newer revision; the owner does not see it.
    const rev = await c.store.put(`${c.keys.rus()}zz-unrelated`, 'x');
    m.owned.delete(job.id);
    toView!({
      revision: rev,
      events: [{ type: 'put', kv: { key: b.key, value: FREE_RU_VALUE, createRevision: b.rev, modRevision: rev, version: 2, lease: '0' } }],
    });
    m.owned.set(job.id, o);
    // Three checks: the first reads the task (its RU still holds it in the store: nothing to
    // learn), the next two find nothing moved and do not ask again.
    await c.advance(3 * SWEEP_MS + 1000);
    expect(m.stats.sweptTasks).toBe(1);
    expect(reads).toEqual([1]);
    expect(o.tasks.get(0)?.rec.state).toBe('running');
  });

  it('watches no task record, and learns each task end from its freed RU without reading the task', async () => {
    const c = (cell = new OwnerCell());
    await c.seed(2, 4);
    const watched: string[] = [];
    const store = wrapStore(c.store, {
      watch: (opts) => {
        watched.push(opts.prefix);
        return c.store.watch(opts);
      },
    });
    const m = await c.owner('A', store);
    const job = makeJob('ends', TEST_PROFILES[0]!, 3, { maxQueueMs: 0 });
    await m.accept(job);
    await c.until(async () => (await c.busy(job.id)).length === 3, 5000);
    expect(await c.finishTasks(job.id)).toBe(3);
    await c.until(async () => (await c.jobState(job.id)) === 'succeeded', 5000);
    expect(watched.some((p) => p.startsWith(c.keys.allTasks()))).toBe(false);
    expect(watched).toContain(c.keys.rus());
    expect(m.stats.taskReads).toBe(0);
  });

  it('a node of an older version frees the RU without the outcome: its owner reads the task record', async () => {
    const { c, m, job } = await placed(makeJob('old-release', TEST_PROFILES[0]!, 2, { maxQueueMs: 0 }));
    for (const b of await c.busy(job.id)) {
      const ref = c.keys.parseRu(b.key)!;
      const rec = outcomeTaskRecord(ref, b.rev, b.rec, { state: 'succeeded', endedAt: c.clock.now(), exitCode: 0 }, { server: ref.server });
      const res = await c.store.txn({
        compare: [{ key: b.key, target: 'mod', op: '==', value: b.rev }],
        success: [
          { type: 'put', key: b.key, value: FREE_RU_VALUE },
          { type: 'put', key: c.keys.task(job.id, b.rec.task), value: JSON.stringify(rec) },
        ],
      });
      expect(res.succeeded).toBe(true);
    }
    await c.until(async () => (await c.jobState(job.id)) === 'succeeded', 5000);
    expect(m.stats.taskReads).toBe(2);
  });

  it('a task that ends while its server is gone from the view (its lease expired) and back: its owner still sees the end', async () => {
    const { c, m, job } = await placed(makeJob('away', TEST_PROFILES[0]!, 1, { maxQueueMs: 0 }));
    const b = (await c.busy(job.id))[0]!;
    const ref = c.keys.parseRu(b.key)!;
    const serverKv = (await c.store.get(c.keys.server(ref.server)))!;
    // The node's lease expires: its server record goes, and with it the server from every view.
    await c.store.delete(serverKv.key);
    await c.flush();
    // Meanwhile the task's supervisor records its success: the RU freed without the outcome.
    const rec = outcomeTaskRecord(ref, b.rev, b.rec, { state: 'succeeded', endedAt: c.clock.now(), exitCode: 0 }, { server: ref.server });
    const res = await c.store.txn({
      compare: [{ key: b.key, target: 'mod', op: '==', value: b.rev }],
      success: [
        { type: 'put', key: b.key, value: FREE_RU_VALUE },
        { type: 'put', key: c.keys.task(job.id, 0), value: JSON.stringify(rec) },
      ],
    });
    expect(res.succeeded).toBe(true);
    // The node registers again well within its grace.
    await c.store.put(serverKv.key, serverKv.value);
    await c.until(async () => (await c.jobState(job.id)) === 'succeeded', 1000);
    expect(m.stats.lost).toBe(0);
  });

  it("a task that failed: the owner reads its whole record, which the job's end quotes", async () => {
    const { c, m, job } = await placed(makeJob('fails', TEST_PROFILES[0]!, 1, { maxQueueMs: 0 }));
    expect(await c.finishTasks(job.id, 'failed')).toBe(1);
    await c.until(async () => (await c.jobState(job.id)) === 'failed', 5000);
    expect(m.stats.taskReads).toBe(1);
    expect(parseJson<LiveJobRecord>(await c.store.get(c.keys.job(job.id)))?.message).toContain('exit code 1');
  });

  it("a node that records its task running itself (a gang's) shows it running at once, through the RU it writes again", async () => {
    // 14 operations per transaction: a gang of 6 is reserved, then confirmed, and its nodes record it running.
    const { c, m, job: gang } = await placed(makeJob('gang-start', TEST_PROFILES[0]!, 6, { mode: 'gang', maxQueueMs: 0 }), { maxTxnOps: 14 });
    await c.flush();
    for (const b of await c.busy(gang.id)) {
      const ref = c.keys.parseRu(b.key)!;
      expect((await c.store.txn(startTxn(c.keys, ref.server, newRun(ref.index, b.rec, b.rev, c.clock.now()), 10_000))).succeeded).toBe(true);
    }
    // No time passes: the RUs' changes are what tells the owner.
    await c.flush();
    expect(parseJson<LiveJobRecord>(await c.store.get(c.keys.job(gang.id)))?.state).toBe('running');
    expect(m.stats.taskReads).toBeGreaterThanOrEqual(6);
  });

  it('a node of an older version that writes the running record alone: its owner reads it once the launch delay is over', async () => {
    const { c, job: gang } = await placed(makeJob('gang-old', TEST_PROFILES[0]!, 6, { mode: 'gang', maxQueueMs: 0 }), { maxTxnOps: 14 });
    for (const b of await c.busy(gang.id)) {
      const ref = c.keys.parseRu(b.key)!;
      const req = startTxn(c.keys, ref.server, newRun(ref.index, b.rec, b.rev, c.clock.now()), 10_000);
      // What a monitor wrote before the RU was put again with it: the task record only.
      req.success = req.success.filter((op) => op.key.startsWith(c.keys.allTasks()));
      expect((await c.store.txn(req)).succeeded).toBe(true);
    }
    await c.flush();
    expect(parseJson<LiveJobRecord>(await c.store.get(c.keys.job(gang.id)))?.state).not.toBe('running');
    await c.until(async () => parseJson<LiveJobRecord>(await c.store.get(c.keys.job(gang.id)))?.state === 'running', DEFAULT_LAUNCH_AFTER_MS + 1000);
  });

  it('a task whose node reports its end on the task record alone (its RU gone meanwhile) still ends for its owner', async () => {
    const { c, job } = await placed(makeJob('alone', TEST_PROFILES[0]!, 1, { maxQueueMs: 0 }));
    const b = (await c.busy(job.id))[0]!;
    const ref = c.keys.parseRu(b.key)!;
    // The RU record goes (an operator's cleanup, a node re-registering) while the server stays.
    await c.store.delete(b.key);
    await c.flush();
    // The node reports the end as its journal does when the RU no longer holds the attempt:
    // the task record alone, fenced on its revision.
    // The placement started it: its record is its chunk's, and its own key is absent (revision 0).
    const key = c.keys.task(job.id, 0);
    expect((await taskRecord(c.store, c.keys, job.id, 0))?.state).toBe('running');
    const own = await c.store.get(key);
    const rec = outcomeTaskRecord(ref, b.rev, b.rec, { state: 'succeeded', endedAt: c.clock.now(), exitCode: 0 }, { server: ref.server });
    const res = await c.store.txn({
      compare: [{ key, target: 'mod', op: '==', value: own?.modRevision ?? 0 }],
      success: [{ type: 'put', key, value: JSON.stringify(rec) }],
    });
    expect(res.succeeded).toBe(true);
    await c.until(async () => (await c.jobState(job.id)) === 'succeeded', 10_000);
  });
});
