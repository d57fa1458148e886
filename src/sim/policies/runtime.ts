/**
 * The run-time loop in virtual time (paper §2 and §5.2): every server's load monitor, fed by the
 * ground truth's rates, with the rules of src/monitor/runtime-loop.ts (the live monitors' rules).
 *
 * - Block: a server with a task below `slowBelow` of its expected rate takes no new placements
 *   until every task is back at `recoverAbove`; the agents' view hears it after the watch delay,
 *   as a live agent hears the node's server record.
 * - Move: a task of a job the policy schedules that stays slow for `moveAfterMs`, when a restart
 *   elsewhere is expected to finish it sooner and the cell-wide budget allows, is handed to the
 *   policy, which places a new copy (excluding the slow server) and only then stops the old one.
 * - Autoscale: a task of a scale-out job (SimJob.scaleOut) that stays slow for `moveAfterMs` gets
 *   its job one more task, placed by the policy like any other, up to the job's `maxTasks`, as the
 *   live owner does (src/owner/moves.ts `scaleOut`): within the same budget as moves, and
 *   looked at again after another wait while the task stays slow. A job grows by at most one task
 *   per wait, and not while its previous new task is still being placed (live, each slow task
 *   keeps its own wait, and the job record's revision check refuses a second growth begun at the
 *   same revision). Scale-out comes before a move, as live: a scale-out job is moved only once it
 *   has all the tasks it may have.
 *
 * "Expected rate" is the task's rate on its platform without interference: the share is the
 * inverse of its interference slowdown, which the truth knows and a live monitor measures.
 */
import { BlockState, MoveBudget, moveWorthIt, roomToGrow, runtimeLoopConfig, type RuntimeLoopConfig } from '../../monitor/runtime-loop.ts';
import type { ProfileLearner } from '../../model/learn.ts';
import { N_RESOURCES } from '../../model/types.ts';
import { TARCIL } from '../constants.ts';
import type { Server, SimJob, SimTask, View, World } from '../world.ts';

export interface SimRuntimeOptions {
  /** Keep placements away from a server while one of its tasks is slow. */
  block?: boolean;
  /** Move slow tasks of jobs that allow it (in the simulator: every job the policy schedules). */
  move?: boolean;
  /** Learn the workload classes' profiles from what the monitors see (src/model/learn.ts). */
  learn?: boolean;
  /** Add tasks to scale-out jobs whose tasks run slow (up to SimJob.scaleOut.maxTasks). */
  autoscale?: boolean;
  config?: Partial<RuntimeLoopConfig>;
}

export interface RuntimeCounters {
  blocks: number;
  unblocks: number;
  /** Slow tasks whose time to move came. */
  moveChecks: number;
  /** Checks that asked the policy for a new RU. */
  moveAsks: number;
  /** Moves not asked: no time saved by a restart, or the budget was spent, or the task's moves were used up. */
  moveNoGain: number;
  moveNoBudget: number;
  moveMaxed: number;
  /** Tasks moved, and the work (reference ms) their restarts threw away. */
  moves: number;
  moveLostWorkMs: number;
  /** Asks that found no acceptable RU, or lost the commit, or whose task ended meanwhile. */
  moveNoBetterRu: number;
  moveConflicts: number;
  moveObsolete: number;
  /** Observations handed to the profile learner. */
  observations: number;
  /** Autoscale: slow tasks of scale-out jobs whose time came with their job below its limit. */
  scaleOutChecks: number;
  /** Checks that asked the policy for one more task. */
  scaleOutAsks: number;
  /** Checks not asked: the job grew less than a wait ago or its last new task is still being placed; or the budget was spent. */
  scaleOutHeld: number;
  scaleOutNoBudget: number;
  /** Checks not asked: the cell had no room (tasks waiting, or too few RUs free: roomToGrow). */
  scaleOutNoRoom: number;
  /** Checks of jobs at their limit (then moved, if moves are on). */
  scaleOutMaxed: number;
  /** Tasks added (started), and asks whose job had no running task left when the new one could start. */
  scaleOuts: number;
  scaleOutObsolete: number;
}

export class SimLoadMonitor {
  readonly cfg: RuntimeLoopConfig;
  readonly c: RuntimeCounters = {
    blocks: 0,
    unblocks: 0,
    moveChecks: 0,
    moveAsks: 0,
    moveNoGain: 0,
    moveNoBudget: 0,
    moveMaxed: 0,
    moves: 0,
    moveLostWorkMs: 0,
    moveNoBetterRu: 0,
    moveConflicts: 0,
    moveObsolete: 0,
    observations: 0,
    scaleOutChecks: 0,
    scaleOutAsks: 0,
    scaleOutHeld: 0,
    scaleOutNoBudget: 0,
    scaleOutNoRoom: 0,
    scaleOutMaxed: 0,
    scaleOuts: 0,
    scaleOutObsolete: 0,
  };
  private readonly blocks = new Map<Server, BlockState<SimTask>>();
  /** Reused by assess: the tasks of a server below the recovery share, with their shares. */
  private readonly below: [SimTask, number][] = [];
  private readonly slowSince = new Map<SimTask, number>();
  /** Tasks the policy is placing a new copy of. */
  private readonly moving = new Set<SimTask>();
  /** Scale-out jobs whose new task the policy is placing, and when each job last grew. */
  private readonly growing = new Set<SimJob>();
  private readonly grewAt = new WeakMap<SimJob, number>();
  private readonly budget: MoveBudget;

  constructor(
    private readonly world: World,
    private readonly view: View,
    private readonly opts: SimRuntimeOptions,
    /** Whether the policy schedules this job (resident load is never moved). */
    private readonly owns: (job: SimJob) => boolean,
    /** Asks the policy to place a new copy of the task and then stop the old one. */
    private readonly requestMove: (task: SimTask) => void,
    private readonly learner?: ProfileLearner,
    /** Asks the policy to place one more task of a scale-out job (it answers scaledOut or notScaledOut). */
    private readonly requestScaleOut?: (job: SimJob) => void,
    /** Tasks the policy holds that wait to be placed (autoscale grows only when none does). */
    private readonly waitingTasks: () => number = () => 0,
  ) {
    this.cfg = runtimeLoopConfig(opts.config);
    this.budget = new MoveBudget(this.cfg, world.engine.now());
    world.onRerate = (s) => this.assess(s);
  }

  /** A real vector of each class observed (the truth, for reporting how far the estimates are). */
  private readonly realOf = new Map<string, readonly number[]>();

  /**
   * For reports only (the scheduler never sees the truth): the mean absolute difference, in c_i
   * points over every resource of every class observed, of the declared and of the learned vector
   * from a real vector of the class (with class-wide profile error, the class's one real vector).
   */
  learningError(learner: ProfileLearner): { declaredError: number; learnedError: number; classesLearned: number } {
    let d = 0;
    let l = 0;
    let n = 0;
    for (const [name, p] of learner.snapshot()) {
      const real = this.realOf.get(name);
      if (!real) continue;
      for (let i = 0; i < N_RESOURCES; i++) {
        d += Math.abs((p.declared[i] as number) - (real[i] as number));
        l += Math.abs((p.learned[i] as number) - (real[i] as number));
      }
      n++;
    }
    return { declaredError: n ? d / (n * N_RESOURCES) : NaN, learnedError: n ? l / (n * N_RESOURCES) : NaN, classesLearned: n };
  }

  private readonly est = new Float64Array(N_RESOURCES);
  private readonly C = new Float64Array(N_RESOURCES);

  /**
   * Learning: each task of the policy's jobs on s is one observation, its share of expected rate
   * amid the pressure of its neighbours as the scheduler knows them (their scheduling vectors).
   */
  private observe(s: Server): void {
    const learner = this.learner as ProfileLearner;
    const others = s.rus - 1;
    if (others <= 0 || s.tasks.length < 2) return;
    const est = this.est;
    est.fill(0);
    for (const t of s.tasks) {
      const v = t.job.scheduledAs ?? t.job.declared;
      for (let i = 0; i < N_RESOURCES; i++) est[i] = (est[i] as number) + (v[i] as number);
    }
    for (const t of s.tasks) {
      if (!this.owns(t.job) || !(t.speed > 0)) continue;
      const v = t.job.scheduledAs ?? t.job.declared;
      for (let i = 0; i < N_RESOURCES; i++) this.C[i] = ((est[i] as number) - (v[i] as number)) / others;
      learner.observe(t.job.profile.name, t.job.declared, this.C, t.rate / t.speed);
      this.realOf.set(t.job.profile.name, t.job.real);
      this.c.observations++;
    }
  }

  /** The server's tasks were re-rated: block or unblock it, and note tasks that turned slow. */
  private assess(s: Server): void {
    if (this.learner) this.observe(s);
    const act = this.opts.move === true || this.opts.autoscale === true;
    if (!this.opts.block && !act) return;
    const now = this.world.engine.now();
    const below = this.below;
    below.length = 0;
    for (const t of s.tasks) {
      const share = t.speed > 0 ? t.rate / t.speed : 1;
      if (share < this.cfg.recoverAbove) below.push([t, share]);
      if (!act) continue;
      if (share < this.cfg.slowBelow) {
        if (!this.slowSince.has(t) && !this.moving.has(t) && this.owns(t.job) && (this.opts.move || t.job.scaleOut)) {
          this.slowSince.set(t, now);
          this.world.engine.after(this.cfg.moveAfterMs, () => this.due(t));
        }
      } else this.slowSince.delete(t);
    }
    if (!this.opts.block) return;
    let b = this.blocks.get(s);
    if (!b) {
      if (below.length === 0) return;
      b = new BlockState<SimTask>(this.cfg);
      this.blocks.set(s, b);
    }
    const was = b.blocked;
    const next = b.update(now, below);
    if (next === was) return;
    if (next) {
      this.c.blocks++;
      // Looked at again when the block's time limit comes, if nothing re-rates the server first.
      this.world.engine.after(this.cfg.maxBlockMs, () => this.assess(s));
    } else {
      this.c.unblocks++;
      if (b.deadline() === Infinity && below.length === 0) this.blocks.delete(s);
    }
    const id = s.spec.id;
    this.world.engine.after(TARCIL.WATCH_DELAY_MS, () => this.view.state.setBlocked(id, next));
  }

  /** A slow task's wait is over: grow its job if it scales out, else move it if a move pays. */
  private due(t: SimTask): void {
    const since = this.slowSince.get(t);
    if (since === undefined || t.state !== 'running') {
      this.slowSince.delete(t);
      return;
    }
    const now = this.world.engine.now();
    // Recovered and turned slow again since this check was set: wait for the newer one.
    if (now - since < this.cfg.moveAfterMs) return;
    // Checked again after another wait if nothing is done now.
    this.slowSince.delete(t);
    const j = t.job;
    if (this.opts.autoscale && j.scaleOut) {
      if (j.tasks.length < j.scaleOut.maxTasks) {
        this.scaleOut(t, now);
        return;
      }
      this.c.scaleOutMaxed++;
    }
    if (!this.opts.move) return;
    this.c.moveChecks++;
    if ((t.moves ?? 0) >= this.cfg.maxMovesPerTask) {
      this.c.moveMaxed++;
      return;
    }
    const remaining = Math.max(0, t.remaining - t.rate * (now - t.last));
    if (!moveWorthIt({ remaining, rateNow: t.rate, work: t.work, rateAfter: t.speed }, this.cfg)) {
      this.c.moveNoGain++;
      this.rearm(t, now);
      return;
    }
    if (!this.budget.take(now)) {
      this.c.moveNoBudget++;
      this.rearm(t, now);
      return;
    }
    this.c.moveAsks++;
    this.moving.add(t);
    this.requestMove(t);
  }

  /**
   * Autoscale: one more task for the slow task's job, if the job has not grown within the last
   * wait, its last new task is placed, and the budget allows. The task is looked at again after
   * another wait either way: still slow then, the job may grow again, up to its limit.
   */
  private scaleOut(t: SimTask, now: number): void {
    const j = t.job;
    this.c.scaleOutChecks++;
    const last = this.grewAt.get(j);
    if (this.growing.has(j) || (last !== undefined && now - last < this.cfg.moveAfterMs)) {
      this.c.scaleOutHeld++;
      this.rearm(t, now);
      return;
    }
    if (!this.requestScaleOut) return;
    if (!roomToGrow({ freeRus: this.world.free.size, totalRus: this.world.nRu, waitingTasks: this.waitingTasks() }, this.cfg)) {
      this.c.scaleOutNoRoom++;
      this.rearm(t, now);
      return;
    }
    if (!this.budget.take(now)) {
      this.c.scaleOutNoBudget++;
      this.rearm(t, now);
      return;
    }
    this.c.scaleOutAsks++;
    this.growing.add(j);
    this.grewAt.set(j, now);
    this.rearm(t, now);
    this.requestScaleOut(j);
  }

  /** The policy's answer to a scale-out: the new task started (joined the job), or the job had no running task left. */
  scaledOut(j: SimJob): void {
    this.growing.delete(j);
    this.c.scaleOuts++;
  }

  notScaledOut(j: SimJob): void {
    this.growing.delete(j);
    this.c.scaleOutObsolete++;
  }

  /** Still slow: look again after another wait. */
  private rearm(t: SimTask, now: number): void {
    this.slowSince.set(t, now);
    this.world.engine.after(this.cfg.moveAfterMs, () => this.due(t));
  }

  /** The policy's answer to a move it was asked for. */
  moved(t: SimTask, lostWork: number): void {
    this.moving.delete(t);
    this.c.moves++;
    this.c.moveLostWorkMs += lostWork;
  }

  notMoved(t: SimTask, why: 'no-better-ru' | 'conflict' | 'obsolete'): void {
    this.moving.delete(t);
    if (why === 'no-better-ru') this.c.moveNoBetterRu++;
    else if (why === 'conflict') this.c.moveConflicts++;
    else this.c.moveObsolete++;
    if (why !== 'obsolete' && t.state === 'running') this.rearm(t, this.world.engine.now());
  }
}
