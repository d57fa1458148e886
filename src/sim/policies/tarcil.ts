/**
 * Tarcil's agents in virtual time. Every decision is the live scheduling core's `decide()`
 * (admission → sample size → batch sampling and selection) run on a cache that lags the truth:
 *
 * - one shared ClusterState + AdmissionState follows the truth WATCH_DELAY_MS late (the watch);
 * - each agent overlays what it alone knows: RUs it has just committed or seen conflict on, passed
 *   to decide() as `exclude` until the shared cache has caught up (a live agent applies its own
 *   writes and the else-branch reads at once);
 * - a commit reaches the store half a round trip after the agent sends it and succeeds for a pick
 *   only if the RU's revision still equals the one the agent read (etcd's compare on mod
 *   revision). Conflicting picks are resampled; after MAX_RETRIES rounds with conflicts the
 *   request goes back to admission, never dropped.
 *
 * Agents are serial: one decision at a time, each costing modelled CPU time; commits are
 * pipelined. Agent count therefore bounds the decision rate (Fig. 10) while stale caches and
 * commit latency create the conflicts that grow with R and with the number of agents.
 */
import { decide, DEFAULT_CORE_CONFIG, type CoreConfig, type CoreContext } from '../../agent/core.ts';
import type { JobSpec, ServerSpec as JobSpecServer } from '../../model/types.ts';
import { jobTarget, type JobTarget } from '../../quality/index.ts';
import type { Rng } from '../../util/rng.ts';
import { COPYSET_ATTR, TARCIL } from '../constants.ts';
import type { SimJob, SimTask, View, World } from '../world.ts';
import type { Policy } from './types.ts';

export interface TarcilOptions {
  agents: number;
  /** Fixed sample size; adaptive (x^R with admission) when undefined. */
  fixedR?: number;
  admission?: boolean;
  /** Longest admission wait before placing anyway. */
  maxQueueMs?: number;
  core?: Partial<CoreConfig>;
}

/** etcd's default --max-txn-ops (128) over 3 ops per placement, as in the live agent. */
const PICKS_PER_TXN = 42;

interface Request {
  job: SimJob;
  spec: JobSpec;
  target: JobTarget;
  pending: SimTask[];
  admitted: boolean;
  retries: number;
  /** First time admission queued it (for the realised-wait figure). */
  queuedAt: number;
  estimate: number;
  agent?: Agent;
}

interface Agent {
  id: number;
  busy: boolean;
  queue: Request[];
  exclude: Map<number, number>;
  excludeSet: Set<number>;
  ctx: CoreContext;
}

export class TarcilPolicy implements Policy {
  readonly name: string;
  private readonly world: World;
  private readonly view: View;
  private readonly agents: Agent[] = [];
  private readonly firstAgent: Agent;
  private readonly cfg: CoreConfig;
  private readonly opts: TarcilOptions;
  private rr = 0;
  private readonly waiters: Request[] = [];
  private readonly targets = new Map<readonly number[], JobTarget>();
  private readonly c = { decisions: 0, commits: 0, conflicts: 0, picks: 0, readmissions: 0, queued: 0, bestEffort: 0, Rsum: 0, capacityWaits: 0 };

  constructor(world: World, rng: Rng, opts: TarcilOptions) {
    this.world = world;
    this.opts = opts;
    this.name = opts.fixedR === undefined ? 'tarcil' : `fixed-R${opts.fixedR}`;
    this.cfg = {
      ...DEFAULT_CORE_CONFIG,
      admission: opts.admission ?? true,
      ...(opts.fixedR === undefined ? {} : { fixedR: opts.fixedR }),
      ...opts.core,
    };
    this.view = world.addView(TARCIL.WATCH_DELAY_MS, true);
    const admission = this.view.admission;
    if (!admission) throw new Error('tarcil needs admission counters');
    for (let i = 0; i < opts.agents; i++) {
      this.agents.push({
        id: i,
        busy: false,
        queue: [],
        exclude: new Map(),
        excludeSet: new Set(),
        ctx: { state: this.view.state, admission, rng: rng.fork(), clock: world.engine },
      });
    }
    const first = this.agents[0];
    if (!first) throw new Error('tarcil needs at least one agent');
    this.firstAgent = first;
    world.onFree = (ru) => this.wakeFor(ru);
  }

  counters(): Record<string, number> {
    return {
      ...this.c,
      conflictsPerCommit: this.c.commits > 0 ? this.c.conflicts / this.c.commits : 0,
      meanR: this.c.decisions > 0 ? this.c.Rsum / this.c.decisions : 0,
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
    return {
      id: String(job.id),
      name: job.profile.name,
      profile: job.profile,
      tasks: m,
      priority: job.priority,
      mode: 'incremental',
      ...this.dataPlacement(data),
      // Users of short tasks bound their queueing by their run time (JobSpec.maxQueueMs): here
      // twice the job's ideal time, within [10 ms, 10 s].
      maxQueueMs: this.opts.maxQueueMs ?? Math.min(10_000, Math.max(10, 2 * job.ideal)),
      submittedAt: job.arrival,
    };
  }

  /**
   * Where a data-constrained task may go. When its replicas form a named set (W2's copysets) the
   * task is hard-constrained to them, as the paper's TPC-H runs constrain first-stage tasks;
   * otherwise the replicas are only preferred (locality pack).
   */
  private dataPlacement(data: number[] | undefined): Pick<JobSpec, 'locality' | 'constraints'> {
    if (!data) return { locality: { mode: 'any', scope: 'server' }, constraints: {} };
    const specs = data.map((s) => (this.world.servers[s] as { spec: JobSpecServer }).spec);
    const dataServers = specs.map((x) => x.id);
    const set = specs[0]?.attributes[COPYSET_ATTR];
    if (set !== undefined && specs.every((x) => x.attributes[COPYSET_ATTR] === set)) {
      return { locality: { mode: 'any', scope: 'server' }, constraints: { attributes: { [COPYSET_ATTR]: set }, dataServers } };
    }
    return { locality: { mode: 'pack', scope: 'server' }, constraints: { dataServers } };
  }

  submit(job: SimJob): void {
    const target = this.target(job.declared);
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
    return { job, spec: this.specOf(job, tasks.length, data), target, pending: tasks, admitted: false, retries: 0, queuedAt: NaN, estimate: NaN };
  }

  private enqueue(r: Request): void {
    const a = this.agents[this.rr++ % this.agents.length] as Agent;
    this.push(a.queue, r);
    this.pump(a);
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

  private excludeFor(a: Agent, ru: number, until: number): void {
    a.exclude.set(ru, until);
    a.excludeSet.add(ru);
  }

  private pruneExclude(a: Agent): void {
    const now = this.world.engine.now();
    for (const [ru, until] of a.exclude) {
      if (until <= now) {
        a.exclude.delete(ru);
        a.excludeSet.delete(ru);
      }
    }
  }

  private process(a: Agent, r: Request): void {
    const eng = this.world.engine;
    const now = eng.now();
    this.pruneExclude(a);
    const chunk = r.pending.slice(0, PICKS_PER_TXN);
    const head = r.job.head;
    const overdue = !Number.isNaN(r.queuedAt) && now - r.queuedAt >= r.spec.maxQueueMs;
    const d = decide(a.ctx, r.spec, r.target, chunk.length, this.cfg, {
      skipAdmission: r.admitted || overdue,
      exclude: a.excludeSet,
    });
    const cost = TARCIL.DECISION_BASE_MS + TARCIL.DECISION_PER_CANDIDATE_MS * d.selection.candidatesSeen;
    head.decisionMs += cost;
    head.Rsum += d.R;
    head.Rn++;
    this.c.decisions++;
    this.c.Rsum += d.R;
    const release = (after: number): void => {
      eng.setTimer(after, () => {
        a.busy = false;
        this.pump(a);
      });
    };

    if (d.verdict && d.verdict.action === 'queue') {
      // Admission control: wait for the estimated time (bounded), then ask again.
      this.c.queued++;
      if (Number.isNaN(r.queuedAt)) {
        r.queuedAt = now;
        r.estimate = d.verdict.estimateMs ?? NaN;
      }
      const left = r.spec.maxQueueMs - (now - r.queuedAt);
      const wait = Math.max(1, Math.min(d.verdict.estimateMs ?? TARCIL.RECHECK_MS, TARCIL.RECHECK_MS, left));
      release(cost);
      eng.setTimer(cost + wait, () => this.requeue(a, r));
      return;
    }
    if (d.verdict?.action === 'best-effort') this.c.bestEffort++;
    if (!r.admitted) {
      r.admitted = true;
      if (!Number.isNaN(r.queuedAt)) head.waits.push({ estimate: r.estimate, realised: now - r.queuedAt });
    }

    const picks = d.selection.picks;
    if (picks.length === 0) {
      // Nothing free and eligible in the (stale) view: wait for a free RU.
      this.c.capacityWaits++;
      release(cost);
      this.push(this.waiters, r);
      eng.setTimer(TARCIL.RECHECK_MS, () => this.wake(r));
      r.agent = a;
      return;
    }
    const sendAt = cost + TARCIL.COMMIT_ISSUE_MS;
    const storeAt = now + sendAt + TARCIL.COMMIT_RTT_MS / 2;
    for (const p of picks) this.excludeFor(a, p.id, storeAt + TARCIL.WATCH_DELAY_MS + TARCIL.COMMIT_RTT_MS);
    release(sendAt);
    // Remove the chunk's tasks from pending while the commit is in flight.
    const inFlight = chunk.slice(0, picks.length);
    r.pending = r.pending.filter((t) => !inFlight.includes(t));
    const Qs = picks.map((p) => p.quality.Q);
    eng.at(storeAt, () => {
      this.c.commits++;
      head.commits++;
      head.commitMs += TARCIL.COMMIT_RTT_MS;
      let conflicts = 0;
      const failed: SimTask[] = [];
      picks.forEach((p, k) => {
        const task = inFlight[k] as SimTask;
        if (this.world.occ[p.id] === null && this.world.rev[p.id] === p.ruRev) {
          task.Q = Qs[k];
          task.acceptable = p.quality.acceptable;
          this.world.startTask(task, p.id);
          this.c.picks++;
        } else {
          conflicts++;
          failed.push(task);
          // The else branch of the txn returns the RU's current value: the agent knows it now.
          this.excludeFor(a, p.id, eng.now() + TARCIL.COMMIT_RTT_MS / 2 + TARCIL.WATCH_DELAY_MS);
        }
      });
      this.c.conflicts += conflicts;
      head.conflicts += conflicts;
      const wasIdle = r.pending.length === 0 && failed.length === 0;
      if (wasIdle) return;
      r.pending = failed.concat(r.pending);
      let delay = TARCIL.COMMIT_RTT_MS / 2;
      if (conflicts > 0) {
        r.retries++;
        if (r.retries > TARCIL.MAX_RETRIES) {
          this.c.readmissions++;
          r.retries = 0;
          r.admitted = false;
          r.queuedAt = NaN;
        }
        delay += Math.min(TARCIL.BACKOFF_MAX_MS, TARCIL.BACKOFF_BASE_MS * 2 ** Math.max(0, r.retries - 1));
      }
      // Only the first chunk's tail goes straight back; the rest of a large job follows.
      if (failed.length > 0 || picks.length === chunk.length) eng.setTimer(delay, () => this.requeue(a, r));
      else {
        // Fewer picks than asked: the view had too few free RUs; wait for frees.
        this.push(this.waiters, r);
        r.agent = a;
      }
    });
  }

  private wake(r: Request): void {
    const k = this.waiters.indexOf(r);
    if (k < 0) return;
    this.waiters.splice(k, 1);
    const a = r.agent ?? this.firstAgent;
    this.requeue(a, r);
  }

  /** A freed RU wakes the first waiting request that may use it (hard constraints checked). */
  private wakeFor(ru: number): void {
    const attrs = this.world.server(ru).spec.attributes;
    const k = this.waiters.findIndex((w) => {
      const want = w.spec.constraints.attributes;
      if (!want) return true;
      for (const [key, v] of Object.entries(want)) if (attrs[key] !== v) return false;
      return true;
    });
    if (k < 0) return;
    const r = this.waiters.splice(k, 1)[0] as Request;
    // The freed RU reaches the agents' cache after the watch delay.
    const a = r.agent ?? this.firstAgent;
    this.world.engine.setTimer(TARCIL.WATCH_DELAY_MS, () => this.requeue(a, r));
  }
}
