import { afterEach, describe, expect, it } from 'vitest';
import type { JobManager } from '../../src/owner/manager.ts';
import type { JobSpec } from '../../src/model/types.ts';
import type { LiveJobRecord, LiveTaskRecord, StoredDecisions } from '../../src/state/live-records.ts';
import { parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { releaseRu } from '../../src/state/release.ts';
import { newRun, startTxn } from '../../src/monitor/run.ts';
import { PROGRESS_WRITE_MS } from '../../src/owner/plan.ts';
import { PROGRESS_RECORD_MS } from '../../src/owner/decisions.ts';
import type { TxnRequest } from '../../src/store/types.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { ADOPT_CONCURRENCY } from '../../src/owner/adoption-gate.ts';
import { STORE_QUEUE_REFUSE_MIN, STORE_QUEUE_REFUSE_PER_SLOT } from '../../src/owner/submit.ts';
import { explanationToProto } from '../../src/frontend/convert.ts';
import { audit } from '../support/audit.ts';
import { wrapStore } from '../support/wrap-store.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { DyingStore, nth, OwnerCell, PausingStore, putsRu } from '../support/owner-harness.ts';
import { taskRecord, taskRecords } from '../support/task-records.ts';

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
  return await taskRecords<LiveTaskRecord>(c.store, c.keys, job);
}

/**
 * `server` leaves the cell and the job's owner dies with it (`dying`); owner B, started only now,
 * never saw the node. B adopts the job and places its task elsewhere after a wait within `wait`.
 */
async function adopterWaits(c: OwnerCell, dying: DyingStore, jobId: string, server: string, wait: number[]): Promise<void> {
  await c.store.txn({
    compare: [],
    success: [
      { type: 'delete', key: c.keys.server(server) },
      { type: 'delete', key: c.keys.serverRus(server), prefix: true },
    ],
  });
  dying.dead = true;
  const b = await c.owner('B');
  await c.until(() => b.stats.adopted === 1, 10_000);
  const adoptedAt = c.clock.now();
  await c.until(async () => (await c.busy(jobId)).length === 1, 70_000, 100);
  const waited = c.clock.now() - adoptedAt;
  expect(waited).toBeGreaterThanOrEqual(wait[0]!);
  expect(waited).toBeLessThan(wait[1]!);
  const [task] = await tasksOf(c, jobId);
  expect([task?.attempt, task?.previous?.[0]?.state, task?.ru?.server === server]).toEqual([1, 'lost', false]);
}

/** Two jobs of two tasks each, submitted to `a` and waited for until both are placed. */
async function placeTwo(c: OwnerCell, a: JobManager, ids: [string, string], withinMs: number): Promise<[JobSpec, JobSpec]> {
  const jobs: [JobSpec, JobSpec] = [makeJob(ids[0], TEST_PROFILES[0]!, 2, { maxQueueMs: 0 }), makeJob(ids[1], TEST_PROFILES[0]!, 2, { maxQueueMs: 0 })];
  for (const j of jobs) await a.accept(j);
  await c.until(async () => (await c.busy(jobs[0].id)).length === 2 && (await c.busy(jobs[1].id)).length === 2, withinMs);
  await c.flush();
  return jobs;
}

/**
 * Two servers of `rus` RUs, and a job of `tasks` tasks placed by owner A, whose store `dying` stops
 * answering once the test sets `dying.dead` (its lease then expires and another owner adopts).
 */
async function placedByDyingOwner(c: OwnerCell, rus: number, id: string, tasks: number): Promise<{ dying: DyingStore; job: JobSpec }> {
  await c.seed(2, rus);
  const dying = new DyingStore(c.store, () => false);
  const a = await c.owner('A', dying);
  const job = makeJob(id, TEST_PROFILES[0]!, tasks, { maxQueueMs: 0 });
  await a.accept(job);
  await c.until(async () => (await c.busy(job.id)).length === tasks, 10_000);
  return { dying, job };
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
    await a.accept(job);
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

  it('an adopter applies a task end that its watch brings before the answer to its adoption transaction', async () => {
    const c = (cell = new OwnerCell());
    const { dying, job } = await placedByDyingOwner(c, 4, 'adopt-window', 4);
    // B's adoption transaction lands; before its answer reaches B, a node ends one of the job's
    // tasks and B's watch delivers that change (in etcd the watch and the answer travel over
    // different connections, so this order happens).
    let ended = 0;
    const inner = c.store;
    const store = wrapStore(inner, {
      txn: async (req) => {
        const res = await inner.txn(req);
        const adoption = req.success.some((op) => op.type === 'get' && op.key === c.keys.tasks(job.id) && op.prefix === true);
        if (adoption && res.succeeded && ended === 0) {
          const b0 = (await c.busy(job.id))[0]!;
          expect(await releaseRu(inner, c.keys, c.keys.parseRu(b0.key)!, b0.rev, b0.rec, { state: 'succeeded', endedAt: c.clock.now(), exitCode: 0 })).toBe(
            true,
          );
          ended++;
          await c.flush();
        }
        return res;
      },
    });
    const b = await c.owner('B', store);
    dying.dead = true; // A stops answering; its lease expires after 2 s
    await c.until(() => b.stats.adopted === 1, 10_000);
    expect(ended).toBe(1);
    // The other three end as usual: the job is final, with all four tasks counted.
    expect(await c.finishTasks(job.id)).toBe(3);
    await c.until(async () => (await c.jobState(job.id)) === 'succeeded', 5000);
    expect(parseJson<LiveJobRecord>(await c.store.get(c.keys.job(job.id)))?.taskStates).toEqual({ succeeded: 4 });
  });

  it('starts on a store that times out its first lease grants and lists (etcd loaded at start), then places', async () => {
    cell = new OwnerCell();
    await cell.seed(2, 4);
    const inner = cell.store;
    const failed = { grants: 0, lists: 0 };
    const slow = () => new TarcilError('DEADLINE_EXCEEDED', 'deadline exceeded after 2 s');
    const store = wrapStore(inner, {
      grantLease: (ttl, opts) => (failed.grants++ < 2 ? Promise.reject(slow()) : inner.grantLease(ttl, opts)),
      range: (prefix, opts) => (failed.lists++ < 3 ? Promise.reject(slow()) : inner.range(prefix, opts)),
      txn: (req) => (req.compare.length === 0 && req.success.every((o) => o.type === 'get') && failed.lists++ < 3 ? Promise.reject(slow()) : inner.txn(req)),
    });
    const a = await cell.owner('A', store);
    expect(failed.grants).toBeGreaterThanOrEqual(3);
    expect(failed.lists).toBeGreaterThanOrEqual(4);
    const job = makeJob('slow-start', TEST_PROFILES[0]!, 4, { maxQueueMs: 0 });
    await a.accept(job);
    await cell.until(async () => (await cell!.busy(job.id)).length === 4, 10_000);
  });

  it('evaluations that time out wait out one pause shared by every job, growing while the store fails, and all jobs end once it answers', async () => {
    cell = new OwnerCell();
    await cell.seed(8, 4);
    const inner = cell.store;
    const k = cell.keys;
    let failing = false;
    let failures = 0;
    const writesJob = (req: TxnRequest): boolean => [...req.success, ...(req.failure ?? [])].some((op) => op.key.startsWith(k.job('')));
    const store = wrapStore(inner, {
      txn: (req) => {
        if (failing && writesJob(req)) {
          failures++;
          return Promise.reject(new TarcilError('DEADLINE_EXCEEDED', 'txn: deadline exceeded (injected)'));
        }
        return inner.txn(req);
      },
    });
    const a = await cell.owner('A', store);
    const jobs = Array.from({ length: 20 }, (_, i) => makeJob(`eval-${i}`, TEST_PROFILES[0]!, 1, { maxQueueMs: 0 }));
    for (const j of jobs) await a.accept(j);
    await cell.until(async () => (await Promise.all(jobs.map((j) => cell!.busy(j.id)))).every((b) => b.length === 1), 10_000);
    failing = true;
    for (const j of jobs) expect(await cell.finishTasks(j.id)).toBe(1);
    // 5 s of a store that times out every job write: a retry every 500 ms per job would be about
    // 200 attempts; one shared pause that doubles at each failure (to 10 s) lets few through.
    await cell.advance(5000);
    expect(failures).toBeGreaterThanOrEqual(jobs.length);
    expect(failures).toBeLessThan(3 * jobs.length);
    expect(a.queue.retryPauseMs).toBe(10_000);
    failing = false;
    await cell.until(async () => (await Promise.all(jobs.map((j) => cell!.jobState(j.id)))).every((st) => st === 'succeeded'), 30_000);
    expect(a.queue.retryPauseMs).toBeLessThan(10_000);
  });

  it('refuses new jobs at once, writing nothing, while many of its requests wait for a slow store', async () => {
    cell = new OwnerCell();
    await cell.seed(2, 4);
    const queue = { limit: 10, inFlight: 10, queued: 0, decreases: 3 };
    const store = Object.assign(wrapStore(cell.store, {}), { inFlightLimit: { stats: () => ({ ...queue }) } });
    const a = await cell.owner('A', store);
    queue.queued = Math.max(STORE_QUEUE_REFUSE_MIN, STORE_QUEUE_REFUSE_PER_SLOT * queue.limit) + 1;
    const before = await cell.store.revision();
    const err = await a.accept(makeJob('refused', TEST_PROFILES[0]!, 2, { maxQueueMs: 0 })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TarcilError);
    expect((err as TarcilError).code).toBe('RESOURCE_EXHAUSTED');
    expect((err as TarcilError).message).toMatch(/store is answering slowly: \d+ requests of this scheduler are waiting/);
    expect(await cell.store.revision()).toBe(before);
    // Once the queue drains, the same job is taken.
    queue.queued = 3;
    const job = makeJob('taken', TEST_PROFILES[0]!, 2, { maxQueueMs: 0 });
    await a.accept(job);
    await cell.until(async () => (await cell!.busy(job.id)).length === 2, 10_000);
  });

  it("a dead owner's many running jobs are all taken up by the survivor, a few at a time", async () => {
    cell = new OwnerCell();
    await cell.seed(8, 8);
    const startRev = await cell.store.revision();
    const dying = new DyingStore(cell.store, () => false);
    const a = await cell.owner('A', dying);
    // B's reads of job records take 200 ms, so that without a bound its adoptions would overlap
    // far more than the gate allows (60 jobs over the half-second adoption jitter).
    const slowGets = wrapStore(cell.store, { get: async (key) => (await cell!.clock.sleep(200), cell!.store.get(key)) });
    const b = await cell.owner('B', slowGets);
    const jobs = Array.from({ length: 60 }, (_, i) => makeJob(`many-${i}`, TEST_PROFILES[0]!, 1, { maxQueueMs: 0 }));
    for (const j of jobs) await a.accept(j);
    await cell.until(async () => (await Promise.all(jobs.map((j) => cell!.busy(j.id)))).every((b) => b.length === 1), 10_000);
    expect(a.ownedJobs().length).toBe(60);
    dying.dead = true;
    let most = 0;
    await cell.until(
      () => {
        most = Math.max(most, b.adoptions.running);
        return b.stats.adopted === 60;
      },
      20_000,
      10,
    );
    expect(most).toBe(ADOPT_CONCURRENCY);
    for (const j of jobs) expect(await cell.finishTasks(j.id)).toBe(1);
    await cell.until(async () => (await Promise.all(jobs.map((j) => cell!.jobState(j.id)))).every((s) => s === 'succeeded'), 10_000);
    const f = await audit(cell.store, cell.keys, startRev);
    for (const j of jobs) expect(f.finals.get(j.id)).toBe(1);
    expect(f.doubleBooked).toBe(0);
    expect(f.heldTwice).toBe(0);
  });

  it('an owner paused past its lease writes nothing once its successor has taken over', async () => {
    cell = new OwnerCell();
    await cell.seed(4, 2);
    // A pauses as it sends its placement: the transaction is held, and goes out late.
    const paused = new PausingStore(cell.store, (req) => putsRu(req, 'busy'));
    const a: JobManager = await cell.owner('A', paused);
    const b = await cell.owner('B');
    const job = makeJob('fence-1', TEST_PROFILES[1]!, 1, { maxQueueMs: 0 });
    await a.accept(job);
    await cell.until(() => paused.isPaused, 2000);
    const held = paused.heldTxns[0]!;
    const aServer = held.success.map((op) => cell!.keys.parseRu(op.key)).find((r) => r !== undefined)!.server;
    // B places the task elsewhere, so that only the owner fence can stop A's late write.
    b.agents[0]!.state.setBlocked(aServer, true);
    await cell.until(() => b.stats.adopted === 1, 10_000);
    await cell.until(async () => (await cell!.busy(job.id)).length === 1, 10_000);
    const bRu = (await cell.busy(job.id))[0]!;
    expect(cell.keys.parseRu(bRu.key)?.server).not.toBe(aServer);
    // Without its owner fence (its member key's lease, and the job's owner record, which B's
    // adoption rewrote) and the compare on the task's record (which B's placement changed), A's
    // held placement would still apply now.
    expect(held.compare.some((c) => c.key === cell!.keys.owner(job.id) && c.target === 'mod')).toBe(true);
    const unfenced = held.compare.filter((c) => c.target !== 'lease' && c.key !== cell!.keys.owner(job.id) && !c.key.startsWith(cell!.keys.allTasks()));
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

  // The first placement transaction fails at once and reaches the store only when the retry is
  // sent: the read-back finds nothing, and the agent places the task again. Landing just before
  // the retry, the late commit makes the retry fail on its chunk key (the owner takes the task as
  // placed from it); landing just after, it fails on the task record the retry wrote.
  it.each([
    { lands: 'just before the retry', first: 'late' },
    { lands: 'just after the retry', first: 'retry' },
  ] as const)('a commit whose answer was lost and which lands $lands places nothing twice', async ({ first }) => {
    cell = new OwnerCell();
    await cell.seed(2, 4);
    const startRev = await cell.store.revision();
    let late: TxnRequest | undefined;
    let lateLanded: boolean | undefined;
    const racing = wrapStore(cell.store, {
      txn: async (req) => {
        if (putsRu(req, 'busy') && late === undefined) {
          late = req;
          throw new TarcilError('UNAVAILABLE', 'connection reset before the answer');
        }
        if (putsRu(req, 'busy') && late && lateLanded === undefined) {
          if (first === 'late') lateLanded = (await cell!.store.txn(late)).succeeded;
          const res = await cell!.store.txn(req);
          if (first === 'retry') lateLanded = (await cell!.store.txn(late)).succeeded;
          return res;
        }
        return cell!.store.txn(req);
      },
    });
    const a = await cell.owner('A', racing);
    const job = makeJob(`late-${first}`, TEST_PROFILES[2]!, 1, { maxQueueMs: 0 });
    await a.accept(job);
    await cell.until(async () => (await cell!.busy(job.id)).length >= 1, 10_000);
    await cell.advance(2000);
    expect(lateLanded).toBe(first === 'late');
    // One RU holds the task, and the task's record names that RU's commit.
    const busy = await cell.busy(job.id);
    expect(busy.length).toBe(1);
    const [task] = await tasksOf(cell, job.id);
    expect(task?.commitId).toBe(busy[0]!.rec.commitId);
    expect(await cell.finishTasks(job.id)).toBe(1);
    await cell.until(async () => (await cell!.jobState(job.id)) === 'succeeded', 10_000);
    const f = await audit(cell.store, cell.keys, startRev);
    expect(f.doubleBooked).toBe(0);
    expect(f.heldTwice).toBe(0);
    expect([...f.orphanOwners, ...f.orphanQueue, ...f.orphanRus, ...f.strayRus]).toEqual([]);
  });

  it('a cancelled job whose tasks are preempted while their kill is in flight still ends cancelled', async () => {
    cell = new OwnerCell();
    await cell.seed(1, 2);
    // The server has a monitor endpoint, so the owner stops tasks through it.
    const serverKey = cell.keys.server('s0000');
    const server = parseJson<Record<string, unknown>>(await cell.store.get(serverKey))!;
    await cell.store.put(serverKey, JSON.stringify({ ...server, endpoint: 'node:1' }));
    const a = await cell.owner('A');
    await a.accept(makeJob('low', TEST_PROFILES[4]!, 2, { priority: 10, maxQueueMs: 0 }));
    await cell.until(async () => (await cell!.busy('low')).length === 2, 5000);
    // The monitor answers the kills only once the test lets it.
    const answers: ((killed: boolean) => void)[] = [];
    cell.nodes.kill = (endpoint, req) => {
      cell!.nodes.kills.push({ endpoint, ...req });
      return new Promise<boolean>((resolve) => answers.push(resolve));
    };
    await a.cancel('low');
    await cell.until(() => answers.length === 2, 5000);
    // Meanwhile a high-priority job takes both RUs: the cancelled job's tasks go back to the queue.
    await a.accept(makeJob('urgent', TEST_PROFILES[4]!, 2, { priority: 500, maxQueueMs: 0 }));
    await cell.until(async () => (await cell!.busy('urgent')).length === 2, 5000);
    expect((await tasksOf(cell, 'low')).map((t) => t.state)).toEqual(['queued', 'queued']);
    for (const answer of answers) answer(true);
    // The queued tasks are looked at again once their stop has ended: cancelled, not left queued.
    await cell.until(async () => (await cell!.jobState('low')) === 'cancelled', 5000);
    expect((await tasksOf(cell, 'low')).map((t) => t.state)).toEqual(['cancelled', 'cancelled']);
    expect(await cell.finishTasks('urgent')).toBe(2);
    await cell.until(async () => (await cell!.jobState('urgent')) === 'succeeded', 5000);
  });

  describe('a node that leaves (its lease expired) with a 10 s disconnect grace', () => {
    async function placedOnLeavingNode(): Promise<{ c: OwnerCell; m: JobManager; job: string; server: string; ru: { key: string; value: string } }> {
      const c = (cell = new OwnerCell());
      await c.seed(2, 2);
      // The monitors declare their grace in their server records.
      for (const kv of (await c.store.range(c.keys.servers())).kvs) {
        await c.store.put(kv.key, JSON.stringify({ ...JSON.parse(kv.value), disconnectGraceMs: 10_000 }));
      }
      const m = await c.owner('A');
      const job = makeJob('grace-1', TEST_PROFILES[0]!, 1, { maxQueueMs: 0 });
      await m.accept(job);
      await c.until(async () => (await c.busy(job.id)).length === 1, 10_000);
      const b = (await c.busy(job.id))[0]!;
      const server = c.keys.parseRu(b.key)!.server;
      const ru = { key: b.key, value: JSON.stringify(b.rec) };
      // The node's lease expires: its server key and RU keys go with it.
      await c.store.txn({
        compare: [],
        success: [
          { type: 'delete', key: c.keys.server(server) },
          { type: 'delete', key: c.keys.serverRus(server), prefix: true },
        ],
      });
      return { c, m, job: job.id, server, ru };
    }

    it('keeps its tasks where they are for the grace, then places them elsewhere as a new attempt', async () => {
      const { c, m, job, server } = await placedOnLeavingNode();
      await c.advance(8000);
      expect((await tasksOf(c, job))[0]?.state).toBe('running');
      expect(m.stats.lost).toBe(0);
      const rec = parseJson<LiveJobRecord>(await c.store.get(c.keys.job(job)));
      expect(rec?.message).toContain(`server ${server} cannot be reached`);
      // Grace (10 s) and margin (2 s) after it left: lost, and placed on the other node.
      await c.until(async () => (await c.busy(job)).length === 1, 8000);
      expect(c.clock.now()).toBeGreaterThanOrEqual(1_700_000_000_000 + 12_000);
      const [task] = await tasksOf(c, job);
      expect(m.stats.lost).toBe(1);
      expect(task?.ru?.server).not.toBe(server);
      expect(task?.attempt).toBe(1);
      // The record keeps the attempt that was lost: where it was, and why it was placed again.
      expect(task?.previous?.map((a) => [a.attempt, a.ru?.server, a.state, a.message])).toEqual([[0, server, 'lost', `server ${server} left the cluster`]]);
      // The RU record of the new attempt carries the same history, for the monitor's records.
      expect((await c.busy(job))[0]?.rec.previous).toEqual(task?.previous);
      // explain and status print one line per attempt.
      const e = explanationToProto(job, 'running', undefined, undefined, '', [task!]);
      expect(e.text).toContain('placed more than once: 1 task(s)');
      expect(e.text).toMatch(new RegExp(`task 0 attempt 0: ${server}/\\d, placed .*lost \\(server ${server} left the cluster\\); placed again`));
      expect(e.text).toMatch(/task 0 attempt 1: s\d+\/\d, placed .*, now placed/);
    });

    it('never marks its tasks lost when it registers again within the grace', async () => {
      const { c, m, job, server, ru } = await placedOnLeavingNode();
      await c.advance(5000);
      // The node is back, its task still running: it registers and adopts the task, rewriting
      // the RU and the task record (which fences any "lost" the owner might be writing).
      // Its own record, or (a task its placement started) the one its chunk implies, written out.
      const task = await taskRecord(c.store, c.keys, job, 0);
      await c.store.txn({
        compare: [],
        success: [
          {
            type: 'put',
            key: c.keys.server(server),
            value: JSON.stringify({
              id: server,
              platform: 'r3-2xlarge',
              rack: 'r000',
              rus: 2,
              speed: 1,
              attributes: {},
              state: 'up',
              disconnectGraceMs: 10_000,
            }),
          },
          { type: 'put', key: ru.key, value: ru.value },
          { type: 'put', key: c.keys.task(job, 0), value: JSON.stringify(task) },
        ],
      });
      await c.advance(20_000);
      expect(m.stats.lost).toBe(0);
      expect((await tasksOf(c, job))[0]?.state).toBe('running');
      expect((await c.busy(job)).map((b) => b.key)).toEqual([ru.key]);
    });
  });

  it.each([
    { recorded: true, wait: [10_000, 14_000] },
    { recorded: false, wait: [60_000, 64_000] },
  ])(
    'an owner that adopts a job after its node left waits the grace the running record gives (recorded: $recorded), else the default',
    async ({ recorded, wait }) => {
      const c = (cell = new OwnerCell());
      const { dying, job } = await placedByDyingOwner(c, 2, 'grace-adopted', 1);
      const b0 = (await c.busy(job.id))[0]!;
      const ref = c.keys.parseRu(b0.key)!;
      // The node starts the task as its monitor does when the placement did not record it running
      // (a task placed again, a gang's, a move's), with a 10 s grace in the running record.
      const { startRecorded: _, ...placedOnly } = b0.rec;
      const start = startTxn(c.keys, ref.server, newRun(ref.index, placedOnly, b0.rev, c.clock.now()), 10_000);
      if (!recorded) {
        const put = start.success[0] as { type: 'put'; key: string; value: string };
        const { nodeGraceMs: _g, ...rest } = JSON.parse(put.value) as LiveTaskRecord;
        put.value = JSON.stringify(rest);
      }
      expect((await c.store.txn(start)).succeeded).toBe(true);
      // Then the node dies and its owner with it; the survivor starts only after the node left, so
      // it never saw the node registered, nor when it left.
      await adopterWaits(c, dying, job.id, ref.server, wait);
    },
  );
  it.each([
    { grace: 10_000, wait: [10_000, 14_000] },
    { grace: undefined, wait: [60_000, 64_000] },
  ])(
    'a task whose node left before it started it: an adopter that never saw the node waits the grace written with the placement ($grace), else the default',
    async ({ grace, wait }) => {
      const c = (cell = new OwnerCell());
      await c.seed(2, 2);
      if (grace !== undefined) {
        // The nodes register with their disconnect grace, as their monitors do.
        for (const kv of (await c.store.range(c.keys.servers())).kvs) {
          const rec = JSON.parse(kv.value) as Record<string, unknown>;
          await c.store.put(kv.key, JSON.stringify({ ...rec, disconnectGraceMs: grace }));
        }
      }
      const dying = new DyingStore(c.store, () => false);
      const a = await c.owner('A', dying);
      const job = makeJob('grace-placed', TEST_PROFILES[0]!, 1, { maxQueueMs: 0 });
      await a.accept(job);
      await c.until(async () => (await c.busy(job.id)).length === 1, 10_000);
      const ref = c.keys.parseRu((await c.busy(job.id))[0]!.key)!;
      const [placed] = await tasksOf(c, job.id);
      // The placement recorded it running, with the grace the placing agent knew.
      expect([placed?.state, placed?.nodeGraceMs]).toEqual(['running', grace]);
      // The node goes before it started the task, and the owner with it; the survivor starts
      // afterwards and never saw the node.
      await adopterWaits(c, dying, job.id, ref.server, wait);
    },
  );

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
    await a.accept(job);
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

describe("the launch call to a node's monitor", () => {
  // A gang larger than one transaction is reserved, then confirmed: its tasks are recorded
  // `placed`, and their monitors record them running as they start them.
  const advertise = async (c: OwnerCell): Promise<void> => {
    // The nodes advertise a NodeMonitor endpoint, as their monitors do.
    for (const kv of (await c.store.range(c.keys.servers())).kvs) {
      const rec = JSON.parse(kv.value) as { id: string };
      await c.store.put(kv.key, JSON.stringify({ ...rec, endpoint: `node-of-${rec.id}:1` }));
    }
  };
  it.each([
    { launchAfterMs: undefined, label: 'default: only to a node that has not started its task by then' },
    { launchAfterMs: 0, label: '0: every placement at once' },
  ])('launchAfterMs $launchAfterMs ($label)', async ({ launchAfterMs }) => {
    // 14 ops per transaction: 4 placements each, so a gang of 6 is reserved, then confirmed.
    const c = (cell = new OwnerCell({ maxTxnOps: 14 }));
    await c.seed(2, 4);
    await advertise(c);
    const a = await c.owner('A', c.store, launchAfterMs === undefined ? {} : { launchAfterMs });
    const job = makeJob('launch-call', TEST_PROFILES[0]!, 6, { mode: 'gang', maxQueueMs: 0 });
    await a.accept(job);
    await c.until(async () => (await c.busy(job.id)).filter((b) => b.rec.state === 'busy').length === 6, 10_000);
    await c.flush();
    const sent = (): number[] =>
      c.nodes.launches
        .filter((l) => l.job === job.id)
        .map((l) => l.task)
        .sort();
    if (launchAfterMs === 0) {
      expect(sent()).toEqual([0, 1, 2, 3, 4, 5]);
      return;
    }
    expect(sent()).toEqual([]);
    // Every node but one starts its task as its monitor does (its watch brought the commit); the other's is behind.
    for (const b of (await c.busy(job.id)).filter((x) => x.rec.task !== 5)) {
      expect(b.rec.startRecorded).toBeUndefined();
      const ref = c.keys.parseRu(b.key)!;
      expect((await c.store.txn(startTxn(c.keys, ref.server, newRun(ref.index, b.rec, b.rev, c.clock.now()), 10_000))).succeeded).toBe(true);
    }
    await c.until(async () => (await tasksOf(c, job.id)).filter((t) => t.state === 'running').length === 5, 5000);
    await c.flush();
    await c.advance(600);
    await c.advance(2000);
    // Only the task not recorded running is sent, once.
    expect(sent()).toEqual([5]);
  });

  it('a task its placement recorded running is started by its node alone: no launch call, and its monitor writes nothing', async () => {
    const c = (cell = new OwnerCell());
    await c.seed(2, 2);
    await advertise(c);
    const a = await c.owner('A');
    const job = makeJob('launch-none', TEST_PROFILES[0]!, 2, { maxQueueMs: 0 });
    await a.accept(job);
    await c.until(async () => (await c.busy(job.id)).length === 2, 10_000);
    await c.flush();
    expect((await tasksOf(c, job.id)).map((t) => t.state)).toEqual(['running', 'running']);
    const b0 = (await c.busy(job.id)).find((b) => b.rec.task === 0)!;
    expect(b0.rec.startRecorded).toBe(true);
    const ref = c.keys.parseRu(b0.key)!;
    const before = await c.store.revision();
    // The monitor's start is the fence and a read of the RU (which makes it linearizable on etcd):
    // it succeeds while the RU holds the attempt, and writes nothing.
    const req = startTxn(c.keys, ref.server, newRun(ref.index, b0.rec, b0.rev, c.clock.now()), 10_000);
    expect(req.success).toEqual([{ type: 'get', key: b0.key }]);
    expect((await c.store.txn(req)).succeeded).toBe(true);
    expect(await c.store.revision()).toBe(before);
    // A stale attempt (an older revision of the RU) is refused.
    expect((await c.store.txn(startTxn(c.keys, ref.server, newRun(ref.index, b0.rec, b0.rev - 1, c.clock.now()), 10_000))).succeeded).toBe(false);
    await c.advance(600);
    await c.advance(2000);
    expect(c.nodes.launches.filter((l) => l.job === job.id)).toEqual([]);
    expect(a.stats.launches).toBe(0);
  });
});

describe('the job record its owner writes', () => {
  it('a change of state is written at once; progress alone at most once per interval, and then the latest', async () => {
    cell = new OwnerCell();
    await cell.seed(2, 8);
    const c = cell;
    const a = await c.owner('A');
    const job = makeJob('progress-1', TEST_PROFILES[0]!, 16, { maxQueueMs: 0 });
    await a.accept(job);
    await c.until(async () => (await c.busy(job.id)).length === 16, 5000);
    // Its placements recorded its tasks running: the job is running at once.
    await c.until(async () => (await c.jobState(job.id)) === 'running', 5000);
    const writes: LiveJobRecord[] = [];
    const w = await c.store.watch({
      prefix: c.keys.job(job.id),
      fromRevision: (await c.store.revision()) + 1,
      onEvents: (b) => b.events.forEach((e) => writes.push(parseJson<LiveJobRecord>(e.kv)!)),
      onError: () => undefined,
    });
    // Eight tasks end one after the other, each looked at by the owner, while no time passes.
    for (const b of (await c.busy(job.id)).slice(0, 8)) {
      const ref = c.keys.parseRu(b.key)!;
      expect(await releaseRu(c.store, c.keys, ref, b.rev, b.rec, { state: 'succeeded', endedAt: c.clock.now(), exitCode: 0 })).toBe(true);
      await c.flush();
    }
    // They only changed its counts: nothing written yet, then the latest counts once.
    expect(writes).toEqual([]);
    await c.advance(PROGRESS_WRITE_MS + 50);
    expect(writes.map((r) => [r.state, r.taskStates?.succeeded])).toEqual([['running', 8]]);
    // The rest end: the final state is written at once, with every count.
    expect(await c.finishTasks(job.id)).toBe(8);
    await c.flush();
    expect(writes.at(-1)).toMatchObject({ state: 'succeeded', taskStates: { succeeded: 16 } });
    await w.close();
  });

  it('the steps to running (admitted, placed) wait out the interval; a job its placement recorded running goes from queued to running in one write', async () => {
    // 14 ops per transaction: 4 placements each, so a gang of 6 is reserved, then confirmed, and
    // its tasks are recorded placed until their monitors start them.
    const c = (cell = new OwnerCell({ maxTxnOps: 14 }));
    await c.seed(2, 4);
    const a = await c.owner('A');
    const states = new Map<string, string[]>();
    const w = await c.store.watch({
      prefix: c.keys.jobs(),
      fromRevision: (await c.store.revision()) + 1,
      onEvents: (b) => b.events.forEach((e) => states.set(e.kv.key, [...(states.get(e.kv.key) ?? []), parseJson<LiveJobRecord>(e.kv)!.state])),
      onError: () => undefined,
    });
    const of = (id: string): string[] => states.get(c.keys.job(id)) ?? [];
    const now = makeJob('steps-now', TEST_PROFILES[0]!, 2, { maxQueueMs: 0 });
    const gang = makeJob('steps-gang', TEST_PROFILES[0]!, 6, { mode: 'gang', maxQueueMs: 0 });
    await a.accept(now);
    await a.accept(gang);
    await c.until(async () => (await c.busy(now.id)).length === 2 && (await c.busy(gang.id)).length === 6, 5000);
    await c.flush();
    // Without the clock moving: the first job is running (written at once), the gang's placed step is not stored yet.
    expect([of(now.id), of(gang.id)]).toEqual([['queued', 'running'], ['queued']]);
    // The gang's tasks do not start: once the interval is over, placed is written.
    await c.advance(PROGRESS_WRITE_MS + 50);
    expect(of(gang.id)).toEqual(['queued', 'placed']);
    // A node starts one of them, as a monitor does: running is written at once.
    const b0 = (await c.busy(gang.id))[0]!;
    const ref = c.keys.parseRu(b0.key)!;
    expect((await c.store.txn(startTxn(c.keys, ref.server, newRun(ref.index, b0.rec, b0.rev, c.clock.now()), 10_000))).succeeded).toBe(true);
    await c.flush();
    expect(of(gang.id)).toEqual(['queued', 'placed', 'running']);
    expect(of(now.id)).toEqual(['queued', 'running']);
    await w.close();
  });

  it('refuses new jobs with RESOURCE_EXHAUSTED past its limit of tasks not yet placed, writing nothing; takes them again once placed', async () => {
    cell = new OwnerCell();
    await cell.seed(1, 8); // 8 RUs
    const c = cell;
    const a = await c.owner('A', c.store, { maxPendingTasks: 12 });
    // The cell is full: what comes next waits.
    const fill = makeJob('bp-fill', TEST_PROFILES[4]!, 8, { maxQueueMs: 0 });
    await a.accept(fill);
    await c.until(async () => (await c.busy(fill.id)).length === 8, 5000);
    const w1 = makeJob('bp-wait-1', TEST_PROFILES[0]!, 6, { maxQueueMs: 0 });
    const w2 = makeJob('bp-wait-2', TEST_PROFILES[0]!, 6, { maxQueueMs: 0 });
    await a.accept(w1, { requestId: 'bp-r1' });
    await a.accept(w2);
    await c.flush();
    await c.advance(150);
    expect(a.pendingTasks()).toBe(12);
    const over = makeJob('bp-over', TEST_PROFILES[0]!, 1, { maxQueueMs: 0 });
    const refused = await a.accept(over, { requestId: 'bp-r2' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(TarcilError);
    expect((refused as TarcilError).code).toBe('RESOURCE_EXHAUSTED');
    expect((refused as TarcilError).message).toMatch(/12 tasks not yet placed \(limit 12/);
    // Nothing of the refused job was written, not even its request id.
    expect(await c.store.get(c.keys.job(over.id))).toBeUndefined();
    expect((await c.store.range(c.keys.prefix)).kvs.some((kv) => kv.key.includes('bp-r2') || kv.key.includes(over.id))).toBe(false);
    // A retry of a job already taken still gets its answer.
    expect((await a.accept({ ...w1, id: 'another-id' }, { requestId: 'bp-r1' })).jobId).toBe(w1.id);
    // The full cell frees: the waiting tasks are placed, and new jobs are taken again.
    expect(await c.finishTasks(fill.id)).toBe(8);
    await c.until(async () => (await c.busy(w1.id)).length + (await c.busy(w2.id)).length === 8, 5000);
    await c.advance(150);
    expect(a.pendingTasks()).toBe(4);
    await expect(a.accept(makeJob('bp-after', TEST_PROFILES[0]!, 8, { maxQueueMs: 0 }))).resolves.toMatchObject({ duplicate: false });
  });

  it('a decision record in progress is rewritten at most once per interval, the final one at once', async () => {
    cell = new OwnerCell();
    await cell.seed(1, 4);
    const c = cell;
    const a = await c.owner('A');
    // Twelve tasks on four RUs: the call places four, then one more with every RU freed.
    const job = makeJob('record-rate', TEST_PROFILES[0]!, 12, { maxQueueMs: 0 });
    const writes: { at: number; rec: StoredDecisions }[] = [];
    const w = await c.store.watch({
      prefix: c.keys.decision(job.id),
      fromRevision: (await c.store.revision()) + 1,
      onEvents: (b) => b.events.forEach((e) => writes.push({ at: c.clock.now(), rec: parseJson<StoredDecisions>(e.kv)! })),
      onError: () => undefined,
    });
    await a.accept(job);
    await c.until(async () => (await c.busy(job.id)).length === 4, 5000);
    // A task ends every 1.5 s; each freed RU takes the next task, so the record changes each time.
    let finished = 0;
    while (finished < 12) {
      const b = (await c.busy(job.id))[0];
      if (b) {
        const ref = c.keys.parseRu(b.key)!;
        expect(await releaseRu(c.store, c.keys, ref, b.rev, b.rec, { state: 'succeeded', endedAt: c.clock.now(), exitCode: 0 })).toBe(true);
        finished++;
      }
      await c.advance(1500);
    }
    await c.until(async () => (await c.jobState(job.id)) === 'succeeded', 5000);
    await c.advance(1000);
    const inProgress = writes.filter((x) => x.rec.inProgress);
    expect(inProgress.length).toBeGreaterThanOrEqual(2);
    for (let i = 1; i < inProgress.length; i++) expect(inProgress[i]!.at - inProgress[i - 1]!.at).toBeGreaterThanOrEqual(PROGRESS_RECORD_MS);
    // Placed over twelve seconds, one more task every 1.5 s: without the interval, eight rewrites.
    expect(inProgress.length).toBeLessThanOrEqual(3);
    const last = writes.at(-1)!.rec;
    expect(last.inProgress).toBe(false);
    const placed = last.records.reduce((n, r) => n + r.placements.length + (r.omittedPlacements ?? 0), 0);
    expect(placed).toBe(12);
    await w.close();
  });

  it('a decision record rides in the job record write of the evaluation that finds it due; a write that failed is made by the next; the final write leaves an unchanged record alone', async () => {
    cell = new OwnerCell();
    await cell.seed(1, 4);
    const c = cell;
    // The first write that carries the second job's record fails (a store error: not applied).
    let failed = 0;
    const store = wrapStore(c.store, {
      txn: (req: TxnRequest) => {
        if (failed === 0 && req.success.some((op) => op.type === 'put' && op.key === c.keys.decision('unsaved'))) {
          failed++;
          return Promise.reject(new TarcilError('UNAVAILABLE', 'injected'));
        }
        return c.store.txn(req);
      },
    });
    const a = await c.owner('A', store);
    const [saved, unsaved] = await placeTwo(c, a, ['saved', 'unsaved'], 5000);
    expect(failed).toBe(1);
    // The first job's record was written with its job record, in one transaction.
    const before = await c.store.get(c.keys.decision(saved.id));
    expect(parseJson<StoredDecisions>(before)?.inProgress).toBe(false);
    expect(before?.modRevision).toBe((await c.store.get(c.keys.job(saved.id)))?.modRevision);
    // The second's was written again by the job's next evaluation.
    await c.until(async () => parseJson<StoredDecisions>(await c.store.get(c.keys.decision(unsaved.id)))?.inProgress === false, 5000);
    const retried = await c.store.get(c.keys.decision(unsaved.id));
    await c.advance(2000);
    expect(await c.finishTasks(saved.id)).toBe(2);
    expect(await c.finishTasks(unsaved.id)).toBe(2);
    await c.until(async () => (await c.jobState(saved.id)) === 'succeeded' && (await c.jobState(unsaved.id)) === 'succeeded', 5000);
    // Neither record changed since its job's scheduling call: the final writes leave both as written.
    const after = await c.store.get(c.keys.decision(saved.id));
    expect([after?.modRevision, after?.version]).toEqual([before?.modRevision, 1]);
    const last = await c.store.get(c.keys.decision(unsaved.id));
    expect([last?.modRevision, last?.version]).toEqual([retried?.modRevision, 1]);
    expect(parseJson<StoredDecisions>(last)!.records.reduce((n, r) => n + r.placements.length + (r.omittedPlacements ?? 0), 0)).toBe(2);
  });

  it('keeps only the state of a task that ended well; a failed task keeps its record, quoted by the job', async () => {
    cell = new OwnerCell();
    await cell.seed(1, 4);
    const c = cell;
    const a = await c.owner('A');
    const job = makeJob('kept-1', TEST_PROFILES[0]!, 4, { maxQueueMs: 0 });
    await a.accept(job);
    await c.until(async () => (await c.busy(job.id)).length === 4, 5000);
    const busy = await c.busy(job.id);
    for (const [i, b] of busy.entries()) {
      const outcome = i === 3 ? { state: 'failed' as const, exitCode: 3, message: 'exit code 3' } : { state: 'succeeded' as const, exitCode: 0 };
      expect(await releaseRu(c.store, c.keys, c.keys.parseRu(b.key)!, b.rev, b.rec, { ...outcome, endedAt: c.clock.now() })).toBe(true);
    }
    await c.until(async () => (await c.jobState(job.id)) === 'failed', 5000);
    const rec = parseJson<LiveJobRecord>(await c.store.get(c.keys.job(job.id)));
    expect(rec?.message).toBe(`1 of 4 tasks failed; task ${busy[3]!.rec.task}: exit code 3`);
    expect(rec?.taskStates).toEqual({ succeeded: 3, failed: 1 });
  });

  it('holds, per task that succeeded, its state and attempt only', async () => {
    cell = new OwnerCell();
    await cell.seed(1, 4);
    const c = cell;
    const a = await c.owner('A');
    const job = makeJob('kept-2', TEST_PROFILES[0]!, 8, { maxQueueMs: 0 });
    await a.accept(job);
    await c.until(async () => (await c.busy(job.id)).length === 4, 5000);
    expect(await c.finishTasks(job.id)).toBe(4);
    await c.until(async () => (await c.busy(job.id)).length === 4, 5000);
    const o = a.owned.get(job.id)!;
    const ended = [...o.tasks.values()].filter((v) => v.rec.state === 'succeeded');
    expect(ended).toHaveLength(4);
    for (const v of ended) expect(Object.keys(v.rec).sort()).toEqual(['attempt', 'index', 'job', 'state']);
    // The stored records are whole.
    const stored = (await tasksOf(c, job.id)).filter((t) => t.state === 'succeeded');
    expect(stored.every((t) => t.ru !== undefined && t.endedAt !== undefined)).toBe(true);
    expect(await c.finishTasks(job.id)).toBe(4);
    await c.until(async () => (await c.jobState(job.id)) === 'succeeded', 5000);
  });
});
