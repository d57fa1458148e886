import { afterEach, describe, expect, it } from 'vitest';
import type { JobManager } from '../../src/owner/manager.ts';
import { IDLE_AFTER_MS } from '../../src/owner/members.ts';
import { ownerLeaseOf, type LiveJobRecord, type MemberRecord, type OwnerRecord } from '../../src/state/live-records.ts';
import { parseJson } from '../../src/state/records.ts';
import type { ClusterStore, TxnRequest } from '../../src/store/types.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { DyingStore, OwnerCell } from '../support/owner-harness.ts';
import { endableWatches, wrapStore } from '../support/wrap-store.ts';

/**
 * The cell's members (`members/<lease>`), the owner records that name a lease and outlive it, and
 * the cancellations' marks, on the embedded store with a manual clock.
 */
let cell: OwnerCell | undefined;
afterEach(async () => {
  await cell?.close();
  cell = undefined;
});

/** A store that records the prefix of every watch opened through it. */
function watching(store: ClusterStore): { store: ClusterStore; prefixes: string[] } {
  const prefixes: string[] = [];
  return {
    prefixes,
    store: wrapStore(store, {
      watch: (opts) => {
        prefixes.push(opts.prefix);
        return store.watch(opts);
      },
    }),
  };
}

const leaseOf = (m: JobManager): string => {
  const id = m.lease?.id;
  if (!id) throw new Error('no lease');
  return id;
};

async function member(c: OwnerCell, m: JobManager): Promise<MemberRecord | undefined> {
  return parseJson<MemberRecord>(await c.store.get(c.keys.member(leaseOf(m))));
}

describe('members and owner records (embedded store, manual clock)', () => {
  it("a front-end follows the members, the cancellations and the RUs, and no job's, task's or owner's records", async () => {
    cell = new OwnerCell();
    await cell.seed(2, 4);
    const w = watching(cell.store);
    const a = await cell.owner('A', w.store);
    const b = await cell.owner('B');
    await b.accept(makeJob('elsewhere', TEST_PROFILES[0]!, 2, { maxQueueMs: 0 }));
    await cell.until(async () => (await cell!.busy('elsewhere')).length === 2, 10_000);
    const k = cell.keys;
    expect(w.prefixes).toEqual(expect.arrayContaining([k.members(), k.cancels(), k.rus()]));
    for (const p of w.prefixes) {
      for (const not of [k.jobs(), k.owners(), k.allTasks()]) expect(p.startsWith(not) || not.startsWith(p)).toBe(false);
    }
    // Each front-end is one member, its record bound to its lease; the job's owner record names B's.
    expect((await cell.store.range(k.members())).kvs.map((kv) => kv.lease).sort()).toEqual([leaseOf(a), leaseOf(b)].sort());
    const owner = await cell.store.get(k.owner('elsewhere'));
    expect(owner?.lease).toBe('0');
    expect(ownerLeaseOf(owner)).toBe(leaseOf(b));
    expect(a.owned.has('elsewhere')).toBe(false);
  });

  it('a cancellation asked through another front-end reaches the owner by its mark, which goes with the job', async () => {
    cell = new OwnerCell();
    await cell.seed(2, 4);
    // The servers have a monitor endpoint, so the owner stops tasks through it.
    for (const id of ['s0000', 's0001']) {
      const key = cell.keys.server(id);
      await cell.store.put(key, JSON.stringify({ ...parseJson<Record<string, unknown>>(await cell.store.get(key)), endpoint: `node:${id}` }));
    }
    const a = await cell.owner('A');
    const b = await cell.owner('B');
    const job = makeJob('to-cancel', TEST_PROFILES[0]!, 3, { maxQueueMs: 0, durationMs: 600_000 });
    await a.accept(job);
    await cell.until(async () => (await cell!.busy(job.id)).length === 3, 10_000);
    const rec = await b.cancel(job.id);
    expect(rec.cancelRequested).toBe(true);
    expect(await cell.store.get(cell.keys.cancel(job.id))).toBeDefined();
    // A's tasks are stopped (FakeNodes records the kills), their RUs given back, the job final.
    await cell.until(() => cell!.nodes.kills.filter((k) => k.job === job.id).length === 3, 10_000);
    await cell.finishTasks(job.id, 'failed');
    await cell.until(async () => (await cell!.jobState(job.id)) === 'cancelled', 10_000);
    expect(await cell.store.get(cell.keys.cancel(job.id))).toBeUndefined();
    expect(await cell.store.get(cell.keys.owner(job.id))).toBeUndefined();
  });

  it("a cancellations' watch that ends lists the cancellations alone: no adoption scan, and a cancellation still reaches the owner", async () => {
    cell = new OwnerCell();
    await cell.seed(2, 4);
    for (const id of ['s0000', 's0001']) {
      const key = cell.keys.server(id);
      await cell.store.put(key, JSON.stringify({ ...parseJson<Record<string, unknown>>(await cell.store.get(key)), endpoint: `node:${id}` }));
    }
    const k = cell.keys;
    const { store, reads, watches: ending } = endableWatches(cell.store);
    const a = await cell.owner('A', store);
    const b = await cell.owner('B');
    const job = makeJob('to-cancel', TEST_PROFILES[0]!, 3, { maxQueueMs: 0, durationMs: 600_000 });
    await a.accept(job);
    await cell.until(async () => (await cell!.busy(job.id)).length === 3, 10_000);
    await cell.advance(1000);
    reads.length = 0;
    // The cancellations' watch ends, as one resuming from a compacted revision does.
    ending.find((w) => w.prefix === k.cancels())!.end();
    await cell.until(() => reads.includes(k.cancels()), 5000);
    await cell.advance(1000);
    expect(reads.filter((p) => p === k.owners() || p === k.members())).toEqual([]);
    // Watched again: a cancellation asked through B stops A's tasks.
    await b.cancel(job.id);
    await cell.until(() => cell!.nodes.kills.filter((x) => x.job === job.id).length === 3, 10_000);
  });

  it("a member's record says whether it has tasks to place: at once when it has, a moment after it has none", async () => {
    cell = new OwnerCell();
    await cell.seed(1, 2);
    const a = await cell.owner('A');
    expect((await member(cell, a))?.placing).toBe(false);
    // Three tasks on two RUs: one waits.
    await a.accept(makeJob('three', TEST_PROFILES[0]!, 3, { maxQueueMs: 600_000, durationMs: 600_000 }));
    await cell.until(async () => (await member(cell!, a))?.placing === true, 1000);
    await cell.until(async () => (await cell!.busy('three')).length === 2, 10_000);
    await cell.advance(3 * IDLE_AFTER_MS);
    expect((await member(cell, a))?.placing).toBe(true);
    // The third is placed once an RU is free; the record says so only after IDLE_AFTER_MS.
    await cell.finishTasks('three');
    await cell.until(async () => (await cell!.busy('three')).length === 1, 10_000);
    const placedAt = cell.clock.now();
    await cell.until(async () => (await member(cell!, a))?.placing === false, 5000);
    expect(cell.clock.now() - placedAt).toBeGreaterThanOrEqual(IDLE_AFTER_MS - 250);
  });

  it('the survivor adopts the jobs whose owner record names a lease that is no member, and the old owner cannot write', async () => {
    cell = new OwnerCell();
    await cell.seed(2, 4);
    const dying = new DyingStore(cell.store, () => false);
    const a = await cell.owner('A', dying);
    const job = makeJob('orphaned', TEST_PROFILES[0]!, 2, { maxQueueMs: 0, durationMs: 600_000 });
    await a.accept(job);
    await cell.until(async () => (await cell!.busy(job.id)).length === 2, 10_000);
    const oldLease = leaseOf(a);
    const b = await cell.owner('B');
    // A stops answering: its lease expires after its TTL, and its member key goes with it.
    dying.dead = true;
    await cell.until(() => b.stats.adopted === 1, 10_000);
    expect(await cell.store.get(cell.keys.member(oldLease))).toBeUndefined();
    const owner = parseJson<OwnerRecord>(await cell.store.get(cell.keys.owner(job.id)));
    expect(owner?.lease).toBe(leaseOf(b));
    // Any write of A's, fenced by its member key, fails now.
    const res = await cell.store.txn({
      compare: [{ key: cell.keys.member(oldLease), target: 'lease', op: '==', value: oldLease }],
      success: [{ type: 'put', key: cell.keys.job(job.id), value: '{}' }],
    });
    expect(res.succeeded).toBe(false);
    expect(parseJson<LiveJobRecord>(await cell.store.get(cell.keys.job(job.id)))?.spec.id).toBe(job.id);
    // B carries the job on: its tasks end, the job is final once.
    await cell.finishTasks(job.id);
    await cell.until(async () => (await cell!.jobState(job.id)) === 'succeeded', 10_000);
  });

  it('a final write whose answer was lost is not written again: the owner record it deleted fences the retry', async () => {
    cell = new OwnerCell();
    await cell.seed(2, 4);
    const jobKey = cell.keys.job('lost-final');
    const finalPut = (req: TxnRequest): boolean => req.success.some((op) => op.type === 'put' && op.key === jobKey && op.value.includes('"state":"succeeded"'));
    let lost = 0;
    let landed = 0;
    const store = wrapStore(cell.store, {
      txn: async (req) => {
        const res = await cell!.store.txn(req);
        if (res.succeeded && finalPut(req)) landed++;
        if (lost === 0 && finalPut(req)) {
          lost++;
          throw new TarcilError('UNAVAILABLE', 'connection reset (simulated)');
        }
        return res;
      },
    });
    const a = await cell.owner('A', store);
    await a.accept(makeJob('lost-final', TEST_PROFILES[0]!, 2, { maxQueueMs: 0 }));
    await cell.until(async () => (await cell!.busy('lost-final')).length === 2, 10_000);
    await cell.finishTasks('lost-final');
    await cell.until(() => lost === 1 && !a.owned.has('lost-final'), 10_000);
    await cell.advance(5000);
    expect(await cell.jobState('lost-final')).toBe('succeeded');
    expect(landed).toBe(1);
  });

  it("a job whose owner record names this front-end's lease, unknown to it (a submission's lost answer), is taken up by a scan", async () => {
    cell = new OwnerCell();
    await cell.seed(2, 4);
    const a = await cell.owner('A');
    const job = makeJob('landed', TEST_PROFILES[0]!, 1, { maxQueueMs: 0 });
    const now = cell.clock.now();
    const rec: LiveJobRecord = {
      spec: job,
      state: 'queued',
      placed: 0,
      updatedAt: now,
      submittedAt: now,
      owner: 'A/a0',
      rescheduled: 0,
      taskStates: { queued: 1 },
    };
    const owner: OwnerRecord = { agent: 'A/a0', process: 'A', since: now, lease: leaseOf(a) };
    await cell.store.txn({
      compare: [],
      success: [
        { type: 'put', key: cell.keys.job(job.id), value: JSON.stringify(rec) },
        { type: 'put', key: cell.keys.owner(job.id), value: JSON.stringify(owner) },
      ],
    });
    await cell.until(async () => (await cell!.busy(job.id)).length === 1, 40_000, 250);
    expect(a.stats.adopted).toBe(1);
  });
});
