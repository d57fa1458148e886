/**
 * One policy replaying a production trace (src/workload/trace.ts) in the simulator: the trace's
 * servers, its jobs at their arrival times with their own run times, and per job the wait from
 * submission until all its tasks run, beside the production scheduler's own wait.
 *
 * What the replay models: cores only (a node's RUs; GPUs, memory and a pod's share of a GPU are
 * not counted, though a pod asking for GPUs is held to GPU platforms); each task runs for its
 * pod's duration in the trace whatever its neighbours (no interference on run times: the trace's
 * times already hold what production's neighbours did), so the quality figures say what each
 * policy's placements would be worth by the catalog's model under the seeded profile rule, not
 * what they cost. No policy preempts (the simulator does not evict).
 */
import { quantileSorted } from 'simple-statistics';
import type { ServerSpec } from '../../model/types.ts';
import { jobTarget } from '../../quality/index.ts';
import { SeededRng, type Rng } from '../../util/rng.ts';
import type { TraceJob, Trace } from '../../workload/trace.ts';
import { Engine } from '../engine.ts';
import { makePolicy, type Policy } from '../policies/index.ts';
import { PodQueuePolicy } from '../policies/one-server.ts';
import { profile } from '../workloads.ts';
import { makeJob, World, type SimJob } from '../world.ts';

/** The policies that honour one-server packing and platform constraints, in the order reported. */
export const TRACE_POLICIES = ['tarcil', 'centralized', 'sparrow', 'random'] as const;
export type TracePolicy = (typeof TRACE_POLICIES)[number];
/** What `--quick` runs. */
export const QUICK_TRACE_POLICIES: readonly TracePolicy[] = ['tarcil', 'centralized'];
/** The simulator's policies that do not run a trace, and why. */
export const NOT_REPLAYED: Readonly<Record<string, string>> = {
  'delay-fixed, delay-dynamic':
    'delay scheduling trades waiting for data locality; a trace has no input data, so it would only be its fallback (a fair, interference-blind slot offer), and it offers one slot at a time, never a pod’s cores together',
  pigeon: 'its groups of workers and short/long classes are W5’s; it places tasks one by one, never a pod’s cores together',
  'omniscient, sparrow-per-task, sparrow-batch': 'Fig. 3 baselines that place tasks one by one; sparrow and random here are their one-server versions',
};

/** The share of the first arrivals left out of the series and of the sped-up load's window (a trace's sparse lead-in). */
export const LEAD_IN = 0.05;

/** Size buckets of a job, by its tasks (a pod's cores). */
export const SIZE_BUCKETS: readonly { label: string; max: number }[] = [
  { label: '1', max: 1 },
  { label: '2–4', max: 4 },
  { label: '5–8', max: 8 },
  { label: '9–16', max: 16 },
  { label: '17–32', max: 32 },
  { label: '33+', max: Infinity },
];
export const sizeBucket = (tasks: number): string => (SIZE_BUCKETS.find((b) => tasks <= b.max) as { label: string }).label;

/** One job's outcome in a replay (times in trace seconds, i.e. undone compression). */
export interface JobOutcome {
  id: string;
  qos: string;
  tasks: number;
  neverScheduled: boolean;
  /** Submission until all its tasks run; undefined: never placed in the replay. */
  waitS?: number;
  /** The production scheduler's wait (scheduled − creation), absent for a pod it never scheduled. */
  productionWaitS?: number;
}

export interface SeriesPoint {
  /** Trace hours since the first arrival. */
  hour: number;
  /** Share of all cores allocated. */
  allocated: number;
  /**
   * Share of all cores free but too few together: the free cores of each server with fewer free
   * than a pod needs, weighted by the share of the trace's pods of that size (cores only, platforms
   * aside: the expected free cores an arriving pod of the trace could not use).
   */
  fragmented: number;
  /** Jobs arrived and not yet placed. */
  waiting: number;
}

export interface TraceRun {
  policy: string;
  outcomes: JobOutcome[];
  series: SeriesPoint[];
  /** Q of every started task against the truth at its start (the catalog's model, seeded profiles). */
  quality: { tasks: number; meanQ: number; p5Q: number; acceptable: number };
  /** Jobs whose tasks ended up on more than one server, and tasks on a platform their job does not allow (both 0 when honoured). */
  splitJobs: number;
  platformViolations: number;
  counters: Record<string, number>;
  events: number;
  wallMs: number;
}

export interface ReplayOptions {
  seed: number;
  /** Divides the arrivals' offsets from the first arrival, durations kept: the offered load grows by this factor (default 1). */
  speedup?: number;
  /** Samples of allocation and fragmentation over the trace's span. */
  samples?: number;
  /**
   * Stop the replay at this virtual time, ms; jobs not placed by then count as never placed.
   * Default: the trace's span and every job's duration one after another, twice over (a policy that
   * places every job in the end has done so well before).
   */
  stopAtMs?: number;
  /** Keep the simulated jobs (tests inspect where their tasks ran). */
  keepJobs?: (jobs: SimJob[], world: World) => void;
}

/** The trace's nodes as simulator servers (40 a rack, in the node list's order; the trace gives no racks). */
export function traceServers(trace: Trace): ServerSpec[] {
  return trace.servers.map((s, i) => ({ id: s.id, platform: s.platform, rack: `rack-${Math.floor(i / 40)}`, rus: s.rus, speed: 1, attributes: {} }));
}

function simJob(j: TraceJob, k: number, at: number, world: World): SimJob {
  const p = profile(j.profile);
  const work = new Array<number>(j.tasks).fill(j.durationMs ?? 1);
  const job = makeJob({ id: k + 1, profile: p, arrival: at, work, priority: j.priority, maxPerf: world.maxPerf(p), label: j.qos });
  job.oneServer = j.mode === 'gang' && j.locality.mode === 'pack';
  if (j.platforms) job.platforms = j.platforms;
  return job;
}

function makeTracePolicy(name: TracePolicy, world: World, rng: Rng): Policy {
  if (name === 'sparrow') return new PodQueuePolicy(world, rng, { d: 2 });
  if (name === 'random') return new PodQueuePolicy(world, rng, { d: 1 });
  // Preemption off: the simulator does not evict a victim, so a pick of a busy RU would only conflict.
  return makePolicy({ name, ...(name === 'tarcil' ? { core: { preemption: false } } : {}) }, world, rng);
}

const q = (sorted: number[], p: number): number => (sorted.length > 0 ? quantileSorted(sorted, p) : NaN);

/** The trace's pod sizes (tasks of its one-server jobs; 1 for the others) with the share of jobs of each. */
function podSizes(trace: Trace): [number, number][] {
  const n = new Map<number, number>();
  for (const j of trace.jobs) {
    const size = j.mode === 'gang' && j.locality.mode === 'pack' ? j.tasks : 1;
    n.set(size, (n.get(size) ?? 0) + 1);
  }
  return [...n].map(([size, k]) => [size, k / Math.max(1, trace.jobs.length)]);
}

/** Replays the trace with one policy. */
export function replayTrace(trace: Trace, policyName: TracePolicy, o: ReplayOptions): TraceRun {
  const t0 = performance.now();
  const root = new SeededRng(o.seed);
  const worldRng = root.fork();
  const policyRng = root.fork();
  const engine = new Engine();
  const sec = trace.compress / 1000;
  const f = o.speedup ?? 1;
  const first0 = trace.jobs.reduce((m, j) => Math.min(m, j.arrivalMs), Infinity);
  const first = Number.isFinite(first0) ? first0 : 0;
  const arrival = (j: TraceJob): number => first + (j.arrivalMs - first) / f;
  const arrivals = trace.jobs.map(arrival).sort((a, b) => a - b);
  const lastArrival = arrivals.at(-1) ?? first;
  const span = trace.jobs.reduce((m, j) => Math.max(m, arrival(j) + (j.durationMs ?? 0)), first) - first;
  // The series covers the arrivals (without the first 5%, a trace's sparse lead-in) and as long
  // again after them (the long-running pods' tail is flat).
  const from = arrivals[Math.floor(LEAD_IN * arrivals.length)] ?? first;
  const samples = o.samples ?? 400;
  const every = Math.max(1, (2 * (lastArrival - from) || span) / samples);
  const world = new World(engine, worldRng, traceServers(trace), { interference: false, scoreQ: true, utilEvery: 0 });
  const policy = makeTracePolicy(policyName, world, policyRng);
  const jobs = trace.jobs.map((j, k) => simJob(j, k, arrival(j), world));
  const waiting = new Set<SimJob>();
  const series: SeriesPoint[] = [];
  const placed = (j: SimJob): boolean => j.started === j.tasks.length;
  const sizes = podSizes(trace);
  const sample = (): void => {
    for (const j of waiting) if (placed(j)) waiting.delete(j);
    let frag = 0;
    for (const s of world.servers) {
      if (s.free === 0) continue;
      for (const [need, share] of sizes) if (s.free < need) frag += share * s.free;
    }
    series.push({ hour: ((engine.now() - first) * sec) / 3600, allocated: world.busy / world.nRu, fragmented: frag / world.nRu, waiting: waiting.size });
    if (engine.pending > 0 && series.length < samples) engine.after(every, sample);
  };
  jobs.forEach((job) => {
    engine.post(job.arrival, () => {
      waiting.add(job);
      policy.submit(job);
    });
  });
  engine.post(from, sample);
  // A job the replay cannot place would keep its policy's rechecks going: the run is bounded.
  const serial = trace.jobs.reduce((a, j) => a + (j.durationMs ?? 0), 0);
  engine.run(o.stopAtMs ?? first + 2 * (span + serial) + 1);
  o.keepJobs?.(jobs, world);

  const outcomes: JobOutcome[] = [];
  const Qs: number[] = [];
  let acceptable = 0;
  let splitJobs = 0;
  let platformViolations = 0;
  const targets = new Map<readonly number[], ReturnType<typeof jobTarget>>();
  trace.jobs.forEach((tj, k) => {
    const j = jobs[k] as SimJob;
    let last = -Infinity;
    const servers = new Set<number>();
    for (const t of j.tasks) {
      if (Number.isNaN(t.start)) continue;
      last = Math.max(last, t.start);
      const s = world.server(t.ru);
      servers.add(s.idx);
      if (j.platforms && !j.platforms.includes(s.spec.platform)) platformViolations++;
      if (t.placedQ !== undefined) {
        Qs.push(t.placedQ);
        let target = targets.get(j.declared);
        if (!target) targets.set(j.declared, (target = jobTarget(j.declared)));
        if (t.placedQ >= target.T) acceptable++;
      }
    }
    if (j.oneServer && servers.size > 1) splitJobs++;
    outcomes.push({
      id: tj.id,
      qos: tj.qos,
      tasks: tj.tasks,
      neverScheduled: tj.neverScheduled,
      ...(placed(j) ? { waitS: (last - j.arrival) * sec } : {}),
      ...(tj.productionWaitMs !== undefined ? { productionWaitS: tj.productionWaitMs * sec } : {}),
    });
  });
  Qs.sort((a, b) => a - b);
  return {
    policy: policy.name,
    outcomes,
    series,
    quality: {
      tasks: Qs.length,
      meanQ: Qs.length ? Qs.reduce((a, x) => a + x, 0) / Qs.length : NaN,
      p5Q: q(Qs, 0.05),
      acceptable: Qs.length ? acceptable / Qs.length : NaN,
    },
    splitJobs,
    platformViolations,
    counters: policy.counters(),
    events: engine.fired,
    wallMs: performance.now() - t0,
  };
}

/** p50 and p99 of the waits (seconds) of the outcomes that were placed, with their count and those never placed. */
export function waitStats(outs: readonly JobOutcome[], which: 'replay' | 'production' = 'replay'): { n: number; p50: number; p99: number; never: number } {
  const w: number[] = [];
  let never = 0;
  for (const o of outs) {
    const v = which === 'replay' ? o.waitS : o.productionWaitS;
    if (v === undefined) never++;
    else w.push(v);
  }
  w.sort((a, b) => a - b);
  return { n: w.length, p50: q(w, 0.5), p99: q(w, 0.99), never };
}

/**
 * The arrivals' speed-up that makes the trace's offered load over its arrival window `target` of
 * the cores: Σ tasks × min(duration, window / F) / (window / F × RUs) = target, by bisection (1 if
 * the trace as it is already offers that much). The window runs from the first arrival to the
 * last, leaving out the first LEAD_IN of arrivals.
 */
export function speedupFor(trace: Trace, target: number): number {
  const rus = trace.servers.reduce((a, s) => a + s.rus, 0);
  const at = trace.jobs.map((j) => j.arrivalMs).sort((a, b) => a - b);
  if (at.length < 2 || rus === 0) return 1;
  const window = (at[at.length - 1] as number) - (at[Math.floor(LEAD_IN * at.length)] as number);
  if (!(window > 0)) return 1;
  const load = (f: number): number => {
    const w = window / f;
    let core = 0;
    for (const j of trace.jobs) core += j.tasks * Math.min(j.durationMs ?? 0, w);
    return core / (w * rus);
  };
  if (load(1) >= target) return 1;
  let lo = 1;
  let hi = 2;
  while (load(hi) < target && hi < 1e9) hi *= 2;
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (load(mid) < target) lo = mid;
    else hi = mid;
  }
  return hi;
}
