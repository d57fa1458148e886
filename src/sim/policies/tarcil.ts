/**
 * Tarcil's agents in virtual time. Every decision is the live scheduling core's `decide()`
 * (admission → sample size → batch sampling and selection) run on a cache that lags the truth:
 *
 * - one shared ClusterState + AdmissionState follows the truth WATCH_DELAY_MS late (the watch);
 * - each agent overlays what it alone knows (tarcil-overlay.ts): RUs it has just committed or seen
 *   conflict on, passed to decide() as `exclude` until the shared cache has caught up, and its own
 *   in-flight picks claimed in the view during its decisions (a live agent claims its picks and
 *   applies the else-branch reads at once);
 * - a commit reaches the store half a round trip after the agent sends it and succeeds for a pick
 *   only if the RU's revision still equals the one the agent read (etcd's compare on mod
 *   revision). A modelling choice: picks that did not conflict start at once, where the live
 *   agent keeps them claimed and commits them again with the resampled ones one round trip later.
 * - what happens between decisions — admission waits, waits for a freed RU, backoff after a
 *   conflict, the return to admission after the retries — is the live agent's attempt loop
 *   (agent/attempt.ts) with the live agent's defaults (DEFAULT_AGENT_CONFIG), driven here by
 *   engine timers; chunks are as large as one etcd transaction allows (picksPerTxn). A request
 *   whose priority bypasses others (§5.3) queues ahead of lower ones at its agent and, having lost
 *   a commit race, waits for a freed RU (the waiters serve priority first, then the job that first
 *   waited earliest: one placed in part keeps its place), not a blind backoff.
 *
 * - fair share among namespaces (agent/fair-share.ts, `core.fairShare`): the same FairShare over
 *   this view, the RUs sent and not yet seen counted as held; requests waiting for a freed RU are
 *   kept per namespace and a freed RU wakes one of the namespace with the lowest usage; a request
 *   yields when namespaces further below wait (held by admission or for a freed RU) for more than
 *   is free, as the live agent does.
 *
 * Agents are serial: one decision at a time, each costing modelled CPU time; commits are
 * pipelined. Agent count therefore bounds the decision rate (Fig. 10) while stale caches and
 * commit latency create the conflicts that grow with R and with the number of agents.
 */
import { DEFAULT_AGENT_CONFIG } from '../../agent/agent.ts';
import { Attempt, picksPerTxn, type AttemptPolicy } from '../../agent/attempt.ts';
import { admissionVerdict, decide, type CoreConfig } from '../../agent/core.ts';
import { FairShare, priorityBefore } from '../../agent/fair-share.ts';
import { namespaceOfJob } from '../../tenancy/namespace.ts';
import { eligibleCapacity } from '../../sampling/feasibility.ts';
import { DEFAULT_MAX_TXN_OPS } from '../../store/common.ts';
import type { JobSpec, ServerSpec as JobSpecServer } from '../../model/types.ts';
import { jobTarget, type JobTarget } from '../../quality/index.ts';
import { own } from '../../util/dict.ts';
import type { Rng } from '../../util/rng.ts';
import { TARCIL } from '../constants.ts';
import { dataPlacement } from '../replicas.ts';
import { addedTask, simJobId, type SimJob, type SimTask, type View, type World } from '../world.ts';
import { ProfileLearner } from '../../model/learn.ts';
import { SimLoadMonitor } from './runtime.ts';
import { AgentOverlay } from './tarcil-overlay.ts';
import { selectOneServer, serverFits } from './one-server.ts';
import type { Policy } from './types.ts';
import type { Agent, Request, TarcilOptions } from './tarcil-types.ts';

/** As large a chunk as one transaction of etcd's default limits holds, as in the live agent. */
const PICKS_PER_TXN = picksPerTxn(DEFAULT_MAX_TXN_OPS);

export class TarcilPolicy implements Policy {
  readonly name: string;
  private readonly world: World;
  private readonly view: View;
  private readonly agents: Agent[] = [];
  private readonly firstAgent: Agent;
  private readonly cfg: CoreConfig;
  private readonly policy: AttemptPolicy;
  private readonly opts: TarcilOptions;
  private rr = 0;
  /** Requests waiting for a freed RU, in priority then arrival order: one list per namespace with fair share, one list ('') without. */
  private readonly waiters = new Map<string, Request[]>();
  /**
   * Each job's arrival number among the waiters, taken at its first wait: a request that waits
   * again keeps its place, as in the live agent (agent.ts waitFreed, freed-waiters.ts).
   */
  private readonly waitSeq = new WeakMap<SimJob, number>();
  private nextSeq = 0;
  /** Fair share among namespaces (agent/fair-share.ts), over the agents' view; undefined when off. */
  private readonly fair: FairShare | undefined;
  /** With fair share: RUs wanted by the waiting requests, per namespace. */
  private readonly needs = new Map<string, number>();
  /** RUs being placed (sent, not yet in the view), per namespace: fair share counts them as held. */
  private readonly placing = new Map<string, number>();
  private readonly targets = new Map<readonly number[], JobTarget>();
  private readonly c = {
    decisions: 0,
    commits: 0,
    conflicts: 0,
    picks: 0,
    readmissions: 0,
    queued: 0,
    bestEffort: 0,
    Rsum: 0,
    capacityWaits: 0,
    fairYields: 0,
    acceptablePicks: 0,
    Qsum: 0,
  };
  private readonly monitor: SimLoadMonitor | undefined;
  private readonly learner: ProfileLearner | undefined;
  private readonly owned = new WeakSet<SimJob>();
  /** Wall time of the core's calls, apart from the counters (it differs from run to run). */
  private readonly wall = { verdicts: 0, verdictMs: 0, decisions: 0, decideMs: 0, candidates: 0 };
  /** How late the agents' shared view follows the store (the watch), and a commit's round trip. */
  private readonly lag: { watch: number; rtt: number };

  constructor(world: World, rng: Rng, opts: TarcilOptions) {
    this.world = world;
    this.opts = opts;
    this.name = opts.fixedR === undefined ? 'tarcil' : `fixed-R${opts.fixedR}`;
    const { maxRetries, backoffBaseMs, backoffMaxMs, recheckMs } = DEFAULT_AGENT_CONFIG;
    this.policy = { maxRetries, backoffBaseMs, backoffMaxMs, recheckMs, ...opts.attempt };
    this.cfg = {
      ...DEFAULT_AGENT_CONFIG,
      admission: opts.admission ?? true,
      ...(opts.fixedR === undefined ? {} : { fixedR: opts.fixedR }),
      ...opts.core,
    };
    this.lag = opts.freshViews ? { watch: 0, rtt: 0 } : { watch: TARCIL.WATCH_DELAY_MS, rtt: TARCIL.COMMIT_RTT_MS };
    this.view = world.addView(this.lag.watch, true);
    const state = this.view.state;
    if (this.cfg.fairShare) {
      const placing = this.placing;
      this.fair = new FairShare({
        held: (ns) => state.namespaceRus(ns) + (placing.get(ns) ?? 0),
        holding: () => new Set([...state.namespacesHolding().keys(), ...placing.keys()]),
        totalRus: () => state.totalRus,
      });
      this.fair.setWeights(Object.entries(opts.weights ?? {}).map(([name, weight]) => ({ name, weight })));
    }
    const admission = this.view.admission;
    if (!admission) throw new Error('tarcil needs admission counters');
    for (let i = 0; i < opts.agents; i++) {
      this.agents.push({
        id: i,
        busy: false,
        queue: [],
        ov: new AgentOverlay(world, this.view.state),
        ctx: { state: this.view.state, admission, rng: rng.fork(), clock: world.engine },
      });
    }
    const first = this.agents[0];
    if (!first) throw new Error('tarcil needs at least one agent');
    this.firstAgent = first;
    world.onFree = (ru) => this.wakeFor(ru);
    const rt = opts.runtime;
    this.learner = rt?.learn ? new ProfileLearner() : undefined;
    this.monitor =
      rt && (rt.block || rt.move || rt.learn || rt.autoscale)
        ? new SimLoadMonitor(
            world,
            this.view,
            rt,
            (job) => this.owned.has(job),
            (t) => this.enqueue({ ...this.request(t.job, this.target(t.job.scheduledAs ?? t.job.declared), [], t.data), move: t }),
            this.learner,
            (job) => this.enqueue({ ...this.request(job, this.target(job.scheduledAs ?? job.declared), [addedTask(job)]), scaleOut: true }),
            () => this.waitingTasks(),
          )
        : undefined;
  }

  /** Tasks queued at the agents or waiting for RUs, not yet placed. */
  private waitingTasks(): number {
    let n = 0;
    for (const a of this.agents) for (const r of a.queue) n += r.pending.length;
    for (const q of this.waiters.values()) for (const r of q) n += r.pending.length;
    return n;
  }

  timing(): Record<string, number> {
    return { ...this.wall };
  }

  counters(): Record<string, number> {
    return {
      ...this.c,
      ...(this.monitor ? this.monitor.c : {}),
      ...(this.monitor && this.learner ? this.monitor.learningError(this.learner) : {}),
      conflictsPerCommit: this.c.commits > 0 ? this.c.conflicts / this.c.commits : 0,
      meanR: this.c.decisions > 0 ? this.c.Rsum / this.c.decisions : 0,
      placedQ: this.c.picks > 0 ? this.c.Qsum / this.c.picks : 0,
      placedAcceptable: this.c.picks > 0 ? this.c.acceptablePicks / this.c.picks : 0,
    };
  }

  private target(caused: readonly number[]): JobTarget {
    let t = this.targets.get(caused);
    if (!t) {
      t = jobTarget(caused);
      this.targets.set(caused, t);
    }
    return t;
  }

  private specOf(job: SimJob, m: number, data?: number[]): JobSpec {
    const where = dataPlacement(
      data?.map((s) => (this.world.servers[s] as { spec: JobSpecServer }).spec),
      this.opts.preferReplicas,
    );
    if (job.platforms) where.constraints = { ...where.constraints, platforms: [...job.platforms] };
    if (job.oneServer) where.locality = { mode: 'pack', scope: 'server' };
    return {
      id: simJobId(job),
      name: job.profile.name,
      profile: job.scheduledAs && job.scheduledAs !== job.profile.caused ? { ...job.profile, caused: job.scheduledAs as number[] } : job.profile,
      tasks: m,
      priority: job.priority,
      mode: 'incremental',
      ...where,
      // Users of short tasks bound their queueing by their run time (JobSpec.maxQueueMs): here
      // twice the job's ideal time, within [10 ms, 10 s].
      maxQueueMs: this.opts.maxQueueMs ?? Math.min(10_000, Math.max(10, 2 * job.ideal)),
      submittedAt: job.arrival,
    };
  }

  submit(job: SimJob): void {
    this.owned.add(job);
    // With learning, the job is scheduled as its class is now estimated to be.
    if (this.learner) job.scheduledAs = this.learner.vector(job.profile.name, job.declared);
    const target = this.target(job.scheduledAs ?? job.declared);
    // Data-constrained tasks each carry their own replicas: one request each (as Tarcil's Spark
    // plugin issues one request per task); the rest of the job is one batch request.
    const free: SimTask[] = [];
    for (const t of job.tasks) {
      if (t.data) this.enqueue(this.request(job, target, [t], t.data));
      else free.push(t);
    }
    if (free.length > 0) this.enqueue(this.request(job, target, free));
  }

  private request(job: SimJob, target: JobTarget, tasks: SimTask[], data?: number[]): Request {
    const spec = this.specOf(job, Math.max(1, tasks.length), data);
    const capacity = spec.constraints.attributes || spec.constraints.platforms ? eligibleCapacity(this.view.state, spec.constraints) : this.view.state.totalRus;
    return { job, spec, target, pending: tasks, capacity, ns: namespaceOfJob(spec.id) };
  }

  private enqueue(r: Request): void {
    this.requeue(this.agents[this.rr++ % this.agents.length] as Agent, r);
  }

  private requeue(a: Agent, r: Request): void {
    this.push(a.queue, r);
    this.pump(a);
  }

  /**
   * FIFO, except that a job above the bypass priority goes ahead of every lower-priority request
   * already waiting (Tarcil §5.3: high priority "bypass[es] all prior-enqueued tasks").
   */
  private push(q: Request[], r: Request): void {
    if (r.job.priority <= this.cfg.bypassAbove) {
      q.push(r);
      return;
    }
    let k = 0;
    while (k < q.length && (q[k] as Request).job.priority >= r.job.priority) k++;
    q.splice(k, 0, r);
  }

  private pump(a: Agent): void {
    if (a.busy) return;
    const r = a.queue.shift();
    if (!r) return;
    a.busy = true;
    this.process(a, r);
  }

  private excludeFor(a: Agent, ru: number, until: number, own?: SimTask): void {
    a.ov.add(ru, until, own && this.world.occupantOf(own));
  }

  /** The simulator's driver of the attempt loop (agent/attempt.ts): engine timers, modelled commits. */
  private process(a: Agent, r: Request): void {
    const eng = this.world.engine;
    const now = eng.now();
    a.ov.prune(now);
    if (r.move) {
      this.processMove(a, r.move, r);
      return;
    }
    if (r.scaleOut && !this.world.canJoin(r.job)) {
      // The job's other tasks ended while its new one waited: nothing left to share.
      (this.monitor as SimLoadMonitor).notScaledOut(r.job);
      a.busy = false;
      this.pump(a);
      return;
    }
    // Fair share: a request that would take RUs that namespaces further below their share wait
    // for holds back and waits in the waiters' order (unless that order just woke it).
    if (
      this.fair &&
      !r.woken &&
      this.needs.size > 0 &&
      this.fair.mustYield(r.ns, Math.min(r.pending.length, PICKS_PER_TXN), this.view.state.available.size, this.needs)
    ) {
      this.c.fairYields++;
      eng.after(0, () => {
        a.busy = false;
        this.pump(a);
      });
      this.waitForRu(a, r, this.policy.recheckMs);
      return;
    }
    r.woken = false;
    const at = (r.at ??= new Attempt(this.policy, a.ctx.rng, r.spec.maxQueueMs, this.opts.priorityWaits !== false && r.job.priority > this.cfg.bypassAbove));
    const chunk = r.job.oneServer ? r.pending : r.pending.slice(0, PICKS_PER_TXN);
    const head = r.job.head;
    const release = (after: number): void => {
      eng.after(after, () => {
        a.busy = false;
        this.pump(a);
      });
    };

    if (!at.admitted) {
      const skip = !this.cfg.admission || at.skipAdmission(now);
      const want = Math.max(1, Math.min(r.pending.length, r.capacity));
      // Wall time of the core's calls (the virtual clock models their cost): what a decision
      // really costs the simulator, which must not grow with the cell (bench sim-speed).
      const w0 = performance.now();
      const verdict = skip
        ? undefined
        : a.ov.during(() =>
            admissionVerdict(a.ctx, {
              job: r.spec,
              target: r.target,
              needed: want,
              cfg: this.cfg,
              capacity: r.capacity,
              leftMs: at.leftMs(now),
              queuedMs: at.queuedMs(now),
            }),
          );
      if (!skip) {
        this.wall.verdicts++;
        this.wall.verdictMs += performance.now() - w0;
      }
      const then = at.afterVerdict(verdict, now);
      if (then.kind === 'admission-wait') {
        // Admission control: wait for the estimated time (bounded), then ask again.
        this.c.queued++;
        release(TARCIL.DECISION_BASE_MS);
        head.decisionMs += TARCIL.DECISION_BASE_MS;
        // Held by admission, the request waits for RUs as a live one does in the waiters (fair share counts it).
        this.need(r.ns, r.pending.length);
        eng.after(TARCIL.DECISION_BASE_MS + then.ms, () => {
          this.need(r.ns, -r.pending.length);
          this.requeue(a, r);
        });
        return;
      }
      if (verdict?.action === 'best-effort') this.c.bestEffort++;
      if (then.realisedWaitMs !== undefined) head.waits.push({ estimate: at.firstEstimateMs, realised: then.realisedWaitMs });
    }

    const w1 = performance.now();
    const displace = this.fairDisplace(r);
    const one = r.job.oneServer ? a.ov.during(() => selectOneServer(a.ctx, r.spec, r.target, chunk.length, this.cfg, a.ov.exclude)) : undefined;
    const d = one
      ? { R: one.R, selection: { ...one, preemptionCandidates: 0 } }
      : a.ov.during(() =>
          decide(a.ctx, { job: r.spec, target: r.target, m: chunk.length, cfg: this.cfg, skipAdmission: true, exclude: a.ov.exclude, ...displace }),
        );
    this.wall.decisions++;
    this.wall.decideMs += performance.now() - w1;
    this.wall.candidates += d.selection.candidatesSeen;
    const cost = TARCIL.DECISION_BASE_MS + TARCIL.DECISION_PER_CANDIDATE_MS * d.selection.candidatesSeen;
    head.decisionMs += cost;
    head.Rsum += d.R;
    head.Rn++;
    this.c.decisions++;
    this.c.Rsum += d.R;

    const picks = d.selection.picks;
    const sel = at.afterSelection(picks.length, chunk.length, false);
    if (sel.kind !== 'go') {
      // Nothing free and eligible in the (stale) view: wait for a free RU.
      this.c.capacityWaits++;
      release(cost);
      this.waitForRu(a, r, sel.ms);
      return;
    }
    const sendAt = cost + TARCIL.COMMIT_ISSUE_MS;
    const storeAt = now + sendAt + this.lag.rtt / 2;
    picks.forEach((p, k) => this.excludeFor(a, p.id, storeAt + this.lag.watch + this.lag.rtt, chunk[k]));
    if (this.fair) this.countPlacing(r.ns, picks.length, storeAt + this.lag.watch);
    release(sendAt);
    // Remove the chunk's tasks from pending while the commit is in flight.
    const inFlight = chunk.slice(0, picks.length);
    r.pending = r.pending.slice(picks.length);
    const Qs = picks.map((p) => p.quality.Q);
    eng.at(storeAt, () => {
      this.c.commits++;
      head.commits++;
      head.commitMs += this.lag.rtt;
      let conflicts = 0;
      const failed: SimTask[] = [];
      // A one-server job's picks commit together or not at all (one transaction's compares).
      const together = !r.job.oneServer || picks.every((p) => this.world.occ[p.id] === null && this.world.rev[p.id] === p.ruRev);
      picks.forEach((p, k) => {
        const task = inFlight[k] as SimTask;
        if (together && this.world.occ[p.id] === null && this.world.rev[p.id] === p.ruRev) {
          if (r.scaleOut && !this.world.canJoin(r.job)) {
            (this.monitor as SimLoadMonitor).notScaledOut(r.job);
            return;
          }
          task.Q = Qs[k];
          task.acceptable = p.quality.acceptable;
          this.world.startTask(task, p.id);
          this.c.picks++;
          this.c.Qsum += task.Q ?? 0;
          if (task.acceptable) this.c.acceptablePicks++;
          if (r.scaleOut) (this.monitor as SimLoadMonitor).scaledOut(r.job);
        } else {
          conflicts++;
          failed.push(task);
          // The else branch of the txn returns the RU's current value: the agent knows it now.
          this.excludeFor(a, p.id, eng.now() + this.lag.rtt / 2 + this.lag.watch);
        }
      });
      this.c.conflicts += conflicts;
      head.conflicts += conflicts;
      r.pending = failed.concat(r.pending);
      const wasAdmitted = at.admitted;
      const then = at.afterCommit({ placed: picks.length - conflicts, conflicts, asked: chunk.length });
      if (r.pending.length === 0) return;
      if (conflicts > 0 && wasAdmitted && !at.admitted) this.c.readmissions++;
      // The commit's answer reaches the agent half a round trip after the store applied it.
      const back = this.lag.rtt / 2;
      if (then.kind === 'capacity-wait') this.waitForRu(a, r, then.ms);
      else if (then.kind === 'backoff' && then.untilFreed) eng.after(back, () => this.waitForRu(a, r, then.ms));
      else eng.after(back + (then.kind === 'backoff' ? then.ms : 0), () => this.requeue(a, r));
    });
  }

  /**
   * A move (run-time loop): one decision for one RU off the slow task's server, no admission; the
   * new RU must be acceptable. At the commit the old copy is stopped and the new one started (the
   * task restarts, after the move's pause), so two copies never run at once; a task that ended or
   * moved meanwhile, or an RU taken meanwhile, cancels the move.
   */
  private processMove(a: Agent, t: SimTask, r: Request): void {
    const eng = this.world.engine;
    const mon = this.monitor as SimLoadMonitor;
    const release = (after: number): void => {
      eng.after(after, () => {
        a.busy = false;
        this.pump(a);
      });
    };
    if (t.state !== 'running') {
      mon.notMoved(t, 'obsolete');
      release(0);
      return;
    }
    const oldRu = t.ru;
    const s = this.world.server(oldRu);
    const exclude = new Set(a.ov.exclude);
    for (let i = 0; i < s.rus; i++) exclude.add(s.base + i);
    const d = a.ov.during(() => decide(a.ctx, { job: r.spec, target: r.target, m: 1, cfg: this.cfg, skipAdmission: true, exclude }));
    const cost = TARCIL.DECISION_BASE_MS + TARCIL.DECISION_PER_CANDIDATE_MS * d.selection.candidatesSeen;
    this.c.decisions++;
    this.c.Rsum += d.R;
    const p = d.selection.picks[0];
    if (!p || !p.quality.acceptable || p.victim) {
      mon.notMoved(t, 'no-better-ru');
      release(cost);
      return;
    }
    const sendAt = cost + TARCIL.COMMIT_ISSUE_MS;
    const storeAt = eng.now() + sendAt + this.lag.rtt / 2;
    this.excludeFor(a, p.id, storeAt + this.lag.watch + this.lag.rtt, t);
    release(sendAt);
    eng.at(storeAt, () => {
      this.c.commits++;
      if (t.state !== 'running' || t.ru !== oldRu) {
        mon.notMoved(t, 'obsolete');
        return;
      }
      if (this.world.occ[p.id] !== null || this.world.rev[p.id] !== p.ruRev) {
        this.c.conflicts++;
        this.excludeFor(a, p.id, eng.now() + this.lag.rtt / 2 + this.lag.watch);
        mon.notMoved(t, 'conflict');
        return;
      }
      const now = eng.now();
      const lost = t.work - Math.max(0, t.remaining - t.rate * (now - t.last));
      this.world.stopTask(t);
      t.Q = p.quality.Q;
      t.acceptable = p.quality.acceptable;
      // The pause holds the new RU before the task's work starts: as much work as the pause at the new platform's speed.
      const speedThere = t.job.profile.platformPerf[this.world.server(p.id).spec.platform] ?? 1;
      this.world.startTask(t, p.id, mon.cfg.movePauseMs * speedThere);
      mon.moved(t, lost);
    });
  }

  /** Fair share's limit on preemption across namespaces (none when the request may not preempt). */
  private fairDisplace(r: Request): { mayDisplace?: (victimJob: string) => boolean } {
    if (!this.fair || !this.cfg.preemption || r.job.priority <= this.cfg.bypassAbove) return {};
    return { mayDisplace: this.fair.mayDisplace(r.ns, this.needs.keys()) };
  }

  /** `n` RUs of namespace `ns` are being placed until `until` (when the view shows them, or not). */
  private countPlacing(ns: string, n: number, until: number): void {
    if (n <= 0) return;
    this.placing.set(ns, (this.placing.get(ns) ?? 0) + n);
    this.world.engine.at(until, () => {
      const left = (this.placing.get(ns) ?? 0) - n;
      if (left > 0) this.placing.set(ns, left);
      else this.placing.delete(ns);
    });
  }

  private waitList(r: Request): Request[] {
    const key = this.fair ? r.ns : '';
    let q = this.waiters.get(key);
    if (!q) this.waiters.set(key, (q = []));
    return q;
  }

  /** With fair share: `n` more (or fewer) RUs wanted by the waiting requests of `ns`. */
  private need(ns: string, n: number): void {
    if (!this.fair) return;
    const left = (this.needs.get(ns) ?? 0) + n;
    if (left > 0) this.needs.set(ns, left);
    else this.needs.delete(ns);
  }

  private unwait(q: Request[], k: number): Request {
    const r = q.splice(k, 1)[0] as Request;
    this.need(r.ns, -r.pending.length);
    return r;
  }

  /** Parks a request until an RU it may use frees, or `ms` passes. */
  private waitForRu(a: Agent, r: Request, ms: number): void {
    r.agent = a;
    this.park(this.waitList(r), r);
    this.need(r.ns, r.pending.length);
    this.world.engine.after(ms, () => this.wake(r));
  }

  /**
   * Inserts a waiting request in priority then arrival order (the job's first wait), as the live
   * agent's waiters are kept: a job partly placed that waits again for a freed RU is not sent
   * behind every job that arrived after it.
   */
  private park(q: Request[], r: Request): void {
    let seq = this.waitSeq.get(r.job);
    if (seq === undefined) this.waitSeq.set(r.job, (seq = this.nextSeq++));
    r.seq = seq;
    const w = { priority: r.job.priority, seq };
    let lo = 0;
    let hi = q.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const o = q[mid] as Request;
      if (priorityBefore(w, { priority: o.job.priority, seq: o.seq ?? Infinity })) hi = mid;
      else lo = mid + 1;
    }
    q.splice(lo, 0, r);
  }

  private wake(r: Request): void {
    const q = this.waitList(r);
    const k = q.indexOf(r);
    if (k < 0) return;
    this.unwait(q, k);
    this.requeue(r.agent ?? this.firstAgent, r);
  }

  /**
   * A freed RU wakes the first waiting request that may use it (hard constraints checked); with
   * fair share, of the namespace with the lowest usage among those with a request that may use it.
   */
  private wakeFor(ru: number): void {
    const srv = this.world.server(ru);
    const fits = (w: Request): boolean => {
      if (!serverFits(w.job, srv, w.pending.length)) return false;
      const want = w.spec.constraints.attributes;
      if (!want) return true;
      for (const [key, v] of Object.entries(want)) if (own(srv.spec.attributes, key) !== v) return false;
      return true;
    };
    let bestQ: Request[] | undefined;
    let bestK = -1;
    let bestU = Infinity;
    for (const [ns, q] of this.waiters) {
      if (q.length === 0) continue;
      const u = this.fair ? this.fair.usage(ns) : 0;
      if (bestQ && u >= bestU) continue;
      const k = q.findIndex(fits);
      if (k < 0) continue;
      bestQ = q;
      bestK = k;
      bestU = u;
    }
    if (!bestQ) return;
    const r = this.unwait(bestQ, bestK);
    r.woken = true;
    // The freed RU reaches the agents' cache after the watch delay.
    this.world.engine.after(this.lag.watch, () => this.requeue(r.agent ?? this.firstAgent, r));
  }
}
