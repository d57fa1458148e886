/**
 * The job's decision records as `explain` reads them (`decisions/<job>`): the first placement
 * and the latest ones, plus the one in progress while the job waits; rewritten, when it changed,
 * at most every PROGRESS_RECORD_MS. A write is asked for (`decisionsDue`: a scheduling call ended,
 * or the record in progress changed) and made by the job's next evaluation, like every other
 * write about an owned job: in the job record's transaction when the evaluation writes the job
 * record (`decisionsWithRecord`), else in one of its own (`writeDecisions`).
 */
import type { StoredDecisions } from '../state/live-records.ts';
import { trimDecision } from '../state/decisions.ts';
import { errorMessage } from '../util/errors.ts';
import type { OwnerContext } from './context.ts';
import { admitted, type Owned } from './job.ts';
import { ownerFence } from './fence.ts';
import type { Op } from '../store/types.ts';
import type { HeldLease } from '../state/lease.ts';

/**
 * A record in progress is rewritten at most this often (the final one at once). A job placed
 * chunk by chunk changes its record with every chunk, and each rewrite carries every placement so
 * far: a backlog of such jobs, rewritten each second, was the larger part of the bytes written to
 * the store. The owner's own `explain` reads the live record from memory.
 */
export const PROGRESS_RECORD_MS = 5000;

/** Decision records kept per job: the first (the original placement) and the latest ones. */
export const KEPT_DECISIONS = 5;

export function keepFirstAndLatest<T>(list: T[], max: number): T[] {
  return list.length <= max ? list : [list[0] as T, ...list.slice(list.length - (max - 1))];
}

export function decisionsJson(m: OwnerContext, o: Owned, inProgress: boolean): string {
  const records = [...o.decisions.kept];
  const live = o.agent.inflight.get(o.id);
  if (live) records.push(live);
  const kept = keepFirstAndLatest(records, KEPT_DECISIONS).map((r) => trimDecision(r));
  const d: StoredDecisions = { records: kept, inProgress, updatedAt: m.o.clock.now() };
  return JSON.stringify(d);
}

/**
 * The final write's decision record: none when the stored one already says the same (the record
 * written when the job's last scheduling call ended, and no write of it in flight), which is the
 * usual case: a job's placements are decided long before its last task ends.
 */
export function finalDecisionsJson(m: OwnerContext, o: Owned): string | undefined {
  const json = decisionsJson(m, o, false);
  if (!o.decisions.writing && o.decisions.written !== '' && o.decisions.written === decisionsSignature(json)) return undefined;
  return json;
}

/** A finished record's content, without the time it was written. */
function decisionsSignature(json: string): string {
  return json.replace(/"updatedAt":\d+/, '');
}

/** The job's next evaluation writes its decision record: a finished call's (`done`) takes the place of one in progress. */
export function decisionsDue(m: OwnerContext, o: Owned, due: 'progress' | 'done'): void {
  if (o.decisions.due !== 'done') o.decisions.due = due;
  m.queue.add(o);
}

/**
 * An evaluation's write of the decision record, if one is due and the job record's write did not
 * carry it (see {@link decisionsWithRecord}): one transaction of its own, not awaited (one write
 * in flight per job).
 */
export function writeDecisions(m: OwnerContext, o: Owned): void {
  const w = decisionsWithRecord(m, o);
  if (!w) return;
  m.track(
    m.o.store
      .txn({ compare: [ownerFence(m.o.keys, w.lease)], success: [w.op] })
      .then((res) => w.settle(res.succeeded))
      .catch((err: unknown) => {
        w.settle(false);
        m.o.log.debug({ job: o.id, err: errorMessage(err) }, 'decision record not written');
      }),
  );
}

/** A decision record to write under the owner's lease, and what to do once the write is settled. */
export interface DecisionsWrite {
  op: Op;
  lease: HeldLease;
  settle(applied: boolean): void;
}

/**
 * The decision record's put, when one is due and anything is to be written now, for the job
 * record's own transaction (summary.ts): a scheduling call usually ends in the evaluation that
 * writes the job running, and the two then cost one transaction, not two. The due mark is taken;
 * `settle` says whether the transaction was applied, and one not applied marks it due again.
 */
export function decisionsWithRecord(m: OwnerContext, o: Owned): DecisionsWrite | undefined {
  const due = o.decisions.due;
  if (due === undefined) return undefined;
  o.decisions.due = undefined;
  const lease = m.lease;
  if (!lease || !lease.confirmed || o.dropped) return undefined;
  const inProgress = due === 'progress';
  // A job in progress is compared by its signature, and serialized only when that changed: every
  // waiting job is looked at each second, and serializing each one's records every time was the
  // largest single cost of a front-end with a backlog.
  const progress = inProgress ? progressSignature(o) : undefined;
  if (progress !== undefined && progress === o.decisions.written) return undefined;
  const now = m.o.clock.now();
  if (progress !== undefined && now - o.decisions.at < PROGRESS_RECORD_MS) return undefined;
  // One progress write in flight per job: under a slow etcd a second one would only queue
  // behind the first with a record that the next tick writes fresher anyway.
  if (progress !== undefined && o.decisions.writing) return undefined;
  const json = decisionsJson(m, o, inProgress);
  const sig = progress ?? decisionsSignature(json);
  if (sig === o.decisions.written) return undefined;
  o.decisions.written = sig;
  if (inProgress) o.decisions.at = now;
  o.decisions.writing = true;
  return {
    op: { type: 'put', key: m.o.keys.decision(o.id), value: json },
    lease,
    settle(applied: boolean): void {
      o.decisions.writing = false;
      if (applied) return;
      // Not written: the next evaluation writes it (a signature seen again would otherwise be skipped).
      if (o.decisions.written === sig) o.decisions.written = '';
      if (!o.dropped && o.decisions.due === undefined) o.decisions.due = due;
    },
  };
}

/** Whether the record in progress would be rewritten now: changed since written, the interval over, no write in flight. */
function progressDue(m: OwnerContext, o: Owned): boolean {
  if (o.decisions.writing || progressSignature(o) === o.decisions.written) return false;
  return m.o.clock.now() - o.decisions.at >= PROGRESS_RECORD_MS;
}

/**
 * What an in-progress record is rewritten for: where the call stands (why it waits, placements,
 * conflicts, returns to admission, the latest verdict's action), not every recheck of a waiting
 * job, whose timings and counters change each time. A backlog of waiting jobs would otherwise
 * rewrite every record each second. The owner's own `explain` reads the live record from memory.
 */
function progressSignature(o: Owned): string {
  const live = o.agent.inflight.get(o.id);
  if (!live) return `${o.decisions.kept.length}`;
  const verdict = live.admission[live.admission.length - 1]?.action ?? '';
  return `${o.decisions.kept.length}|${live.waiting ?? ''}|${live.placements.length + (live.omittedPlacements ?? 0)}|${live.conflicts}|${live.readmissions}|${verdict}|${live.samples.length > 0 ? 1 : 0}`;
}

/** While jobs wait, keep their decision records (and admitted state) current for `explain`. */
export function persistProgress(m: OwnerContext): void {
  for (const o of m.owned.values()) {
    if (o.blockedSince !== undefined) {
      m.queue.add(o);
      continue;
    }
    if (o.scheduling.size === 0) continue;
    if (progressDue(m, o)) decisionsDue(m, o, 'progress');
    // Why it waits (admission queue, no free RU it may use), for the job's message.
    // (Kept between waits, cleared when the scheduling call ends: no rewrite per attempt.)
    const waiting = o.agent.inflight.get(o.id)?.waiting;
    if ((waiting !== undefined && waiting !== o.note) || (o.rec.state === 'queued' && admitted(o))) {
      if (waiting !== undefined) o.note = waiting;
      m.queue.add(o);
    }
  }
}
