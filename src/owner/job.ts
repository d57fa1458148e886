/**
 * One owned job as its owner keeps it (`Owned`): its record, its task records by index, counts
 * by state, live tasks by server, what changed since the last evaluation, its decision records,
 * its moves and its quota tokens; and the bookkeeping every record change goes through
 * (`mergeTask`, `forgetTask`).
 */
import type { JobSpec, RuRef, TaskState } from '../model/types.ts';
import type { LiveJobRecord, LiveTaskRecord } from '../state/live-records.ts';
import type { DecisionRecord, SchedulingAgent } from '../agent/agent.ts';
import { DEFAULT_NAMESPACE, namespaceOfJob } from '../tenancy/namespace.ts';
import { endedToken, isLiveTask } from '../tenancy/quota.ts';
import { doneEntry, type DoneEntry } from '../state/task-outcomes.ts';

export interface TaskView {
  rec: LiveTaskRecord;
  rev: number;
  /**
   * The record is the one the task's chunk implies (state/task-chunks.ts): the task's own key
   * does not exist, and a write about the task compares it as absent (taskKeyRev).
   */
  implied?: true;
}

/** The mod revision of the task's own key as the owner knows it: what a write about the task compares. */
export function taskKeyRev(v: TaskView | undefined): number {
  return !v || v.implied ? 0 : v.rev;
}

export interface Owned {
  id: string;
  spec: JobSpec;
  agent: SchedulingAgent;
  rec: LiveJobRecord;
  jobRev: number;
  /**
   * Mod revision of the job's owner record as this process wrote it (submission, adoption) or
   * read it (a lost submission taken up): every fenced write compares it, so that none lands once
   * the record is gone (the job's final write deleted it) or rewritten (adopted).
   */
  ownerRev?: number;
  tasks: Map<number, TaskView>;
  /** Task records by state (tasks without a record are not counted: they are queued). */
  counts: Map<TaskState, number>;
  /** Live (placed or running) tasks by server: a server that leaves marks them for evaluation. */
  byServer: Map<string, Set<number>>;
  /** The process's jobs by server they have live tasks on (OwnerContext.ownedOn), kept with byServer. */
  ownedOn: Map<string, Set<Owned>>;
  /**
   * Tasks whose records changed since the last evaluation. Evaluation looks only at these (or at
   * every task when `full` is set), so its cost follows what changed, not the job's size.
   */
  dirty: Set<number>;
  full: boolean;
  scheduling: Set<number>;
  stopping: Set<number>;
  /** The job's scheduling calls' decision records, as `explain` reads them (decisions.ts). */
  decisions: DecisionLog;
  evalQueued: boolean;
  chain: Promise<void>;
  dropped: boolean;
  /** A gang whose reservations may have been left half-done (adopted, or an attempt failed). */
  reconcile: boolean;
  /** Why the job waits, when it does: written to the job record's message. */
  note: string | undefined;
  /** Since when the job's unplaced tasks wait for servers that are down (see cell.ts). */
  blockedSince: number | undefined;
  /** Departed nodes whose tasks this job waits for, within the node's disconnect grace. */
  awaitingNodes: Set<string>;
  /** When the job record was last written by its summary (clock ms; see summary.ts). */
  summaryAt: number;
  /** When the evaluation scheduled for a summary write held back (progress, `seen`) is due; undefined: none is. */
  summaryDueAt: number | undefined;
  /** The run-time loop's moves of the job's slow tasks (moves.ts). */
  moves: MoveBook;
  /**
   * A job of a namespace other than default: the namespace may have an RU quota, so the owner
   * gives back the allotment tokens of placements it sees end (tenancy/quota.ts). Undefined in
   * the default namespace.
   */
  quota: QuotaBook | undefined;
  /** Outcomes learned from freed RUs, on their way into the job's records (OutcomeBook). */
  outcomes: OutcomeBook;
  /** While the job is in its process's OwnedJobs: that process's count of unplaced tasks, kept with the job's records. */
  tally?: { pending: number } | undefined;
}

/**
 * The outcomes a job's owner learned from freed RUs (a success or a cancellation: nothing else
 * records them, state/task-outcomes.ts) and the reads that may still bring some.
 */
export interface OutcomeBook {
  /** Not yet in the job's records: written with the next write of the job record (summary.ts). */
  unrecorded: Map<number, DoneEntry>;
  /**
   * Reads of the job's task records (and RU histories) in flight: an outcome may be among what
   * they find, so the job record's `seen` does not move on meanwhile.
   */
  reading: number;
  /**
   * Tasks whose outcome is beyond recall: their record says live on an RU that holds something
   * else, and the RU's history was compacted before the outcome was recorded. The next
   * evaluation records them failed (plan.ts), never run again.
   */
  compacted: Set<number>;
}

/** The decision records of a job's scheduling calls and their writes (Owned.decisions, decisions.ts). */
export interface DecisionLog {
  /** The first and latest records (KEPT_DECISIONS). */
  kept: DecisionRecord[];
  /** The signature of what was last written ('' when a write failed: written again). */
  written: string;
  /** When a record in progress was last written (see decisions.ts decisionsWithRecord). */
  at: number;
  /** A progress write is in flight. */
  writing: boolean;
  /** The write the job's next evaluation makes: the record in progress, or a scheduling call's finished one (decisions.ts). */
  due: 'progress' | 'done' | undefined;
}

/** The moves of a job's slow tasks (Owned.moves, moves.ts). */
export interface MoveBook {
  /** Tasks a node's load monitor reports slow now: since when (this process's clock), at what share of their rate. */
  slow: Map<number, { since: number; rate: number; rev: number }>;
  /** Slow tasks whose wait is over (moveAfterMs), by the revision of the report it waited on: the next evaluation plans their move. */
  due: Map<number, number>;
  /** Tasks whose move is being decided and committed. */
  moving: Set<number>;
  /** Moved tasks whose held copy waits for the old copy to stop: the pause before the next look. */
  finishing: Map<number, number>;
  /** Tasks the job's evaluation looks at again after a pause, the pause running (moves.ts lookAgain). */
  looking: Set<number>;
  /** Held copies of moved tasks whose old copy ended the task (a success): given back, never started. */
  heldAfterEnd: Map<number, { ru: RuRef; attempt: number }>;
}

/** What the owner keeps of a job's namespace quota tokens (Owned.quota). */
export interface QuotaBook {
  /** Tokens of ended placements not yet given back. */
  returns: Set<string>;
  /** Tokens of moved tasks' old copies, given back once the new copy no longer waits for the old one to stop. */
  moving: Map<number, string>;
  /** Adopted: recompute the job's tokens from its live tasks before anything else. */
  reconcile: boolean;
  /** Every task is final and every token of the job was given back: the final write may go. */
  settled: boolean;
}

/** A job's tasks not yet placed: never placed, or queued again (preempted, lost). */
export function unplacedTasks(o: Owned): number {
  if (o.rec.cancelRequested) return 0;
  return o.spec.tasks - o.tasks.size + (o.counts.get('queued') ?? 0) + (o.counts.get('lost') ?? 0);
}

/** The task changes the watch brought for a job while its adoption transaction was in flight. */
export interface AdoptWindow {
  tasks: { index: number; rec: LiveTaskRecord | undefined; rev: number; ru?: RuRef }[];
  /** Tasks whose RU changed meanwhile in a way that does not show their record: read them once owned. */
  refresh?: Set<number>;
}

export function newOwned(spec: JobSpec, agent: SchedulingAgent, rec: LiveJobRecord, jobRev: number, ownedOn: Map<string, Set<Owned>>): Owned {
  return {
    id: spec.id,
    spec,
    agent,
    rec,
    jobRev,
    tasks: new Map(),
    counts: new Map(),
    byServer: new Map(),
    ownedOn,
    dirty: new Set(),
    full: true,
    scheduling: new Set(),
    stopping: new Set(),
    decisions: { kept: [], written: '', at: Number.NEGATIVE_INFINITY, writing: false, due: undefined },
    evalQueued: false,
    chain: Promise.resolve(),
    dropped: false,
    reconcile: false,
    note: rec.message,
    blockedSince: undefined,
    awaitingNodes: new Set(),
    summaryAt: Number.NEGATIVE_INFINITY,
    summaryDueAt: undefined,
    moves: { slow: new Map(), due: new Map(), moving: new Set(), finishing: new Map(), looking: new Set(), heldAfterEnd: new Map() },
    quota: namespaceOfJob(spec.id) !== DEFAULT_NAMESPACE ? { returns: new Set(), moving: new Map(), reconcile: false, settled: false } : undefined,
    outcomes: { unrecorded: new Map(), reading: 0, compacted: new Set() },
    tally: undefined,
  };
}

/**
 * What the owner keeps of a task that succeeded or was cancelled: its state, for the counts, and
 * nothing else (no RU, times or ids). A 100,000-task job keeps a few dozen bytes per ended task
 * instead of the whole record (a failed task keeps its record: the job's message quotes it).
 */
function kept(o: Owned, rec: LiveTaskRecord): LiveTaskRecord {
  if (rec.state === 'succeeded') return { job: o.id, index: rec.index, state: 'succeeded', attempt: rec.attempt };
  if (rec.state === 'cancelled') return { job: o.id, index: rec.index, state: 'cancelled', attempt: rec.attempt };
  return rec;
}

/**
 * Records a task's newer record (older revisions are ignored) and marks it for evaluation;
 * `implied`: the record its chunk implies, its own key absent (TaskView.implied).
 */
export function mergeTask(o: Owned, index: number, full: LiveTaskRecord | undefined, rev: number, implied = false): void {
  const cur = o.tasks.get(index);
  if (cur && cur.rev >= rev) return;
  const before = unplacedTasks(o);
  if (cur) untrack(o, index, cur.rec);
  if (o.quota) quotaTransition(o.quota, index, cur?.rec, full);
  const rec = full && kept(o, full);
  if (rec) {
    o.tasks.set(index, implied ? { rec, rev, implied: true } : { rec, rev });
    o.counts.set(rec.state, (o.counts.get(rec.state) ?? 0) + 1);
    if ((rec.state === 'placed' || rec.state === 'running') && rec.ru) {
      let on = o.byServer.get(rec.ru.server);
      if (!on) {
        o.byServer.set(rec.ru.server, (on = new Set()));
        let jobs = o.ownedOn.get(rec.ru.server);
        if (!jobs) o.ownedOn.set(rec.ru.server, (jobs = new Set()));
        jobs.add(o);
      }
      on.add(index);
    }
  } else o.tasks.delete(index);
  o.dirty.add(index);
  if (o.tally) o.tally.pending += unplacedTasks(o) - before;
}

/**
 * The quota tokens a task's record change gives back (tenancy/quota.ts): the old placement's once
 * it ended; for a move, the old copy's once the new copy's record no longer names it (the old
 * copy has stopped and freed its RU).
 */
function quotaTransition(q: QuotaBook, index: number, old: LiveTaskRecord | undefined, next: LiveTaskRecord | undefined): void {
  const moving = next !== undefined && next.movedFrom !== undefined && isLiveTask(next);
  const token = endedToken(index, old, next);
  if (token) {
    const earlier = q.moving.get(index);
    if (moving && earlier === undefined) q.moving.set(index, token);
    else q.returns.add(token);
  }
  const deferred = q.moving.get(index);
  if (deferred !== undefined && !moving) {
    q.returns.add(deferred);
    q.moving.delete(index);
  }
}

function untrack(o: Owned, index: number, rec: LiveTaskRecord): void {
  o.counts.set(rec.state, (o.counts.get(rec.state) ?? 1) - 1);
  if (rec.ru) {
    const on = o.byServer.get(rec.ru.server);
    on?.delete(index);
    if (on?.size === 0) {
      o.byServer.delete(rec.ru.server);
      leaveServer(o, rec.ru.server);
    }
  }
}

/** Forgets a task record (a gang reservation given back): the task is queued again. */
function leaveServer(o: Owned, server: string): void {
  const jobs = o.ownedOn.get(server);
  jobs?.delete(o);
  if (jobs?.size === 0) o.ownedOn.delete(server);
}

/** A job no longer owned here: it leaves the process's index of jobs by server. */
export function leaveServers(o: Owned): void {
  for (const server of o.byServer.keys()) leaveServer(o, server);
}

export function forgetTask(o: Owned, index: number): void {
  const cur = o.tasks.get(index);
  if (!cur) return;
  const before = unplacedTasks(o);
  untrack(o, index, cur.rec);
  if (o.quota) quotaTransition(o.quota, index, cur.rec, undefined);
  o.tasks.delete(index);
  o.dirty.add(index);
  if (o.tally) o.tally.pending += unplacedTasks(o) - before;
}

/** The job's record is now `rec` (a cancellation requested there leaves no task unplaced), and its spec `spec` (grown by scale-out). */
export function setRecord(o: Owned, rec: LiveJobRecord, spec = o.spec): void {
  const before = unplacedTasks(o);
  o.rec = rec;
  o.spec = spec;
  if (o.tally) o.tally.pending += unplacedTasks(o) - before;
}

/**
 * The jobs a process owns, by id, with the count of their tasks not yet placed (back-pressure
 * and the members' record read it on every submission): kept as each job's records change, so
 * reading it costs nothing however many jobs wait.
 */
export class OwnedJobs extends Map<string, Owned> {
  private readonly tally = { pending: 0 };

  /** Tasks of these jobs not yet placed (unplacedTasks summed). */
  get pending(): number {
    return this.tally.pending;
  }

  override set(id: string, o: Owned): this {
    const old = this.get(id);
    if (old !== o) {
      if (old) this.leave(old);
      o.tally = this.tally;
      this.tally.pending += unplacedTasks(o);
    }
    return super.set(id, o);
  }

  override delete(id: string): boolean {
    const old = this.get(id);
    if (old) this.leave(old);
    return super.delete(id);
  }

  override clear(): void {
    for (const o of this.values()) this.leave(o);
    super.clear();
  }

  private leave(o: Owned): void {
    this.tally.pending -= unplacedTasks(o);
    o.tally = undefined;
  }
}

/** Has admission control let the job through (a decision made, or the in-progress one past it)? */
export function admitted(o: Owned): boolean {
  if (o.decisions.kept.length > 0) return true;
  const rec = o.agent.inflight.get(o.id);
  if (!rec) return false;
  const last = rec.admission[rec.admission.length - 1];
  return last === undefined ? rec.samples.length > 0 : last.action !== 'queue';
}

/**
 * A success or a cancellation learned from the RU freed at `rev`: the task's record from now on
 * (no record of its own says it: `implied`), and an outcome to write with the job record.
 */
export function recordOutcome(o: Owned, last: LiveTaskRecord, rev: number, ru: RuRef | undefined): void {
  const before = o.tasks.get(last.index)?.rec;
  mergeTask(o, last.index, last, rev, true);
  const entry = o.tasks.get(last.index)?.rev === rev ? doneEntry(last, ru) : undefined;
  if (!entry) return;
  o.outcomes.unrecorded.set(last.index, entry);
  // The old copy of a move ended the task before the new copy was started: the new copy's RU,
  // held for it, is given back (moves.ts).
  if (before?.state === 'placed' && before.movedFrom && before.ru && before.commitId !== last.commitId) {
    o.moves.heldAfterEnd.set(last.index, { ru: before.ru, attempt: before.attempt });
  }
}
