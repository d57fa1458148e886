/**
 * The owner's plan: what should happen to an owned job, computed from what the owner knows of it
 * (its records, its tasks, the facts an evaluation gathered) and the time, with no store and no
 * change to anything. Each evaluation gathers facts (facts.ts), plans (`planJob`), and applies
 * the plan (apply.ts, the only writer of an owned job's records, through transitions.ts and
 * summary.ts), then plans and writes the job record.
 *
 * - `planTasks`: per task looked at, one step — record failed a task whose outcome was compacted
 *   away, finish a move (or give back the copy held for
 *   it, the task having ended), wait for a departed node's grace, record the task lost (then
 *   place it again), place it, move a task still slow once its wait is over (or add a task to a
 *   scale-out job), or nothing.
 * - `planUnplaced`: what the tasks to place get — scheduled, held while the cell cannot take the
 *   job (with the reason), or failed once that lasted `unplaceableTimeoutMs`.
 * - `planCancel`: for a cancelled job, each task stopped (placed, running) or recorded cancelled
 *   (never placed, queued, lost).
 * - `planQuota`: what the job gives back of its namespace's RU quota (tenancy/quota.ts).
 * - `planGangRepair`: a gang left half-reserved, settled all or nothing.
 * - `planRecord`: whether the job record is due (a new state or message at once, progress at most
 *   every PROGRESS_WRITE_MS, the final write once nothing is in flight) and what it says.
 */
import type { JobSpec, JobState, TaskState } from '../model/types.ts';
import { isFinalJob, isFinalTask, type LiveJobRecord, type LiveTaskRecord } from '../state/live-records.ts';
import { replaceAfter } from '../state/node-fence.ts';
import type { Feasibility } from '../agent/cell.ts';
import { isLiveTask, quotaToken, type changeJobTokens } from '../tenancy/quota.ts';
import type { PlacedRuRecord } from '../state/records.ts';
import type { TaskView } from './job.ts';

/**
 * Progress alone (task counts, placed, outcomes) is written to the job record at most this often.
 * Where a job's tasks end spread out, each interval with an end costs a write of the record and
 * of an outcome block: once a second, the soak's mix with tasks of 30 s writes 3.44 keys a task
 * against 3.73 at 250 ms (bench/README, record-cost); counts shown may lag that much.
 */
export const PROGRESS_WRITE_MS = 1000;
/**
 * A job with live tasks has its record written at least this often, to move its `seen` revision
 * on (live-records.ts): the history a lookup of an unrecorded outcome replays starts there, and
 * the store keeps minutes of it (state/ru-history.ts).
 */
export const SEEN_REFRESH_MS = 60_000;
/** Outcomes written with one write of the job record (about 130 bytes each); more wait for the next. */
export const OUTCOMES_PER_WRITE = 2000;

/** The grace assumed for a node never seen registered whose grace no record gives (the monitor's default). */
export const ASSUMED_GRACE_MS = 60_000;

/** States a job passes through on its way to running, written like progress (see summary.ts). */
const STEPS: ReadonlySet<JobState> = new Set<JobState>(['admitted', 'placed']);

/** What the plan reads of an owned job (context.ts Owned): never changed by planning. */
export interface JobView {
  readonly id: string;
  readonly spec: JobSpec;
  readonly rec: LiveJobRecord;
  readonly tasks: ReadonlyMap<number, TaskView>;
  readonly counts: ReadonlyMap<TaskState, number>;
  readonly scheduling: ReadonlySet<number>;
  readonly stopping: ReadonlySet<number>;
  readonly note: string | undefined;
  readonly blockedSince: number | undefined;
  readonly summaryAt: number;
  /** Its namespace quota's tokens (context.ts QuotaBook); undefined in the default namespace. */
  readonly quota: { readonly returns: ReadonlySet<string>; readonly reconcile: boolean; readonly settled: boolean } | undefined;
  /** Outcomes learned from freed RUs, not yet in the job's records (job.ts OutcomeBook). */
  readonly outcomes: { readonly unrecorded: ReadonlyMap<number, unknown>; readonly compacted?: ReadonlySet<number> };
  /** The run-time loop's moves (job.ts MoveBook): held copies of moved tasks that ended before the copy started, slow tasks and those whose wait is over. */
  readonly moves?: {
    readonly heldAfterEnd: ReadonlyMap<number, unknown>;
    readonly slow: ReadonlyMap<number, { readonly rev: number }>;
    readonly due: ReadonlyMap<number, number>;
    readonly moving: ReadonlySet<number>;
  };
}

/** A node that live tasks of the job are on, not registered with this process, as the store answered. */
export type NodeFact =
  /** Its server record is still there (it registered elsewhere first, or this process is behind). */
  | { kind: 'up' }
  /** Seen leaving: when, and its disconnect grace. */
  | { kind: 'left'; leftAt: number; graceMs: number }
  /** Never seen registered here, and gone from the store: since when this process has known that. */
  | { kind: 'unseen'; since: number };

/** What an evaluation found out before planning (facts.ts gatherFacts). */
export interface Facts {
  now: number;
  /** The tasks to look at: those whose records changed since the last evaluation (all of them after adoption or a failure). */
  tasks: readonly number[];
  /** Admission control has let the job through (its record says `admitted` once it has). */
  admitted: boolean;
  /** A gang that may be half-done, with no scheduling call in flight: its placed tasks' RUs as read. */
  gang?: readonly GangRu[];
  /** Nodes of live tasks not registered here (servers registered here are up). */
  nodes: ReadonlyMap<string, NodeFact>;
  /** Is a server registered with this process (its lease live, as this process follows them)? */
  registered(server: string): boolean;
  /** Can the cell take the job now (cell.ts; asked only when there is something to place). */
  feasibility(): Feasibility;
  unplaceableTimeoutMs: number;
}

export type TaskStep =
  /** Its outcome is beyond recall (job.ts OutcomeBook.compacted): recorded failed, never run again. */
  | { kind: 'fail-compacted'; task: number }
  | { kind: 'finish-move'; task: number }
  | { kind: 'give-back-held'; task: number }
  | { kind: 'await-node'; task: number; server: string; due: number }
  | { kind: 'lose'; task: number; why: string }
  | { kind: 'place'; task: number }
  /** A running task still slow once its wait is over: add a task to its scale-out job, or move it (moves.ts weighs the gain and the budget). */
  | { kind: 'move-slow'; task: number; how: 'scale-out' | 'move' };

/**
 * One evaluation's plan, applied in this order (apply.ts): the quota tokens given back; a gang
 * left half-done settled (and nothing else: the tasks it gives back are looked at by the next
 * evaluation, as one gang); for a cancelled job, its scheduling call aborted, its tasks stopped
 * or recorded cancelled; otherwise each changed task's step, and what the tasks to place get.
 * The job record is planned after these are applied (planRecord), from what they changed.
 */
export interface JobPlan {
  quota?: QuotaChange;
  gang?: { confirm: boolean; held: number[] };
  cancel?: CancelPlan & { abort: boolean };
  tasks: TaskStep[];
  /** Asked only when some task is to be placed (or placed again once recorded lost). */
  unplaced?: Unplaced;
}

export function planJob(o: JobView, f: Facts): JobPlan {
  const quota = planQuota(o, f.admitted);
  if (f.gang) return { quota, gang: planGangRepair(o, f.gang), tasks: [] };
  if (o.rec.cancelRequested) return { quota, cancel: { ...planCancel(o, f.tasks), abort: o.scheduling.size > 0 }, tasks: [] };
  const tasks = planTasks(o, f.tasks, f);
  const placing = tasks.some((s) => s.kind === 'place' || s.kind === 'lose');
  return { quota, tasks, ...(placing ? { unplaced: planUnplaced(o, f) } : {}) };
}

/** When the tasks of a departed node may run elsewhere (the grace its supervisors use, state/node-fence.ts). */
export function replaceDue(fact: Exclude<NodeFact, { kind: 'up' }>, recordedGraceMs?: number): number {
  if (fact.kind === 'left') return replaceAfter(fact.leftAt, fact.graceMs);
  return replaceAfter(fact.since, recordedGraceMs ?? ASSUMED_GRACE_MS);
}

/** The live tasks' servers among `tasks` that are not registered here: the nodes an evaluation asks the store about. */
export function serversToCheck(o: JobView, tasks: readonly number[], registered: (server: string) => boolean): Set<string> {
  const out = new Set<string>();
  for (const t of tasks) {
    const rec = o.tasks.get(t)?.rec;
    if (rec && (rec.state === 'placed' || rec.state === 'running') && rec.ru && !registered(rec.ru.server)) out.add(rec.ru.server);
  }
  return out;
}

/** One step per task looked at that needs one (a task being scheduled, or live on a node that is up, needs none). */
export function planTasks(o: JobView, tasks: readonly number[], f: Facts): TaskStep[] {
  const steps: TaskStep[] = [];
  for (const t of tasks) {
    if (o.scheduling.has(t)) continue;
    const rec = o.tasks.get(t)?.rec;
    const st = rec?.state;
    // A task that may have finished, its outcome lost: failed before anything could place it again.
    if (o.outcomes.compacted?.has(t) && (st === 'placed' || st === 'running')) steps.push({ kind: 'fail-compacted', task: t });
    // A move's new copy, held until the old one stopped (moves.ts; it also handles nodes gone);
    // given back if the old one ended the task.
    else if (o.moves?.heldAfterEnd.has(t)) steps.push({ kind: 'give-back-held', task: t });
    else if (rec && st === 'placed' && rec.movedFrom) steps.push({ kind: 'finish-move', task: t });
    else if (rec && (st === 'placed' || st === 'running') && rec.ru && !f.registered(rec.ru.server)) {
      const fact = f.nodes.get(rec.ru.server);
      if (!fact || fact.kind === 'up') continue;
      // The node may still be running the task, cut off from the store: it keeps its tasks for
      // its disconnect grace, so they are placed elsewhere only once that has run out.
      const due = replaceDue(fact, rec.nodeGraceMs);
      if (f.now < due) steps.push({ kind: 'await-node', task: t, server: rec.ru.server, due });
      else steps.push({ kind: 'lose', task: t, why: `server ${rec.ru.server} left the cluster` });
    } else if (!rec || st === 'queued' || st === 'lost') steps.push({ kind: 'place', task: t });
    else if (st === 'running' && rec.ru) {
      const how = slowStep(o, t);
      if (how) steps.push({ kind: 'move-slow', task: t, how });
    }
  }
  return steps;
}

/** What a running task whose slow wait is over gets: one more task for a scale-out job below its limit, a move for a migratable one. */
function slowStep(o: JobView, t: number): 'scale-out' | 'move' | undefined {
  const due = o.moves?.due.get(t);
  // Recovered, or reported again since (that report set its own wait), or being moved.
  if (due === undefined || o.moves?.slow.get(t)?.rev !== due || o.moves.moving.has(t)) return undefined;
  if (o.spec.scaleOut && o.spec.tasks < o.spec.scaleOut.maxTasks) return 'scale-out';
  return o.spec.migratable ? 'move' : undefined;
}

export type Unplaced = { kind: 'schedule' } | { kind: 'hold'; since: number; note: string } | { kind: 'fail'; note: string };

/** What the tasks to place get: scheduled if the cell can take the job; held with the reason for up to the bound, then failed. */
export function planUnplaced(o: JobView, f: Facts): Unplaced {
  const c = f.feasibility();
  if (c.kind === 'ok') return { kind: 'schedule' };
  const since = o.blockedSince ?? f.now;
  if (f.now - since < f.unplaceableTimeoutMs) return { kind: 'hold', since, note: blockedNote(f.unplaceableTimeoutMs, c.reason, since) };
  return { kind: 'fail', note: `${c.reason}; gave up after ${fmtDuration(f.unplaceableTimeoutMs)}` };
}

export function blockedNote(timeoutMs: number, reason: string, since: number): string {
  return `${reason}; waiting for them, the job fails at ${new Date(since + timeoutMs).toISOString()} if they are not back`;
}

export function fmtDuration(ms: number): string {
  return ms >= 60_000 ? `${(ms / 60_000).toFixed(ms % 60_000 === 0 ? 0 : 1)} min` : `${(ms / 1000).toFixed(ms % 1000 === 0 ? 0 : 1)} s`;
}

export interface CancelPlan {
  /** Placed or running: stopped through their monitors. */
  stop: number[];
  /** Never placed, queued or lost, with a record: recorded cancelled. */
  cancel: number[];
}

/**
 * A cancelled job: placed and running tasks are stopped, queued ones recorded cancelled. Tasks
 * that never had a record get none (the record's counts take them as cancelled); tasks being
 * scheduled or stopped wait for that to end.
 */
export function planCancel(o: JobView, tasks: readonly number[]): CancelPlan {
  const plan: CancelPlan = { stop: [], cancel: [] };
  for (const t of tasks) {
    if (o.scheduling.has(t) || o.stopping.has(t)) continue;
    const rec = o.tasks.get(t)?.rec;
    if (!rec || isFinalTask(rec.state)) continue;
    if (rec.state === 'queued' || rec.state === 'lost') plan.cancel.push(t);
    else plan.stop.push(t);
  }
  return plan;
}

export interface Summary {
  state: JobState;
  counts: Partial<Record<TaskState, number>>;
  placed: number;
}

/** The job's state from the task counts (O(states), kept up to date by context.ts mergeTask). */
export function summarize(o: JobView, admitted: boolean): Summary {
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
  else if (admitted) state = 'admitted';
  else state = o.rec.state === 'admitted' ? 'admitted' : 'queued';
  return { state, counts, placed };
}

/** A failed job says why: the reason it could not be placed, or its first failed task's. */
function finalMessage(o: JobView, state: JobState): string {
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

export type RecordStep =
  /** Nothing to write, or the final write waits for tasks being scheduled or stopped. */
  | { kind: 'none' }
  /** Final, but the job's quota allotment is given back first (the next evaluation settles it). */
  | { kind: 'settle-quota' }
  /** Progress written a moment ago: look again once the interval is over. */
  | { kind: 'later'; waitMs: number }
  | { kind: 'write'; next: LiveJobRecord; final: boolean };

/**
 * Whether the job record is due, and what it says. A change of message, or of state to running or
 * final, is due at once; progress alone (task counts, placed, the steps on the way to running) at
 * most every PROGRESS_WRITE_MS. `owner` names the agent that writes it.
 */
export function planRecord(o: JobView, now: number, admitted: boolean, owner: string, seenRefreshMs = SEEN_REFRESH_MS): RecordStep {
  const s = summarize(o, admitted);
  const final = isFinalJob(s.state);
  const message = final ? finalMessage(o, s.state) : (o.note ?? '');
  const same =
    s.state === o.rec.state &&
    s.placed === o.rec.placed &&
    message === (o.rec.message ?? '') &&
    JSON.stringify(s.counts) === JSON.stringify(o.rec.taskStates ?? {}) &&
    o.outcomes.unrecorded.size === 0;
  const live = (o.counts.get('running') ?? 0) + (o.counts.get('placed') ?? 0) > 0;
  if (same && !final && !(live && now - o.summaryAt >= seenRefreshMs)) return { kind: 'none' };
  if (final && (o.scheduling.size > 0 || o.stopping.size > 0)) return { kind: 'none' };
  if (final && o.quota && !o.quota.settled) return { kind: 'settle-quota' };
  if (!final && (s.state === o.rec.state || STEPS.has(s.state)) && message === (o.rec.message ?? '')) {
    const wait = o.summaryAt + PROGRESS_WRITE_MS - now;
    if (wait > 0) return { kind: 'later', waitMs: wait };
  }
  // Outcomes that do not fit one write go first, the job's state as it was.
  if (final && o.outcomes.unrecorded.size > OUTCOMES_PER_WRITE) return { kind: 'write', next: { ...o.rec, updatedAt: now, owner }, final: false };
  const next: LiveJobRecord = { ...o.rec, state: s.state, placed: s.placed, taskStates: s.counts, updatedAt: now, owner };
  if (message !== '') next.message = message;
  else delete next.message;
  if (final) next.finishedAt = now;
  return { kind: 'write', next, final };
}

export type QuotaChange = Parameters<typeof changeJobTokens>[2];

/**
 * The job's quota tokens to change (tenancy/quota.ts): all given back once the job is final; after
 * adoption, recomputed from its live tasks (once no scheduling call is in flight); otherwise the
 * tokens of placements seen to end. Undefined: nothing to write.
 */
export function planQuota(o: JobView, admitted: boolean): QuotaChange | undefined {
  const q = o.quota;
  if (!q) return undefined;
  if (isFinalJob(summarize(o, admitted).state)) return q.settled ? undefined : { all: true };
  if (q.reconcile && o.scheduling.size === 0) {
    const live: string[] = [];
    for (const [t, v] of o.tasks) if (isLiveTask(v.rec)) live.push(quotaToken(t, v.rec.commitId as string));
    return { keep: new Set(live), add: live };
  }
  return q.returns.size > 0 ? { drop: new Set(q.returns) } : undefined;
}

/** A gang's placed task and its RU record as the store has it (undefined: gone, or another task's now). */
export interface GangRu {
  task: number;
  ru: PlacedRuRecord | undefined;
}

/**
 * A gang left half-reserved (transitions.ts repairGang): if its confirmation had begun (an RU
 * of the job busy, or a task ran), the remaining reservations are confirmed, since part of the
 * gang may be running; otherwise every reservation is given back and the gang scheduled again.
 */
export function planGangRepair(o: JobView, rus: readonly GangRu[]): { confirm: boolean; held: number[] } {
  let confirm = false;
  for (const v of o.tasks.values()) if (v.rec.state === 'running' || v.rec.state === 'succeeded' || v.rec.state === 'failed') confirm = true;
  const held: number[] = [];
  for (const { task, ru } of rus) {
    if (!ru || ru.job !== o.id || ru.task !== task) continue;
    if (ru.state === 'busy') confirm = true;
    else if (ru.state === 'reserved') held.push(task);
  }
  return { confirm, held };
}
