/**
 * Gangs larger than one transaction: reserve chunk by chunk (RUs marked `reserved`, invisible to
 * other agents' sampling), then turn every reservation into a placement. If a chunk cannot be
 * reserved after its retries, every reservation is released and the whole job goes back to
 * admission: all or nothing, across several transactions. An owner that stops part-way leaves
 * reservations that the job's owner settles (owner/transitions.ts, repairGang).
 */
import type { Placement } from '../state/decisions.ts';
import type { PlacedRuRecord } from '../state/records.ts';
import { fenceCompares, fenceHolds, fenceReads } from '../state/placement.ts';
import { freeReservation } from '../state/release.ts';
import type { Compare, Op } from '../store/types.ts';
import { errorMessage, TarcilError } from '../util/errors.ts';
import type { Pick } from '../sampling/batch.ts';
import type { AttemptContext } from './attempt-context.ts';
import type { Outcome, Step } from './attempt-steps.ts';
import { tryCommit } from './commit.ts';
import { decide } from './core.ts';

/**
 * A gang's reservation steps (attempt-steps.ts) on the live agent: decide a chunk's RUs, reserve
 * them, confirm every reservation, or give them all back. Stopped mid-way (cancelled, closed,
 * store error) before confirming, it gives back what it reserved, if it still may; whatever is
 * left is reconciled by the job's owner, or by the process that adopts the job.
 */
export class GangPlacer {
  private reserved: Placement[] = [];
  private picks: Pick[] = [];
  private chunk: number[] = [];
  private confirming = false;

  constructor(private readonly cx: AttemptContext) {}

  /** One decision for the chunk after those reserved; a required pack chooses its group for every task left. */
  decide(s: Extract<Step, { kind: 'decide' }>): Outcome {
    const { cx } = this;
    const a = cx.agent;
    const off = this.reserved.length;
    this.chunk = cx.tasks.slice(off, off + s.chunk);
    const d = decide(a.core, { job: cx.job, target: cx.target, m: s.room, cfg: { ...a.config, preemption: false }, skipAdmission: true });
    this.picks = d.selection.picks.length >= s.room ? d.selection.picks.slice(0, this.chunk.length) : [];
    return { kind: 'decided', picks: this.picks.length, kept: 0 };
  }

  /** Reserves the chunk, all or nothing. */
  async commit(): Promise<Outcome> {
    const { cx, chunk, picks } = this;
    const before = cx.rec.placements.length;
    const res = await tryCommit(cx, { tasks: chunk, picks, finalForJob: false, ruState: 'reserved' });
    if (res.ok) {
      this.reserved.push(...cx.rec.placements.splice(before));
      return { kind: 'committed', placed: chunk.length, conflicts: 0 };
    }
    if (res.quota) return { kind: 'committed', placed: 0, conflicts: 0, quota: res.quota };
    cx.unclaim(res.survivors);
    return { kind: 'committed', placed: 0, conflicts: Math.max(1, picks.length - res.survivors.length) };
  }

  async confirm(): Promise<Outcome> {
    this.confirming = true;
    await confirmReservations(this.cx, this.reserved);
    return { kind: 'confirmed' };
  }

  async release(): Promise<Outcome> {
    const reserved = this.reserved;
    this.reserved = [];
    await releaseReservations(this.cx, reserved);
    return { kind: 'released' };
  }

  /** The call failed: give back what was reserved (not once confirming began: the owner settles that). */
  async abandon(): Promise<void> {
    const { cx } = this;
    if (this.confirming || this.reserved.length === 0) return;
    const reserved = this.reserved;
    this.reserved = [];
    await releaseReservations(cx, reserved).catch((e: unknown) =>
      cx.agent.log.warn({ job: cx.job.id, err: errorMessage(e) }, 'could not release gang reservations; the owner will'),
    );
  }
}

/** Turns the reservations into placements (`busy`), one owner-fenced transaction per chunk. */
async function confirmReservations(cx: AttemptContext, reserved: Placement[]): Promise<void> {
  const per = cx.agent.picksPerTxn;
  for (let off = 0; off < reserved.length; off += per) {
    const part = reserved.slice(off, off + per);
    await confirmPart(cx, part, off + per >= reserved.length);
  }
}

async function confirmPart(cx: AttemptContext, part: Placement[], last: boolean): Promise<void> {
  const { agent: a, job, rec } = cx;
  const k = a.keys;
  const compare: Compare[] = part.map((r) => ({ key: k.ru(r.ru), target: 'mod', op: '==', value: r.commitRevision }));
  const success: Op[] = [];
  const now = a.clock.now();
  const current = await a.store.txn({ compare: [], success: part.map((r) => ({ type: 'get' as const, key: k.ru(r.ru) })) });
  current.responses.forEach((kvs) => {
    const kv = kvs?.[0];
    if (!kv) return;
    const ru = JSON.parse(kv.value) as PlacedRuRecord;
    success.push({ type: 'put', key: kv.key, value: JSON.stringify({ ...ru, state: 'busy', since: now }) });
  });
  for (const sid of new Set(part.map((r) => r.ru.server))) success.push({ type: 'put', key: k.epoch(sid), value: `${a.id}:gang` });
  if (last && a.config.recordJob) {
    success.push({ type: 'put', key: k.job(job.id), value: JSON.stringify({ spec: job, state: 'placed', placed: job.tasks, updatedAt: now }) });
  }
  const fence = a.fenceOf(job.id);
  const failure: Op[] = [];
  if (fence) {
    compare.push(...fenceCompares(fence));
    failure.push(...fenceReads(fence));
  }
  const res = await a.store.txn({ compare, success, failure });
  if (!res.succeeded) {
    if (fence && !fenceHolds(fence, res.responses)) a.lostFence(job.id, fence.lease);
    // Only the job's owner writes its reserved RUs; a mismatch means someone else changed
    // them (e.g. an operator reset). Surface it rather than guess: the owner reconciles.
    throw new TarcilError('INTERNAL', `gang reservation of job ${job.id} changed under its owner`);
  }
  for (const r of part) rec.placements.push({ ...r, commitRevision: res.revision });
}

async function releaseReservations(cx: AttemptContext, reserved: Placement[]): Promise<void> {
  const { agent: a, job } = cx;
  const fence = a.fenceOf(job.id);
  for (const r of reserved) {
    await freeReservation(a.store, a.keys, { ru: r.ru, ruRevision: r.commitRevision, job: job.id, task: r.task, by: a.id }, fence);
  }
}
