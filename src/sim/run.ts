/** One simulation run: a workload, a policy and a seed in; measured jobs and counters out. */
import { SeededRng } from '../util/rng.ts';
import { Engine } from './engine.ts';
import type { Truth } from '../model/perf.ts';
import { makePolicy, type PolicySpec } from './policies/index.ts';
import { record, summarize, type JobRecord, type Summary } from './metrics.ts';
import { StreamingSummary } from './streaming.ts';
import type { Workload } from './workloads.ts';
import { World, type SimJob } from './world.ts';

export interface RunConfig {
  workload: Workload;
  policy: PolicySpec;
  seed: number;
  /**
   * The ground truth the run is judged by (default: the committed one, src/model/perf.ts): its
   * interference model rates the tasks, and its profile error is what the workload draws each
   * job's real vector with, unless the workload sets its own (w1/w3 `profileError`).
   */
  truth?: Truth;
  /** Stop (and report what finished) at this virtual time. */
  maxTimeMs?: number;
  /** Called now and then with the virtual time. */
  onProgress?: (t: number) => void;
  /** Keep the world for inspection (tests). */
  keepWorld?: boolean;
  /** Score every placement's Q against the truth (WorldOptions.scoreQ). */
  scoreQ?: boolean;
  /**
   * Keep every measured job's record (default). Off: the summary is taken as jobs finish
   * (StreamingSummary: exact means and counts, percentiles within 1%) and `records` stays empty,
   * so memory does not grow with the number of jobs.
   */
  keepRecords?: boolean;
  /**
   * Jobs arriving before this virtual time (ms) are warm-up and not measured. Default: the
   * override set by setWarmup (`tarcil bench --warmup-ms`), else the workload's own (W1–W5: a
   * share of the arrival window, e.g. the first 10% for W4).
   */
  warmupMs?: number;
}

let warmupOverride: number | undefined;
/** A fixed warm-up (ms) for every run of this thread that does not set its own; undefined: the workloads' defaults. */
export function setWarmup(ms: number | undefined): void {
  warmupOverride = ms;
}

export interface RunResult {
  policy: string;
  workload: string;
  seed: number;
  records: JobRecord[];
  summary: Summary;
  counters: Record<string, number>;
  util: { t: number; busy: number }[];
  nRu: number;
  stats: { events: number; tasks: number; wallMs: number; simMs: number; unfinished: number; warmupMs: number; timing?: Record<string, number> };
  world?: World;
}

export function runSim(cfg: RunConfig): RunResult {
  const t0 = performance.now();
  const root = new SeededRng(cfg.seed);
  const wlRng = root.fork();
  const worldRng = root.fork();
  const policyRng = root.fork();
  const engine = new Engine();
  const wl = cfg.workload;
  const world = new World(engine, worldRng, wl.servers, {
    interference: wl.interference,
    ...(wl.utilEvery ? { utilEvery: wl.utilEvery } : {}),
    ...(cfg.truth ? { truth: cfg.truth } : {}),
    ...(cfg.scoreQ ? { scoreQ: true } : {}),
    ...(cfg.keepWorld ? { keepCompleted: true } : {}),
  });
  wl.setup?.(world, worldRng.fork());
  const policy = makePolicy(cfg.policy, world, policyRng, wl.env);
  let submitted = 0;
  // Each job's figures are taken when its chain ends; the job itself is then let go.
  const warmupMs = cfg.warmupMs ?? warmupOverride ?? wl.warmupMs;
  const records: JobRecord[] = [];
  const stream = cfg.keepRecords === false ? new StreamingSummary() : undefined;
  world.onJobDone = (job: SimJob) => {
    const next = job.next;
    if (next) {
      next.arrival = engine.now();
      policy.submit(next);
    } else if (job.head.arrival >= warmupMs) {
      if (stream) stream.add(record(job));
      else records.push(record(job));
    }
  };
  const gen = wl.jobs(world, wlRng);
  const arrive = (): void => {
    const r = gen.next();
    if (r.done) return;
    const job = r.value;
    engine.post(job.arrival, () => {
      submitted++;
      policy.submit(job);
      arrive();
    });
  };
  arrive();
  engine.run(cfg.maxTimeMs ?? Infinity, cfg.onProgress);
  const res: RunResult = {
    policy: policy.name,
    workload: wl.name,
    seed: cfg.seed,
    records,
    summary: stream ? stream.summary() : summarize(records),
    counters: policy.counters(),
    util: world.util,
    nRu: world.nRu,
    stats: {
      events: engine.fired,
      tasks: world.tasksFinished,
      wallMs: performance.now() - t0,
      simMs: engine.now(),
      unfinished: submitted - world.completedCount,
      warmupMs,
      ...(policy.timing ? { timing: policy.timing() } : {}),
    },
  };
  if (cfg.keepWorld) res.world = world;
  return res;
}
