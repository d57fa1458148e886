/**
 * Gangs larger than one transaction: reserve chunk by chunk (RUs marked `reserved`, invisible to
 * other agents' sampling), then turn every reservation into a placement. If a chunk cannot be
 * reserved after its retries, every reservation is released and the whole job goes back to
 * admission: all or nothing, across several transactions. An owner that stops part-way leaves
 * reservations that the job's owner settles (owner/transitions.ts, reconcileGang).
 */
import type { Placement } from '../state/decisions.ts';
import type { PlacedRuRecord } from '../state/records.ts';
import { freeReservation } from '../state/release.ts';
import type { Compare, Op } from '../store/types.ts';
import { errorMessage, TarcilError } from '../util/errors.ts';
import type { Next } from './attempt.ts';
import type { AttemptContext } from './attempt-context.ts';
import { tryCommit } from './commit.ts';
import { decide } from './core.ts';
import { hardPack } from '../sampling/feasibility.ts';
import { admit, waitForCapacity } from './waits.ts';

/**
 * Places every task of the call (cx.tasks) as one gang: reserves them all, then confirms the
 * reservations; gives them all back and waits as the attempt loop says when a chunk cannot be
 * reserved. The context's Attempt never waits for a freed RU after a lost race: it backs off.
 */
export async function reserveAndConfirm(cx: AttemptContext): Promise<void> {
  const { agent: a, job, rec, at } = cx;
  const pending = cx.tasks;
  for (;;) {
    cx.assertOpen();
    if (!at.admitted) await admit(cx, pending.length);
    const { reserved, then } = await reserveAll(cx);
    if (then.kind === 'go') {
      await confirmReservations(cx, reserved);
      return;
    }
    // All or nothing: give every reservation back, then wait as the attempt loop says.
    await releaseReservations(cx, reserved);
    at.readmit();
    rec.readmissions++;
    a.stats.readmissions++;
    await cx.waiting.ensure(pending.length);
    if (then.kind === 'backoff') {
      const q0 = a.clock.now();
      await a.clock.sleep(then.ms);
      rec.stageMs.queue += a.clock.now() - q0;
    } else {
      const why = then.kind === 'capacity-wait' ? then.why : undefined;
      await waitForCapacity(cx, { ms: then.ms, need: hardPack(job.locality) ? pending.length : 1, why, quota: why !== undefined });
    }
  }
}

/** Reserves the call's tasks chunk by chunk, up to the first chunk that could not be reserved. */
async function reserveAll(cx: AttemptContext): Promise<{ reserved: Placement[]; then: Next }> {
  const { agent: a, job, rec } = cx;
  const pending = cx.tasks;
  const reserved: Placement[] = [];
  let then: Next = { kind: 'go' };
  try {
    for (let off = 0; off < pending.length; off += a.picksPerTxn) {
      cx.assertOpen();
      const chunk = pending.slice(off, off + a.picksPerTxn);
      const before = rec.placements.length;
      // A required pack chooses its group for every task left, then reserves this chunk of it.
      then = await reserveChunk(cx, chunk, hardPack(job.locality) ? pending.length - off : chunk.length);
      if (then.kind !== 'go') break;
      reserved.push(...rec.placements.splice(before));
    }
  } catch (err) {
    // Stopped mid-way (cancelled, closed, store error): give back what we reserved, if we
    // still may. Whatever is left is reconciled by the job's owner (JobManager), or by the
    // process that adopts the job.
    await releaseReservations(cx, reserved).catch((e: unknown) =>
      a.log.warn({ job: job.id, err: errorMessage(e) }, 'could not release gang reservations; the owner will'),
    );
    throw err;
  }
  return { reserved, then };
}

/**
 * Reserves one chunk of a gang, all or nothing; conflicts resample after the loop's backoff.
 * `room`: tasks the selection must find room for (more than the chunk: a required pack's rest).
 */
async function reserveChunk(cx: AttemptContext, chunk: number[], room: number): Promise<Next> {
  const { agent: a, job, at, rec } = cx;
  for (;;) {
    cx.assertOpen();
    const d = decide(a.core, { job, target: cx.target, m: room, cfg: { ...a.config, preemption: false }, skipAdmission: true });
    const picks = d.selection.picks.length >= room ? d.selection.picks.slice(0, chunk.length) : [];
    const sel = at.afterSelection(picks.length, chunk.length, true);
    if (sel.kind !== 'go') return sel;
    const res = await tryCommit(cx, { tasks: chunk, picks, finalForJob: false, ruState: 'reserved' });
    if (res.ok) return at.afterCommit({ placed: chunk.length, conflicts: 0, asked: chunk.length });
    if (res.quota) return at.afterQuota(res.quota.message);
    cx.unclaim(res.survivors);
    const then = at.afterCommit({ placed: 0, conflicts: Math.max(1, picks.length - res.survivors.length), asked: chunk.length });
    if (!at.admitted) return then;
    rec.retries++;
    await a.clock.sleep(then.kind === 'backoff' ? then.ms : 0);
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
    compare.push({ key: fence.key, target: 'lease', op: '==', value: fence.lease });
    failure.push({ type: 'get', key: fence.key });
  }
  const res = await a.store.txn({ compare, success, failure });
  if (!res.succeeded) {
    const cur = fence ? res.responses[0]?.[0] : undefined;
    if (fence && (!cur || cur.lease !== fence.lease)) a.lostFence(job.id, fence.lease);
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
