/**
 * The job record as its owner keeps it: the write of what `planRecord` (plan.ts) found due — the
 * state summarised from the task counts and the message (why it waits, or why it failed) — and
 * the final write, which removes everything the job held (owner key, load reports, queue
 * entries) in the same transaction.
 *
 * A change of message, or of state to running or final, is written at once; progress alone
 * (task counts, placed) at most every PROGRESS_WRITE_MS. The record carries the whole spec, so a
 * job whose tasks end hundreds of times a second would otherwise rewrite (and every follower of
 * `jobs/` re-read) over a kilobyte per ended task.
 *
 * The steps on the way to running (admitted, placed) wait like progress: a job usually passes
 * through both within milliseconds of its submission, and writing each would store the record
 * three times before its first task runs. A job that stays admitted or placed has it written once
 * the interval is over.
 */
import type { LiveJobRecord } from '../state/live-records.ts';
import { parseJson } from '../state/records.ts';
import { queueDeletesOf } from '../state/queue.ts';
import type { HeldLease } from '../state/lease.ts';
import type { Op } from '../store/types.ts';
import type { OwnerContext } from './context.ts';
import { admitted, leaveServers, setRecord, type Owned } from './job.ts';
import { fencedTxn } from './fence.ts';
import { decisionsWithRecord, finalDecisionsJson } from './decisions.ts';
import { finishedEntry } from '../state/retention.ts';
import { OUTCOMES_PER_WRITE, planRecord, type RecordStep } from './plan.ts';
import { donePuts } from '../state/task-outcomes.ts';

/** Plans the job record (plan.ts planRecord) and applies what is due. */
export async function writeSummary(m: OwnerContext, o: Owned): Promise<void> {
  const lease = m.lease;
  if (!lease || !lease.confirmed) return;
  const step = planRecord(o, m.o.clock.now(), admitted(o), o.agent.id, m.seenRefreshMs);
  if (step.kind === 'write') await writeRecord(m, o, lease, step);
  else if (step.kind === 'settle-quota') {
    // The job's quota allotment is given back before its final write (the next evaluation's plan gives it back
    // first, planQuota): the owner stops following the job after that write.
    m.queue.add(o);
  } else if (step.kind === 'later') {
    // Progress or a step towards running, written a moment ago: once the interval is over,
    // evaluate again (the job may be running by then, which is written instead).
    evaluateIn(m, o, step.waitMs);
  } else if ((o.counts.get('running') ?? 0) + (o.counts.get('placed') ?? 0) > 0) {
    // Nothing to write: with live tasks, the record is due again to move `seen` on (plan.ts).
    evaluateIn(m, o, Math.max(0, o.summaryAt + m.seenRefreshMs - m.o.clock.now()));
  }
}

/** Evaluates the job again after `ms`, unless an evaluation is due by then already. */
function evaluateIn(m: OwnerContext, o: Owned, ms: number): void {
  const at = m.o.clock.now() + ms;
  if (o.summaryDueAt !== undefined && o.summaryDueAt <= at) return;
  o.summaryDueAt = at;
  m.later(ms, () => {
    if (o.summaryDueAt !== at) return;
    o.summaryDueAt = undefined;
    m.queue.add(o);
  });
}

/** The fenced write of the job record, compared on the revision the owner last saw; the final one takes everything the job held with it. */
async function writeRecord(m: OwnerContext, o: Owned, lease: HeldLease, step: Extract<RecordStep, { kind: 'write' }>): Promise<void> {
  const { next, final } = step;
  const now = next.updatedAt;
  const k = m.o.keys;
  // Every change of an RU up to the view's revision is applied here, unless a read that may bring
  // an outcome is still out; with the outcomes below, the job's records hold them all.
  if (o.outcomes.reading === 0) next.seen = m.seenRevision();
  const done = [...o.outcomes.unrecorded.values()].slice(0, OUTCOMES_PER_WRITE);
  const success: Op[] = [{ type: 'put', key: k.job(o.id), value: JSON.stringify(next) }];
  for (const put of donePuts(k, o.id, done)) success.push({ type: 'put', ...put });
  if (final) {
    // Everything the job held goes in the same transaction as its final state: no orphans.
    success.push({ type: 'delete', key: k.owner(o.id) });
    // Retention reads the finished jobs from here, oldest first (it follows no job record).
    success.push({ type: 'put', key: k.finishedEntry(now, o.id), value: JSON.stringify(finishedEntry(o.id, next)) });
    if (next.cancelRequested) success.push({ type: 'delete', key: k.cancel(o.id) });
    success.push({ type: 'delete', key: m.live.jobReports(o.id), prefix: true });
    success.push(queueDeletesOf(k, o.id));
    const decisions = finalDecisionsJson(m, o);
    if (decisions !== undefined) success.push({ type: 'put', key: k.decision(o.id), value: decisions });
  }
  // A decision record due now rides in the same transaction (decisions.ts).
  const decisions = final ? undefined : decisionsWithRecord(m, o);
  if (decisions) success.push(decisions.op);
  let res;
  try {
    res = await fencedTxn(m, o, lease, {
      compare: [{ key: k.job(o.id), target: 'mod', op: '==', value: o.jobRev }],
      success,
      failure: [{ type: 'get', key: k.job(o.id) }],
    });
  } catch (err) {
    decisions?.settle(false);
    throw err;
  }
  decisions?.settle(res.succeeded);
  if (!res.succeeded) {
    const jkv = res.responses[1]?.[0];
    const jrec = parseJson<LiveJobRecord>(jkv);
    if (!o.dropped && jkv && jrec) takeRecord(m, o, jrec, jkv.modRevision);
    return;
  }
  setRecord(o, next);
  o.jobRev = res.revision;
  o.summaryAt = now;
  for (const e of done) if (o.outcomes.unrecorded.get(e.t) === e) o.outcomes.unrecorded.delete(e.t);
  if (o.outcomes.unrecorded.size > 0) m.queue.add(o);
  if (final) {
    m.stats.finished++;
    m.owned.delete(o.id);
    leaveServers(o);
    o.dropped = true;
    o.agent.release(o.id);
    m.o.log.info({ job: o.id, state: next.state, rescheduled: next.rescheduled ?? 0 }, 'job finished');
    m.o.onJobFinished?.(o.spec, next.state);
  }
}

/** The stored job record is newer than ours (a cancellation, or our own write seen back). */
export function takeRecord(m: OwnerContext, o: Owned, rec: LiveJobRecord, rev: number): void {
  // A cancellation concerns every task, not only those that changed.
  if (rec.cancelRequested && !o.rec.cancelRequested) o.full = true;
  setRecord(o, rec);
  o.jobRev = rev;
  m.queue.add(o);
}
