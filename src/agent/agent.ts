import { AdmissionState, DEFAULT_BUCKETS } from '../admission/index.ts';
import type { JobSpec, RuRef } from '../model/types.ts';
import { jobTarget, type JobTarget } from '../quality/index.ts';
import type { Pick } from '../sampling/batch.ts';
import { ClusterState } from '../sampling/cluster-state.ts';
import { eligibleCapacity } from '../sampling/feasibility.ts';
import { GroupCommit, type GroupCommitStats } from '../store/group-commit.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore, Compare, KeyValue, Op, TxnRequest } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import { TarcilError } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import type { Rng } from '../util/rng.ts';
import { Attempt, picksPerTxn, type Next } from './attempt.ts';
import { AgentCache } from './cache.ts';
import { Follower } from '../state/follow.ts';
import { admissionVerdict, DEFAULT_CORE_CONFIG, decide, wireAdmission, type CoreConfig, type CoreContext } from './core.ts';
import { freeReservation } from '../state/release.ts';
import { parseJson, type JobRecord, type PlacedRuRecord, type PlacedTaskRecord } from '../state/records.ts';

export type ConflictScope = 'ru' | 'server';

export interface AgentConfig extends CoreConfig {
  conflictScope: ConflictScope;
  /** Commit attempts for one chunk before the job goes back to admission. */
  maxRetries: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** Admission buckets and history (paper: 20 buckets, 2 h). */
  buckets: number;
  historyWindowMs: number;
  /** Upper bound on one wait for capacity when nothing is free, before re-checking. */
  recheckMs: number;
  /** Claim and reschedule preempted tasks from the durable queue. */
  consumeQueue: boolean;
  /**
   * Write the job record (state 'placed') with the last placement. Off when a job owner
   * (lifecycle.ts) keeps the job record itself, so the two never overwrite each other.
   */
  recordJob: boolean;
  /**
   * Group commit: the most commit requests this agent keeps in flight. Jobs that become ready
   * while every slot is busy are decided when a slot frees up and leave together, in one request
   * of nested transactions (see store/group-commit.ts). 0 sends one transaction per decision, at
   * once, however many are in flight.
   */
  groupCommit: number;
}

export const DEFAULT_AGENT_CONFIG: AgentConfig = {
  ...DEFAULT_CORE_CONFIG,
  conflictScope: 'ru',
  maxRetries: 6,
  backoffBaseMs: 1,
  backoffMaxMs: 100,
  buckets: DEFAULT_BUCKETS,
  historyWindowMs: 2 * 3600_000,
  recheckMs: 1000,
  consumeQueue: true,
  recordJob: true,
  groupCommit: 2,
};

import type { DecisionRecord, Placement } from '../state/decisions.ts';
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
 * A scheduling agent (paper §5.1): a cached copy of the shared state, the scheduling core, and an
 * optimistic commit per decision. Any number of agents may share one store.
 */
export class SchedulingAgent {
  readonly id: string;
  readonly state = new ClusterState();
  readonly admission: AdmissionState;
  readonly cache: AgentCache;
  readonly config: AgentConfig;
  private readonly store: ClusterStore;
  private readonly keys: Keys;
  private readonly clock: Clock;
  private readonly rng: Rng;
  private readonly log: Logger;
  private readonly core: CoreContext;
  /** Placement commits go through here (group commit), or straight to the store when off. */
  private readonly committer: { txn: ClusterStore['txn'] };
  private readonly groupCommit: GroupCommit | undefined;
  private commitSeq = 0;
  private closed = false;
  private queueFollower: Follower | undefined;
  /** Server scope: the latest in-flight commit of this agent per server (see chainServerCommits). */
  private readonly serverTails = new Map<string, { base: number; result: Promise<number | undefined> }>();
  private readonly background = new Set<Promise<unknown>>();
  private readonly onCommitted: AgentOptions['onCommitted'];
  private readonly fences = new Map<string, JobFence>();
  private readonly aborted = new Set<string>();
  /** Jobs waiting for a freed RU, by job: abort() wakes them. */
  private readonly wakers = new Map<string, Set<() => void>>();
  /** Decisions in progress, by job: what `explain` shows for a job still waiting. */
  readonly inflight = new Map<string, DecisionRecord>();
  /** Counters for metrics and benchmarks. */
  readonly stats = { commits: 0, conflicts: 0, tasksPlaced: 0, readmissions: 0, preemptions: 0, rescheduled: 0 };

  constructor(opts: AgentOptions) {
    this.id = opts.id;
    this.store = opts.store;
    this.keys = opts.keys;
    this.clock = opts.clock;
    this.rng = opts.rng;
    this.log = opts.log.child({ agent: opts.id });
    this.config = { ...DEFAULT_AGENT_CONFIG, ...opts.config };
    this.admission = new AdmissionState({
      buckets: this.config.buckets,
      clock: this.clock,
      historyWindowMs: this.config.historyWindowMs,
      seed: 0x7a3c11,
    });
    wireAdmission(this.state, this.admission);
    // Under the `ru` scope nothing compares server epochs (commits still bump them, for agents
    // using the `server` scope): following them would double the watch traffic for nothing.
    this.cache = new AgentCache({
      store: this.store,
      keys: this.keys,
      state: this.state,
      clock: this.clock,
      log: this.log,
      watchEpochs: this.config.conflictScope === 'server',
    });
    this.core = { state: this.state, admission: this.admission, rng: this.rng, clock: this.clock };
    this.onCommitted = opts.onCommitted;
    this.groupCommit = this.config.groupCommit > 0 ? new GroupCommit(this.store, { maxInFlight: this.config.groupCommit }) : undefined;
    this.committer = this.groupCommit ?? this.store;
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
    await this.cache.start();
    if (this.config.consumeQueue) await this.startQueueConsumer();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.queueFollower?.close();
    await this.cache.close();
    await Promise.allSettled([...this.background]);
  }

  /** Persists the job (so any agent can reschedule its tasks later), then schedules it. */
  async submit(job: JobSpec): Promise<DecisionRecord> {
    const rec: JobRecord = { spec: job, state: 'queued', placed: 0, updatedAt: this.clock.now() };
    await this.store.put(this.keys.job(job.id), JSON.stringify(rec));
    return this.schedule(job);
  }

  /**
   * Preempted tasks wait in the durable queue (`queue/…`, reason 'preempted'). Every agent
   * watches it; one claims an entry by deleting it in a transaction that compares its revision,
   * then reschedules the task from the job's stored spec. A task whose spec cannot be found is
   * marked failed with the reason: it never disappears silently.
   */
  private async startQueueConsumer(): Promise<void> {
    this.queueFollower = new Follower({
      store: this.store,
      clock: this.clock,
      rng: this.rng,
      log: this.log,
      prefix: this.keys.queue(),
      onSnapshot: (kvs) => {
        for (const kv of kvs) this.onQueueEntry(kv);
      },
      onEvent: (kv, deleted) => {
        if (!deleted) this.onQueueEntry(kv);
      },
    });
    await this.queueFollower.start();
  }

  private onQueueEntry(kv: KeyValue): void {
    const entry = parseJson<{ job: string; tasks?: number[]; reason?: string }>(kv);
    if (!entry || entry.reason !== 'preempted' || !Array.isArray(entry.tasks)) return;
    const p = this.claimAndReschedule(kv, entry.job, entry.tasks).catch((err: unknown) => {
      this.log.error({ err: (err as Error).message, job: entry.job }, 'rescheduling a preempted task failed');
    });
    this.background.add(p);
    void p.finally(() => this.background.delete(p));
  }

  private async claimAndReschedule(kv: KeyValue, jobId: string, tasks: number[]): Promise<void> {
    const k = this.keys;
    const claim = await this.store.txn({
      compare: [{ key: kv.key, target: 'mod', op: '==', value: kv.modRevision }],
      success: [{ type: 'delete', key: kv.key }, { type: 'get', key: k.job(jobId) }],
    });
    if (!claim.succeeded || this.closed) return; // another agent took it
    const job = parseJson<JobRecord>(claim.responses[1]?.[0]);
    if (!job) {
      for (const t of tasks) {
        await this.store.put(
          k.task(jobId, t),
          JSON.stringify({ job: jobId, index: t, state: 'failed', attempt: 1, message: 'preempted, and the job spec was not found to reschedule it' }),
        );
      }
      this.log.error({ job: jobId, tasks }, 'preempted task has no job spec; marked failed');
      return;
    }
    this.stats.rescheduled += tasks.length;
    await this.schedule(job.spec, tasks);
  }

  /**
   * Places the given tasks of a job (all of them by default). Resolves when every task is placed;
   * a job is never dropped: failed commits resample, exhausted retries go back to admission.
   */
  async schedule(job: JobSpec, taskIndices?: number[]): Promise<DecisionRecord> {
    const target = jobTarget(job.profile.caused);
    const rec: DecisionRecord = {
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
    this.inflight.set(job.id, rec);
    try {
      await this.scheduleWith(job, target, rec, taskIndices);
    } finally {
      if (this.inflight.get(job.id) === rec) this.inflight.delete(job.id);
    }
    rec.finishedAt = this.clock.now();
    return rec;
  }

  private async scheduleWith(job: JobSpec, target: JobTarget, rec: DecisionRecord, taskIndices: number[] | undefined): Promise<void> {
    const pending = taskIndices ? [...taskIndices] : Array.from({ length: job.tasks }, (_, i) => i);
    const gangSize = pending.length;
    if (job.mode === 'gang') {
      const capacity = this.eligibleCapacity(job);
      if (gangSize > capacity) {
        throw new TarcilError('FAILED_PRECONDITION', `tasks: a gang of ${gangSize} tasks exceeds the ${capacity} RUs eligible for it`, {
          field: 'tasks',
        });
      }
    }
    if (job.mode === 'gang' && gangSize > this.picksPerTxn) {
      await this.scheduleGangReserved(job, target, pending, rec);
    } else {
      await this.scheduleIncremental(job, target, pending, rec, job.mode === 'gang');
    }
  }

  private async scheduleIncremental(
    job: JobSpec,
    target: JobTarget,
    pending: number[],
    rec: DecisionRecord,
    allAtOnce: boolean,
  ): Promise<void> {
    const waiting = new WaitingEntry(this.store, this.keys, job, this.id, this.clock);
    try {
      await this.placeIncremental(job, target, pending, rec, allAtOnce, waiting);
    } finally {
      await waiting.remove();
    }
  }

  /** The live driver of the attempt loop (attempt.ts): awaits on the store and the clock. */
  private async placeIncremental(
    job: JobSpec,
    target: JobTarget,
    pending: number[],
    rec: DecisionRecord,
    allAtOnce: boolean,
    waiting: WaitingEntry,
  ): Promise<void> {
    const at = new Attempt(this.config, this.rng, job.maxQueueMs);
    // `next` is the first task not yet placed: chunks place a prefix of what is left, so a
    // cursor replaces removing placed tasks from the array (quadratic for 100,000-task jobs).
    let next = 0;
    while (next < pending.length) {
      this.assertOpen(job.id);
      const left = pending.length - next;
      if (!at.admitted) await this.admit(job, target, left, rec, at, waiting);
      const chunk = pending.slice(next, next + this.picksPerTxn);
      const { placed, then } = await this.commitChunk(job, target, chunk, rec, at, allAtOnce, left === chunk.length);
      next += placed.length;
      if (then.kind === 'go' || next >= pending.length) continue;
      if (!at.admitted) {
        rec.readmissions++;
        this.stats.readmissions++;
        await waiting.ensure(pending.length - next);
      }
      if (then.kind === 'capacity-wait') {
        await this.waitForCapacity(rec, job, then.ms);
      } else {
        const q0 = this.clock.now();
        await this.clock.sleep(then.ms);
        rec.stageMs.queue += this.clock.now() - q0;
      }
    }
  }

  /**
   * Admission control: queue while acceptable RUs are scarce and the estimated wait is below its
   * bound; never longer than the job's maxQueueMs. The durable queue entry lets another agent see
   * (and, with ownership, adopt) the waiting job.
   */
  private async admit(job: JobSpec, target: JobTarget, needed: number, rec: DecisionRecord, at: Attempt, waiting: WaitingEntry): Promise<void> {
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
      const verdict = admissionVerdict(this.core, job, target, want, this.config, capacity);
      rec.stageMs.admission += this.clock.monotonic() - t0;
      rec.admission.push(verdict);
      // Keep the first verdict and the latest ones: enough to explain a long wait.
      if (rec.admission.length > 20) rec.admission.splice(1, 1);
      const then = at.afterVerdict(verdict, this.clock.now());
      if (then.kind === 'go') return;
      await waiting.ensure(needed);
      rec.waiting = `queued by admission control until enough free RUs would run it well (at most ${job.maxQueueMs} ms; see explain)`;
      const q0 = this.clock.now();
      await this.waitFreed(then.ms, job.id);
      delete rec.waiting;
      this.assertOpen(job.id);
      rec.queuedMs += this.clock.now() - q0;
      rec.stageMs.queue += this.clock.now() - q0;
    }
  }

  private async waitForCapacity(rec: DecisionRecord, job: JobSpec, ms = this.config.recheckMs): Promise<void> {
    const jobId = job.id;
    const q0 = this.clock.now();
    const spread = job.locality.mode === 'spread' && job.locality.required !== false;
    rec.waiting = `waiting for a free RU it may use${spread ? ` on a ${job.locality.scope} without a task of this job (spread is required)` : ''}`;
    await this.waitFreed(ms, jobId);
    delete rec.waiting;
    rec.stageMs.queue += this.clock.now() - q0;
    rec.queuedMs += this.clock.now() - q0;
    this.assertOpen(jobId);
  }

  /** Waits until an RU frees, `ms` passes, or the job is aborted (cancel must not wait for RUs). */
  private waitFreed(ms: number, jobId: string): Promise<void> {
    if (this.aborted.has(jobId)) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        timer.cancel();
        off();
        this.wakers.get(jobId)?.delete(done);
        if (this.wakers.get(jobId)?.size === 0) this.wakers.delete(jobId);
        resolve();
      };
      const timer = this.clock.setTimer(ms, done);
      const off = this.cache.onFreed(done);
      let set = this.wakers.get(jobId);
      if (!set) this.wakers.set(jobId, (set = new Set()));
      set.add(done);
    });
  }

  /**
   * Selects and commits one chunk of tasks; conflicting picks are resampled with a fresh draw after
   * the attempt loop's backoff. Returns the task indices placed and what the attempt loop says
   * comes next (go on, wait for a freed RU, or back off after a return to admission).
   */
  private async commitChunk(
    job: JobSpec,
    target: JobTarget,
    chunk: number[],
    rec: DecisionRecord,
    at: Attempt,
    allOrNothing: boolean,
    lastChunk: boolean,
  ): Promise<{ placed: number[]; then: Next }> {
    let keep: Pick[] = [];
    try {
      for (;;) {
        this.assertOpen(job.id);
        // With group commit, decide only when the decision can leave at once: a decision that
        // waited in the queue would reach the store staler, and conflict more.
        const t0 = this.clock.monotonic();
        await this.groupCommit?.turn();
        this.assertOpen(job.id);
        rec.stageMs.commit += this.clock.monotonic() - t0;
        // A survivor that a rival took meanwhile (the watch replaced our claim with its write)
        // would only conflict again: resample it too.
        keep = keep.filter((p) => this.state.isClaimed({ server: p.server.id, index: p.index }));
        const need = chunk.length - keep.length;
        const d = decide(this.core, job, target, need, this.config, {
          skipAdmission: true,
          exclude: new Set(keep.map((p) => p.id)),
        });
        rec.stageMs.size += d.stageUs.size / 1000;
        rec.stageMs.select += d.stageUs.select / 1000;
        rec.samples.push({ R: d.R, f: d.f, candidates: d.selection.candidatesSeen });
        if (rec.samples.length > 50) rec.samples.splice(1, 1);
        const picks = keep.concat(d.selection.picks);
        const sel = at.afterSelection(picks.length, chunk.length, allOrNothing);
        if (sel.kind !== 'go') return { placed: [], then: sel };
        const tasks = chunk.slice(0, picks.length);
        const c0 = this.clock.monotonic();
        const res = await this.tryCommit(job, tasks, picks, rec, lastChunk && tasks.length === chunk.length, 'busy');
        rec.stageMs.commit += this.clock.monotonic() - c0;
        if (res.ok) {
          keep = [];
          return { placed: tasks, then: at.afterCommit({ placed: tasks.length, conflicts: 0, asked: chunk.length }) };
        }
        // Incremental: picks the store confirmed unchanged stay chosen (and claimed); only the
        // conflicting ones are resampled.
        keep = res.survivors;
        const then = at.afterCommit({ placed: 0, conflicts: Math.max(1, picks.length - keep.length), asked: chunk.length });
        if (!at.admitted) return { placed: [], then };
        rec.retries++;
        await this.clock.sleep(then.kind === 'backoff' ? then.ms : 0);
      }
    } finally {
      if (keep.length > 0) this.state.batch(() => keep.forEach((p) => this.state.unclaim({ server: p.server.id, index: p.index })));
    }
  }

  /**
   * One optimistic transaction: compare the revisions the choice was based on (RU keys, or server
   * epochs under the `server` scope), write RU, task and epoch records. On failure the else
   * branch reads what we compared so the cache refreshes exactly that, then we resample.
   */
  private async tryCommit(
    job: JobSpec,
    tasks: number[],
    picks: Pick[],
    rec: DecisionRecord,
    finalForJob: boolean,
    ruState: 'busy' | 'reserved',
  ): Promise<{ ok: true } | { ok: false; survivors: Pick[] }> {
    const now = this.clock.now();
    const commitId = `${this.id}:${++this.commitSeq}`;
    const k = this.keys;
    const compare: Compare[] = [];
    const success: Op[] = [];
    const failure: Op[] = [];
    const servers = new Map<string, number>();
    for (const p of picks) if (!servers.has(p.server.id)) servers.set(p.server.id, p.epochRev);
    // Claim the picks locally until the commit resolves, so this agent's other in-flight
    // decisions do not choose them too (or score their neighbours as empty). The claim holds the
    // occupant the commit writes, so applying our own commit changes nothing more in the cache.
    const refs = picks.map((p) => ({ server: p.server.id, index: p.index }));
    picks.forEach((p, i) => {
      const ref = refs[i] as RuRef;
      // Survivors of a previous attempt are still claimed by us.
      if (!this.state.isClaimed(ref)) {
        this.state.claim(ref, { job: job.id, task: tasks[i] as number, caused: job.profile.caused, priority: job.priority, state: ruState });
      }
    });
    const chained = this.config.conflictScope === 'server' ? await this.chainServerCommits(servers) : undefined;
    if (chained === false) {
      this.state.batch(() => refs.forEach((r) => this.state.unclaim(r)));
      rec.conflicts++;
      this.stats.conflicts++;
      return { ok: false, survivors: [] };
    }
    if (this.config.conflictScope === 'server') {
      for (const [sid, rev] of servers) {
        compare.push({ key: k.epoch(sid), target: 'mod', op: '==', value: rev });
        failure.push({ type: 'get', key: k.epoch(sid) });
        failure.push({ type: 'get', key: k.serverRus(sid), prefix: true });
      }
    } else {
      // On a conflict, read only the picks. Reading their servers' other RUs too (a rival that
      // took one pick has often taken its neighbours) avoids a few conflicts but costs more CPU
      // to parse than the retries it saves (bench/commit-etcd.ts, 3 agents, 8-task jobs).
      for (const p of picks) {
        const key = k.ru({ server: p.server.id, index: p.index });
        compare.push({ key, target: 'mod', op: '==', value: p.ruRev });
        failure.push({ type: 'get', key });
      }
    }
    const fence = this.fences.get(job.id);
    if (fence) {
      compare.push({ key: fence.key, target: 'lease', op: '==', value: fence.lease });
      failure.push({ type: 'get', key: fence.key });
    }
    const ruRecords: { key: string; rec: PlacedRuRecord }[] = [];
    picks.forEach((p, i) => {
      const task = tasks[i] as number;
      const ref = { server: p.server.id, index: p.index };
      const ruRec: PlacedRuRecord = {
        state: ruState,
        job: job.id,
        task,
        caused: job.profile.caused,
        priority: job.priority,
        agent: this.id,
        since: now,
        attempt: 0,
        basedOn: servers.get(p.server.id) ?? p.epochRev,
        commitId,
        ...(job.durationMs !== undefined ? { durationMs: job.durationMs } : {}),
      };
      ruRecords.push({ key: k.ru(ref), rec: ruRec });
      success.push({ type: 'put', key: k.ru(ref), value: JSON.stringify(ruRec) });
      const taskRec: PlacedTaskRecord = {
        job: job.id,
        index: task,
        state: 'placed',
        ru: ref,
        attempt: 0,
        placedAt: now,
        basedOn: servers.get(p.server.id) ?? p.epochRev,
        commitId,
        agent: this.id,
      };
      success.push({ type: 'put', key: k.task(job.id, task), value: JSON.stringify(taskRec) });
      if (p.victim) {
        // The displaced task goes back to the durable queue: nothing is lost.
        success.push({
          type: 'put',
          key: k.task(p.victim.job, p.victim.task),
          value: JSON.stringify({ job: p.victim.job, index: p.victim.task, state: 'queued', attempt: 1, message: `preempted by ${job.id}` }),
        });
        success.push({
          type: 'put',
          key: k.queueEntry(p.victim.priority, now, `${p.victim.job}#${p.victim.task}`),
          value: JSON.stringify({ job: p.victim.job, tasks: [p.victim.task], reason: 'preempted', by: job.id }),
        });
      }
    });
    for (const sid of servers.keys()) success.push({ type: 'put', key: k.epoch(sid), value: commitId });
    if (finalForJob && this.config.recordJob) {
      const jobRec: JobRecord = { spec: job, state: 'placed', placed: job.tasks, updatedAt: now };
      success.push({ type: 'put', key: k.job(job.id), value: JSON.stringify(jobRec) });
    }
    const req: TxnRequest = { compare, success, failure };
    let res;
    try {
      res = await this.committer.txn(req);
    } catch (err) {
      // The outcome is unknown (the store may have applied it before the error). Find out from
      // the store before trying anything else: a blind retry could place the tasks twice.
      res = await this.resolveIndeterminate(job.id, tasks[0] as number, commitId, err);
      if (!res) {
        chained?.settle(undefined);
        this.state.batch(() => refs.forEach((r) => this.state.unclaim(r)));
        rec.conflicts++;
        return { ok: false, survivors: [] };
      }
    }
    this.stats.commits++;
    chained?.settle(res.succeeded ? res.revision : undefined);
    if (res.succeeded) {
      // Apply our own writes now: the watch will confirm them, but the next decision must not
      // see these RUs as free in the meantime.
      this.state.batch(() => {
        for (const r of ruRecords) this.cache.applyKv(kvAt(r.key, JSON.stringify(r.rec), res.revision));
        for (const sid of servers.keys()) this.cache.applyKv(kvAt(k.epoch(sid), commitId, res.revision));
      });
      picks.forEach((p, i) => {
        const pl: Placement = {
          task: tasks[i] as number,
          ru: { server: p.server.id, index: p.index },
          Q: p.quality.Q,
          acceptable: p.quality.acceptable,
          score: p.score,
          commitRevision: res.revision,
        };
        if (p.victim) {
          pl.preempted = { job: p.victim.job, task: p.victim.task, priority: p.victim.priority };
          this.stats.preemptions++;
        }
        rec.placements.push(pl);
      });
      this.stats.tasksPlaced += picks.length;
      this.onCommitted?.(job, rec.placements.slice(-picks.length));
      return { ok: true };
    }
    if (fence) {
      const cur = res.responses[res.responses.length - 1]?.[0];
      if (!cur || cur.lease !== fence.lease) {
        this.state.batch(() => refs.forEach((r) => this.state.unclaim(r)));
        this.aborted.add(job.id);
        throw new TarcilError('CANCELLED', `job ${job.id} is no longer owned through lease ${fence.lease}`);
      }
    }
    rec.conflicts++;
    this.stats.conflicts++;
    // Apply the fresh reads first: a changed RU (or server, under the server scope) replaces our
    // claim with its real state; an unchanged one keeps our claim and stays a valid pick.
    const survivors: Pick[] = [];
    this.state.batch(() => {
      for (const r of res.responses) for (const kv of r ?? []) this.cache.applyKv(kv);
      picks.forEach((p, i) => {
        const ref = refs[i] as RuRef;
        const unchanged =
          this.config.conflictScope === 'server'
            ? p.server.epochRev === servers.get(p.server.id)
            : p.server.ruRevs[p.index] === p.ruRev;
        if (unchanged && this.state.isClaimed(ref)) survivors.push(p);
        else this.state.unclaim(ref);
      });
    });
    this.log.debug({ job: job.id, conflicts: rec.conflicts, kept: survivors.length }, 'commit conflict; resampling the rest');
    return { ok: false, survivors };
  }

  /**
   * Server scope: a decision that read server S at epoch E while this agent's own commit on S
   * (also based on E) is in flight has already counted that commit's RUs as neighbours (they are
   * claimed). If that commit succeeds, the neighbourhood is exactly what was scored, so this
   * decision compares against the epoch revision that commit produced instead of conflicting
   * with its own agent. Returns false if an earlier commit it depends on failed, otherwise a
   * handle to settle once this commit resolves.
   */
  private async chainServerCommits(servers: Map<string, number>): Promise<false | { settle(rev: number | undefined): void }> {
    let settle!: (rev: number | undefined) => void;
    const done = new Promise<number | undefined>((r) => (settle = r));
    const waits: [string, Promise<number | undefined>][] = [];
    for (const [sid, epoch] of servers) {
      const tail = this.serverTails.get(sid);
      if (tail && tail.base === epoch) waits.push([sid, tail.result]);
      this.serverTails.set(sid, { base: epoch, result: done });
    }
    const handle = {
      settle: (rev: number | undefined): void => {
        settle(rev);
        for (const sid of servers.keys()) if (this.serverTails.get(sid)?.result === done) this.serverTails.delete(sid);
      },
    };
    for (const [sid, result] of waits) {
      const after = await result;
      if (after === undefined) {
        handle.settle(undefined);
        return false;
      }
      servers.set(sid, after);
    }
    return handle;
  }

  /**
   * After a failed transaction call: did our commit land? Reads the first task's record (written
   * by the same transaction) until the store answers. Returns a success result carrying the
   * commit's revision, or undefined if the commit did not happen.
   */
  private async resolveIndeterminate(jobId: string, task: number, commitId: string, cause: unknown): Promise<{ succeeded: true; revision: number; responses: [] } | undefined> {
    this.log.warn({ job: jobId, err: (cause as Error).message }, 'commit outcome unknown; checking the store');
    let delay = this.config.backoffBaseMs * 10;
    for (;;) {
      this.assertOpen(jobId);
      try {
        const kv = await this.store.get(this.keys.task(jobId, task));
        const t = parseJson<PlacedTaskRecord>(kv);
        if (kv && t?.commitId === commitId) return { succeeded: true, revision: kv.modRevision, responses: [] };
        return undefined;
      } catch {
        await this.clock.sleep(delay);
        delay = Math.min(delay * 2, 2000);
      }
    }
  }

  /**
   * Gang jobs larger than one transaction: reserve chunk by chunk (RUs marked `reserved`, invisible
   * to other agents' sampling), then turn every reservation into a placement. If a chunk cannot be
   * reserved after its retries, every reservation is released and the whole job goes back to
   * admission: all or nothing, across several transactions.
   */
  private async scheduleGangReserved(job: JobSpec, target: JobTarget, pending: number[], rec: DecisionRecord): Promise<void> {
    const waiting = new WaitingEntry(this.store, this.keys, job, this.id, this.clock);
    try {
      await this.reserveAndConfirm(job, target, pending, rec, waiting);
    } finally {
      await waiting.remove();
    }
  }

  private async reserveAndConfirm(job: JobSpec, target: JobTarget, pending: number[], rec: DecisionRecord, waiting: WaitingEntry): Promise<void> {
    const at = new Attempt(this.config, this.rng, job.maxQueueMs);
    for (;;) {
      this.assertOpen(job.id);
      if (!at.admitted) await this.admit(job, target, pending.length, rec, at, waiting);
      const reserved: Placement[] = [];
      let then: Next = { kind: 'go' };
      try {
        for (let off = 0; off < pending.length; off += this.picksPerTxn) {
          this.assertOpen(job.id);
          const chunk = pending.slice(off, off + this.picksPerTxn);
          const before = rec.placements.length;
          then = await this.reserveChunk(job, target, chunk, rec, at);
          if (then.kind !== 'go') break;
          reserved.push(...rec.placements.splice(before));
        }
      } catch (err) {
        // Stopped mid-way (cancelled, closed, store error): give back what we reserved, if we
        // still may. Whatever is left is reconciled by the job's owner (JobManager), or by the
        // process that adopts the job.
        await this.releaseReservations(job, reserved).catch((e: unknown) =>
          this.log.warn({ job: job.id, err: (e as Error).message }, 'could not release gang reservations; the owner will'),
        );
        throw err;
      }
      if (then.kind === 'go') {
        await this.confirmReservations(job, reserved, rec);
        return;
      }
      // All or nothing: give every reservation back, then wait as the attempt loop says.
      await this.releaseReservations(job, reserved);
      at.readmit();
      rec.readmissions++;
      this.stats.readmissions++;
      await waiting.ensure(pending.length);
      if (then.kind === 'backoff') {
        const q0 = this.clock.now();
        await this.clock.sleep(then.ms);
        rec.stageMs.queue += this.clock.now() - q0;
      } else {
        await this.waitForCapacity(rec, job, then.ms);
      }
    }
  }

  /** Reserves one chunk of a gang, all or nothing; conflicts resample after the loop's backoff. */
  private async reserveChunk(job: JobSpec, target: JobTarget, chunk: number[], rec: DecisionRecord, at: Attempt): Promise<Next> {
    for (;;) {
      this.assertOpen(job.id);
      const d = decide(this.core, job, target, chunk.length, { ...this.config, preemption: false }, { skipAdmission: true });
      const sel = at.afterSelection(d.selection.picks.length, chunk.length, true);
      if (sel.kind !== 'go') return sel;
      const res = await this.tryCommit(job, chunk, d.selection.picks, rec, false, 'reserved');
      if (res.ok) return at.afterCommit({ placed: chunk.length, conflicts: 0, asked: chunk.length });
      this.state.batch(() => res.survivors.forEach((p) => this.state.unclaim({ server: p.server.id, index: p.index })));
      const then = at.afterCommit({ placed: 0, conflicts: Math.max(1, d.selection.picks.length - res.survivors.length), asked: chunk.length });
      if (!at.admitted) return then;
      rec.retries++;
      await this.clock.sleep(then.kind === 'backoff' ? then.ms : 0);
    }
  }

  private async confirmReservations(job: JobSpec, reserved: Placement[], rec: DecisionRecord): Promise<void> {
    const k = this.keys;
    const per = this.picksPerTxn;
    for (let off = 0; off < reserved.length; off += per) {
      const part = reserved.slice(off, off + per);
      const last = off + per >= reserved.length;
      const compare: Compare[] = part.map((r) => ({ key: k.ru(r.ru), target: 'mod', op: '==', value: r.commitRevision }));
      const success: Op[] = [];
      const now = this.clock.now();
      const current = await this.store.txn({ compare: [], success: part.map((r) => ({ type: 'get' as const, key: k.ru(r.ru) })) });
      current.responses.forEach((kvs) => {
        const kv = kvs?.[0];
        if (!kv) return;
        const ru = JSON.parse(kv.value) as PlacedRuRecord;
        success.push({ type: 'put', key: kv.key, value: JSON.stringify({ ...ru, state: 'busy', since: now }) });
      });
      for (const sid of new Set(part.map((r) => r.ru.server))) success.push({ type: 'put', key: k.epoch(sid), value: `${this.id}:gang` });
      if (last && this.config.recordJob) {
        const jobRec: JobRecord = { spec: job, state: 'placed', placed: job.tasks, updatedAt: now };
        success.push({ type: 'put', key: k.job(job.id), value: JSON.stringify(jobRec) });
      }
      const fence = this.fences.get(job.id);
      const failure: Op[] = [];
      if (fence) {
        compare.push({ key: fence.key, target: 'lease', op: '==', value: fence.lease });
        failure.push({ type: 'get', key: fence.key });
      }
      const res = await this.store.txn({ compare, success, failure });
      if (!res.succeeded) {
        const cur = fence ? res.responses[0]?.[0] : undefined;
        if (fence && (!cur || cur.lease !== fence.lease)) {
          this.aborted.add(job.id);
          throw new TarcilError('CANCELLED', `job ${job.id} is no longer owned through lease ${fence.lease}`);
        }
        // Only the job's owner writes its reserved RUs; a mismatch means someone else changed
        // them (e.g. an operator reset). Surface it rather than guess: the owner reconciles.
        throw new TarcilError('INTERNAL', `gang reservation of job ${job.id} changed under its owner`);
      }
      for (const r of part) rec.placements.push({ ...r, commitRevision: res.revision });
    }
  }

  private async releaseReservations(job: JobSpec, reserved: Placement[]): Promise<void> {
    const k = this.keys;
    const fence = this.fences.get(job.id);
    for (const r of reserved) {
      await freeReservation(this.store, k, { ru: r.ru, ruRevision: r.commitRevision, job: job.id, task: r.task, by: this.id }, fence);
    }
  }

  /** RUs that could ever hold this job (constraints applied, down servers excluded). */
  eligibleCapacity(job: JobSpec): number {
    return eligibleCapacity(this.state, job.constraints);
  }

  private assertOpen(jobId?: string): void {
    if (this.closed) throw new TarcilError('CLOSED', `agent ${this.id} is closed`);
    if (jobId !== undefined && this.aborted.has(jobId)) throw new TarcilError('CANCELLED', `scheduling of job ${jobId} was stopped`);
  }
}

/**
 * The durable trace of a job that has to wait (admission queue, or no eligible RU free): a key
 * under `queue/`, ordered by priority then arrival, removed once the job is placed. It names the
 * agent that holds the job, so operators (and adopting agents) can see every waiting job.
 */
class WaitingEntry {
  private key: string | undefined;
  constructor(
    private readonly store: ClusterStore,
    private readonly keys: Keys,
    private readonly job: JobSpec,
    private readonly agent: string,
    private readonly clock: Clock,
  ) {}
  async ensure(needed: number): Promise<void> {
    if (this.key) return;
    const since = this.clock.now();
    this.key = this.keys.queueEntry(this.job.priority, since, this.job.id);
    await this.store.put(this.key, JSON.stringify({ job: this.job.id, agent: this.agent, needed, since, reason: 'waiting' }));
  }
  async remove(): Promise<void> {
    if (!this.key) return;
    const key = this.key;
    this.key = undefined;
    await this.store.delete(key);
  }
}

function kvAt(key: string, value: string, rev: number): KeyValue {
  return { key, value, createRevision: rev, modRevision: rev, version: 1, lease: '0' };
}
