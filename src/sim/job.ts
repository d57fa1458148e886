/**
 * A simulated job and its tasks: what the world runs and the policies place (world.ts), how one is
 * built, and the job id the schedulers see.
 */
import { DEFAULT_PRIORITY, type JobSpec, type WorkloadProfile } from '../model/types.ts';
import type { Occupant } from '../sampling/ru-index.ts';

export interface SimTask {
  job: SimJob;
  /**
   * Its index in `job.tasks`; -1 for a task added to a running scale-out job until it starts (it
   * joins the job then, see World.startTask).
   */
  index: number;
  /** Work in reference-platform milliseconds (remote reads included once known). */
  work: number;
  /** Servers holding the task's input (data-constrained tasks only). */
  data?: number[];
  state: 'pending' | 'running' | 'done';
  ru: number;
  start: number;
  end: number;
  remaining: number;
  rate: number;
  last: number;
  /** The pending finish event while it runs: its engine slot (-1: none) and the slot's generation. */
  finishSlot: number;
  finishGen: number;
  remote: boolean;
  /** The Q the scheduler saw for its RU (policies that score), for the Q CDFs. */
  Q?: number;
  /** Whether that RU was acceptable for the job (U_H ≥ T_W) when chosen. */
  acceptable?: boolean;
  /** Q of its RU at the moment it started, from the truth (any policy; WorldOptions.scoreQ). */
  placedQ?: number;
  /** Platform speed of the RU it ran on, for this job (splits lost performance into platform vs interference). */
  speed: number;
  occupant?: Occupant;
  /** Times the run-time loop moved it (each move restarted it on another RU). */
  moves?: number;
}

export interface SimJob {
  id: number;
  /** Its namespace (fair share); absent: default, and the job's id is the bare number. */
  namespace?: string;
  profile: WorkloadProfile;
  /** What the scheduler is told. */
  declared: readonly number[];
  /** What the scheduler schedules it with, when that is not `declared` (a learned profile). */
  scheduledAs?: readonly number[];
  /** What the performance model uses (declared + profile error). */
  real: readonly number[];
  priority: number;
  arrival: number;
  tasks: SimTask[];
  /** W5: a short job (Pigeon's high-priority class). */
  short: boolean;
  /** First job of a chain (W2 query stages); the chain is measured as one unit. */
  head: SimJob;
  next?: SimJob;
  /** Ideal job time: the longest task's ideal time (best platform, no interference, no delay). */
  ideal: number;
  /** Sum of the ideals of this job and the earlier stages of its chain. */
  chainIdeal: number;
  /** The job's best platform speed on this cluster (the denominator of its ideal). */
  maxPerf: number;
  done: number;
  finish: number;
  /** Overheads, ms, summed over the chain on the head. */
  decisionMs: number;
  commitMs: number;
  queueMs: number;
  conflicts: number;
  commits: number;
  Rsum: number;
  Rn: number;
  /** Admission waits: estimated vs realised (tarcil only). */
  waits: { estimate: number; realised: number }[];
  /** Data-constrained tasks placed on a server holding their data (counted on the head). */
  local: number;
  started: number;
  /** Submission to last task start, summed over the chain (on the head): the scheduling overhead. */
  schedMs: number;
  spec?: JobSpec;
  /** Query type or family, for per-type tables. */
  label: string;
  /** Free slot for the policy that owns the job. */
  policyData?: unknown;
  /**
   * A scale-out job (JobSpec.scaleOut): its work is shared by its tasks, so the run-time loop may
   * add tasks, up to `maxTasks`; the work its running tasks still have is then spread over them and
   * the newcomer (World.startTask). Its ideal stays that of the tasks it asked for.
   */
  scaleOut?: { maxTasks: number };
  /** Tasks added to it by autoscale (started). */
  scaledOut?: number;
  /**
   * All its tasks on one server, started together (a trace's pod of several cores): a policy that
   * cannot find one server with room for every pending task places none of them.
   */
  oneServer?: boolean;
  /** The platforms it may run on (a hard constraint); absent: any. */
  platforms?: readonly string[];
  /** All its tasks placed or none (JobSpec.mode 'gang'); absent: incremental. */
  gang?: boolean;
}

/** Builds a job; tasks' work is given in reference-platform ms. */
export function makeJob(opts: {
  profile: WorkloadProfile;
  declared?: readonly number[];
  real?: readonly number[];
  arrival: number;
  work: readonly number[];
  data?: (number[] | undefined)[];
  short?: boolean;
  priority?: number;
  maxPerf: number;
  prev?: SimJob;
  id: number;
  label?: string;
  scaleOut?: { maxTasks: number };
  namespace?: string;
  gang?: boolean;
}): SimJob {
  const id = opts.id;
  const job = {
    id,
    profile: opts.profile,
    declared: opts.declared ?? opts.profile.caused,
    real: opts.real ?? opts.declared ?? opts.profile.caused,
    priority: opts.priority ?? DEFAULT_PRIORITY,
    arrival: opts.arrival,
    tasks: [] as SimTask[],
    short: opts.short ?? false,
    ideal: 0,
    chainIdeal: 0,
    maxPerf: opts.maxPerf,
    done: 0,
    finish: NaN,
    decisionMs: 0,
    commitMs: 0,
    queueMs: 0,
    conflicts: 0,
    commits: 0,
    Rsum: 0,
    Rn: 0,
    waits: [],
    local: 0,
    started: 0,
    schedMs: 0,
    label: opts.label ?? opts.profile.name,
  } as Omit<SimJob, 'head'> as SimJob;
  if (opts.scaleOut) job.scaleOut = opts.scaleOut;
  if (opts.namespace !== undefined) job.namespace = opts.namespace;
  if (opts.gang) job.gang = true;
  job.head = opts.prev ? opts.prev.head : job;
  if (opts.prev) opts.prev.next = job;
  let longest = 0;
  opts.work.forEach((w, i) => {
    const task = pendingTask(job, i, w);
    const d = opts.data?.[i];
    if (d) task.data = d;
    job.tasks.push(task);
    if (w > longest) longest = w;
  });
  job.ideal = longest / opts.maxPerf;
  job.chainIdeal = job.ideal + (opts.prev ? opts.prev.chainIdeal : 0);
  return job;
}

/** The job id the schedulers see: `<namespace>/<id>` in a namespace, the bare number otherwise (as live). */
export function simJobId(job: SimJob): string {
  return job.namespace === undefined ? String(job.id) : `${job.namespace}/${job.id}`;
}

/** A task to add to a running scale-out job: it takes its work when it starts and joins the job (World.startTask). */
export function addedTask(job: SimJob): SimTask {
  return pendingTask(job, -1, 0);
}

/** A task not started yet, of `work` on the reference platform. */
function pendingTask(job: SimJob, index: number, work: number): SimTask {
  return {
    job,
    index,
    work,
    state: 'pending',
    ru: -1,
    start: NaN,
    end: NaN,
    remaining: work,
    rate: 1,
    last: 0,
    finishSlot: -1,
    finishGen: 0,
    remote: false,
    speed: 1,
  };
}
