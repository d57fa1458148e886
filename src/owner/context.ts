/**
 * What the parts of a job owner share: the options of a JobManager, the per-job bookkeeping
 * (`Owned`: task records by index, counts by state, live tasks by server, what changed since the
 * last evaluation) and the owner-fenced write every change to an owned job goes through.
 */
import type { JobSpec, JobState, TaskState } from '../model/types.ts';
import type { Keys } from '../state/keys.ts';
import type { HeldLease } from '../state/lease.ts';
import type { LiveJobRecord, LiveKeys, LiveServerRecord, LiveTaskRecord } from '../state/live-records.ts';
import type { ClusterStore, Compare, KeyValue, Op, TxnResult } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';
import type { Rng } from '../util/rng.ts';
import type { AgentConfig, DecisionRecord, Placement, SchedulingAgent } from '../agent/agent.ts';
import type { CellServer, Feasibility } from '../agent/cell.ts';
import type { AdoptionGate } from './adoption-gate.ts';
import { laterTurn } from '../util/turns.ts';
import type { JobQueue } from './job-queue.ts';
import { parseJson } from '../state/records.ts';
import type { RuntimeLoopConfig } from '../monitor/runtime-loop.ts';
import type { ProfileBook, ProfileBookOptions } from '../state/profiles.ts';
import { DEFAULT_NAMESPACE, namespaceOfJob } from '../tenancy/namespace.ts';
import { endedToken, isLiveTask } from '../tenancy/quota.ts';

/** How an owner reaches node monitors (the gRPC client lives in frontend/node-link.ts, injected here). */
export interface NodeLink {
  /** `server` names the node: one endpoint may serve many (a hollow process). */
  launch(endpoint: string, req: { server: string; job: string; task: number; ruIndex: number; revision: number }): Promise<void>;
  /** Resolves true once the monitor has stopped the task and recorded the outcome. */
  kill(endpoint: string, req: { server: string; job: string; task: number; reason: string }): Promise<boolean>;
}

/** How long a server that left still counts as part of the cell (JobManagerOptions.departedMemoryMs). */
export const DEFAULT_DEPARTED_MEMORY_MS = 10 * 60_000;
/** How long a job waits for servers that are down before its unplaced tasks fail. */
export const DEFAULT_UNPLACEABLE_TIMEOUT_MS = 5 * 60_000;
/**
 * How long after its commit a task its node has not yet recorded running is sent to the node's
 * monitor directly (LaunchTask). The monitor follows its RUs in the store and starts a placement
 * as the watch brings it, about when the commit's answer reaches the front-end; the call is for a
 * monitor whose watch is behind (JobManagerOptions.launchAfterMs).
 */
export const DEFAULT_LAUNCH_AFTER_MS = 500;
/**
 * Back-pressure: a front-end holding this many tasks not yet placed answers new submissions with
 * RESOURCE_EXHAUSTED (retry later, or on another front-end) instead of taking on work it cannot
 * keep up with. 0: no limit.
 */
export const DEFAULT_MAX_PENDING_TASKS = 20_000;

export interface JobManagerOptions {
  /** Names this process in agent ids and owner records. */
  process: string;
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  rng: Rng;
  log: Logger;
  agents: number;
  agentConfig?: Partial<AgentConfig>;
  /** TTL of the lease that binds this process's `owners/<job>` keys (default 10 s). */
  leaseTtlSeconds?: number;
  nodes?: NodeLink;
  /**
   * How long a server that left is still counted as part of the cell, so that a job it could run
   * waits for it instead of being refused (default {@link DEFAULT_DEPARTED_MEMORY_MS}).
   */
  departedMemoryMs?: number;
  /**
   * How long a job may wait for servers that are down (no server it may use is up, a gang or a
   * required spread larger than what is up) before its unplaced tasks fail (default
   * {@link DEFAULT_UNPLACEABLE_TIMEOUT_MS}).
   */
  unplaceableTimeoutMs?: number;
  /** Tasks not yet placed above which submissions are refused (default {@link DEFAULT_MAX_PENDING_TASKS}; 0: no limit). */
  maxPendingTasks?: number;
  /**
   * A task still only placed this long after its commit is sent to its node's monitor (LaunchTask;
   * default {@link DEFAULT_LAUNCH_AFTER_MS}). 0: every placement at once, with its commit.
   */
  launchAfterMs?: number;
  /** The run-time loop's rules for moving slow tasks of migratable jobs (monitor/runtime-loop.ts). */
  runtime?: Partial<RuntimeLoopConfig>;
  /** Learned profiles: whether new jobs are scheduled with them, after how many observations, how often they are written. */
  profiles?: Pick<ProfileBookOptions, 'use' | 'minObservations' | 'flushMs'>;
  /** Observers for metrics. */
  onDecision?: (job: JobSpec, rec: DecisionRecord) => void;
  onCommitted?: (job: JobSpec, placements: readonly Placement[], agent: string) => void;
  /** A job owned here reached a final state (succeeded, failed, cancelled). */
  onJobFinished?: (job: JobSpec, state: JobState) => void;
}

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
  /** A summary write held back by the progress interval is due (an evaluation is scheduled). */
  summaryDue: boolean;
  /** The run-time loop's moves of the job's slow tasks (moves.ts). */
  moves: MoveBook;
  /**
   * A job of a namespace other than default: the namespace may have an RU quota, so the owner
   * gives back the allotment tokens of placements it sees end (tenancy/quota.ts). Undefined in
   * the default namespace.
   */
  quota: QuotaBook | undefined;
}

/** The decision records of a job's scheduling calls and their writes (Owned.decisions, decisions.ts). */
export interface DecisionLog {
  /** The first and latest records (KEPT_DECISIONS). */
  kept: DecisionRecord[];
  /** The signature of what was last written ('' when a write failed: written again). */
  written: string;
  /** When a record in progress was last written (see persistDecisions). */
  at: number;
  /** A progress write is in flight. */
  writing: boolean;
}

/** The moves of a job's slow tasks (Owned.moves, moves.ts). */
export interface MoveBook {
  /** Tasks a node's load monitor reports slow now: since when (this process's clock), at what share of their rate. */
  slow: Map<number, { since: number; rate: number; rev: number }>;
  /** Tasks whose move is being decided and committed. */
  moving: Set<number>;
  /** Moved tasks whose held copy waits for the old copy to stop. */
  finishing: Set<number>;
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

export interface OwnerStats {
  submitted: number;
  duplicates: number;
  adopted: number;
  lost: number;
  rescheduled: number;
  finished: number;
  /** Times the store said the owner lease was gone (expired or revoked): the jobs were given up. */
  fencedLeases: number;
  /** Times no keepalive was confirmed within the lease's budget: the owner paused, keeping its jobs, until the store answered. */
  leasePauses: number;
  /** LaunchTask calls sent to monitors (tasks not recorded running launchAfterMs after their commit, or all with 0). */
  launches: number;
  /** Task records read again: what the RUs did not show (the owner follows no task record; ru-events.ts). */
  taskReads: number;
}

/**
 * The job manager as its parts see it: options, shared maps, and the few operations that cross
 * parts (the work queue, a background promise, a timer).
 */
export interface OwnerContext {
  readonly o: JobManagerOptions;
  readonly live: LiveKeys;
  /** The owner lease of this process (undefined while a new one is granted). */
  readonly lease: HeldLease | undefined;
  readonly ttlSeconds: number;
  readonly unplaceableTimeoutMs: number;
  readonly departedMemoryMs: number;
  readonly owned: Map<string, Owned>;
  readonly submitting: Set<string>;
  readonly adopting: Set<string>;
  /**
   * Jobs whose adoption transaction is in flight, with the changes of their task records that the
   * watch brings meanwhile (adoption.ts): the watch and the transaction's answer come over
   * different connections, so a change made just after the transaction may arrive before its
   * answer, while the job is not owned yet; it is applied once the job is.
   */
  readonly adoptWindow: Map<string, AdoptWindow>;
  /** The jobs owned here by server they have live (placed or running) tasks on (kept by mergeTask). */
  readonly ownedOn: Map<string, Set<Owned>>;
  /** Concurrency and backoff of this process's adoptions (adoption.ts). */
  readonly adoptions: AdoptionGate;
  readonly servers: Map<string, LiveServerRecord>;
  readonly cell: Map<string, CellServer & { leftAt?: number }>;
  /** Servers named by a task but never seen registered by this process: since when. */
  readonly unseenSince: Map<string, number>;
  readonly stats: OwnerStats;
  readonly started: boolean;
  /** Submissions are taken (the lease and the owner's followers are in; the agents may still be starting). */
  readonly serving: boolean;
  readonly closed: boolean;
  /** The jobs to evaluate (job-queue.ts): what learns something about a job adds it here. */
  readonly queue: JobQueue<Owned>;
  track(p: Promise<unknown>): void;
  /** A timer that close() cancels. */
  later(ms: number, fn: () => void): void;
  pickAgent(): SchedulingAgent;
  feasibility(spec: JobSpec): Feasibility;
  /** Learned profiles: the spec a new job is scheduled with is its class's learned vector (state/profiles.ts). */
  readonly profiles: ProfileBook;
  /** Task records read again (ru-events.ts TaskRefresher): the owner follows no task record, and learns from the RUs what they show. */
  readonly refresher: TaskReads;
  /** Tasks of the jobs owned here not yet placed (a count at most 100 ms old). */
  pendingTasks(): number;
  readonly maxPendingTasks: number;
}

/** Reads of task records the RUs do not show (ru-events.ts TaskRefresher). */
export interface TaskReads {
  /** Reads these tasks' records again (soon, batched) and applies them; resolves once they are. */
  refresh(o: Owned, tasks: Iterable<number>): Promise<void>;
  /** Reads task `t`'s record again, now and then, until it is `running` or moves on. */
  watch(o: Owned, t: number): void;
}

/** A job's tasks not yet placed: never placed, or queued again (preempted, lost). */
export function unplacedTasks(o: Owned): number {
  if (o.rec.cancelRequested) return 0;
  return o.spec.tasks - o.tasks.size + (o.counts.get('queued') ?? 0) + (o.counts.get('lost') ?? 0);
}

/** A full pass over a job's tasks yields to the event loop this often (a 100,000-task job). */
export const YIELD_EVERY = 5000;

/** A later turn of the event loop, shared fairly with the process's other long passes. */
export const yieldNow = laterTurn;

/** The task changes the watch brought for a job while its adoption transaction was in flight. */
export interface AdoptWindow {
  tasks: { index: number; rec: LiveTaskRecord | undefined; rev: number }[];
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
    decisions: { kept: [], written: '', at: Number.NEGATIVE_INFINITY, writing: false },
    evalQueued: false,
    chain: Promise.resolve(),
    dropped: false,
    reconcile: false,
    note: rec.message,
    blockedSince: undefined,
    awaitingNodes: new Set(),
    summaryAt: Number.NEGATIVE_INFINITY,
    summaryDue: false,
    moves: { slow: new Map(), moving: new Set(), finishing: new Set() },
    quota: namespaceOfJob(spec.id) !== DEFAULT_NAMESPACE ? { returns: new Set(), moving: new Map(), reconcile: false, settled: false } : undefined,
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
  untrack(o, index, cur.rec);
  if (o.quota) quotaTransition(o.quota, index, cur.rec, undefined);
  o.tasks.delete(index);
  o.dirty.add(index);
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
 * The compare that makes a write conditional on still owning jobs through `lease`: our member key
 * is still bound to it (members.ts). A job changes owner only once its owner's member key is gone
 * (adoption.ts), so while ours lives, the jobs our owner records name are ours.
 */
export function ownerFence(keys: Keys, lease: Pick<HeldLease, 'id'>): Compare {
  return { key: keys.member(lease.id), target: 'lease', op: '==', value: lease.id };
}

/** The same, as a placement commit's fence (SchedulingAgent.setFence). */
export function commitFence(keys: Keys, lease: Pick<HeldLease, 'id'>): { key: string; lease: string } {
  return { key: keys.member(lease.id), lease: lease.id };
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
  const owner: Compare[] = o.ownerRev === undefined ? [] : [{ key: k.owner(o.id), target: 'mod', op: '==', value: o.ownerRev }];
  const res = await m.o.store.txn({
    compare: [ownerFence(k, lease), ...owner, ...(req.compare ?? [])],
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
