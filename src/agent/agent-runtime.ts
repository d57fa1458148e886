/**
 * What the scheduling calls of one agent share, for the agent's whole life: its handles on the
 * store, clock, rng, log and the view it shares with the other agents of its process, its options
 * and counters, the fences and abort marks of its jobs, the waits for a freed RU in progress, and
 * its commits in flight (server scope) or whose answer was lost. SchedulingAgent (agent.ts) makes
 * one; each call's steps (chunks.ts, gang.ts, commit.ts, waits.ts) reach it through their
 * AttemptContext (attempt-context.ts).
 */
import type { Outcome, Step } from './attempt-steps.ts';
import type { AdmissionCounters } from '../admission/index.ts';
import type { JobSpec } from '../model/types.ts';
import type { RuIndex } from '../sampling/ru-index.ts';
import { eligibleCapacity } from '../sampling/feasibility.ts';
import type { Placement } from '../state/decisions.ts';
import type { Keys } from '../state/keys.ts';
import { GroupCommit, type GroupCommitStats } from '../store/group-commit.ts';
import type { OwnerFence } from '../state/placement.ts';
import type { ClusterStore } from '../store/types.ts';
import { namespaceOfJob } from '../tenancy/namespace.ts';
import type { Clock } from '../util/clock.ts';
import { TarcilError } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import type { Rng } from '../util/rng.ts';
import { picksPerTxn } from './attempt.ts';
import type { AgentCache } from './cache.ts';
import { agentConfig, type AgentConfig } from './config.ts';
import { CONFLICT_CAUSES, FRONT_END_RACES, type ConflictCause, type FrontEndRace } from './conflict-cause.ts';
import type { CoreContext } from './core.ts';
import type { WaitClass } from './freed-waiters.ts';
import { SharedView } from './shared-view.ts';

/**
 * A write fence for a job: every commit for it also compares `key`'s lease and the job's owner
 * record revision (state/placement.ts OwnerFence), so an owner whose lease expired, or whose job
 * another process adopted, can place nothing more.
 */
export type JobFence = OwnerFence;

/** A task of a commit whose answer was lost (AgentRuntime.unsureCommits): its chunk key, and its pick's scores for when the commit shows up. */
export interface UnsureTask {
  chunk: string;
  Q: number;
  acceptable: boolean;
  score: number;
}

export interface AgentRuntimeOptions {
  id: string;
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  rng: Rng;
  log: Logger;
  config?: Partial<AgentConfig>;
  /** Called after each successful commit with the tasks it placed (the launch fast path). */
  onCommitted?: (job: JobSpec, placements: readonly Placement[]) => void;
  /**
   * The view shared with the other agents of this process (its cache, admission counters, claims
   * and waiting calls). Without one the agent makes, starts and closes its own.
   */
  view?: SharedView;
  /** Hears each step of each scheduling call (attempt-steps.ts), by job: explain and tests. */
  onStep?: (jobId: string, step: Step, after: Outcome | undefined) => void;
}

export class AgentRuntime {
  readonly id: string;
  readonly store: ClusterStore;
  readonly keys: Keys;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly log: Logger;
  readonly config: AgentConfig;
  readonly view: SharedView;
  readonly ownsView: boolean;
  readonly state: RuIndex;
  readonly admission: AdmissionCounters;
  readonly cache: AgentCache;
  readonly core: CoreContext;
  /** Placement commits go through here (group commit), or straight to the store when off. */
  readonly committer: { txn: ClusterStore['txn'] };
  private readonly groupCommit: GroupCommit | undefined;
  private readonly onCommitted: AgentRuntimeOptions['onCommitted'];
  readonly onStep: AgentRuntimeOptions['onStep'];
  private commitSeq = 0;
  closed = false;
  /** Server scope: the latest in-flight commit of this agent per server (see chainServerCommits in commit.ts). */
  readonly serverTails = new Map<string, { base: number; result: Promise<number | undefined> }>();
  /**
   * Per job, the tasks of a commit whose answer was lost and that was not found in the store, with
   * the chunk key it would have written: it may still land. Their next placement writes the tasks'
   * own records (a late landing compares them absent, and fails) and compares that chunk key
   * absent (so it fails if the late commit landed first): a task is never placed twice (commit.ts).
   */
  readonly unsureCommits = new Map<string, Map<number, UnsureTask>>();
  private readonly fences = new Map<string, JobFence>();
  private readonly aborted = new Set<string>();
  /** Jobs waiting for a freed RU, by job: abort() wakes them. */
  private readonly wakers = new Map<string, Set<() => void>>();
  /** Arrival number of each job's current wait (it keeps its place among waiters when it waits again). */
  /** Each waiting job's arrival number and the time of its first wait (kept across its waits, forgotten when its call ends). */
  private readonly waitSeq = new Map<string, { seq: number; since: number }>();
  /** Counters for metrics and benchmarks. */
  readonly stats = {
    commits: 0,
    conflicts: 0,
    /** Conflicts by cause (conflict-cause.ts); the chained server-scope ones (no read) are not counted here. */
    conflictCauses: Object.fromEntries(CONFLICT_CAUSES.map((c) => [c, 0])) as Record<ConflictCause, number>,
    /** Of the `front-end` conflicts, by race (conflict-cause.ts FrontEndRace), and the sum of their lags (build time − the rival's). */
    frontEndRaces: Object.fromEntries(FRONT_END_RACES.map((c) => [c, 0])) as Record<FrontEndRace, number>,
    frontEndLagMs: 0,
    tasksPlaced: 0,
    readmissions: 0,
    preemptions: 0,
    rescheduled: 0,
    fairYields: 0,
    reserveHolds: 0,
    /** Sampling rounds (one per decide()) and the candidates they scored. */
    samples: 0,
    candidates: 0,
  };

  constructor(opts: AgentRuntimeOptions) {
    this.id = opts.id;
    this.store = opts.store;
    this.keys = opts.keys;
    this.clock = opts.clock;
    this.rng = opts.rng;
    this.log = opts.log.child({ agent: opts.id });
    this.config = agentConfig(opts.config);
    this.ownsView = opts.view === undefined;
    this.view = opts.view ?? new SharedView({ store: this.store, keys: this.keys, clock: this.clock, log: this.log, config: this.config });
    this.state = this.view.state;
    this.admission = this.view.admission;
    this.cache = this.view.cache;
    this.core = { state: this.state, admission: this.admission, rng: this.rng, clock: this.clock };
    this.onCommitted = opts.onCommitted;
    this.onStep = opts.onStep;
    this.groupCommit = this.config.groupCommit > 0 ? new GroupCommit(this.store, { maxInFlight: this.config.groupCommit }) : undefined;
    this.committer = this.groupCommit ?? this.store;
  }

  /** Resolves when a commit built now leaves in the next request (group commit; at once when off). */
  commitTurn(): Promise<void> {
    return this.groupCommit ? this.groupCommit.turn() : Promise.resolve();
  }

  /** Requests sent, transactions answered and the largest group, by group commit (undefined when off). */
  get groupCommitStats(): GroupCommitStats | undefined {
    return this.groupCommit?.stats;
  }

  /** Largest number of placements one transaction can carry under the store's op limit. */
  get picksPerTxn(): number {
    return picksPerTxn(this.store.maxTxnOps);
  }

  setFence(jobId: string, fence: JobFence): void {
    this.fences.set(jobId, fence);
    this.aborted.delete(jobId);
  }

  fenceOf(jobId: string): JobFence | undefined {
    return this.fences.get(jobId);
  }

  abort(jobId: string): void {
    this.aborted.add(jobId);
    // A job waiting for RUs (admission queue, no capacity) stops waiting now.
    for (const wake of [...(this.wakers.get(jobId) ?? [])]) wake();
  }

  release(jobId: string): void {
    this.fences.delete(jobId);
    this.aborted.delete(jobId);
  }

  /** The job is no longer owned through `lease`: stop scheduling it. */
  lostFence(jobId: string, lease: string): never {
    this.aborted.add(jobId);
    throw new TarcilError('CANCELLED', `job ${jobId} is no longer owned through lease ${lease}`);
  }

  assertOpen(jobId?: string): void {
    if (this.closed) throw new TarcilError('CLOSED', `agent ${this.id} is closed`);
    if (jobId !== undefined && this.aborted.has(jobId)) throw new TarcilError('CANCELLED', `scheduling of job ${jobId} was stopped`);
  }

  nextCommitId(): string {
    return `${this.id}:${++this.commitSeq}`;
  }

  notifyCommitted(job: JobSpec, placements: readonly Placement[]): void {
    this.onCommitted?.(job, placements);
  }

  /** RUs that could ever hold this job (constraints applied, down servers excluded). */
  eligibleCapacity(job: JobSpec): number {
    return eligibleCapacity(this.state, job.constraints);
  }

  /**
   * Waits until a freed RU wakes this call (see freed-waiters.ts: only a call that can use the RU
   * is woken, one per RU, in priority then the wait order: arrival, or response ratio), `ms` passes, or the job is aborted
   * (cancel must not wait for RUs).
   */
  waitFreed(ms: number, job: JobSpec, cls: WaitClass, need = 1): Promise<boolean> {
    const jobId = job.id;
    if (this.aborted.has(jobId)) return Promise.resolve(false);
    let first = this.waitSeq.get(jobId);
    if (first === undefined) this.waitSeq.set(jobId, (first = { seq: this.view.waiters.nextSeq(), since: this.clock.now() }));
    const { seq, since } = first;
    if (this.view.fair) this.view.refreshWeights();
    return new Promise((resolve) => {
      const finish = (woken: boolean): void => {
        timer.cancel();
        off();
        this.wakers.get(jobId)?.delete(done);
        if (this.wakers.get(jobId)?.size === 0) this.wakers.delete(jobId);
        resolve(woken);
      };
      const done = (): void => finish(true);
      const timer = this.clock.setTimer(ms, () => finish(false));
      const off = this.view.waiters.add(cls, {
        namespace: namespaceOfJob(jobId),
        need,
        priority: job.priority,
        seq,
        since,
        runClass: job.profile.name,
        wake: done,
      });
      let set = this.wakers.get(jobId);
      if (!set) this.wakers.set(jobId, (set = new Set()));
      set.add(done);
    });
  }

  /** The scheduling call of this job ended: its next one arrives anew among the waiters. */
  forgetWait(jobId: string): void {
    this.waitSeq.delete(jobId);
  }
}
