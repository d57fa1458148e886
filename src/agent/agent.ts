/**
 * A scheduling agent (paper §5.1): the scheduling core over a cached copy of the shared state (one
 * per process, shared-view.ts), and an optimistic commit per decision, driven by the attempt loop
 * (attempt.ts) chunk by chunk (chunks.ts). Gangs larger than one transaction go through gang.ts;
 * a standalone agent also consumes the preempted-task queue (preempted-queue.ts). Its options and
 * defaults are in config.ts.
 */
import { trace } from '../util/trace.ts';
import type { AdmissionState } from '../admission/index.ts';
import type { JobSpec, RuRef } from '../model/types.ts';
import { contention, jobTarget, scoreRu, type JobTarget } from '../quality/index.ts';
import type { Pick } from '../sampling/batch.ts';
import type { ClusterState, ServerState } from '../sampling/cluster-state.ts';
import { eligibleCapacity, eligibleGroups, hardPack, hardSpread, serverMatches } from '../sampling/feasibility.ts';
import { bestRoom, groupOf, groupRoom, packGroupsHeld } from '../sampling/one-group.ts';
import { GroupCommit, type GroupCommitStats } from '../store/group-commit.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import { TarcilError } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import type { Rng } from '../util/rng.ts';
import { Attempt, picksPerTxn } from './attempt.ts';
import type { AgentCache } from './cache.ts';
import { agentConfig, type AgentConfig } from './config.ts';
import { admissionVerdict, decide, type CoreContext } from './core.ts';
import type { WaitClass } from './freed-waiters.ts';
import { SharedView } from './shared-view.ts';
import { commitPicks, type CommitHost, type CommitResult, type TaskStamp, type UnsureTask } from './commit.ts';
import { scheduleGangReserved } from './gang.ts';
import { placeIncremental, type ChunkHost } from './chunks.ts';
import { PreemptedQueue } from './preempted-queue.ts';
import { WaitingEntry } from './waiting.ts';
import { namespaceOfJob } from '../tenancy/namespace.ts';
import type { JobRecord, PlacedRuRecord } from '../state/records.ts';
import type { AttemptSummary } from '../state/records.ts';
import type { DecisionRecord, Placement } from '../state/decisions.ts';
import { CONFLICT_CAUSES, type ConflictCause } from './conflict-cause.ts';

export { DEFAULT_AGENT_CONFIG, type AgentConfig, type ConflictScope } from './config.ts';
export type { DecisionRecord, Placement } from '../state/decisions.ts';

export interface AgentOptions {
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
}

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
 * A write fence for a job: every commit for it also compares `key`'s lease, so an owner whose
 * lease expired (and whose job another agent adopted) can place nothing more.
 */
export interface JobFence {
  key: string;
  lease: string;
}

/**
 * A scheduling agent (paper §5.1): the scheduling core over a cached copy of the shared state, and
 * an optimistic commit per decision. Any number of agents may share one store, and the agents of
 * one process share one view of it.
 */
export class SchedulingAgent implements ChunkHost, CommitHost {
  readonly id: string;
  readonly view: SharedView;
  readonly state: ClusterState;
  readonly admission: AdmissionState;
  readonly cache: AgentCache;
  private readonly ownsView: boolean;
  /** Arrival number of each job's current wait (it keeps its place among waiters when it waits again). */
  private readonly waitSeq = new Map<string, number>();
  readonly config: AgentConfig;
  readonly store: ClusterStore;
  readonly keys: Keys;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly log: Logger;
  readonly core: CoreContext;
  /** Placement commits go through here (group commit), or straight to the store when off. */
  readonly committer: { txn: ClusterStore['txn'] };
  private readonly groupCommit: GroupCommit | undefined;
  private commitSeq = 0;
  private closed = false;
  private queue: PreemptedQueue | undefined;
  /** Server scope: the latest in-flight commit of this agent per server (see chainServerCommits). */
  readonly serverTails = new Map<string, { base: number; result: Promise<number | undefined> }>();
  readonly unsureCommits = new Map<string, Map<number, UnsureTask>>();
  private readonly onCommitted: AgentOptions['onCommitted'];
  private readonly fences = new Map<string, JobFence>();
  private readonly aborted = new Set<string>();
  /** Jobs waiting for a freed RU, by job: abort() wakes them. */
  private readonly wakers = new Map<string, Set<() => void>>();
  /** Decisions in progress, by job: what `explain` shows for a job still waiting. */
  readonly inflight = new Map<string, DecisionRecord>();
  /** Counters for metrics and benchmarks. */
  readonly stats = {
    commits: 0,
    conflicts: 0,
    /** Conflicts by cause (conflict-cause.ts); the chained server-scope ones (no read) are not counted here. */
    conflictCauses: Object.fromEntries(CONFLICT_CAUSES.map((c) => [c, 0])) as Record<ConflictCause, number>,
    tasksPlaced: 0,
    readmissions: 0,
    preemptions: 0,
    rescheduled: 0,
    fairYields: 0,
  };

  constructor(opts: AgentOptions) {
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
    this.groupCommit = this.config.groupCommit > 0 ? new GroupCommit(this.store, { maxInFlight: this.config.groupCommit }) : undefined;
    this.committer = this.groupCommit ?? this.store;
  }

  commitTurn(): Promise<void> {
    return this.groupCommit ? this.groupCommit.turn() : Promise.resolve();
  }

  /** Requests sent, transactions answered and the largest group, by group commit (undefined when off). */
  get groupCommitStats(): GroupCommitStats | undefined {
    return this.groupCommit?.stats;
  }

  /** Fences every later commit for this job on the lease of `fence.key` (see JobFence). */
  setFence(jobId: string, fence: JobFence): void {
    this.fences.set(jobId, fence);
    this.aborted.delete(jobId);
  }

  fenceOf(jobId: string): JobFence | undefined {
    return this.fences.get(jobId);
  }

  /** Stops scheduling this job: its schedule() call rejects with CANCELLED at the next step. */
  abort(jobId: string): void {
    this.aborted.add(jobId);
    // A job waiting for RUs (admission queue, no capacity) stops waiting now.
    for (const wake of [...(this.wakers.get(jobId) ?? [])]) wake();
  }

  /** Forgets the fence and abort mark of a job that is no longer scheduled here. */
  release(jobId: string): void {
    this.fences.delete(jobId);
    this.aborted.delete(jobId);
  }

  /** Largest number of placements one transaction can carry under the store's op limit. */
  get picksPerTxn(): number {
    return picksPerTxn(this.store.maxTxnOps);
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
        isClosed: () => this.closed,
        reschedule: (job, tasks) => {
          this.stats.rescheduled += tasks.length;
          return this.schedule(job, tasks, { attempt: () => 1 });
        },
      });
      await this.queue.start();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.queue?.close();
    if (this.ownsView) await this.view.close();
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
    const target = jobTarget(job.profile.caused);
    const rec = this.newRecord(job, target);
    const pending = taskIndices ? [...taskIndices] : Array.from({ length: job.tasks }, (_, i) => i);
    const stamp: TaskStamp = {
      attempt: opts.attempt ?? (() => 0),
      ...(opts.taskRev ? { taskRev: opts.taskRev } : {}),
      ...(opts.previous ? { previous: opts.previous } : {}),
    };
    if (job.mode === 'gang') {
      const capacity = this.eligibleCapacity(job);
      if (pending.length > capacity) {
        rec.unplaceable = { field: 'tasks', reason: `tasks: a gang of ${pending.length} tasks exceeds the ${capacity} RUs eligible for it` };
        rec.finishedAt = this.clock.now();
        return rec;
      }
      if (hardPack(job.locality) && this.state.jobGroups(job.id, job.locality.scope).size === 0) {
        const up = eligibleGroups(this.state, job.constraints).up;
        const room = job.locality.scope === 'rack' ? up.rackRus : up.serverRus;
        if (pending.length > room) {
          rec.unplaceable = {
            field: 'locality',
            reason: `locality: a required pack puts all ${pending.length} tasks on one ${job.locality.scope}; the largest it may use has ${room} RUs`,
          };
          rec.finishedAt = this.clock.now();
          return rec;
        }
      }
    }
    this.inflight.set(job.id, rec);
    try {
      if (job.mode === 'gang' && pending.length > this.picksPerTxn) {
        await scheduleGangReserved(this, job, target, pending, rec, stamp);
      } else {
        const waiting = new WaitingEntry(this.store, this.keys, job, this.id, this.clock);
        try {
          await placeIncremental(this, job, target, pending, rec, job.mode === 'gang', waiting, stamp);
        } finally {
          await waiting.remove();
        }
      }
    } finally {
      if (this.inflight.get(job.id) === rec) this.inflight.delete(job.id);
      this.waitSeq.delete(job.id);
    }
    rec.finishedAt = this.clock.now();
    return rec;
  }

  private newRecord(job: JobSpec, target: JobTarget): DecisionRecord {
    return {
      job: job.id,
      agent: this.id,
      target: target.T,
      admission: [],
      samples: [],
      placements: [],
      conflicts: 0,
      retries: 0,
      readmissions: 0,
      queuedMs: 0,
      stageMs: { admission: 0, size: 0, select: 0, commit: 0, queue: 0 },
      startedAt: this.clock.now(),
    };
  }

  /**
   * A move of the run-time loop: one decision for one RU off the slow task's server, without
   * admission, and one commit that places the new copy held and tells the old one to stop
   * (state/placement.ts). The new RU must be acceptable and taken from no one; a conflict cancels
   * the move (the owner may try again later). `moved` says whether the commit went through.
   */
  async move(job: JobSpec, m: MoveRequest): Promise<{ rec: DecisionRecord; moved: boolean; why?: string }> {
    this.assertOpen(job.id);
    const target = jobTarget(job.profile.caused);
    const rec = this.newRecord(job, target);
    const finish = (moved: boolean, why?: string): { rec: DecisionRecord; moved: boolean; why?: string } => {
      rec.finishedAt = this.clock.now();
      return { rec, moved, ...(why ? { why } : {}) };
    };
    const s = this.state.server(m.from.server);
    const exclude = new Set<number>();
    if (s) for (let i = 0; i < s.ruCount; i++) exclude.add(s.base + i);
    const d = decide(this.core, job, target, 1, this.config, { skipAdmission: true, exclude });
    rec.stageMs.size += d.stageUs.size / 1000;
    rec.stageMs.select += d.stageUs.select / 1000;
    rec.samples.push({ R: d.R, f: d.f, candidates: d.selection.candidatesSeen });
    const pick = d.selection.picks[0];
    if (!pick || !pick.quality.acceptable || pick.victim) return finish(false, 'no better RU');
    const stamp: TaskStamp = {
      attempt: () => m.attempt,
      taskRev: () => m.taskRev,
      previous: () => m.previous,
      move: () => ({ from: m.from, rev: m.fromRev, rec: m.fromRec, reason: m.reason, moves: m.moves, rate: m.rate }),
    };
    const c0 = this.clock.monotonic();
    const res = await this.tryCommit(job, [m.task], [pick], rec, false, 'busy', stamp);
    rec.stageMs.commit += this.clock.monotonic() - c0;
    if (!res.ok) {
      for (const p of res.survivors) this.state.unclaim({ server: p.server.id, index: p.index }, rec);
      return finish(false, 'conflict');
    }
    return finish(true);
  }

  /**
   * Admission control: queue while acceptable RUs are scarce and the estimated wait is below its
   * bound; never longer than the job's maxQueueMs. The durable queue entry lets another agent see
   * (and, with ownership, adopt) the waiting job.
   */
  async admit(job: JobSpec, target: JobTarget, needed: number, rec: DecisionRecord, at: Attempt, waiting: WaitingEntry): Promise<void> {
    for (;;) {
      if (!this.config.admission || at.skipAdmission(this.clock.now())) {
        at.afterVerdict(undefined, this.clock.now());
        return;
      }
      const t0 = this.clock.monotonic();
      // An incremental job larger than the RUs it may use takes them as they come: admission
      // asks for what it can hold at once, not for all its tasks (a gang is feasible by now).
      const capacity = this.eligibleCapacity(job);
      const want = job.mode === 'gang' ? needed : Math.max(1, Math.min(needed, capacity));
      const verdict = admissionVerdict(this.core, job, target, want, this.config, capacity, at.leftMs(this.clock.now()), at.queuedMs(this.clock.now()));
      rec.stageMs.admission += this.clock.monotonic() - t0;
      rec.admission.push(verdict);
      // Keep the first verdict and the latest ones: enough to explain a long wait.
      if (rec.admission.length > 20) rec.admission.splice(1, 1);
      const then = at.afterVerdict(verdict, this.clock.now());
      if (then.kind === 'go') return;
      await waiting.ensure(needed);
      rec.waiting = `queued by admission control until enough free RUs would run it well (at most ${job.maxQueueMs} ms; see explain)`;
      const q0 = this.clock.now();
      await this.waitFreed(then.ms, job, this.admissionClass(job, target, want), needed);
      delete rec.waiting;
      this.assertOpen(job.id);
      rec.queuedMs += this.clock.now() - q0;
      rec.stageMs.queue += this.clock.now() - q0;
    }
  }

  /** Waits for a freed RU (waitFreed); true when one woke the call. `why`: what the job waits for
   *  if not just a free RU (with `quota`, its namespace's quota, kept in the record for explain). */
  async waitForCapacity(rec: DecisionRecord, job: JobSpec, ms = this.config.recheckMs, need = 1, why?: string, quota = false): Promise<boolean> {
    const q0 = this.clock.now();
    const spread = job.locality.mode === 'spread' && job.locality.required !== false;
    rec.waiting =
      why ??
      (hardPack(job.locality)
        ? this.packWaiting(job, need)
        : `waiting for a free RU it may use${spread ? ` on a ${job.locality.scope} without a task of this job (spread is required)` : ''}`);
    if (quota && why !== undefined) rec.quota = why;
    const woken = await this.waitFreed(ms, job, this.capacityClass(job, need), need);
    delete rec.waiting;
    rec.stageMs.queue += this.clock.now() - q0;
    rec.queuedMs += this.clock.now() - q0;
    this.assertOpen(job.id);
    return woken;
  }

  /**
   * Waits until a freed RU wakes this call (see freed-waiters.ts: only a call that can use the RU
   * is woken, one per RU, in priority then arrival order), `ms` passes, or the job is aborted
   * (cancel must not wait for RUs).
   */
  private waitFreed(ms: number, job: JobSpec, cls: WaitClass, need = 1): Promise<boolean> {
    const jobId = job.id;
    if (this.aborted.has(jobId)) return Promise.resolve(false);
    let seq = this.waitSeq.get(jobId);
    if (seq === undefined) this.waitSeq.set(jobId, (seq = this.view.waiters.nextSeq()));
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
      const off = this.view.waiters.add(cls, { namespace: namespaceOfJob(jobId), need, priority: job.priority, seq, wake: done });
      let set = this.wakers.get(jobId);
      if (!set) this.wakers.set(jobId, (set = new Set()));
      set.add(done);
    });
  }

  /**
   * Jobs held by admission: woken by a freed RU they may use once enough acceptable RUs are free
   * for the verdict to admit them (`want` with its margin), counted once per freed RU for all the
   * jobs of the same target, size and constraints. With the sample arbiter on, a freed RU that is
   * itself acceptable for the job wakes it too: the buckets' means may not show it, the sample
   * the woken job takes may.
   */
  private admissionClass(job: JobSpec, target: JobTarget, want: number): WaitClass {
    const threshold = Math.ceil(want * this.admission.margin - 1e-9);
    const base = this.capacityClass(job);
    const arbiter = this.config.arbiterSample > 0 && !job.constraints.attributes;
    const form = this.config.qualityForm;
    const C: number[] = [];
    return {
      key: `a|${threshold}|${job.profile.caused.join(',')}|${base.key}`,
      canUse: (s, i) => base.canUse(s, i),
      ...(base.perRu ? { perRu: true } : {}),
      ready: (s) => {
        if (this.admission.estimateF(target).acceptableFree >= threshold) return true;
        if (!arbiter) return false;
        contention(s.sum, s.ruCount, null, C);
        return scoreRu(C, target, form).acceptable;
      },
    };
  }

  /**
   * Jobs with no eligible RU free: woken by a freed RU on a server their constraints allow (and,
   * for a required spread, where the job has no task yet); a gang only once its chunk could fit.
   */
  private capacityClass(job: JobSpec, need = 1): WaitClass {
    const c = job.constraints;
    const key = `c|${job.mode === 'gang' ? Math.min(job.tasks, this.picksPerTxn) : 1}|${c.platforms?.join(',') ?? ''}|${c.attributes ? JSON.stringify(c.attributes) : ''}`;
    const gangNeed = job.mode === 'gang' ? Math.min(job.tasks, this.picksPerTxn) : 0;
    const ready = gangNeed > 1 ? { ready: () => this.state.available.size >= gangNeed } : {};
    if (hardPack(job.locality)) {
      // Woken only by an RU of a group with room for all it needs (its own group, once it holds one).
      const scope = job.locality.scope;
      const ok = (s: ServerState): boolean => serverMatches(s.spec, c);
      return {
        key: `${key}|pack|${job.id}|${need}`,
        perRu: true,
        canUse: (s) => {
          if (!ok(s)) return false;
          const held = packGroupsHeld(this.state, job.id, scope)[0];
          const g = groupOf(scope, s);
          if (held !== undefined && held !== g) return false;
          return groupRoom(this.state, scope === 'rack' ? (this.state.racks.get(g) ?? [s]) : [s], ok) >= need;
        },
      };
    }
    if (hardSpread(job.locality)) {
      const scope = job.locality.scope;
      return {
        key: `${key}|spread|${job.id}`,
        perRu: true,
        canUse: (s) => serverMatches(s.spec, c) && !this.state.jobGroups(job.id, scope).has(scope === 'rack' ? s.rack : s.id),
        ...ready,
      };
    }
    return { key, canUse: (s) => serverMatches(s.spec, c), ...ready };
  }

  /** One optimistic placement transaction: see commit.ts. */
  tryCommit(
    job: JobSpec,
    tasks: number[],
    picks: Pick[],
    rec: DecisionRecord,
    finalForJob: boolean,
    ruState: 'busy' | 'reserved',
    stamp: TaskStamp,
    direct = false,
  ): Promise<CommitResult> {
    return commitPicks(this, { job, tasks, picks, rec, finalForJob, ruState, ...stamp, direct });
  }

  nextCommitId(): string {
    return `${this.id}:${++this.commitSeq}`;
  }

  notifyCommitted(job: JobSpec, placements: readonly Placement[]): void {
    this.onCommitted?.(job, placements);
  }

  /** The job is no longer owned through `lease`: stop scheduling it. */
  lostFence(jobId: string, lease: string): never {
    this.aborted.add(jobId);
    throw new TarcilError('CANCELLED', `job ${jobId} is no longer owned through lease ${lease}`);
  }

  /** What a required pack waits for: room for `need` tasks in one group (its own, once it holds one). */
  private packWaiting(job: JobSpec, need: number): string {
    const scope = job.locality.scope;
    const ok = (s: ServerState): boolean => serverMatches(s.spec, job.constraints);
    const { held, room } = bestRoom(this.state, job.id, scope, ok);
    return held !== undefined
      ? `waiting for room for ${need} more of its tasks on ${scope} ${held}, where its other tasks are (pack is required): ${room} free there`
      : `waiting for a ${scope} with room for all ${need} of its tasks (pack is required): the ${scope} it may use with the most free RUs has ${room}`;
  }

  /** RUs that could ever hold this job (constraints applied, down servers excluded). */
  eligibleCapacity(job: JobSpec): number {
    return eligibleCapacity(this.state, job.constraints);
  }

  assertOpen(jobId?: string): void {
    if (this.closed) throw new TarcilError('CLOSED', `agent ${this.id} is closed`);
    if (jobId !== undefined && this.aborted.has(jobId)) throw new TarcilError('CANCELLED', `scheduling of job ${jobId} was stopped`);
  }
}
