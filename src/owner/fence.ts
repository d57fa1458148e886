/**
 * The owner's fence: every write for an owned job compares that this process still owns it (its
 * member key bound to its lease, the job's owner record as it wrote it), and a write that finds
 * it does not stops owning the job.
 */
import type { Keys } from '../state/keys.ts';
import { fenceCompares, type OwnerFence } from '../state/placement.ts';
import type { HeldLease } from '../state/lease.ts';
import type { LiveTaskRecord } from '../state/live-records.ts';
import { parseJson } from '../state/records.ts';
import type { Compare, KeyValue, Op, TxnResult } from '../store/types.ts';
import type { OwnerContext } from './context.ts';
import { leaveServers, mergeTask, type Owned } from './job.ts';

/**
 * The compare that makes a write conditional on still owning jobs through `lease`: our member key
 * is still bound to it (members.ts). A job changes owner only once its owner's member key is gone
 * (adoption.ts), so while ours lives, the jobs our owner records name are ours.
 */
export function ownerFence(keys: Keys, lease: Pick<HeldLease, 'id'>): Compare {
  return { key: keys.member(lease.id), target: 'lease', op: '==', value: lease.id };
}

/**
 * The same, as a placement commit's fence (SchedulingAgent.setFence): our member key bound to our
 * lease and, for a job, its owner record at the revision we wrote or read it, as every fenced
 * write of ours compares (fencedTxn). An adoption rewrites the owner record, so a placement this
 * process still makes for a job it no longer owns fails even if its member key lives on.
 */
export function commitFence(keys: Keys, lease: Pick<HeldLease, 'id'>, o?: Pick<Owned, 'id' | 'ownerRev'>): OwnerFence {
  const f: OwnerFence = { key: keys.member(lease.id), lease: lease.id };
  if (o?.ownerRev !== undefined) f.owner = { key: keys.owner(o.id), rev: o.ownerRev };
  return f;
}

/**
 * The owner-fenced write: `compare` and `success` guarded by our member key still being bound to
 * our lease and our owner record being the one we wrote (Owned.ownerRev). When it fails because
 * the lease is gone, or the record was deleted (a final write of ours whose answer was lost) or
 * rewritten, the job is dropped (it is final, or another process owns it, or will). `failure` reads come after the member key in `res.responses` (from 1).
 */
export async function fencedTxn(m: OwnerContext, o: Owned, lease: HeldLease, req: { compare?: Compare[]; success: Op[]; failure?: Op[] }): Promise<TxnResult> {
  // On failure, the job's task records it compared are read too: one of them changed without
  // this owner seeing it (it follows no task record), and is applied here.
  const k = m.o.keys;
  const prefix = k.tasks(o.id);
  const taskKeys = (req.compare ?? []).filter((c) => c.key.startsWith(prefix)).map((c) => c.key);
  const failure = req.failure ?? [];
  const res = await m.o.store.txn({
    // The same fence as the job's placements (commitFence): member key and owner record.
    compare: [...fenceCompares(commitFence(k, lease, o)), ...(req.compare ?? [])],
    success: req.success,
    // Our member key first, the caller's reads, the task records compared, our owner record last.
    failure: [
      { type: 'get', key: k.member(lease.id) },
      ...failure,
      ...taskKeys.map((key) => ({ type: 'get' as const, key })),
      { type: 'get', key: k.owner(o.id) },
    ],
  });
  if (!res.succeeded) {
    checkOwnership(m, o, res.responses[0]?.[0], lease);
    const ownerKv = res.responses[res.responses.length - 1]?.[0];
    if (!o.dropped && o.ownerRev !== undefined && ownerKv?.modRevision !== o.ownerRev)
      dropJob(m, o, ownerKv ? 'owner record rewritten (adopted)' : 'owner record gone (the job is final)');
    if (o.dropped) return res;
    taskKeys.forEach((key, i) => {
      const t = Number(key.slice(prefix.length));
      const kv = res.responses[1 + failure.length + i]?.[0];
      if (kv) mergeTask(o, t, parseJson<LiveTaskRecord>(kv), kv.modRevision);
      // No record of its own: gone, unless it never had one (its chunk's still holds).
      else if (o.tasks.has(t) && !o.tasks.get(t)?.implied) mergeTask(o, t, undefined, res.revision);
    });
    if (taskKeys.length > 0) m.queue.add(o);
  }
  return res;
}

/** Stops owning the job (final, adopted elsewhere, or the lease lost): its scheduling call is aborted and it leaves the process's maps. */
export function dropJob(m: Pick<OwnerContext, 'owned' | 'o'>, o: Owned, why: string): void {
  if (o.dropped) return;
  o.dropped = true;
  o.agent.abort(o.id);
  if (m.owned.get(o.id) === o) m.owned.delete(o.id);
  leaveServers(o);
  m.o.log.info({ job: o.id, why }, 'no longer owner of job');
}

/** After a failed fenced write, given our member key as read: is the job still ours? If not, stop owning it. */
export function checkOwnership(m: OwnerContext, o: Owned, memberKv: KeyValue | undefined, lease: HeldLease): void {
  if (!memberKv || memberKv.lease !== lease.id) dropJob(m, o, 'ownership lost (fenced write)');
}
