/**
 * A scheduling agent (paper §5.1): the scheduling core over a cached copy of the shared state (one
 * per process, shared-view.ts), and an optimistic commit per decision, driven by the attempt loop
 * (attempt.ts) and its step sequence (attempt-steps.ts, driven by attempt-driver.ts) chunk by chunk
 * (chunks.ts). Each scheduling call runs over its own context
 * (attempt-context.ts) on the agent's runtime (agent-runtime.ts); its waits are in waits.ts, its
 * commits in commit.ts. Gangs larger than one transaction go through gang.ts; a standalone agent
 * also consumes the preempted-task queue (preempted-queue.ts). Its options and defaults are in
 * config.ts.
 */
import { trace } from '../util/trace.ts';
import type { AdmissionCounters } from '../admission/index.ts';
import type { JobSpec, RuRef } from '../model/types.ts';
import type { RuIndex } from '../sampling/ru-index.ts';
import { eligibleGroups, hardPack } from '../sampling/feasibility.ts';
import type { GroupCommitStats } from '../store/group-commit.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import { TarcilError } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import type { Rng } from '../util/rng.ts';
import { AgentRuntime, type AgentRuntimeOptions, type JobFence } from './agent-runtime.ts';
import { AttemptContext, type TaskStamp } from './attempt-context.ts';
import type { AgentCache } from './cache.ts';
import type { AgentConfig } from './config.ts';
import { decide } from './core.ts';
import type { SharedView } from './shared-view.ts';
import { tryCommit } from './commit.ts';
import { drive } from './attempt-driver.ts';
import { PreemptedQueue } from './preempted-queue.ts';
import type { JobRecord, PlacedRuRecord } from '../state/records.ts';
import type { AttemptSummary } from '../state/records.ts';
import type { DecisionRecord } from '../state/decisions.ts';

export { DEFAULT_AGENT_CONFIG, type AgentConfig, type ConflictScope } from './config.ts';
export type { DecisionRecord, Placement } from '../state/decisions.ts';
export type { JobFence } from './agent-runtime.ts';

export type AgentOptions = AgentRuntimeOptions;

/** A running task to move (SchedulingAgent.move). */
export interface MoveRequest {
  task: number;
  /** Its RU now, that record's mod revision and value. */
  from: RuRef;
  fromRev: number;
  fromRec: PlacedRuRecord;
  /** Its task record's mod revision (the move compares it). */
  taskRev: number;
  /** The attempt number of the new copy. */
  attempt: number;
  previous?: AttemptSummary[];
  /** Moves of the task so far. */
  moves: number;
  /** Its share of the expected rate where it runs. */
  rate: number;
  reason: string;
}

/** Options of one scheduling call. */
export interface ScheduleOptions {
  /** The attempt number each task's placement gets (default 0: a first placement). */
  attempt?: (task: number) => number;
  /**
   * The mod revision of each task's record as the caller knows it (0: none). The placement then
   * compares it, so that no task is placed twice (see state/placement.ts).
   */
  taskRev?: (task: number) => number;
  /** Earlier attempts of each task, carried on its new records (status and explain show them). */
  previous?: (task: number) => AttemptSummary[] | undefined;
}

/**
 * A scheduling agent (paper §5.1): the scheduling core over a cached copy of the shared state, and
 * an optimistic commit per decision. Any number of agents may share one store, and the agents of
 * one process share one view of it.
 */
export class SchedulingAgent {
  /** What the agent's scheduling calls share (handles, options, counters, fences, waits). */
  private readonly rt: AgentRuntime;
  readonly id: string;
  readonly view: SharedView;
  readonly state: RuIndex;
  readonly admission: AdmissionCounters;
  readonly cache: AgentCache;
  readonly config: AgentConfig;
  readonly store: ClusterStore;
  readonly keys: Keys;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly log: Logger;
  /** Counters for metrics and benchmarks. */
  readonly stats: AgentRuntime['stats'];
  private queue: PreemptedQueue | undefined;
  /** Decisions in progress, by job: what `explain` shows for a job still waiting. */
  readonly inflight = new Map<string, DecisionRecord>();

  constructor(opts: AgentOptions) {
    const rt = (this.rt = new AgentRuntime(opts));
    this.id = rt.id;
    this.view = rt.view;
    this.state = rt.state;
    this.admission = rt.admission;
    this.cache = rt.cache;
    this.config = rt.config;
    this.store = rt.store;
    this.keys = rt.keys;
    this.clock = rt.clock;
    this.rng = rt.rng;
    this.log = rt.log;
    this.stats = rt.stats;
  }

  /** Requests sent, transactions answered and the largest group, by group commit (undefined when off). */
  get groupCommitStats(): GroupCommitStats | undefined {
    return this.rt.groupCommitStats;
  }

  /** Fences every later commit for this job on the lease of `fence.key` (see JobFence). */
  setFence(jobId: string, fence: JobFence): void {
    this.rt.setFence(jobId, fence);
  }

  fenceOf(jobId: string): JobFence | undefined {
    return this.rt.fenceOf(jobId);
  }

  /** Stops scheduling this job: its schedule() call rejects with CANCELLED at the next step. */
  abort(jobId: string): void {
    this.rt.abort(jobId);
  }

  /** Forgets the fence and abort mark of a job that is no longer scheduled here. */
  release(jobId: string): void {
    this.rt.release(jobId);
  }

  /** Largest number of placements one transaction can carry under the store's op limit. */
  get picksPerTxn(): number {
    return this.rt.picksPerTxn;
  }

  async start(): Promise<void> {
    await this.view.start();
    if (this.config.consumeQueue) {
      this.queue = new PreemptedQueue({
        store: this.store,
        keys: this.keys,
        clock: this.clock,
        rng: this.rng,
        log: this.log,
        isClosed: () => this.rt.closed,
        reschedule: (job, tasks) => {
          this.stats.rescheduled += tasks.length;
          return this.schedule(job, tasks, { attempt: () => 1 });
        },
      });
      await this.queue.start();
    }
  }

  async close(): Promise<void> {
    this.rt.closed = true;
    await this.queue?.close();
    if (this.rt.ownsView) await this.view.close();
  }

  /**
   * Persists the job (so any agent can reschedule its tasks later), then schedules it. A job the
   * cell can never take is refused with FAILED_PRECONDITION naming the field.
   */
  async submit(job: JobSpec): Promise<DecisionRecord> {
    const rec: JobRecord = { spec: job, state: 'queued', placed: 0, updatedAt: this.clock.now() };
    await this.store.put(this.keys.job(job.id), JSON.stringify(rec));
    const done = await this.schedule(job);
    if (done.unplaceable) throw new TarcilError('FAILED_PRECONDITION', done.unplaceable.reason, { field: done.unplaceable.field });
    return done;
  }

  /**
   * Places the given tasks of a job (all of them by default). Resolves when every task is placed;
   * a job is never dropped: failed commits resample, exhausted retries go back to admission. A
   * job this agent's view of the cell can never take resolves at once with `unplaceable` set.
   */
  async schedule(job: JobSpec, taskIndices?: number[], opts: ScheduleOptions = {}): Promise<DecisionRecord> {
    trace('schedule', job.id);
    const pending = taskIndices ? [...taskIndices] : Array.from({ length: job.tasks }, (_, i) => i);
    const stamp: TaskStamp = {
      attempt: opts.attempt ?? (() => 0),
      ...(opts.taskRev ? { taskRev: opts.taskRev } : {}),
      ...(opts.previous ? { previous: opts.previous } : {}),
    };
    // A gang larger than one transaction is reserved chunk by chunk (gang.ts), and backs off
    // after a lost race; every other call is placed chunk by chunk (chunks.ts): the step
    // sequence of both is attempt-steps.ts, driven by attempt-driver.ts.
    const reserved = job.mode === 'gang' && pending.length > this.picksPerTxn;
    const cx = new AttemptContext(this.rt, job, { tasks: pending, stamp, bypasses: !reserved && job.priority > this.config.bypassAbove });
    const rec = cx.rec;
    const refusal = this.unplaceable(job, pending.length);
    if (refusal) {
      rec.unplaceable = refusal;
      rec.finishedAt = this.clock.now();
      return rec;
    }
    this.inflight.set(job.id, rec);
    try {
      try {
        await drive(cx);
      } finally {
        await cx.waiting.remove();
      }
    } finally {
      if (this.inflight.get(job.id) === rec) this.inflight.delete(job.id);
      this.rt.forgetWait(job.id);
    }
    rec.finishedAt = this.clock.now();
    return rec;
  }

  /** Why a gang of `tasks` tasks can never be placed on this agent's view of the cell (undefined: it can). */
  private unplaceable(job: JobSpec, tasks: number): DecisionRecord['unplaceable'] {
    if (job.mode !== 'gang') return undefined;
    const capacity = this.rt.eligibleCapacity(job);
    if (tasks > capacity) return { field: 'tasks', reason: `tasks: a gang of ${tasks} tasks exceeds the ${capacity} RUs eligible for it` };
    if (hardPack(job.locality) && this.state.jobGroups(job.id, job.locality.scope).size === 0) {
      const up = eligibleGroups(this.state, job.constraints).up;
      const room = job.locality.scope === 'rack' ? up.rackRus : up.serverRus;
      if (tasks > room) {
        return {
          field: 'locality',
          reason: `locality: a required pack puts all ${tasks} tasks on one ${job.locality.scope}; the largest it may use has ${room} RUs`,
        };
      }
    }
    return undefined;
  }

  /**
   * A move of the run-time loop: one decision for one RU off the slow task's server, without
   * admission, and one commit that places the new copy held and tells the old one to stop
   * (state/placement.ts). The new RU must be acceptable and taken from no one; a conflict cancels
   * the move (the owner may try again later). `moved` says whether the commit went through.
   */
  async move(job: JobSpec, m: MoveRequest): Promise<{ rec: DecisionRecord; moved: boolean; why?: string }> {
    this.rt.assertOpen(job.id);
    const stamp: TaskStamp = {
      attempt: () => m.attempt,
      taskRev: () => m.taskRev,
      previous: () => m.previous,
      move: () => ({ from: m.from, rev: m.fromRev, rec: m.fromRec, reason: m.reason, moves: m.moves, rate: m.rate }),
    };
    const cx = new AttemptContext(this.rt, job, { tasks: [m.task], stamp });
    const rec = cx.rec;
    const finish = (moved: boolean, why?: string): { rec: DecisionRecord; moved: boolean; why?: string } => {
      rec.finishedAt = this.clock.now();
      return { rec, moved, ...(why ? { why } : {}) };
    };
    const s = this.state.server(m.from.server);
    const exclude = new Set<number>();
    if (s) for (let i = 0; i < s.ruCount; i++) exclude.add(s.base + i);
    const d = decide(this.rt.core, { job, target: cx.target, m: 1, cfg: this.config, skipAdmission: true, exclude });
    cx.noteDecision(d);
    const pick = d.selection.picks[0];
    if (!pick || !pick.quality.acceptable || pick.victim) return finish(false, 'no better RU');
    const c0 = this.clock.monotonic();
    const res = await tryCommit(cx, { tasks: [m.task], picks: [pick], finalForJob: false, ruState: 'busy' });
    cx.commitTime(c0);
    if (!res.ok) {
      for (const p of res.survivors) this.state.unclaim({ server: p.server.id, index: p.index }, rec);
      return finish(false, 'conflict');
    }
    return finish(true);
  }
}
