/**
 * The simulated cluster as it really is: which task holds which RU, the revision of every RU
 * (the etcd mod revision a commit compares), the real interference on every server and the
 * progress of every running task. Policies act on it only through startTask (and read it through
 * views, which may lag).
 */
import { AdmissionCounters } from '../admission/index.ts';
import { wireAdmission } from '../agent/core.ts';
import { N_RESOURCES, type ServerSpec, type WorkloadProfile } from '../model/types.ts';
import { RuIndex, type Occupant } from '../sampling/ru-index.ts';
import { IndexedSet } from '../sampling/indexed-set.ts';
import { contention, jobTarget, scoreRu, type JobTarget } from '../quality/index.ts';
import type { Rng } from '../util/rng.ts';
import { PERF, UTIL_SAMPLE_MS } from './constants.ts';
import type { Engine } from './engine.ts';
import { COMMITTED_TRUTH, slowdown, type PerfParams, type Truth } from '../model/perf.ts';

import { simJobId, type SimJob, type SimTask } from './job.ts';

export { addedTask, makeJob, simJobId, type SimJob, type SimTask } from './job.ts';

export interface Server {
  idx: number;
  spec: ServerSpec;
  base: number;
  rus: number;
  /** Σ real caused over occupants. */
  sum: Float64Array;
  /** Its running tasks, kept only in a world with interference (the tasks re-rated when a neighbour comes or goes). */
  tasks: SimTask[];
  free: number;
}

export interface View {
  state: RuIndex;
  admission: AdmissionCounters | undefined;
  delay: number;
}

export interface WorldOptions {
  interference: boolean;
  /** The ground truth tasks run by (default: the committed one). */
  truth?: Truth;
  /** Record utilisation every this many ms (0: off). */
  utilEvery?: number;
  /** Score every placement's Q against the truth at start (Fig. 15c/17, for every policy). */
  scoreQ?: boolean;
  /**
   * Keep every finished job (with its tasks) in `completed`, for inspection. Off by default: a
   * run takes each job's figures when it finishes (onJobDone) and lets it go, so memory follows
   * what is live, not what has happened.
   */
  keepCompleted?: boolean;
}

export class World {
  readonly engine: Engine;
  readonly rng: Rng;
  readonly servers: Server[] = [];
  readonly nRu: number;
  readonly ruServer: Int32Array;
  readonly occ: (SimTask | null)[];
  readonly rev: Float64Array;
  /** Σ real caused over each server's occupants: server i's at [i·N_RESOURCES, (i+1)·N_RESOURCES). */
  private readonly sums: Float64Array;
  readonly free = new IndexedSet();
  readonly interference: boolean;
  /** The ground truth this world runs tasks by; `perf` is its interference model. */
  readonly truth: Truth;
  readonly perf: PerfParams;
  private revCounter = 0;
  /** RUs reserved for a gang's task (hold), not started yet. */
  private readonly held = new Set<number>();
  private readonly views: View[] = [];
  /** Policies hear about every freed RU (after the task's end) here. */
  onFree: ((ru: number, task: SimTask) => void) | undefined;
  /** The runner hears about finished jobs here. */
  onJobDone: ((job: SimJob) => void) | undefined;
  /** A load monitor hears here when the rates of a server's tasks were recomputed (with interference). */
  onRerate: ((s: Server) => void) | undefined;
  /** Finished jobs (chain ends), kept only with WorldOptions.keepCompleted. */
  readonly completed: SimJob[] = [];
  /** Finished jobs (chain ends), counted whether kept or not. */
  completedCount = 0;
  private readonly keepCompleted: boolean;
  readonly util: { t: number; busy: number }[] = [];
  busy = 0;
  /** Resident (unscheduled) occupants: counted apart from the measured load. */
  resident = 0;
  tasksStarted = 0;
  tasksFinished = 0;
  readonly platforms: readonly string[];
  private readonly maxPerfCache = new Map<WorkloadProfile, number>();
  private readonly scoreQ: boolean;
  private readonly targets = new Map<readonly number[], JobTarget>();
  private readonly scratchC: number[] = [];
  private readonly scratchSum = new Array<number>(N_RESOURCES).fill(0);
  /** A task's finish event, made once: the event carries the task, no closure per task. */
  private readonly finishFn = (t: SimTask): void => this.finish(t);

  constructor(engine: Engine, rng: Rng, specs: readonly ServerSpec[], opts: WorldOptions) {
    this.engine = engine;
    this.rng = rng;
    this.interference = opts.interference;
    this.truth = opts.truth ?? COMMITTED_TRUTH;
    this.perf = this.truth.perf;
    this.scoreQ = opts.scoreQ ?? false;
    this.keepCompleted = opts.keepCompleted ?? false;
    let base = 0;
    // Every server's load sum in one array (a server's `sum` is its slice), side by side in memory.
    this.sums = new Float64Array(specs.length * N_RESOURCES);
    for (const spec of specs) {
      const idx = this.servers.length;
      this.servers.push({ idx, spec, base, rus: spec.rus, sum: this.sums.subarray(idx * N_RESOURCES, (idx + 1) * N_RESOURCES), tasks: [], free: spec.rus });
      base += spec.rus;
    }
    this.nRu = base;
    this.ruServer = new Int32Array(base);
    for (const s of this.servers) for (let i = 0; i < s.rus; i++) this.ruServer[s.base + i] = s.idx;
    this.occ = new Array<SimTask | null>(base).fill(null);
    this.rev = new Float64Array(base);
    for (let i = 0; i < base; i++) this.free.add(i);
    this.platforms = [...new Set(specs.map((s) => s.platform))];
    const every = opts.utilEvery ?? UTIL_SAMPLE_MS;
    if (every > 0) this.sampleUtil(every);
  }

  private sampleUtil(every: number): void {
    this.util.push({ t: this.engine.now(), busy: this.busy });
    this.engine.after(every, () => {
      // Stop sampling once nothing is left to happen, or the run would never end.
      if (this.engine.pending > 0) this.sampleUtil(every);
    });
  }

  server(ru: number): Server {
    return this.servers[this.ruServer[ru] as number] as Server;
  }

  /** The job's best speed on this cluster's platforms: the denominator of "ideal". */
  maxPerf(profile: WorkloadProfile): number {
    let m = this.maxPerfCache.get(profile);
    if (m === undefined) {
      m = 0;
      for (const p of this.platforms) m = Math.max(m, profile.platformPerf[p] ?? 1);
      if (m <= 0) m = 1;
      this.maxPerfCache.set(profile, m);
    }
    return m;
  }

  /** A cluster view that follows the truth `delay` ms late (a cache fed by a watch). */
  addView(delay: number, withAdmission: boolean, seed = 0x7a3c11): View {
    const state = new RuIndex();
    let admission: AdmissionCounters | undefined;
    if (withAdmission) {
      admission = new AdmissionCounters({ clock: this.engine, seed });
      wireAdmission(state, admission);
    }
    state.batch(() => {
      for (const s of this.servers) state.upsertServer(s.spec);
      for (let ru = 0; ru < this.nRu; ru++) {
        const t = this.occ[ru];
        if (t) this.applyToView(state, ru, t, this.rev[ru] as number);
      }
    });
    const v: View = { state, admission, delay };
    this.views.push(v);
    return v;
  }

  private applyToView(state: RuIndex, ru: number, task: SimTask | null, rev: number, held = false): void {
    const s = this.server(ru);
    const occ = task ? this.occupantOf(task) : null;
    state.setRu({ server: s.spec.id, index: ru - s.base }, occ && held ? { ...occ, state: 'reserved' } : occ, rev);
  }

  occupantOf(task: SimTask): Occupant {
    if (!task.occupant) {
      task.occupant = {
        job: simJobId(task.job),
        task: task.index,
        caused: task.job.scheduledAs ?? task.job.declared,
        priority: task.job.priority,
        state: 'busy',
      };
    }
    return task.occupant;
  }

  private publish(ru: number, task: SimTask | null, held = false): void {
    const rev = this.rev[ru] as number;
    for (const v of this.views) {
      if (v.delay <= 0) this.applyToView(v.state, ru, task, rev, held);
      else this.engine.after(v.delay, () => this.applyToView(v.state, ru, task, rev, held));
    }
  }

  /**
   * Reserves a free RU for a task of a gang: taken (a commit comparing its older revision fails)
   * and shown as reserved, but idle until the task starts there (startTask) or it is given back
   * (unhold).
   */
  hold(task: SimTask, ru: number): void {
    if (this.occ[ru] !== null) throw new Error(`RU ${ru} double-booked (job ${task.job.id} task ${task.index})`);
    const s = this.server(ru);
    this.occ[ru] = task;
    this.rev[ru] = ++this.revCounter;
    this.free.delete(ru);
    s.free--;
    this.held.add(ru);
    this.publish(ru, task, true);
  }

  /** Gives a reserved RU back (free again). */
  unhold(ru: number): void {
    if (!this.held.delete(ru)) throw new Error(`RU ${ru} is not reserved`);
    const s = this.server(ru);
    this.occ[ru] = null;
    this.rev[ru] = ++this.revCounter;
    this.free.add(ru);
    s.free++;
    this.publish(ru, null);
  }

  /**
   * Starts a task on a free RU. Throws if the RU is taken: no policy may double-book. `extraWork`
   * (reference ms) holds the RU before the task's own work starts (a move's pause). A task added
   * to a scale-out job (index -1) joins the job here and takes its share of the job's work
   * (see `join`); it throws unless the job has a running task to share with (`canJoin`).
   */
  startTask(task: SimTask, ru: number, extraWork = 0): void {
    const s = this.server(ru);
    if (this.occ[ru] !== null) {
      // Only the task an RU is reserved for may start there.
      if (this.occ[ru] !== task || !this.held.delete(ru)) throw new Error(`RU ${ru} double-booked (job ${task.job.id} task ${task.index})`);
      this.occ[ru] = null;
      this.free.add(ru);
      s.free++;
    }
    if (task.state !== 'pending') throw new Error(`task ${task.job.id}/${task.index} started twice`);
    const now = this.engine.now();
    this.occ[ru] = task;
    this.rev[ru] = ++this.revCounter;
    this.free.delete(ru);
    s.free--;
    this.busy++;
    const restart = (task.moves ?? 0) > 0;
    const joins = task.index < 0;
    if (joins) {
      if (!this.canJoin(task.job)) throw new Error(`task added to job ${task.job.id} with no running task to share with`);
      this.join(task, now);
    }
    if (!restart) this.tasksStarted++;
    task.state = 'running';
    task.ru = ru;
    task.start = now;
    task.last = now;
    const remote = task.data !== undefined && !task.data.includes(s.idx);
    task.remote = remote;
    if (this.scoreQ) {
      // Before the task's own load joins the server: what the newcomer finds there.
      let target = this.targets.get(task.job.declared);
      if (!target) {
        target = jobTarget(task.job.declared);
        this.targets.set(task.job.declared, target);
      }
      for (let i = 0; i < N_RESOURCES; i++) this.scratchSum[i] = s.sum[i] as number;
      task.placedQ = scoreRu(contention(this.scratchSum, s.rus, null, this.scratchC), target).Q;
    }
    if (remote) task.work += PERF.REMOTE_READ_FRACTION * task.work;
    else if (task.data) task.job.head.local++;
    const j = task.job;
    if (!restart && !joins) {
      j.started++;
      if (j.started === j.tasks.length) j.head.schedMs += now - j.arrival;
    }
    task.remaining = task.work + extraWork;
    task.speed = task.job.profile.platformPerf[s.spec.platform] ?? 1;
    const real = task.job.real;
    const sums = this.sums;
    const o = s.idx * N_RESOURCES;
    for (let i = 0; i < N_RESOURCES; i++) sums[o + i] = (sums[o + i] as number) + (real[i] as number);
    if (this.interference) {
      s.tasks.push(task);
      this.rerate(s);
    } else this.rateOne(task, s);
    this.publish(ru, task);
  }

  /** Whether a task added to this scale-out job could start now: it has running tasks to share with. */
  canJoin(job: SimJob): boolean {
    if (!job.scaleOut || job.done === job.tasks.length) return false;
    for (const t of job.tasks) if (t.state === 'running') return true;
    return false;
  }

  /**
   * A task added to a running scale-out job joins it: the work the job's running tasks still have
   * (their progress settled now) is spread evenly over them and the newcomer, so each finishes its
   * share at its own rate. Tasks of the job not started yet keep their own work.
   */
  private join(task: SimTask, now: number): void {
    const j = task.job;
    let left = 0;
    let k = 0;
    for (const t of j.tasks) {
      if (t.state !== 'running') continue;
      if (t.last < now) {
        t.remaining = Math.max(0, t.remaining - t.rate * (now - t.last));
        t.last = now;
      }
      left += t.remaining;
      k++;
    }
    const share = left / (k + 1);
    for (const t of j.tasks) {
      if (t.state !== 'running') continue;
      // Its whole work is what it has done and its share (a move would restart all of it).
      t.work -= t.remaining - share;
      t.remaining = share;
      this.rateOne(t, this.server(t.ru));
    }
    task.work = share;
    task.index = j.tasks.length;
    j.tasks.push(task);
    j.started++;
    j.scaledOut = (j.scaledOut ?? 0) + 1;
  }

  /** A long-running occupant no policy schedules (Tarcil §6.2.1 resident load). */
  placeResident(job: SimJob, ru: number): void {
    const task = job.tasks[0];
    if (!task) return;
    this.resident++;
    this.startTask(task, ru);
    this.tasksStarted--;
  }

  private rateOne(t: SimTask, s: Server): void {
    // t.speed: the job's speed on this server's platform, set when the task started here.
    t.rate = this.interference ? t.speed / slowdown(t.job.real, s.sum, s.rus, this.perf) : t.speed;
    if (!Number.isFinite(t.remaining)) return;
    // One finish event per task, moved when its rate changes (the same order of events as
    // scheduling a new one and dropping the old, without the dead event in the queue).
    const ms = t.remaining / t.rate;
    const eng = this.engine;
    const at = eng.now() + Math.max(0, ms);
    if (t.finishSlot >= 0 && eng.moveSlot(t.finishSlot, t.finishGen, at)) return;
    const slot = eng.postArg(at, this.finishFn, t);
    t.finishSlot = slot;
    t.finishGen = eng.genOf(slot);
  }

  /** Settles progress and re-rates every task of a server whose neighbourhood just changed. */
  private rerate(s: Server): void {
    const now = this.engine.now();
    for (const t of s.tasks) {
      if (t.last < now) {
        t.remaining -= t.rate * (now - t.last);
        if (t.remaining < 0) t.remaining = 0;
        t.last = now;
      }
      this.rateOne(t, s);
    }
    this.onRerate?.(s);
  }

  /**
   * Stops a running task without finishing it, for a move: its RU is freed, its progress is lost
   * (it restarts from the beginning wherever it is started again) and it is pending once more.
   */
  stopTask(t: SimTask): void {
    if (t.state !== 'running') throw new Error(`task ${t.job.id}/${t.index} stopped while ${t.state}`);
    const ru = t.ru;
    const s = this.server(ru);
    if (t.finishSlot >= 0) this.engine.cancelSlot(t.finishSlot, t.finishGen);
    t.finishSlot = -1;
    this.release(t, ru, s);
    t.state = 'pending';
    t.moves = (t.moves ?? 0) + 1;
    // Remote reads are charged again by the next start, against its own server.
    if (t.remote) t.work /= 1 + PERF.REMOTE_READ_FRACTION;
    t.remote = false;
    t.remaining = t.work;
    if (this.interference) this.rerate(s);
    this.publish(ru, null);
    this.onFree?.(ru, t);
  }

  /** The RU and the server's load of a task that leaves it. */
  private release(t: SimTask, ru: number, s: Server): void {
    this.occ[ru] = null;
    this.rev[ru] = ++this.revCounter;
    this.free.add(ru);
    s.free++;
    this.busy--;
    if (this.interference) {
      const k = s.tasks.indexOf(t);
      if (k >= 0) {
        const last = s.tasks.pop() as SimTask;
        if (k < s.tasks.length) s.tasks[k] = last;
      }
    }
    const real = t.job.real;
    const sums = this.sums;
    const o = s.idx * N_RESOURCES;
    for (let i = 0; i < N_RESOURCES; i++) sums[o + i] = (sums[o + i] as number) - (real[i] as number);
  }

  private finish(t: SimTask): void {
    if (t.state !== 'running') throw new Error(`task ${t.job.id}/${t.index} finished twice`);
    const now = this.engine.now();
    const ru = t.ru;
    const s = this.server(ru);
    t.state = 'done';
    t.end = now;
    t.finishSlot = -1;
    this.release(t, ru, s);
    this.tasksFinished++;
    const job = t.job;
    if (this.interference) this.rerate(s);
    this.publish(ru, null);
    job.done++;
    if (job.done === job.tasks.length) {
      job.finish = now;
      if (!job.next) {
        this.completedCount++;
        if (this.keepCompleted) this.completed.push(job);
      }
      this.onJobDone?.(job);
    }
    this.onFree?.(ru, t);
  }
}
