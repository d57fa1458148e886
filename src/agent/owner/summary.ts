/**
 * The job record as its owner keeps it: the state summarised from the task counts, the message
 * (why it waits, or why it failed), and the final write, which removes everything the job held
 * (owner key, load reports, queue entries) in the same transaction.
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
import type { JobState, TaskState } from '../../model/types.ts';
import { isFinalJob, type LiveJobRecord, type LiveTaskRecord } from '../../state/live-records.ts';
import { parseJson } from '../../state/records.ts';
import { queueDeletesOf } from '../../state/queue.ts';
import type { Op } from '../../store/types.ts';
import { admitted, fencedTxn, leaveServers, type OwnerContext, type Owned } from './context.ts';
import { finalDecisionsJson } from './decisions.ts';
import { finishedEntry } from '../../state/retention.ts';

/** Progress alone (task counts, placed) is written to the job record at most this often. */
export const PROGRESS_WRITE_MS = 250;

/** States a job passes through on its way to running, written like progress (see above). */
const STEPS: ReadonlySet<JobState> = new Set<JobState>(['admitted', 'placed']);

/** The job's state from the task counts (O(states), kept up to date by mergeTask). */
export function summarize(o: Owned): { state: JobState; counts: Partial<Record<TaskState, number>>; placed: number } {
  const counts: Partial<Record<TaskState, number>> = {};
  for (const [st, c] of o.counts) if (c > 0) counts[st] = c;
  const unrecorded = o.spec.tasks - o.tasks.size;
  if (unrecorded > 0) {
    // Tasks never placed have no record; a cancelled job does not write one for each.
    const as: TaskState = o.rec.cancelRequested ? 'cancelled' : 'queued';
    counts[as] = (counts[as] ?? 0) + unrecorded;
  }
  const n = o.spec.tasks;
  const c = (s: TaskState): number => counts[s] ?? 0;
  const placed = n - c('queued') - c('lost') - (o.rec.cancelRequested ? unrecorded : 0);
  const finals = c('succeeded') + c('failed') + c('cancelled');
  let state: JobState;
  if (finals === n) {
    if (c('cancelled') > 0 && o.rec.cancelRequested) state = 'cancelled';
    else if (c('failed') > 0) state = 'failed';
    else if (c('cancelled') > 0) state = 'cancelled';
    else state = 'succeeded';
  } else if (c('running') > 0 || finals > 0) {
    // Under way: some task runs or has run; a moment with none running (the next ones wait for
    // a free RU) does not send the job back to queued.
    state = 'running';
  } else if (placed === n) state = 'placed';
  else if (admitted(o)) state = 'admitted';
  else state = o.rec.state === 'admitted' ? 'admitted' : 'queued';
  return { state, counts, placed };
}

/** A failed job says why: the reason it could not be placed, or its first failed task's. */
function finalMessage(o: Owned, state: JobState): string {
  if (state === 'cancelled') return 'cancelled';
  if (state !== 'failed') return '';
  if (o.note) return o.note;
  let failed = 0;
  let first: LiveTaskRecord | undefined;
  for (const v of o.tasks.values()) {
    if (v.rec.state !== 'failed') continue;
    failed++;
    if (!first || v.rec.index < first.index) first = v.rec;
  }
  return first ? `${failed} of ${o.spec.tasks} tasks failed; task ${first.index}: ${first.message ?? `exit code ${first.exitCode ?? '?'}`}` : 'failed';
}

export async function writeSummary(m: OwnerContext, o: Owned): Promise<void> {
  const lease = m.lease;
  if (!lease || !lease.confirmed) return;
  const s = summarize(o);
  const final = isFinalJob(s.state);
  const message = final ? finalMessage(o, s.state) : (o.note ?? '');
  const same =
    s.state === o.rec.state &&
    s.placed === o.rec.placed &&
    message === (o.rec.message ?? '') &&
    JSON.stringify(s.counts) === JSON.stringify(o.rec.taskStates ?? {});
  if (same && !final) return;
  if (final && (o.scheduling.size > 0 || o.stopping.size > 0)) return;
  // The job's quota allotment is given back before its final write (evaluate.ts settles it at
  // the start of the next evaluation): the owner stops following the job after that write.
  if (final && o.quota && !o.quotaSettled) {
    m.evaluate(o);
    return;
  }
  const k = m.o.keys;
  const now = m.o.clock.now();
  if (!final && (s.state === o.rec.state || STEPS.has(s.state)) && message === (o.rec.message ?? '')) {
    const wait = o.summaryAt + PROGRESS_WRITE_MS - now;
    if (wait > 0) {
      // Progress or a step towards running, and written a moment ago: once the interval is over,
      // evaluate again (the job may be running by then, which is written instead).
      if (!o.summaryDue) {
        o.summaryDue = true;
        m.later(wait, () => {
          o.summaryDue = false;
          m.evaluate(o);
        });
      }
      return;
    }
  }
  const next: LiveJobRecord = { ...o.rec, state: s.state, placed: s.placed, taskStates: s.counts, updatedAt: now, owner: o.agent.id };
  if (message !== '') next.message = message;
  else delete next.message;
  if (final) next.finishedAt = now;
  const success: Op[] = [{ type: 'put', key: k.job(o.id), value: JSON.stringify(next) }];
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
  const res = await fencedTxn(m, o, lease, {
    compare: [{ key: k.job(o.id), target: 'mod', op: '==', value: o.jobRev }],
    success,
    failure: [{ type: 'get', key: k.job(o.id) }],
  });
  if (!res.succeeded) {
    const jkv = res.responses[1]?.[0];
    const jrec = parseJson<LiveJobRecord>(jkv);
    if (!o.dropped && jkv && jrec) takeRecord(m, o, jrec, jkv.modRevision);
    return;
  }
  o.rec = next;
  o.jobRev = res.revision;
  o.summaryAt = now;
  if (final) {
    m.stats.finished++;
    m.owned.delete(o.id);
    leaveServers(o);
    o.dropped = true;
    o.agent.release(o.id);
    m.o.log.info({ job: o.id, state: s.state, rescheduled: next.rescheduled ?? 0 }, 'job finished');
    m.o.onJobFinished?.(o.spec, s.state);
  }
}

/** The stored job record is newer than ours (a cancellation, or our own write seen back). */
export function takeRecord(m: OwnerContext, o: Owned, rec: LiveJobRecord, rev: number): void {
  // A cancellation concerns every task, not only those that changed.
  if (rec.cancelRequested && !o.rec.cancelRequested) o.full = true;
  o.rec = rec;
  o.jobRev = rev;
  m.evaluate(o);
}
