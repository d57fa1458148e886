/**
 * Tarcil's agents in virtual time. Every decision is the live scheduling core's `decide()`
 * (admission → sample size → batch sampling and selection) run on a cache that lags the truth:
 *
 * - one shared RuIndex + AdmissionCounters follows the truth WATCH_DELAY_MS late (the watch);
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
import type { AttemptPolicy } from '../../agent/attempt.ts';
import type { Step } from '../../agent/attempt-steps.ts';
import { decide, type CoreConfig } from '../../agent/core.ts';
import { FairShare, priorityBefore } from '../../agent/fair-share.ts';
import { firstAcross, RunTimes, type OrderedWaiter } from '../../agent/wait-order.ts';
import { reserveHolds } from '../../agent/short-reserve.ts';
import { namespaceOfJob } from '../../tenancy/namespace.ts';
import { eligibleCapacity } from '../../sampling/feasibility.ts';
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
import { QuotaBook } from './tarcil-gang.ts';
import { TarcilTurns } from './tarcil-turns.ts';
import { serverFits } from './one-server.ts';
import type { Policy } from './types.ts';
import type { Agent, Request, TarcilOptions } from './tarcil-types.ts';

export class TarcilPolicy extends TarcilTurns implements Policy {
  readonly name: string;
  protected readonly world: World;
  protected readonly view: View;
  private readonly agents: Agent[] = [];
  private readonly firstAgent: Agent;
  protected readonly cfg: CoreConfig;
  protected readonly policy: AttemptPolicy;
  protected readonly opts: TarcilOptions;
  private rr = 0;
  /** Requests waiting for a freed RU, each list in priority then arrival order (waitList). */
  private readonly waiters = new Map<string, { ns: string; list: Request[] }>();
  /**
   * Each job's arrival number among the waiters, taken at its first wait: a request that waits
   * again keeps its place, as in the live agent (agent.ts waitFreed, freed-waiters.ts).
   */
  private readonly waitSeq = new WeakMap<SimJob, { seq: number; since: number }>();
  /** The `ratio` wait order: its tasks' run times as seen to end, per workload class. */
  private readonly runTimes = new RunTimes();
  private readonly expected = (cls: string): number | undefined => this.runTimes.expected(cls);
  private nextSeq = 0;
  /** Fair share among namespaces (agent/fair-share.ts), over the agents' view; undefined when off. */
  protected readonly fair: FairShare | undefined;
  /** With fair share: RUs wanted by the waiting requests, per namespace. */
  protected readonly needs = new Map<string, number>();
  /** RUs being placed (sent, not yet in the view), per namespace: fair share counts them as held. */
  private readonly placing = new Map<string, number>();
  private readonly targets = new Map<readonly number[], JobTarget>();
  protected readonly c = {
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
    reserveHolds: 0,
    acceptablePicks: 0,
    Qsum: 0,
  };
  protected readonly monitor: SimLoadMonitor | undefined;
  /** Namespaces' RUs against their quotas (TarcilOptions.quotas); undefined: none. */
  protected readonly quotas: QuotaBook | undefined;
  private readonly learner: ProfileLearner | undefined;
  private readonly owned = new WeakSet<SimJob>();
  /** Wall time of the core's calls, apart from the counters (it differs from run to run). */
  protected readonly wall = { verdicts: 0, verdictMs: 0, decisions: 0, decideMs: 0, candidates: 0 };
  /** How late the agents' shared view follows the store (the watch), and a commit's round trip. */
  protected readonly lag: { watch: number; rtt: number };

  constructor(world: World, rng: Rng, opts: TarcilOptions) {
    super();
    this.world = world;
    this.opts = opts;
    this.name = opts.fixedR === undefined ? 'tarcil' : `fixed-R${opts.fixedR}`;
    const { maxRetries, backoffBaseMs, backoffMaxMs, recheckMs, recheckMaxMs } = DEFAULT_AGENT_CONFIG;
    this.policy = { maxRetries, backoffBaseMs, backoffMaxMs, recheckMs, recheckMaxMs, ...opts.attempt };
    this.cfg = {
      ...DEFAULT_AGENT_CONFIG,
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
    const quotas = (this.quotas = opts.quotas ? new QuotaBook(opts.quotas) : undefined);
    world.onFree = (ru, task) => {
      quotas?.freed(task.job);
      if (task.state === 'done') this.runTimes.observe(task.job.profile.name, task.end - task.start);
      this.wakeFor(ru);
    };
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
    for (const { list } of this.waiters.values()) for (const r of list) n += r.pending.length;
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
    if (job.oneServer || (this.opts.packJobs && where.locality.mode === 'any')) where.locality = { mode: 'pack', scope: 'server' };
    return {
      id: simJobId(job),
      name: job.profile.name,
      profile: job.scheduledAs && job.scheduledAs !== job.profile.caused ? { ...job.profile, caused: job.scheduledAs as number[] } : job.profile,
      tasks: m,
      priority: job.priority,
      mode: job.gang ? 'gang' : 'incremental',
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

  protected requeue(a: Agent, r: Request): void {
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

  protected pump(a: Agent): void {
    if (a.busy) return;
    const r = a.queue.shift();
    if (!r) return;
    a.busy = true;
    this.process(a, r);
  }

  protected excludeFor(a: Agent, ru: number, until: number, own?: SimTask): void {
    a.ov.add(ru, until, own && this.world.occupantOf(own));
  }

  /** The simulator's driver of the step sequence (agent/attempt-steps.ts): engine timers, modelled commits. */
  private process(a: Agent, r: Request): void {
    a.ov.prune(this.world.engine.now());
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
    // Its first step, the step its last commit's answer left for it, or what follows its wait.
    const first = r.steps === undefined;
    const steps = (r.steps ??= this.stepsOf(a, r));
    const s: Step = first ? steps.start() : (r.next ?? steps.next({ kind: 'waited', woken: r.woken === true }));
    r.next = undefined;
    r.woken = false;
    this.turn(a, r, steps, s);
  }

  /**
   * A move (run-time loop): one decision for one RU off the slow task's server, no admission; the
   * new RU must be acceptable. At the commit the old copy is stopped and the new one started (the
   * task restarts, after the move's pause), so two copies never run at once; a task that ended or
   * moved meanwhile, or an RU taken meanwhile, cancels the move.
   */
  protected processMove(a: Agent, t: SimTask, r: Request): void {
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
      this.quotas?.add(r.ns, 1);
      mon.moved(t, lost);
    });
  }

  /** The short-task reserve (agent/short-reserve.ts), on the agents' view: is this request held back now? */
  protected reserveHolds(r: Request, freed = 0): boolean {
    const st = this.view.state;
    return reserveHolds(this.cfg, this.runTimes, { available: st.available.size + freed, total: st.totalRus }, r.job.profile.name, r.job.priority);
  }

  /** Fair share's limit on preemption across namespaces (none when the request may not preempt). */
  protected fairDisplace(r: Request): { mayDisplace?: (victimJob: string) => boolean } {
    if (!this.fair || !this.cfg.preemption || r.job.priority <= this.cfg.bypassAbove) return {};
    return { mayDisplace: this.fair.mayDisplace(r.ns, this.needs.keys()) };
  }

  /** `n` RUs of namespace `ns` are being placed until `until` (when the view shows them, or not). */
  protected countPlacing(ns: string, n: number, until: number): void {
    if (n <= 0) return;
    this.placing.set(ns, (this.placing.get(ns) ?? 0) + n);
    this.world.engine.at(until, () => {
      const left = (this.placing.get(ns) ?? 0) - n;
      if (left > 0) this.placing.set(ns, left);
      else this.placing.delete(ns);
    });
  }

  /**
   * The list a request waits in: one per namespace with fair share (one for all without), and
   * under the `ratio` order one per workload class in it, as the live waiters keep them
   * (freed-waiters.ts): the requests of one class share its expected run time, so in their list,
   * kept in priority then arrival order, the first that fits is the first in the ratio order.
   */
  private waitList(r: Request): Request[] {
    const ns = this.fair ? r.ns : '';
    const key = this.cfg.waitOrder === 'ratio' ? `${ns}|${r.job.profile.name}` : ns;
    let e = this.waiters.get(key);
    if (!e) this.waiters.set(key, (e = { ns, list: [] }));
    return e.list;
  }

  /** With fair share: `n` more (or fewer) RUs wanted by the waiting requests of `ns`. */
  protected need(ns: string, n: number): void {
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
  protected waitForRu(a: Agent, r: Request, ms: number): void {
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
    let first = this.waitSeq.get(r.job);
    if (first === undefined) this.waitSeq.set(r.job, (first = { seq: this.nextSeq++, since: this.world.engine.now() }));
    const w: OrderedWaiter = (r.wait = { priority: r.job.priority, seq: first.seq, since: first.since, runClass: r.job.profile.name });
    let lo = 0;
    let hi = q.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (priorityBefore(w, (q[mid] as Request).wait as OrderedWaiter)) hi = mid;
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
  protected wakeFor(ru: number): void {
    const srv = this.world.server(ru);
    const fits = (w: Request): boolean => {
      // The agents' view holds the freed RU only after the watch delay: it counts here already.
      if (this.reserveHolds(w, 1)) return false;
      if (!serverFits(w.job, srv, w.pending.length)) return false;
      const want = w.spec.constraints.attributes;
      if (!want) return true;
      for (const [key, v] of Object.entries(want)) if (own(srv.spec.attributes, key) !== v) return false;
      return true;
    };
    const fair = this.fair;
    const found = firstAcross(
      this.waiters.values(),
      waitOf,
      fits,
      this.cfg.waitOrder,
      this.world.engine.now(),
      this.expected,
      fair ? (l) => fair.usage(l.ns) : undefined,
    );
    if (!found) return;
    const r = this.unwait(found.of.list, found.k);
    r.woken = true;
    // The freed RU reaches the agents' cache after the watch delay.
    this.world.engine.after(this.lag.watch, () => this.requeue(r.agent ?? this.firstAgent, r));
  }
}

/** What the wait order reads of a waiting request (set when it is parked). */
const waitOf = (r: Request): OrderedWaiter => r.wait as OrderedWaiter;
