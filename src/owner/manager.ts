/**
 * The job owner of one process (JobManager): holds an owner lease, follows servers, the cell's
 * members and the RUs (through the agents' view), and drives each job it owns to a final state.
 * Its parts live in `owner/`: submission, membership, adoption, evaluation, task transitions, the
 * summary, decision records.
 */
import type { JobSpec, JobState } from '../model/types.ts';
import type { KeyValue } from '../store/types.ts';
import { errorMessage, isTransient, TarcilError } from '../util/errors.ts';
import { SchedulingAgent, type DecisionRecord, type Placement } from '../agent/agent.ts';
import { agentConfig } from '../agent/config.ts';
import { SharedView } from '../agent/shared-view.ts';
import type { RunTimes } from '../agent/wait-order.ts';
import { Follower } from '../state/follow.ts';
import { ProfileBook } from '../state/profiles.ts';
import { LiveKeys, type LiveJobRecord, type LiveServerRecord, type LiveTaskRecord } from '../state/live-records.ts';
import { KnownCell, sameShape, type Feasibility } from '../agent/cell.ts';
import { DEFAULT_LEASE_TTL_S, HeldLease } from '../state/lease.ts';
import { parseJson } from '../state/records.ts';
import {
  DEFAULT_DEPARTED_MEMORY_MS,
  DEFAULT_LAUNCH_AFTER_MS,
  DEFAULT_MAX_PENDING_TASKS,
  DEFAULT_UNPLACEABLE_TIMEOUT_MS,
  type JobManagerOptions,
  type OwnerContext,
  type OwnerStats,
} from './context.ts';
import { mergeTask, OwnedJobs, type AdoptWindow, type Owned } from './job.ts';
import { dropJob } from './fence.ts';
import { scan } from './adoption.ts';
import { LAYOUT_VERSION, readLayout, upgradeLayout } from './layout.ts';
import { Members } from './members.ts';
import { AdoptionGate } from './adoption-gate.ts';
import { persistProgress } from './decisions.ts';
import { evaluateJob } from './evaluate.ts';
import { EVAL_RETRY_MAX_MS, EVAL_RETRY_MIN_MS, JobQueue } from './job-queue.ts';
import { SharedBackoff } from '../util/backoff.ts';
import { Background } from '../util/background.ts';
import { cancelJob, submitJob, type SubmitOptions, type SubmitResult } from './submit.ts';
import { takeRecord } from './summary.ts';
import { newMoveStats, onReport, type MoveHost, type MoveStats } from './moves.ts';
import { onRuChange, SWEEP_MS, TaskRefresher } from './ru-events.ts';
import { RecentEnds } from './recent-ends.ts';
import { MoveBudget, runtimeLoopConfig, type RuntimeLoopConfig } from '../monitor/runtime-loop.ts';
import { SEEN_REFRESH_MS } from './plan.ts';

export type { JobManagerOptions, NodeLink } from './context.ts';

/**
 * How often the owner records are scanned for jobs to adopt, besides when a member goes (and
 * after a failed adoption or a submission of unknown outcome): a backstop, since each scan reads
 * the owner record of every job not yet final.
 */
const SCAN_EVERY_MS = 30_000;
export type { SubmitResult } from './submit.ts';

/**
 * Job lifecycle and ownership for the agents of one process.
 *
 * Ownership: a job is owned through `owners/<job>`, a record naming this process's lease, created
 * in the same transaction as the job record, so an acknowledged job always has an owner. The
 * process is present through `members/<lease>`, bound to that lease (owner/members.ts); when the
 * lease ends, the others see the member go, read the owner records and race to rewrite those that
 * name it (owner/adoption.ts). The winner adopts the job: it reads the job's tasks and carries on
 * from them. Nobody follows every job's records: an owner knows its own, and learns of a
 * cancellation from its mark in `cancels/`.
 *
 * Fencing: every write for an owned job compares our member key's lease (placement commits through
 * SchedulingAgent.setFence, job records, task state changes), so an owner that was paused past its
 * TTL cannot write after its successor has taken over; the RU record's revision
 * fences the monitors' writes for a task attempt. No task is ever placed unless the RU write
 * succeeds against the revision that was read, so a task has at most one RU at any revision.
 */
export class JobManager implements OwnerContext, MoveHost {
  readonly agents: SchedulingAgent[];
  /** The one cluster view (list+watch, admission counters, claims, waiting calls) its agents share. */
  readonly view: SharedView;
  readonly o: JobManagerOptions;
  readonly live: LiveKeys;
  readonly ttlSeconds: number;
  readonly departedMemoryMs: number;
  readonly unplaceableTimeoutMs: number;
  readonly seenRefreshMs: number;
  /** See JobManagerOptions.launchAfterMs. */
  readonly launchAfterMs: number;
  readonly maxPendingTasks: number;
  private held: HeldLease | undefined;
  readonly owned = new OwnedJobs();
  /** The cell's front-ends (members/) and the cancellations' marks (cancels/), followed. */
  readonly members: Members;
  /** Submissions whose transaction is in flight (their owner key may show up before the answer). */
  readonly submitting = new Set<string>();
  readonly servers = new Map<string, LiveServerRecord>();
  /** Every server of the cell: registered now, or gone within departedMemoryMs (see cell.ts). */
  readonly cell = new KnownCell();
  readonly adopting = new Set<string>();
  readonly adoptWindow = new Map<string, AdoptWindow>();
  readonly recentEnds: RecentEnds;
  readonly ownedOn = new Map<string, Set<Owned>>();
  readonly adoptions: AdoptionGate;
  /** The jobs to evaluate: every part adds a job it learnt something about; one evaluation at a time per job. */
  readonly queue: JobQueue<Owned>;
  readonly unseenSince = new Map<string, number>();
  private followers: Follower[] = [];
  /** Its timers and the promises it does not await (`close()` cancels the one, waits for the other). */
  private readonly bg: Background;
  private nextAgent = 0;
  closed = false;
  started = false;
  serving = false;
  readonly stats: OwnerStats = {
    submitted: 0,
    duplicates: 0,
    adopted: 0,
    lost: 0,
    rescheduled: 0,
    finished: 0,
    fencedLeases: 0,
    leasePauses: 0,
    launches: 0,
    taskReads: 0,
    historyReads: 0,
    sweptTasks: 0,
    outcomesFromRecentEnds: 0,
    outcomesCompacted: 0,
    outcomesCarried: 0,
  };
  /** The run-time loop's rules, and this process's budget of moves (owner/moves.ts). */
  readonly runtime: RuntimeLoopConfig;
  readonly moveBudget: MoveBudget;
  readonly moveStats: MoveStats = newMoveStats();
  /** Learned profiles: observations of this process's tasks, written to the store (state/profiles.ts). */
  readonly profiles: ProfileBook;
  readonly refresher: TaskRefresher;
  get runTimes(): RunTimes {
    return this.view.runTimes;
  }

  constructor(opts: JobManagerOptions) {
    this.o = opts;
    this.bg = new Background(opts.clock);
    this.live = new LiveKeys(opts.keys);
    this.recentEnds = new RecentEnds(opts.clock);
    this.ttlSeconds = opts.leaseTtlSeconds ?? DEFAULT_LEASE_TTL_S;
    this.departedMemoryMs = opts.departedMemoryMs ?? DEFAULT_DEPARTED_MEMORY_MS;
    this.unplaceableTimeoutMs = opts.unplaceableTimeoutMs ?? DEFAULT_UNPLACEABLE_TIMEOUT_MS;
    this.seenRefreshMs = opts.seenRefreshMs ?? SEEN_REFRESH_MS;
    this.launchAfterMs = opts.launchAfterMs ?? DEFAULT_LAUNCH_AFTER_MS;
    this.maxPendingTasks = opts.maxPendingTasks ?? DEFAULT_MAX_PENDING_TASKS;
    this.runtime = runtimeLoopConfig(opts.runtime);
    this.moveBudget = new MoveBudget(this.runtime, opts.clock.now());
    this.profiles = new ProfileBook({ store: opts.store, keys: opts.keys, clock: opts.clock, log: opts.log, ...opts.profiles });
    this.adoptions = new AdoptionGate(opts.clock, opts.rng);
    this.queue = this.newQueue();
    // The owner keeps the job record and reschedules preempted tasks itself.
    const config = { ...opts.agentConfig, recordJob: false, consumeQueue: false };
    this.view = new SharedView({ store: opts.store, keys: opts.keys, clock: opts.clock, log: opts.log, config: agentConfig(config) });
    this.members = new Members({
      store: opts.store,
      keys: opts.keys,
      clock: opts.clock,
      log: opts.log,
      process: opts.process,
      layout: LAYOUT_VERSION,
      endsSince: this.recentEnds.since,
      onGone: () => scan(this),
      onCancel: (job) => this.onCancel(job),
    });
    this.view.handoff.setDemand(this.members.demand);
    // The owner follows no task record: what happens to its tasks shows in the RUs (ru-events.ts).
    const state = this.view.state;
    this.refresher = new TaskRefresher(this, {
      holds: (ru, job, task) => {
        const occ = state.server(ru.server)?.occupants[ru.index];
        return !!occ && occ.job === job && occ.task === task;
      },
      revision: (ru) => state.server(ru.server)?.ruRevs[ru.index],
    });
    const observe = (o: Owned, observed: NonNullable<LiveTaskRecord['observed']>): void => this.profiles.observe(o.spec, observed);
    this.view.cache.onRu((kv, deleted, rec, prev, ref) => onRuChange(this, this.refresher, { kv, deleted, rec, prev, ref }, observe));
    const agentId = (i: number): string => `${opts.process}/a${i + 1}`;
    this.agents = Array.from(
      { length: Math.max(1, opts.agents) },
      (_, i) =>
        new SchedulingAgent({
          id: agentId(i),
          store: opts.store,
          keys: opts.keys,
          clock: opts.clock,
          rng: opts.rng.fork(),
          log: opts.log,
          config,
          view: this.view,
          onCommitted: (job, placements) => this.committed(job, placements, agentId(i)),
        }),
    );
  }

  /** The work queue: its evaluations, and when it holds them (not started yet; the lease unconfirmed). */
  private newQueue(): JobQueue<Owned> {
    return new JobQueue({
      run: (o) => evaluateJob(this, o),
      log: this.o.log,
      retries: new SharedBackoff(EVAL_RETRY_MIN_MS, EVAL_RETRY_MAX_MS, this.o.rng),
      later: (ms, fn) => this.later(ms, fn),
      track: (p) => this.track(p),
      closed: () => this.closed,
      // Taken before the agents started (see start): evaluated once they have.
      hold: () => (!this.started ? 'starting' : this.lease && !this.lease.confirmed ? 'paused' : undefined),
    });
  }

  get lease(): HeldLease | undefined {
    return this.held;
  }

  get leaseId(): string | undefined {
    return this.held?.id;
  }

  seenRevision(): number {
    return this.view.cache.revision;
  }

  memberGoneAt(lease: string): number | undefined {
    return this.members.goneAt(lease);
  }

  /** Tasks of the jobs owned here not yet placed (kept as their records change: OwnedJobs). */
  pendingTasks(): number {
    return this.owned.pending;
  }

  /** Jobs this process owns now. */
  ownedJobs(): string[] {
    return [...this.owned.keys()];
  }

  /** The jobs owned here, counted by the state of their record. */
  jobsByState(): Partial<Record<JobState, number>> {
    const out: Partial<Record<JobState, number>> = {};
    for (const o of this.owned.values()) out[o.rec.state] = (out[o.rec.state] ?? 0) + 1;
    return out;
  }

  /** The in-progress decision for a job owned here (what `explain` shows while it waits). */
  inflightDecision(jobId: string): DecisionRecord | undefined {
    const o = this.owned.get(jobId);
    return o?.agent.inflight.get(jobId);
  }

  /**
   * Takes the lease, lists what the owner follows, then loads the cluster view and starts the
   * agents; resolves once it schedules. `onServing` is called as soon as submissions can be taken
   * (the lease and the owner's followers: servers, members, reports), before the view of a
   * large cell is loaded; jobs taken meanwhile are evaluated once the agents have started.
   */
  async start(opts: { onServing?: () => void } = {}): Promise<void> {
    const layout = await readLayout(this.o.store, this.o.keys);
    await this.firstLease();
    const viewReady = this.view.start();
    this.followers = this.ownerFollowers();
    // The cluster view and the owner's followers list at once (a large cell takes a while).
    viewReady.catch(() => undefined);
    await Promise.all([...this.followers.map((f) => f.start()), this.members.start()]);
    const older = this.members.older();
    if (older.length > 0) {
      await this.close();
      throw new TarcilError(
        'FAILED_PRECONDITION',
        `front-ends of an older release run in this cell (${older.slice(0, 5).join(', ')}${older.length > 5 ? ', …' : ''}): they read task records this release no longer writes; stop every one of them, then start this release's (their jobs are adopted, nothing is lost)`,
      );
    }
    this.serving = true;
    opts.onServing?.();
    await viewReady;
    await Promise.all(this.agents.map((a) => a.start()));
    // Closed while the view loaded (a front-end stopped during its start): nothing more to start.
    if (this.closed) return;
    this.started = true;
    this.startWork(layout);
  }

  /** The owner's own followers: the servers (nodes joining and leaving) and the nodes' load reports. */
  private ownerFollowers(): Follower[] {
    const k = this.o.keys;
    const mk = (
      prefix: string,
      onSnapshot: (kvs: KeyValue[], revision: number) => void,
      onEvent: (kv: KeyValue, deleted: boolean, revision: number) => void,
    ): Follower => new Follower({ store: this.o.store, clock: this.o.clock, log: this.o.log, prefix, onSnapshot, onEvent });
    const each = (on: (kv: KeyValue, deleted: boolean) => void) => (kvs: KeyValue[]) => {
      for (const kv of kvs) on(kv, false);
    };
    return [
      mk(
        k.servers(),
        (kvs) => {
          this.servers.clear();
          for (const kv of kvs) this.onServer(kv, false);
          const now = this.o.clock.now();
          for (const [id, c] of this.cell) {
            if (!this.servers.has(id) && c.leftAt === undefined) Object.assign(c, { up: false, leftAt: now });
          }
          this.cell.version++;
        },
        (kv, del) => this.onServer(kv, del),
      ),
      mk(
        this.live.reports(),
        (kvs) => {
          for (const o of this.owned.values()) o.moves.slow.clear();
          each((kv, d) => onReport(this, kv, d))(kvs);
        },
        (kv, del) => onReport(this, kv, del),
      ),
    ];
  }

  /** Once the agents schedule: the jobs taken meanwhile, the first scan, the layout upgrade, and the owner's periodic work. */
  private startWork(layout: Awaited<ReturnType<typeof readLayout>>): void {
    this.queue.release((o) => this.owned.get(o.id) === o);
    scan(this);
    if (!layout.current)
      this.track(
        upgradeLayout(this, layout.rev).catch((err: unknown) =>
          this.o.log.warn({ err: errorMessage(err) }, 'store layout upgrade failed; the next start retries'),
        ),
      );
    // The members' watch starts a scan when one goes; this one is for what it cannot show.
    this.bg.every(SCAN_EVERY_MS, () => scan(this));
    this.bg.every(200, () => this.members.update(this.pendingTasks() > 0));
    this.bg.every(1000, () => persistProgress(this));
    this.bg.every(SWEEP_MS, () => (this.stats.sweptTasks += this.refresher.sweep()));
    this.track(this.profiles.refresh());
    this.bg.every(this.profiles.flushMs, () => this.track(this.profiles.flush()));
  }

  /**
   * Stops scheduling and gives up ownership at once (revoking the lease deletes every owner key,
   * so other processes adopt the jobs without waiting for the TTL).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.bg.stopTimers();
    for (const o of this.owned.values()) o.agent.abort(o.id);
    await Promise.all([...this.followers.map((f) => f.close()), this.members.close()]);
    await Promise.all(this.agents.map((a) => a.close()));
    await this.view.close();
    await this.bg.settled();
    await this.held?.revoke();
    this.owned.clear();
    this.ownedOn.clear();
  }

  /** Takes a job: stores it with its owner record (this process) and schedules it (owner/submit.ts submitJob); resolves once the job is durable. */
  accept(spec: JobSpec, opts: SubmitOptions = {}): Promise<SubmitResult> {
    return submitJob(this, spec, opts);
  }

  /** Requests cancellation (from any process); the job's owner stops its tasks. */
  cancel(jobId: string): Promise<LiveJobRecord> {
    return cancelJob(this, jobId);
  }

  /** Can the job run in the cell, and now? (see cell.ts) */
  feasibility(spec: JobSpec): Feasibility {
    return this.cell.feasibility(spec, this.o.clock.now(), this.departedMemoryMs);
  }

  pickAgent(): SchedulingAgent {
    const a = this.agents[this.nextAgent++ % this.agents.length];
    if (!a) throw new TarcilError('INTERNAL', 'no agents');
    return a;
  }

  later(ms: number, fn: () => void): void {
    this.bg.later(ms, fn);
  }

  track(p: Promise<unknown>): void {
    this.bg.track(p);
  }

  // ---------------------------------------------------------------------------------------------
  // Lease

  /**
   * The owner lease at start: a store that is slow or briefly unreachable (UNAVAILABLE,
   * DEADLINE_EXCEEDED) costs a pause, as after a fenced lease; other errors fail the start.
   */
  private async firstLease(): Promise<void> {
    for (let delay = 200; ; delay = Math.min(delay * 2, 3000)) {
      try {
        await this.grantLease();
        return;
      } catch (err) {
        if (this.closed || !isTransient(err)) throw err;
        this.o.log.warn({ err: errorMessage(err), delay }, 'cannot grant an owner lease; retrying');
        await this.o.clock.sleep(delay);
      }
    }
  }

  private async grantLease(): Promise<void> {
    this.held = await HeldLease.grant({
      store: this.o.store,
      clock: this.o.clock,
      log: this.o.log.child({ part: 'owner-lease' }),
      ttlSeconds: this.ttlSeconds,
      onFenced: () => this.onFenced(),
      rideOut: { onUnconfirmed: () => this.onPaused(), onConfirmed: () => this.onResumed() },
    });
    try {
      await this.members.join(this.held.id, this.pendingTasks() > 0);
    } catch (err) {
      await this.held.revoke().catch(() => undefined);
      throw err;
    }
    this.view.handoff.setSelf(this.held.id);
  }

  /**
   * No keepalive confirmed within the lease's budget (etcd restarting, unreachable or far behind):
   * the owner stops acting for its jobs at the moment it could no longer be sure of the lease,
   * but keeps them. Every write it might still have in flight is fenced by its owner keys, and
   * nothing it does outside etcd comes before a commit. Keepalives go on: if the store answers
   * that the lease lives (an etcd restart keeps leases and restarts their TTL), the owner
   * resumes (onResumed); if it answers that the lease is gone, the jobs go (onFenced). Giving the
   * jobs up at once instead, as a lease timer alone would suggest, makes every front-end of the
   * cell re-adopt every job after each etcd restart.
   */
  private onPaused(): void {
    this.stats.leasePauses++;
    this.o.log.warn({ lease: this.held?.id, owned: this.owned.size }, 'owner lease unconfirmed: pausing its jobs until the store answers');
  }

  /** The store confirmed the lease again: every owned job is looked at in full (what changed while paused was not acted on), and unowned jobs are swept. */
  private onResumed(): void {
    if (this.closed) return;
    this.o.log.info({ lease: this.held?.id, owned: this.owned.size }, 'owner lease confirmed again: resuming its jobs');
    for (const o of this.owned.values()) {
      o.full = true;
      this.queue.add(o);
    }
    if (this.started) scan(this);
  }

  /** The store says our lease is gone: stop everything done under it, then get a new one. */
  private onFenced(): void {
    this.stats.fencedLeases++;
    for (const o of [...this.owned.values()]) dropJob(this, o, 'owner lease fenced');
    if (this.closed) return;
    const again = async (): Promise<void> => {
      let delay = 200;
      while (!this.closed) {
        try {
          await this.grantLease();
          this.o.log.info({ lease: this.held?.id }, 'new owner lease; adopting unowned jobs');
          scan(this);
          return;
        } catch (err) {
          this.o.log.warn({ err: errorMessage(err) }, 'cannot grant an owner lease; retrying');
          await this.o.clock.sleep(delay);
          delay = Math.min(delay * 2, 3000);
        }
      }
    };
    this.track(again());
  }

  // ---------------------------------------------------------------------------------------------
  // Watches

  private onServer(kv: KeyValue, deleted: boolean): void {
    const id = this.o.keys.tail(this.o.keys.servers(), kv.key);
    if (id === undefined) return;
    if (deleted) {
      this.servers.delete(id);
      const c = this.cell.get(id);
      if (c) Object.assign(c, { up: false, leftAt: this.o.clock.now() });
      this.cell.version++;
      for (const o of this.owned.values()) {
        const on = o.byServer.get(id);
        if (!on || on.size === 0) continue;
        for (const t of on) o.dirty.add(t);
        this.queue.add(o);
      }
      return;
    }
    const rec = parseJson<LiveServerRecord>(kv);
    if (!rec) return;
    this.servers.set(id, rec);
    this.unseenSince.delete(id);
    const prev = this.cell.get(id);
    const wasUp = prev?.up === true;
    const up = rec.state !== 'down';
    if (!prev || prev.up !== up || prev.leftAt !== undefined || !sameShape(prev.spec, rec)) this.cell.version++;
    this.cell.set(id, { spec: rec, up });
    this.view.state.setBlocked(id, rec.blocked === true);
    // A server (back) up may be what a waiting job needs.
    if (!wasUp && rec.state !== 'down') for (const o of this.owned.values()) if (o.blockedSince !== undefined) this.queue.add(o);
  }

  /** A cancellation's mark: if the job is ours, its record is read and taken (see cancelJob). */
  private onCancel(id: string): void {
    const o = this.owned.get(id);
    if (!o || o.rec.cancelRequested) return;
    this.track(
      this.o.store
        .get(this.o.keys.job(id))
        .then((kv) => {
          const rec = parseJson<LiveJobRecord>(kv);
          if (kv && rec && this.owned.get(id) === o && kv.modRevision > o.jobRev) takeRecord(this, o, rec, kv.modRevision);
        })
        .catch((err: unknown) => this.o.log.warn({ job: id, err: errorMessage(err) }, 'reading a cancelled job failed; its next write finds the cancellation')),
    );
  }

  /** A commit of one of our agents: record the placements before the watch brings them. */
  private committed(job: JobSpec, placements: readonly Placement[], agent: string): void {
    const o = this.owned.get(job.id);
    if (o) {
      for (const p of placements) {
        const rec: LiveTaskRecord = {
          job: job.id,
          index: p.task,
          state: p.startRecorded ? 'running' : 'placed',
          ru: p.ru,
          attempt: p.attempt ?? 0,
          placedAt: this.o.clock.now(),
          ...(p.startRecorded ? { startedAt: this.o.clock.now() } : {}),
          ...(p.commitId ? { commitId: p.commitId } : {}),
        };
        // A move's record must say so at once: the watch brings the full record at this same
        // revision, which is then not applied again, and the move is finished from this one.
        if (p.movedFrom) rec.movedFrom = { server: p.movedFrom.server, index: p.movedFrom.index, commitId: p.movedFrom.commitId };
        // A task the commit started has no record of its own: its chunk's holds (state/task-chunks.ts).
        mergeTask(o, p.task, rec, p.commitRevision, p.startRecorded === true);
      }
    }
    this.o.onCommitted?.(job, placements, agent);
    if (this.launchAfterMs === 0) this.launch(job.id, placements);
    // The monitor follows its RUs in the store and starts the task as the watch brings the commit,
    // about when its answer reaches us: a call now would almost always arrive second, and costs
    // both processes a gRPC call per task. It goes only to a node that has not recorded the task
    // running by then (its watch behind, or broken); not for a task its placement recorded
    // running (Placement.startRecorded), which gives no such sign.
    const later = placements.filter((p) => !p.startRecorded);
    if (later.length === 0) return;
    this.later(this.launchAfterMs, () => {
      const o = this.owned.get(job.id);
      // Final, or owned elsewhere now: its owner sees to it.
      if (o) this.track(this.refresher.unstarted(o, later).then((still) => this.launchAfterMs > 0 && this.launch(job.id, still)));
    });
  }

  /** LaunchTask to the monitors of these placements (the ones that advertise an endpoint). */
  private launch(job: string, placements: readonly Placement[]): void {
    const nodes = this.o.nodes;
    if (!nodes) return;
    for (const p of placements) {
      const endpoint = this.servers.get(p.ru.server)?.endpoint;
      if (!endpoint) continue;
      const req = { server: p.ru.server, job, task: p.task, ruIndex: p.ru.index, revision: p.commitRevision };
      this.stats.launches++;
      this.track(
        nodes.launch(endpoint, req).catch((err: unknown) => {
          this.o.log.debug({ job, task: p.task, endpoint, err: errorMessage(err) }, 'launch RPC failed; the monitor will see the commit');
        }),
      );
    }
  }
}
