/**
 * The oracle: a clairvoyant scheduler that bounds what a practical policy can attain on the same
 * workload under the same truth. It reads the ground truth itself — every job's real vector, every
 * platform's speed for it, the truth's interference model (World.perf) and every running task's
 * rate and remaining work — where the practical policies see declared (or learned) profiles
 * through a quality Q. It pays nothing to decide or commit: no decision time, no watch delay, no
 * conflict, no sampling (every server with a free RU is looked at), and no admission wait: a task
 * waits only while no RU is free, or while the short-task reserve holds it (below). Waiting jobs are served shortest first (the job's ideal time,
 * which it knows; ties in arrival order): of the orders measured (W3, seed 1; % of ideal at gain
 * 2.5 / profile error sd 10), arrival order reached 64.9 / 76.1, highest response ratio next 67.3 /
 * 76.5 and shortest first 68.0 / 76.6. A bound that served arrivals in order would be beaten on
 * its own terms by a practical policy that orders its waiters better (tarcil's `ratio` wait order).
 *
 * It keeps the practical policy's short-task reserve (agent/short-reserve.ts, the default share):
 * while the free RUs are at or below that share of the cell's, a job longer than the mean (its
 * ideal time against the mean over every task that arrived, which it knows) is passed over for
 * shorter ones behind it. Without it a practical policy that keeps the reserve beats the oracle
 * where the cell fills; larger shares raise the oracle further still, since the mean of per-job
 * ratios rewards holding long jobs back (bench/README, truths): the bound is for tarcil's rules
 * with perfect knowledge, not for every rule.
 *
 * Each task goes, one at a time, to the free RU that maximises the truth's marginal mean
 * performance (the figure every W3 table reports, ideal / response per job):
 *
 *   gain(s) = ideal_J / (waited_J + d)  −  Σ_{tasks u already on s} ( ideal_K / R_u − ideal_K / (R_u + lost_u) )
 *   d       = work · slowdown_J(s) / speed_J(s)
 *   lost_u  = min(rem_u / rate'_u, d) · (1 − rate'_u / rate_u)
 *
 * where slowdown_J(s) is the truth's slowdown of job J's task with its own load added to server s,
 * K is u's job, R_u = waited_K + rem_u / rate_u (u's remaining work at its present rate) and
 * rate'_u the rate the newcomer leaves it: while both run, u loses that share of its progress,
 * made up later at its own rate. So it weighs the newcomer's own speed (platform and
 * interference) against the damage it does to the tasks already there for as long as it stays,
 * each job's loss counted as the mean counts it; a remote read (a data-constrained task away from
 * its data) is part of the work. On W3 at the committed truth (seed 1) this scores 84.9% against
 * 83.4% for the newcomer's own speed alone and 82.5% for damage counted over the neighbours'
 * whole remaining time; at gain 2.5, 64.9% against 56.6% and 63.6% (all three serving their
 * waiting jobs in arrival order, as the oracle did then).
 *
 * Why it is a fair upper bound for the practical policies. Each of them places with less: a
 * profile that may be wrong, Q's lexicographic reading of it rather than the truth's sum over all
 * resources, a sample of the RUs rather than all of them, a view that lags, decisions and commits
 * that take time and may conflict, waits that admission imposes, and run times it does not know.
 * The oracle has every one of those removed and keeps only what no online scheduler can escape:
 * capacity, and not knowing the jobs that have not arrived yet. It is a bound in that sense — the best of the greedy online
 * placements the practical policies approximate — and not a proof of optimality: a scheduler
 * that waits for a better RU could, in principle, beat a greedy one on some job; `bench truths`
 * reports every policy against it, so a policy above 100% of the oracle would show it.
 *
 * Why greedy and not exact. The exact optimum is the assignment of every task of the run (W3:
 * about 150,000 tasks over 4,178 RUs and 7,200 arrivals) to an RU and a start time, with each
 * task's rate a non-linear function of everything that shares its server at every moment and
 * re-rated whenever a neighbour comes or goes: a time-coupled non-linear integer programme, far
 * beyond what can be solved at this scale (a time-indexed formulation alone has tasks × RUs ×
 * time slots variables). Even the problem of one arrival alone (its tasks over the free RUs, the
 * job's time its slowest task's, its tasks adding to each other's load on a shared server) is a
 * non-linear bottleneck assignment; the greedy above solves it task by task with every server
 * re-scored after each pick.
 */
import { slowdown, type PerfParams } from '../../model/perf.ts';
import { N_RESOURCES } from '../../model/types.ts';
import type { Rng } from '../../util/rng.ts';
import { PERF } from '../constants.ts';
import type { Server, SimJob, SimTask, World } from '../world.ts';
import { freeRuOn, type Policy } from './types.ts';
import { SHORT_RESERVE } from '../../agent/defaults.ts';

/**
 * What the oracle is allowed to know, for the ladder that splits its lead over a practical policy
 * (bench/oracle-ladder.ts). Each option takes away one thing the practical policies lack; all
 * absent is the bound itself.
 */
export interface OracleOptions {
  /** Looks only at the servers of R·m free RUs drawn uniformly for a job of m pending tasks (tarcil's sample), not at every server. */
  sampleR?: number;
  /** Reads each job's declared vector, as the practical policies do, instead of its real one. */
  declared?: boolean;
  /** Scores by these interference constants instead of the truth's (what a scheduler believes). */
  believes?: PerfParams;
  /** Scores the newcomer's own speed only, not what it costs the residents (with declared or believes). */
  ownOnly?: boolean;
  /** The short-task reserve's share (default: the practical policy's, SHORT_RESERVE; 0: none). */
  reserve?: number;
}

export class OraclePolicy implements Policy {
  readonly name = 'oracle';
  /** The servers the job being placed may use (sampleR), or null for all. */
  private allowed: Uint8Array | null = null;
  /** The residents' pressure as a scheduler that knows less sums it (gain). */
  private readonly before = new Float64Array(N_RESOURCES);
  /** Jobs with tasks not yet placed, shortest ideal first, then arrival order. */
  private readonly queue: SimJob[] = [];
  private readonly scratch = new Float64Array(N_RESOURCES);
  /** Each server's gain for the job being placed (NaN: to compute), valid until a pick changes it. */
  private readonly gains: Float64Array;
  private readonly c = { placements: 0, capacityWaits: 0, serversScored: 0, reserveHolds: 0 };
  /** Ideal time summed over every task that arrived, and their count: what "long" is measured against. */
  private idealSum = 0;
  private idealN = 0;
  private readonly reserve: number;

  constructor(
    private readonly world: World,
    private readonly rng: Rng,
    private readonly opts: OracleOptions = {},
  ) {
    if (opts.sampleR !== undefined && !(Number.isInteger(opts.sampleR) && opts.sampleR >= 1))
      throw new Error(`oracle sampleR: must be an integer ≥ 1 (got ${opts.sampleR})`);
    this.gains = new Float64Array(world.servers.length);
    if (opts.sampleR !== undefined) this.allowed = new Uint8Array(world.servers.length);
    this.reserve = opts.reserve ?? SHORT_RESERVE;
    if (!(this.reserve >= 0 && this.reserve < 1)) throw new Error(`oracle reserve: must be a number in [0, 1) (got ${opts.reserve})`);
    world.onFree = () => this.dispatch();
  }

  counters(): Record<string, number> {
    return { ...this.c };
  }

  submit(job: SimJob): void {
    this.idealSum += job.ideal * job.tasks.length;
    this.idealN += job.tasks.length;
    const q = this.queue;
    // After every job with a shorter ideal, or the same and an earlier arrival.
    let lo = 0;
    let hi = q.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((q[mid] as SimJob).ideal <= job.ideal) lo = mid + 1;
      else hi = mid;
    }
    q.splice(lo, 0, job);
    // A job arriving while others still wait for capacity waits too.
    if (q.length > 1) this.c.capacityWaits++;
    this.dispatch();
  }

  /**
   * Places pending tasks, the shortest waiting job's first, while RUs are free; while the free RUs
   * are at or below the reserve, jobs longer than the mean are passed over.
   */
  private dispatch(): void {
    const w = this.world;
    const q = this.queue;
    const keep = this.reserve * w.ruServer.length;
    const mean = this.idealN > 0 ? this.idealSum / this.idealN : Infinity;
    for (let i = 0; i < q.length && w.free.size > 0;) {
      const job = q[i] as SimJob;
      if (w.free.size <= keep && job.ideal > mean) {
        this.c.reserveHolds++;
        i++;
        continue;
      }
      this.placeJob(job);
      if (job.tasks.some((t) => t.state === 'pending')) return;
      q.splice(i, 1);
    }
  }

  private placeJob(job: SimJob): void {
    const w = this.world;
    this.gains.fill(NaN);
    const allowed = this.allowed;
    if (allowed) this.draw(job);
    for (const t of job.tasks) {
      if (t.state !== 'pending') continue;
      if (w.free.size === 0) return;
      let best = -1;
      let bestGain = -Infinity;
      // With a sample, a second look at a fresh one when the first has no room left.
      for (let look = 0; look < 2 && best < 0; look++) {
        if (look === 1) {
          if (!allowed) break;
          this.draw(job);
        }
        for (const s of w.servers) {
          if (s.free === 0 || (allowed && allowed[s.idx] === 0)) continue;
          let g = this.gains[s.idx] as number;
          // A task with input data scores each server afresh (its remote read depends on it).
          if (Number.isNaN(g) || t.data) {
            g = this.gain(t, s);
            if (!t.data) this.gains[s.idx] = g;
          }
          if (g > bestGain) {
            bestGain = g;
            best = s.idx;
          }
        }
      }
      if (best < 0) return;
      const ru = freeRuOn(w, best);
      w.startTask(t, ru);
      this.c.placements++;
      // Only the chosen server changed for the job's next task.
      this.gains[best] = NaN;
    }
  }

  /** The servers of R·m free RUs drawn uniformly (with replacement), m the job's pending tasks; their gains to compute afresh. */
  private draw(job: SimJob): void {
    const w = this.world;
    const allowed = this.allowed as Uint8Array;
    allowed.fill(0);
    this.gains.fill(NaN);
    const m = job.tasks.reduce((n, t) => n + (t.state === 'pending' ? 1 : 0), 0);
    for (let i = 0; i < (this.opts.sampleR ?? 1) * m; i++) allowed[w.ruServer[w.free.at(this.rng.int(w.free.size))] as number] = 1;
  }

  /**
   * The truth's marginal mean performance of placing task t on server s now (see the header), or,
   * with OracleOptions that take knowledge away, the same figure as a scheduler that knows less
   * sees it: the vectors it reads (declared or real), the constants it believes, the residents'
   * rates before and after both its beliefs; their remaining work and every job's ideal time are
   * still known. Without those options the residents' rates are their true ones.
   */
  private gain(t: SimTask, s: Server): number {
    this.c.serversScored++;
    const w = this.world;
    const job = t.job;
    const now = w.engine.now();
    const speed = job.profile.platformPerf[s.spec.platform] ?? 1;
    const work = t.data && !t.data.includes(s.idx) ? t.work * (1 + PERF.REMOTE_READ_FRACTION) : t.work;
    if (!w.interference) return job.ideal / (now - job.arrival + work / speed);
    const o = this.opts;
    const believed = o.declared === true || o.believes !== undefined || o.ownOnly === true;
    const perf = o.believes ?? w.perf;
    const vec = (j: SimJob): readonly number[] => (o.declared ? j.declared : j.real);
    // The residents' pressure: the truth's, kept by the world, or summed from the vectors read.
    let before: ArrayLike<number> = s.sum;
    if (believed) {
      const b = this.before;
      b.fill(0);
      for (const u of s.tasks) {
        const v = vec(u.job);
        for (let i = 0; i < N_RESOURCES; i++) b[i] = (b[i] as number) + (v[i] as number);
      }
      before = b;
    }
    const mineVec = vec(job);
    const sum = this.scratch;
    for (let i = 0; i < N_RESOURCES; i++) sum[i] = (before[i] as number) + (mineVec[i] as number);
    const mine = (work * slowdown(mineVec, sum, s.rus, perf)) / speed;
    let g = job.ideal / (now - job.arrival + mine);
    if (o.ownOnly) return g;
    for (const u of s.tasks) {
      const rem = u.remaining - u.rate * (now - u.last);
      if (!(rem > 0) || !Number.isFinite(rem)) continue;
      const k = u.job;
      const rate = believed ? u.speed / slowdown(vec(k), before, s.rus, perf) : u.rate;
      const after = u.speed / slowdown(vec(k), sum, s.rus, perf);
      if (after >= rate) continue;
      const waited = now - k.arrival;
      const r0 = waited + rem / rate;
      // While both run, u does `after` instead of `rate`: the work it loses is done later at its rate.
      const lost = Math.min(rem / after, mine) * (1 - after / rate);
      g -= k.ideal / r0 - k.ideal / (r0 + lost);
    }
    return g;
  }
}
