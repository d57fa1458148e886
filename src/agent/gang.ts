/**
 * Gangs larger than one transaction: reserve chunk by chunk (RUs marked `reserved`, invisible to
 * other agents' sampling), then turn every reservation into a placement. If a chunk cannot be
 * reserved after its retries, every reservation is released and the whole job goes back to
 * admission: all or nothing, across several transactions. An owner that stops part-way leaves
 * reservations that the job's owner settles (owner/transitions.ts, reconcileGang).
 */
import type { JobSpec } from '../model/types.ts';
import type { JobTarget } from '../quality/index.ts';
import type { Pick } from '../sampling/batch.ts';
import type { ClusterState } from '../sampling/cluster-state.ts';
import type { DecisionRecord, Placement } from '../state/decisions.ts';
import type { Keys } from '../state/keys.ts';
import type { PlacedRuRecord } from '../state/records.ts';
import { freeReservation } from '../state/release.ts';
import type { ClusterStore, Compare, Op } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import { errorMessage, TarcilError } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import type { Rng } from '../util/rng.ts';
import { Attempt, type Next } from './attempt.ts';
import type { CommitResult, TaskStamp } from './commit.ts';
import type { AgentConfig } from './config.ts';
import { decide, type CoreContext } from './core.ts';
import { hardPack } from '../sampling/feasibility.ts';
import { WaitingEntry } from './waiting.ts';

/** What the reservation protocol uses of its agent. */
export interface GangHost {
  readonly id: string;
  readonly store: ClusterStore;
  readonly keys: Keys;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly log: Logger;
  readonly config: AgentConfig;
  readonly state: ClusterState;
  readonly core: CoreContext;
  readonly picksPerTxn: number;
  readonly stats: { readmissions: number };
  fenceOf(jobId: string): { key: string; lease: string } | undefined;
  /** The job's fence no longer holds: stop scheduling it. */
  lostFence(jobId: string, lease: string): never;
  assertOpen(jobId?: string): void;
  admit(job: JobSpec, target: JobTarget, needed: number, rec: DecisionRecord, at: Attempt, waiting: WaitingEntry): Promise<void>;
  waitForCapacity(rec: DecisionRecord, job: JobSpec, ms?: number, need?: number, why?: string, quota?: boolean): Promise<unknown>;
  tryCommit(
    job: JobSpec,
    tasks: number[],
    picks: Pick[],
    rec: DecisionRecord,
    finalForJob: boolean,
    ruState: 'busy' | 'reserved',
    stamp: TaskStamp,
    /** Straight to the store, not through group commit (CommitRequest.direct). */
    direct?: boolean,
  ): Promise<CommitResult>;
}

export async function scheduleGangReserved(
  h: GangHost,
  job: JobSpec,
  target: JobTarget,
  pending: number[],
  rec: DecisionRecord,
  stamp: TaskStamp,
): Promise<void> {
  const waiting = new WaitingEntry(h.store, h.keys, job, h.id, h.clock);
  try {
    await reserveAndConfirm(h, job, target, pending, rec, waiting, stamp);
  } finally {
    await waiting.remove();
  }
}

async function reserveAndConfirm(
  h: GangHost,
  job: JobSpec,
  target: JobTarget,
  pending: number[],
  rec: DecisionRecord,
  waiting: WaitingEntry,
  stamp: TaskStamp,
): Promise<void> {
  const at = new Attempt(h.config, h.rng, job.maxQueueMs);
  for (;;) {
    h.assertOpen(job.id);
    if (!at.admitted) await h.admit(job, target, pending.length, rec, at, waiting);
    const reserved: Placement[] = [];
    let then: Next = { kind: 'go' };
    try {
      for (let off = 0; off < pending.length; off += h.picksPerTxn) {
        h.assertOpen(job.id);
        const chunk = pending.slice(off, off + h.picksPerTxn);
        const before = rec.placements.length;
        // A required pack chooses its group for every task left, then reserves this chunk of it.
        then = await reserveChunk(h, job, target, chunk, rec, at, stamp, hardPack(job.locality) ? pending.length - off : chunk.length);
        if (then.kind !== 'go') break;
        reserved.push(...rec.placements.splice(before));
      }
    } catch (err) {
      // Stopped mid-way (cancelled, closed, store error): give back what we reserved, if we
      // still may. Whatever is left is reconciled by the job's owner (JobManager), or by the
      // process that adopts the job.
      await releaseReservations(h, job, reserved).catch((e: unknown) =>
        h.log.warn({ job: job.id, err: errorMessage(e) }, 'could not release gang reservations; the owner will'),
      );
      throw err;
    }
    if (then.kind === 'go') {
      await confirmReservations(h, job, reserved, rec);
      return;
    }
    // All or nothing: give every reservation back, then wait as the attempt loop says.
    await releaseReservations(h, job, reserved);
    at.readmit();
    rec.readmissions++;
    h.stats.readmissions++;
    await waiting.ensure(pending.length);
    if (then.kind === 'backoff') {
      const q0 = h.clock.now();
      await h.clock.sleep(then.ms);
      rec.stageMs.queue += h.clock.now() - q0;
    } else {
      const why = then.kind === 'capacity-wait' ? then.why : undefined;
      await h.waitForCapacity(rec, job, then.ms, hardPack(job.locality) ? pending.length : 1, why, why !== undefined);
    }
  }
}

/** Reserves one chunk of a gang, all or nothing; conflicts resample after the loop's backoff. */
async function reserveChunk(
  h: GangHost,
  job: JobSpec,
  target: JobTarget,
  chunk: number[],
  rec: DecisionRecord,
  at: Attempt,
  stamp: TaskStamp,
  /** Tasks the selection must find room for (more than the chunk: a required pack's rest). */
  room: number,
): Promise<Next> {
  for (;;) {
    h.assertOpen(job.id);
    const d = decide(h.core, job, target, room, { ...h.config, preemption: false }, { skipAdmission: true });
    const picks = d.selection.picks.length >= room ? d.selection.picks.slice(0, chunk.length) : [];
    const sel = at.afterSelection(picks.length, chunk.length, true);
    if (sel.kind !== 'go') return sel;
    const res = await h.tryCommit(job, chunk, picks, rec, false, 'reserved', stamp);
    if (res.ok) return at.afterCommit({ placed: chunk.length, conflicts: 0, asked: chunk.length });
    if (res.quota) return at.afterQuota(res.quota.message);
    h.state.batch(() => res.survivors.forEach((p) => h.state.unclaim({ server: p.server.id, index: p.index }, rec)));
    const then = at.afterCommit({ placed: 0, conflicts: Math.max(1, picks.length - res.survivors.length), asked: chunk.length });
    if (!at.admitted) return then;
    rec.retries++;
    await h.clock.sleep(then.kind === 'backoff' ? then.ms : 0);
  }
}

async function confirmReservations(h: GangHost, job: JobSpec, reserved: Placement[], rec: DecisionRecord): Promise<void> {
  const k = h.keys;
  const per = h.picksPerTxn;
  for (let off = 0; off < reserved.length; off += per) {
    const part = reserved.slice(off, off + per);
    const last = off + per >= reserved.length;
    const compare: Compare[] = part.map((r) => ({ key: k.ru(r.ru), target: 'mod', op: '==', value: r.commitRevision }));
    const success: Op[] = [];
    const now = h.clock.now();
    const current = await h.store.txn({ compare: [], success: part.map((r) => ({ type: 'get' as const, key: k.ru(r.ru) })) });
    current.responses.forEach((kvs) => {
      const kv = kvs?.[0];
      if (!kv) return;
      const ru = JSON.parse(kv.value) as PlacedRuRecord;
      success.push({ type: 'put', key: kv.key, value: JSON.stringify({ ...ru, state: 'busy', since: now }) });
    });
    for (const sid of new Set(part.map((r) => r.ru.server))) success.push({ type: 'put', key: k.epoch(sid), value: `${h.id}:gang` });
    if (last && h.config.recordJob) {
      success.push({ type: 'put', key: k.job(job.id), value: JSON.stringify({ spec: job, state: 'placed', placed: job.tasks, updatedAt: now }) });
    }
    const fence = h.fenceOf(job.id);
    const failure: Op[] = [];
    if (fence) {
      compare.push({ key: fence.key, target: 'lease', op: '==', value: fence.lease });
      failure.push({ type: 'get', key: fence.key });
    }
    const res = await h.store.txn({ compare, success, failure });
    if (!res.succeeded) {
      const cur = fence ? res.responses[0]?.[0] : undefined;
      if (fence && (!cur || cur.lease !== fence.lease)) h.lostFence(job.id, fence.lease);
      // Only the job's owner writes its reserved RUs; a mismatch means someone else changed
      // them (e.g. an operator reset). Surface it rather than guess: the owner reconciles.
      throw new TarcilError('INTERNAL', `gang reservation of job ${job.id} changed under its owner`);
    }
    for (const r of part) rec.placements.push({ ...r, commitRevision: res.revision });
  }
}

async function releaseReservations(h: GangHost, job: JobSpec, reserved: Placement[]): Promise<void> {
  const fence = h.fenceOf(job.id);
  for (const r of reserved) {
    await freeReservation(h.store, h.keys, { ru: r.ru, ruRevision: r.commitRevision, job: job.id, task: r.task, by: h.id }, fence);
  }
}
