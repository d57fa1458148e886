import { afterEach, describe, expect, it } from 'vitest';
import type { JobManager } from '../../src/owner/manager.ts';
import { parseJson } from '../../src/state/records.ts';
import type { Lease, TxnRequest } from '../../src/store/types.ts';
import { wrapStore } from '../support/wrap-store.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { OwnerCell, putsRu } from '../support/owner-harness.ts';

/**
 * A front-end whose owner lease ends while one of its own requests is out: the answer comes back
 * under a new lease, after another front-end adopted the job. The late answer must not make it
 * act for the job again (embedded store, manual clock).
 */
let cell: OwnerCell | undefined;
afterEach(async () => {
  await cell?.close();
  cell = undefined;
});

/**
 * Process A's view of the store: the answer to the first transaction `holdAt` picks is held (the
 * transaction itself lands) until `release()`; every lease A is granted is kept, so that the test
 * can end them in the store as etcd would end an expired one; A's placements of `job` are counted.
 */
function staleOwnerStore(c: OwnerCell, job: string, holdAt: (req: TxnRequest) => boolean) {
  const leases: Lease[] = [];
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const s = { held: false, placements: 0 };
  const placing = (req: TxnRequest): boolean =>
    putsRu(req, 'busy') && req.success.some((op) => op.type === 'put' && parseJson<{ job?: string }>({ value: op.value } as never)?.job === job);
  const store = wrapStore(c.store, {
    grantLease: async (ttl, opts) => {
      const l = await c.store.grantLease(ttl, opts);
      leases.push(l);
      return l;
    },
    txn: async (req) => {
      if (placing(req)) s.placements++;
      const res = await c.store.txn(req);
      if (!s.held && holdAt(req)) {
        s.held = true;
        await gate;
      }
      return res;
    },
    txns: async (reqs) => {
      for (const r of reqs) if (placing(r)) s.placements++;
      return await c.store.txns(reqs);
    },
  });
  return { store, s, release: () => release(), endLeases: () => Promise.all(leases.map((l) => l.revoke().catch(() => undefined))) };
}

/** A's lease ends in the store; B sees its member go and adopts its jobs; A takes a new lease. */
async function fenceAndAdopt(c: OwnerCell, a: JobManager, b: JobManager, endLeases: () => Promise<unknown>): Promise<void> {
  const before = a.leaseId;
  await endLeases();
  await c.until(() => b.stats.adopted === 1, 10_000);
  await c.until(() => a.leaseId !== undefined && a.leaseId !== before, 10_000);
}

describe('an owner whose lease ends while its request is out', () => {
  it('a submission answered under a new lease is acknowledged, not held: the adopter places the job, once', async () => {
    cell = new OwnerCell();
    await cell.seed(2, 2);
    const job = makeJob('stale-submit', TEST_PROFILES[0]!, 2, { maxQueueMs: 0 });
    const isSubmission = (req: TxnRequest): boolean => req.success.some((op) => op.type === 'put' && op.key === cell!.keys.job(job.id));
    const { store, s, release, endLeases } = staleOwnerStore(cell, job.id, isSubmission);
    const a = await cell.owner('A', store);
    const b = await cell.owner('B');
    const acked = a.accept(job);
    await cell.until(() => s.held, 2000);
    await fenceAndAdopt(cell, a, b, endLeases);
    release();
    const res = await acked;
    expect(res.jobId).toBe(job.id);
    await cell.advance(3000);
    // The answer came under a lease that is not the one the job was stored under: A holds nothing
    // of it, and never tried to place it; B, which adopted it, placed both tasks.
    expect(a.ownedJobs()).not.toContain(job.id);
    expect(s.placements).toBe(0);
    await cell.until(async () => (await cell!.busy(job.id)).length === 2, 10_000);
    expect(b.ownedJobs()).toContain(job.id);
    expect(await cell.finishTasks(job.id)).toBe(2);
    await cell.until(async () => (await cell!.jobState(job.id)) === 'succeeded', 10_000);
    expect(s.placements).toBe(0);
  });

  it('an evaluation whose lost-task write is answered after the job was adopted schedules nothing', async () => {
    cell = new OwnerCell();
    await cell.seed(2, 2);
    for (const kv of (await cell.store.range(cell.keys.servers())).kvs) {
      await cell.store.put(kv.key, JSON.stringify({ ...JSON.parse(kv.value), disconnectGraceMs: 10_000 }));
    }
    const job = makeJob('stale-eval', TEST_PROFILES[0]!, 1, { maxQueueMs: 0 });
    const marksLost = (req: TxnRequest): boolean =>
      req.success.some((op) => op.type === 'put' && op.key === cell!.keys.task(job.id, 0) && op.value.includes('"state":"lost"'));
    const { store, s, release, endLeases } = staleOwnerStore(cell, job.id, marksLost);
    const a = await cell.owner('A', store);
    await a.accept(job);
    await cell.until(async () => (await cell!.busy(job.id)).length === 1, 10_000);
    expect(s.placements).toBe(1);
    const left = cell.keys.parseRu((await cell.busy(job.id))[0]!.key)!.server;
    // The task's node leaves; after its grace, A records the task lost (the write lands, its answer is held).
    await cell.store.txn({
      compare: [],
      success: [
        { type: 'delete', key: cell.keys.server(left) },
        { type: 'delete', key: cell.keys.serverRus(left), prefix: true },
      ],
    });
    await cell.until(() => s.held, 20_000);
    const b = await cell.owner('B');
    await fenceAndAdopt(cell, a, b, endLeases);
    // The evaluation goes on from the answer: the job was dropped meanwhile, so it schedules
    // nothing (src/owner/apply.ts checks before it schedules; under its new lease, A's fence would
    // otherwise hold again, and its agent would send a placement that only the owner record stops).
    release();
    await cell.advance(3000);
    expect(s.placements).toBe(1);
    expect(a.ownedJobs()).not.toContain(job.id);
    await cell.until(async () => (await cell!.busy(job.id)).length === 1, 20_000);
    expect(cell.keys.parseRu((await cell.busy(job.id))[0]!.key)!.server).not.toBe(left);
    expect(s.placements).toBe(1);
  });
});
