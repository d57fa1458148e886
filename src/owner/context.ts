/**
 * What the parts of a job owner share: the options of a JobManager, its counters, and the
 * manager as its parts see it (`OwnerContext`). One job's bookkeeping is job.ts's; the
 * owner-fenced write, fence.ts's.
 */
import type { JobSpec, JobState } from '../model/types.ts';
import type { Keys } from '../state/keys.ts';
import type { HeldLease } from '../state/lease.ts';
import type { LiveKeys, LiveServerRecord } from '../state/live-records.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';
import type { Rng } from '../util/rng.ts';
import type { AgentConfig, DecisionRecord, Placement, SchedulingAgent } from '../agent/agent.ts';
import type { CellServer, Feasibility } from '../agent/cell.ts';
import type { RecentEnds } from './recent-ends.ts';
import type { AdoptionGate } from './adoption-gate.ts';
import { laterTurn } from '../util/turns.ts';
import type { JobQueue } from './job-queue.ts';
import type { AdoptWindow, Owned } from './job.ts';
import type { RuntimeLoopConfig } from '../monitor/runtime-loop.ts';
import type { ProfileBook, ProfileBookOptions } from '../state/profiles.ts';
import type { RunTimes } from '../agent/wait-order.ts';

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
   * A job with live tasks has its record written at least this often, to move its `seen` revision
   * on (plan.ts SEEN_REFRESH_MS, the default): keep it well inside the history compaction keeps.
   */
  seenRefreshMs?: number;
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
  /** RU histories read for a task outcome not yet recorded (state/ru-history.ts). */
  historyReads: number;
  /** Placed or running tasks whose RU the view showed moved on without this owner having seen it: read again (ru-events.ts sweep). */
  sweptTasks: number;
  /** Task ends an adoption took from what the view saw before the job was found orphaned (recent-ends.ts). */
  outcomesFromRecentEnds: number;
  /** Tasks whose outcome was compacted out of the store's history before it was recorded: recorded failed, saying so. */
  outcomesCompacted: number;
  /** Outcomes not yet recorded, found in the record of the placement that took their RU next (PlacedRuRecord.prev), not in the history. */
  outcomesCarried: number;
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
  readonly seenRefreshMs: number;
  readonly departedMemoryMs: number;
  readonly owned: Map<string, Owned>;
  readonly submitting: Set<string>;
  readonly adopting: Set<string>;
  /**
   * Jobs queued for adoption or whose adoption transaction is in flight, with the changes of their
   * task records that the watch brings meanwhile (adoption.ts): a task that ends while its job
   * waits for adoption is applied once the job is ours, without a read of its RU's history (which
   * compaction may have taken by then); and the watch and the transaction's answer come over
   * different connections, so a change made just after the transaction may arrive before its
   * answer.
   */
  readonly adoptWindow: Map<string, AdoptWindow>;
  /** Ends of tasks of jobs not owned here, as the view saw them, for an adoption to take up (recent-ends.ts). */
  readonly recentEnds: RecentEnds;
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
  /** The run times of the tasks seen to end here, per workload class: the agents' `ratio` wait order reads them (agent/wait-order.ts). */
  readonly runTimes: RunTimes;
  /** Learned profiles: the spec a new job is scheduled with is its class's learned vector (state/profiles.ts). */
  readonly profiles: ProfileBook;
  /** Task records read again (ru-events.ts TaskRefresher): the owner follows no task record, and learns from the RUs what they show. */
  readonly refresher: TaskReads;
  /** Tasks of the jobs owned here not yet placed (a count at most 100 ms old). */
  pendingTasks(): number;
  /** The revision up to which the view's RU changes have reached the owner (ru-events.ts). */
  seenRevision(): number;
  /** When this process saw the member record of `lease` go (members.ts), if it did. */
  memberGoneAt(lease: string): number | undefined;
  readonly maxPendingTasks: number;
}

/** Reads of task records the RUs do not show (ru-events.ts TaskRefresher). */
export interface TaskReads {
  /** Reads these tasks' records again (soon, batched) and applies them; resolves once they are. */
  refresh(o: Owned, tasks: Iterable<number>): Promise<void>;
  /** Reads task `t`'s record again, now and then, until it is `running` or moves on. */
  watch(o: Owned, t: number): void;
  /** The job's placed or running tasks whose RU, as the view shows it, does not hold them. */
  unheld(o: Owned): number[];
}

/** A full pass over a job's tasks yields to the event loop this often (a 100,000-task job). */
export const YIELD_EVERY = 5000;

/** A later turn of the event loop, shared fairly with the process's other long passes. */
export const yieldNow = laterTurn;
