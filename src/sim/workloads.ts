/**
 * Seeded workload generators W1–W5. Each yields jobs lazily in arrival order, so a
 * million-task run never holds its whole trace in memory.
 */
import { expandCluster, loadCatalog, type Catalog } from '../model/catalog.ts';
import { DEFAULT_PRIORITY, N_RESOURCES, type ClusterSpec, type ServerSpec, type WorkloadProfile } from '../model/types.ts';
import { SeededRng, type Rng } from '../util/rng.ts';
import { PIGEON } from './constants.ts';
import { placeReplicas, type Replication } from './replicas.ts';
import { realVector } from '../model/perf.ts';
import { makeJob, type SimJob, type World } from './world.ts';
import type { PolicyEnv } from './policies/types.ts';

export interface Workload {
  name: string;
  servers: ServerSpec[];
  interference: boolean;
  env: PolicyEnv;
  /** Jobs arriving before this are warm-up and not measured. */
  warmupMs: number;
  /** Places resident load (not scheduled by the policy under test). */
  setup?: (world: World, rng: Rng) => void;
  /** Yields jobs (chain heads) in arrival order; later stages are linked through `next`. */
  jobs: (world: World, rng: Rng) => Generator<SimJob>;
  /** Offered load from the scheduled jobs, as a share of RUs (informational). */
  offered: number;
  /** Utilisation sampling interval, ms. */
  utilEvery?: number;
}

let catalogCache: Catalog | undefined;
export function catalog(): Catalog {
  catalogCache ??= loadCatalog();
  return catalogCache;
}

export function profile(name: string): WorkloadProfile {
  const p = catalog().workloads.get(name);
  if (!p) throw new Error(`unknown workload profile ${name}`);
  return p;
}

function clusterServers(name: string): ServerSpec[] {
  const c = catalog();
  const spec = c.clusters.get(name);
  if (!spec) throw new Error(`unknown cluster ${name}`);
  return expandCluster(spec, c.platforms);
}

export function homogeneous(platform: string, count: number, perRack = 40): ServerSpec[] {
  const spec: ClusterSpec = { name: `${platform}-${count}`, description: 'generated', serversPerRack: perRack, groups: [{ platform, count }] };
  return expandCluster(spec, catalog().platforms);
}

/** An exponential draw of mean `mean`. */
export const exp = (rng: Rng, mean: number): number => -Math.log(1 - rng.next()) * mean;
const uniform = (rng: Rng, a: number, b: number): number => a + (b - a) * rng.next();
const uniformInt = (rng: Rng, a: number, b: number): number => a + rng.int(b - a + 1);

/** A profile that causes and suffers nothing and runs at speed 1 everywhere (W4, W5). */
export const SYNTHETIC: WorkloadProfile = Object.freeze({
  name: 'synthetic',
  description: 'interference-free unit task',
  family: 'synthetic',
  caused: new Array<number>(N_RESOURCES).fill(0),
  platformPerf: {},
  typicalDurationMs: 100,
  latencyCritical: false,
});

export interface W1Options {
  load: number;
  durationMs?: number;
  jobs: number;
  profileError?: number;
  /** Share of jobs marked high priority (Tarcil Fig. 12); they are labelled 'high', the rest 'low'. */
  highShare?: number;
  /** Give the 'high' jobs their priority (false: same jobs, same labels, all at the default priority). */
  priorities?: boolean;
}

/** The priority of Fig. 12's high-priority tasks: anything above the default bypasses. */
export const HIGH_PRIORITY = DEFAULT_PRIORITY + 100;

/** W1 (Tarcil §6.1): one-task Spark jobs of a fixed duration on ec2-100, Poisson arrivals at a load. */
export function w1(o: W1Options): Workload {
  const servers = clusterServers('ec2-100');
  const nRu = servers.reduce((n, s) => n + s.rus, 0);
  const dur = o.durationMs ?? 100;
  const p = profile('spark-lr');
  const gapMs = dur / (o.load * nRu);
  return {
    name: `W1 load=${o.load} dur=${dur}ms`,
    servers,
    interference: true,
    env: {},
    warmupMs: Math.min(o.jobs * gapMs * 0.2, Math.max(2 * dur, o.jobs * gapMs * 0.1)),
    offered: o.load,
    utilEvery: Math.max(10, (o.jobs * gapMs) / 200),
    *jobs(world, rng) {
      let t = 0;
      const maxPerf = world.maxPerf(p);
      for (let i = 0; i < o.jobs; i++) {
        t += exp(rng, gapMs);
        const real = realVector(p.caused, o.profileError ?? world.truth.profileErrorSd, rng);
        if (o.highShare === undefined) {
          yield makeJob({ id: i + 1, profile: p, real, arrival: t, work: [dur], maxPerf });
          continue;
        }
        const high = rng.next() < o.highShare;
        const priority = high && o.priorities !== false ? HIGH_PRIORITY : DEFAULT_PRIORITY;
        yield makeJob({ id: i + 1, profile: p, real, arrival: t, work: [dur], maxPerf, priority, label: high ? 'high' : 'low' });
      }
    },
  };
}

/** Seven TPC-H query types: ideal per-task ms of the scan, join and aggregation stages. */
const QUERIES: Record<string, [number, number, number]> = {
  q1: [120, 60, 30],
  q3: [200, 300, 40],
  q4: [150, 200, 30],
  q6: [80, 40, 20],
  q9: [350, 500, 80],
  q10: [250, 400, 60],
  q12: [180, 250, 40],
};
const STAGE_TASKS = [33, 8, 1] as const;
/**
 * Blocks of the queries' input with 'random' replication: ten for each scan task of a query, so
 * that every server holds some (about 10 on 100 servers).
 */
const INPUT_BLOCKS = 330;

export interface W2Options {
  variant: 'unloaded' | 'resident' | 'hetero';
  queries: number;
  /**
   * The queries' *ideal* work as a share of RUs (best platform, no interference, all reads local);
   * resident load comes on top. What they really impose is more — interference among TPC-H
   * tasks and with residents, remote reads — and depends on the policy: `tarcil bench w2-load`
   * measures it. 0.25 by default: the highest load of that sweep at which Tarcil, Sparrow and
   * both delay schedulers are below saturation (realised utilisation 65–69% with residents).
   */
  load?: number;
  /**
   * Where the input blocks' replicas live (src/sim/replicas.ts): 'random', HDFS's default
   * placement (the default); 'copysets', fixed triplets of servers (an ablation).
   */
  replication?: Replication;
}

function heteroHundred(): ServerSpec[] {
  // Tarcil §6.2.1: same size, 75% of workers replaced by weaker or stronger types.
  const spec: ClusterSpec = {
    name: 'hetero-100',
    description: 'generated',
    serversPerRack: 20,
    groups: [
      { platform: 'r3-2xlarge', count: 25 },
      { platform: 'm3-xlarge', count: 15 },
      { platform: 'c3-xlarge', count: 15 },
      { platform: 'm3-2xlarge', count: 15 },
      { platform: 'c3-2xlarge', count: 15 },
      { platform: 'c3-4xlarge', count: 8 },
      { platform: 'r3-4xlarge', count: 7 },
    ],
  };
  return expandCluster(spec, catalog().platforms);
}

/** W2 (Tarcil §6.2.1, Sparrow §7): TPC-H queries as stages of 33 data-constrained, 8 and 1 tasks. */
export function w2(o: W2Options): Workload {
  // Each scan task reads one block of the input and is held to the servers holding that block's
  // replicas (a server attribute per block, or per copyset: src/sim/replicas.ts), as the paper's
  // TPC-H runs constrain first-stage tasks, for every scheduler.
  const base = o.variant === 'hetero' ? heteroHundred() : clusterServers('ec2-100');
  const { servers, blocks } = placeReplicas(base, o.replication ?? 'random', INPUT_BLOCKS);
  const nRu = servers.reduce((n, s) => n + s.rus, 0);
  const names = Object.keys(QUERIES);
  let meanWork = 0;
  for (const q of names) {
    const d = QUERIES[q] as [number, number, number];
    meanWork += (STAGE_TASKS[0] * d[0] + STAGE_TASKS[1] * d[1] + STAGE_TASKS[2] * d[2]) / names.length;
  }
  const resident = o.variant === 'unloaded' ? 0 : 0.4;
  const load = o.load ?? 0.25;
  const gapMs = meanWork / (load * nRu);
  const stageProfiles = [profile('tpch-scan'), profile('tpch-join'), profile('tpch-agg')];
  const residentProfiles = ['memcached', 'hadoop-map', 'hadoop-reduce', 'spark-lr'].map(profile);
  return {
    name: `W2 ${o.variant}`,
    servers,
    interference: true,
    env: {},
    warmupMs: o.queries * gapMs * 0.2,
    offered: load + resident,
    setup(world, rng) {
      if (resident === 0) return;
      const want = Math.round(resident * world.nRu);
      let id = -1;
      for (let k = 0; k < want; k++) {
        const free = world.free;
        const ru = free.at(rng.int(free.size));
        const p = residentProfiles[rng.int(residentProfiles.length)] as WorkloadProfile;
        world.placeResident(makeJob({ id: id--, profile: p, arrival: 0, work: [Infinity], maxPerf: 1, label: 'resident' }), ru);
      }
    },
    *jobs(world, rng) {
      let t = 0;
      let id = 1;
      for (let i = 0; i < o.queries; i++) {
        t += exp(rng, gapMs);
        const q = names[rng.int(names.length)] as string;
        const d = QUERIES[q] as [number, number, number];
        let prev: SimJob | undefined;
        let head: SimJob | undefined;
        for (let st = 0; st < 3; st++) {
          const p = stageProfiles[st] as WorkloadProfile;
          const n = STAGE_TASKS[st] as number;
          const work = Array.from({ length: n }, () => (d[st] as number) * uniform(rng, 0.8, 1.2));
          const data =
            st === 0
              ? work.map(() => {
                  return [...(blocks[rng.int(blocks.length)] as number[])];
                })
              : undefined;
          const job: SimJob = makeJob({
            id: id++,
            profile: p,
            arrival: t,
            work,
            maxPerf: world.maxPerf(p),
            label: q,
            ...(data ? { data } : {}),
            ...(prev ? { prev } : {}),
          });
          head ??= job;
          prev = job;
        }
        yield head as SimJob;
      }
    },
  };
}

interface Family {
  profiles: string[];
  weight: number;
  tasks: [number, number];
  /** Task work in ms on the reference platform: [min, max], uniform. */
  work: [number, number];
}

/** The W3 mix (Tarcil §6.3): our reconstruction; the paper lists the families only. */
const W3_MIX: Family[] = [
  { profiles: ['spark-lr'], weight: 0.3, tasks: [16, 64], work: [100, 5000] },
  { profiles: ['hadoop-map'], weight: 0.12, tasks: [16, 48], work: [30_000, 90_000] },
  { profiles: ['hadoop-reduce'], weight: 0.08, tasks: [4, 16], work: [60_000, 120_000] },
  { profiles: ['storm-wordcount'], weight: 0.08, tasks: [4, 12], work: [600_000, 1_200_000] },
  { profiles: ['memcached'], weight: 0.05, tasks: [2, 8], work: [1_200_000, 2_400_000] },
  { profiles: ['cassandra'], weight: 0.05, tasks: [2, 8], work: [1_200_000, 2_400_000] },
  { profiles: ['spec-gcc', 'spec-libquantum', 'spec-mcf', 'spec-povray'], weight: 0.16, tasks: [1, 1], work: [120_000, 480_000] },
  { profiles: ['parsec-blackscholes', 'parsec-canneal', 'parsec-streamcluster'], weight: 0.16, tasks: [4, 16], work: [150_000, 360_000] },
];

export interface W3Options {
  jobs: number;
  interArrivalMs?: number;
  profileError?: number;
  /**
   * 'job' (default): each job's real vector is its own draw around the declared one. 'class': one
   * draw per workload class, shared by all its jobs (the class's declared profile is wrong), which
   * is what a learned profile can correct.
   */
  profileErrorScope?: 'job' | 'class';
  /**
   * Mark the jobs of W3_SCALE_OUT's classes scale-out, each allowed up to SCALE_OUT_FACTOR times
   * the tasks it asks for. No catalog class declares scale-out (it is a job spec's `scaleOut`), and
   * the mark changes nothing unless the policy autoscales: the same jobs, the same draws.
   */
  scaleOut?: boolean;
}

/**
 * W3's long-running classes whose work is shared by their tasks and can spread over more of them:
 * the key-value services (memcached, cassandra) and the streaming analytics (storm-wordcount).
 */
export const W3_SCALE_OUT: readonly string[] = ['memcached', 'cassandra', 'storm-wordcount'];
/** A marked scale-out job may grow to this many times its tasks. */
export const SCALE_OUT_FACTOR = 2;

/** W3 (Tarcil §6.3): 7,200 mixed jobs at 1 s inter-arrival on hetero-400 (4,178 RUs, 10 types). */
export function w3(o: W3Options): Workload {
  const servers = clusterServers('hetero-400');
  const nRu = servers.reduce((n, s) => n + s.rus, 0);
  const gap = o.interArrivalMs ?? 1000;
  let meanWork = 0;
  for (const f of W3_MIX) meanWork += f.weight * ((f.tasks[0] + f.tasks[1]) / 2) * ((f.work[0] + f.work[1]) / 2);
  return {
    name: 'W3 hetero-400 mix',
    servers,
    interference: true,
    env: { shortCutoffMs: 10_000 },
    warmupMs: 0,
    offered: meanWork / gap / nRu,
    *jobs(world, rng) {
      // Class-wide errors come from a stream of their own, drawn in the order classes first appear.
      const classRng = o.profileErrorScope === 'class' ? rng.fork() : rng;
      const classReal = new Map<string, readonly number[]>();
      for (let i = 0; i < o.jobs; i++) {
        let x = rng.next();
        let fam = W3_MIX[W3_MIX.length - 1] as Family;
        for (const f of W3_MIX) {
          if (x < f.weight) {
            fam = f;
            break;
          }
          x -= f.weight;
        }
        const p = profile(fam.profiles[rng.int(fam.profiles.length)] as string);
        const n = uniformInt(rng, fam.tasks[0], fam.tasks[1]);
        const w = uniform(rng, fam.work[0], fam.work[1]);
        const sd = o.profileError ?? world.truth.profileErrorSd;
        let real: readonly number[];
        if (o.profileErrorScope === 'class') {
          let r = classReal.get(p.name);
          if (!r) {
            r = realVector(p.caused, sd, classRng);
            classReal.set(p.name, r);
          }
          real = r;
        } else real = realVector(p.caused, sd, rng);
        yield makeJob({
          id: i + 1,
          profile: p,
          real,
          arrival: i * gap,
          work: new Array<number>(n).fill(w),
          maxPerf: world.maxPerf(p),
          label: p.family,
          ...(o.scaleOut && W3_SCALE_OUT.includes(p.name) ? { scaleOut: { maxTasks: SCALE_OUT_FACTOR * n } } : {}),
        });
      }
    },
  };
}

export interface W4Options {
  load: number;
  jobs: number;
  workers?: number;
  tasksPerJob?: number;
}

/** W4 (Sparrow §3.3 Fig. 3): 10,000 4-core workers, 100-task jobs, exponential 100 ms tasks. */
export function w4(o: W4Options): Workload {
  const workers = o.workers ?? 10_000;
  const servers = homogeneous('r3-xlarge', workers, 40);
  const slots = workers * 4;
  const m = o.tasksPerJob ?? 100;
  const gapMs = (m * 100) / (o.load * slots);
  return {
    name: `W4 load=${o.load}`,
    servers,
    interference: false,
    env: {},
    warmupMs: o.jobs * gapMs * 0.1,
    offered: o.load,
    *jobs(world, rng) {
      let t = 0;
      for (let i = 0; i < o.jobs; i++) {
        t += exp(rng, gapMs);
        // Within a job every task has the same duration; across jobs it is exponential (§3.3).
        const d = exp(rng, 100);
        yield makeJob({ id: i + 1, profile: SYNTHETIC, arrival: t, work: new Array<number>(m).fill(d), maxPerf: 1 });
      }
    },
  };
}

/** Pigeon Table 1: fanout and task time statistics of three traces (seconds). */
export const TRACES = {
  yahoo: { Fmax: 5900, Favg: 39.91, Tmin: 1.54e-5, Tmax: 21259.9, Tavg: 118.78, cutoff: 90.5811 },
  cloudera: { Fmax: 51834, Favg: 272.93, Tmin: 3.89e-5, Tmax: 97941.8, Tavg: 162.19, cutoff: 272.783 },
  google: { Fmax: 49960, Favg: 35.32, Tmin: 1e-6, Tmax: 774922, Tavg: 661.74, cutoff: 1129.532 },
} as const;
export type TraceName = keyof typeof TRACES;

/** Mean of a bounded Pareto(α) on [L, H]. */
export function boundedParetoMean(a: number, L: number, H: number): number {
  if (Math.abs(a - 1) < 1e-9) return (H * L * Math.log(H / L)) / (H - L);
  const La = Math.pow(L, a);
  return ((La / (1 - Math.pow(L / H, a))) * a * (Math.pow(L, 1 - a) - Math.pow(H, 1 - a))) / (a - 1);
}

/** The shape α for which a bounded Pareto on [L, H] has the given mean (bisection; mean falls with α). */
export function fitParetoShape(mean: number, L: number, H: number): number {
  let lo = 0.01;
  let hi = 10;
  for (let i = 0; i < 100; i++) {
    const mid = (lo + hi) / 2;
    if (boundedParetoMean(mid, L, H) > mean) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

export function boundedPareto(rng: Rng, a: number, L: number, H: number): number {
  const u = rng.next();
  const La = Math.pow(L, a);
  const Ha = Math.pow(H, a);
  return Math.pow(-(u * Ha - u * La - Ha) / (Ha * La), -1 / a);
}

export interface W5Options {
  trace: TraceName;
  load: number;
  jobs: number;
  /** Arrival rate, jobs per second (the cluster is sized to the load). */
  rate?: number;
  /** Fanout cap, to keep quick runs small; the table's maximum by default. */
  maxFanout?: number;
  /** Seed of the trace itself (the cluster is sized from it, so it is drawn before the run). */
  seed?: number;
}

export interface W5Trace {
  jobs: { arrival: number; work: number[]; short: boolean }[];
  /** Σ task work, ms. */
  work: number;
  /** Last arrival, ms: the window in which jobs arrive and are measured. */
  span: number;
  /**
   * Slots the trace keeps busy on average over [0, span] with unlimited resources: Σ of each task's
   * work that falls inside the window, over the window. Tasks of the heavy tail run for hours past
   * a window of minutes; only the part inside it loads the cluster while jobs arrive.
   */
  occupancy: number;
}

/** Draws a W5 trace: bounded-Pareto fanout and mean task time with Table 1's bounds and means. */
export function w5Trace(o: W5Options): W5Trace {
  const tr = TRACES[o.trace];
  const Fmax = Math.min(tr.Fmax, o.maxFanout ?? tr.Fmax);
  const aF = fitParetoShape(tr.Favg, 1, Fmax);
  const aT = fitParetoShape(tr.Tavg, tr.Tmin, tr.Tmax);
  const gapMs = 1000 / (o.rate ?? 1);
  const rng = new SeededRng(o.seed ?? 1);
  const jobs: W5Trace['jobs'] = [];
  let t = 0;
  let work = 0;
  for (let i = 0; i < o.jobs; i++) {
    t += exp(rng, gapMs);
    const F = Math.max(1, Math.min(Fmax, Math.round(boundedPareto(rng, aF, 1, Fmax))));
    const Tm = boundedPareto(rng, aT, tr.Tmin, tr.Tmax) * 1000;
    const w = Array.from({ length: F }, () => Math.max(0.001, exp(rng, Tm)));
    for (const x of w) work += x;
    jobs.push({ arrival: t, work: w, short: Tm < tr.cutoff * 1000 });
  }
  let inside = 0;
  for (const j of jobs) for (const x of j.work) inside += Math.min(x, t - j.arrival);
  return { jobs, work, span: t, occupancy: t > 0 ? inside / t : 0 };
}

/**
 * W5 (Pigeon §4): heavy-tailed fanout and task times with Table 1's bounds and means. Fanout and a
 * job's mean task time are bounded Pareto with the shape that gives the table's mean; a job's
 * tasks are exponential around its mean. Pigeon varies the cluster size for the load (§4.2); the
 * number of 4-RU workers here is sized from the *drawn* trace: the slots it keeps busy during its
 * arrival window (W5Trace.occupancy) over the load. Sizing from Table 1's means would not do: a few
 * thousand draws from a bounded Pareto this heavy rarely reach its mean (Cloudera, Google far
 * below nominal); nor would total work over the window, which counts tasks that run for hours
 * after the last arrival as if they loaded the window.
 */
export function w5(o: W5Options): Workload {
  const tr = TRACES[o.trace];
  const trace = w5Trace(o);
  const slots = Math.max(4, Math.ceil(trace.occupancy / o.load));
  const workers = Math.ceil(slots / 4);
  const servers = homogeneous('r3-xlarge', workers, 40);
  const gapMs = 1000 / (o.rate ?? 1);
  const reserved = PIGEON.RESERVED[o.trace];
  return {
    name: `W5 ${o.trace} load=${o.load}`,
    servers,
    interference: false,
    env: { shortCutoffMs: tr.cutoff * 1000, reserved },
    warmupMs: o.jobs * gapMs * 0.1,
    offered: trace.occupancy / (workers * 4),
    *jobs() {
      let id = 1;
      for (const j of trace.jobs) {
        const job = makeJob({ id: id++, profile: SYNTHETIC, arrival: j.arrival, work: j.work, maxPerf: 1 });
        job.short = j.short;
        yield job;
      }
    },
  };
}

export interface CellOptions {
  /** Servers of 16 RUs (two platforms, as the hollow-10k cell). */
  servers: number;
  load: number;
  /** Tasks to run in all (jobs of 1–32 tasks keep arriving until this many were sent). */
  tasks: number;
  /** Mean task work, ms (exponential). */
  meanWorkMs?: number;
}

/**
 * A cell of any size for the simulator's own speed (`bench sim-speed`): `servers` × 16 RUs of the
 * hollow-10k platforms, the catalog's profiles, jobs of 1–32 tasks with exponential work, arriving
 * at `load` of the cell. Memory and time per decision, not placement quality, are the point.
 */
export function cell(o: CellOptions): Workload {
  const half = Math.ceil(o.servers / 2);
  const spec: ClusterSpec = {
    name: `cell-${o.servers}`,
    description: 'generated',
    serversPerRack: 40,
    groups: [
      { platform: 'c3-4xlarge', count: half },
      { platform: 'r3-4xlarge', count: o.servers - half },
    ],
  };
  const servers = expandCluster(spec, catalog().platforms);
  const nRu = servers.reduce((n, s) => n + s.rus, 0);
  const meanWork = o.meanWorkMs ?? 2000;
  const meanTasks = 16.5;
  const gapMs = (meanTasks * meanWork) / (o.load * nRu);
  const profiles = [...catalog().workloads.values()];
  return {
    name: `cell ${o.servers}x16 load=${o.load}`,
    servers,
    interference: true,
    env: {},
    warmupMs: 0,
    offered: o.load,
    *jobs(world, rng) {
      let t = 0;
      let sent = 0;
      for (let id = 1; sent < o.tasks; id++) {
        t += exp(rng, gapMs);
        const p = profiles[rng.int(profiles.length)] as WorkloadProfile;
        const n = Math.min(o.tasks - sent, uniformInt(rng, 1, 32));
        sent += n;
        const w = exp(rng, meanWork);
        yield makeJob({ id, profile: p, arrival: t, work: new Array<number>(n).fill(w), maxPerf: world.maxPerf(p) });
      }
    },
  };
}
