/**
 * The benchmark experiments of issue 4. Each returns flat rows (CSV), tables (terminal and
 * markdown), charts and the paper's figure to compare against. Sizes have a quick and a full
 * setting; the full one is what bench/results holds.
 */
import { contention, jobTarget, rankD, scoreRu, type RuScore } from '../quality/index.ts';
import { SeededRng } from '../util/rng.ts';
import { calibrate } from './calibrate.ts';
import type { ChartSpec, Point } from './charts.ts';
import { pigeonSlowdowns, type Summary } from './metrics.ts';
import { runSim, type RunResult } from './run.ts';
import { catalog, w1, w2, w3, w4, w5, type TraceName, type Workload } from './workloads.ts';
import { makeJob, World } from './world.ts';
import { Engine } from './engine.ts';

export interface Table {
  title: string;
  head: string[];
  rows: (string | number)[][];
}

export interface ExperimentResult {
  name: string;
  title: string;
  quick: boolean;
  seed: number;
  rows: Record<string, string | number>[];
  tables: Table[];
  charts: ChartSpec[];
  /** Markdown: what the paper reports for this figure. */
  paper: string;
  wallMs: number;
  extra?: Record<string, unknown>;
}

export interface ExperimentContext {
  quick: boolean;
  seed: number;
  progress: (done: number, total: number, label: string) => void;
}

type Runner = (ctx: ExperimentContext) => ExperimentResult;

const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : '-');
const f2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : '-');
const f3 = (x: number): string => (Number.isFinite(x) ? x.toFixed(3) : '-');
const pc = (x: number): string => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : '-');

function sweep<T>(ctx: ExperimentContext, cells: T[], label: (c: T) => string, fn: (c: T) => RunResult): { cell: T; r: RunResult }[] {
  const out: { cell: T; r: RunResult }[] = [];
  cells.forEach((c, i) => {
    ctx.progress(i, cells.length, label(c));
    out.push({ cell: c, r: fn(c) });
  });
  ctx.progress(cells.length, cells.length, 'done');
  return out;
}

function run(wl: Workload, policy: string, seed: number, agents?: number): RunResult {
  return runSim({ workload: wl, policy: { name: policy, ...(agents === undefined ? {} : { agents }) }, seed });
}

const meanUtil = (r: RunResult): number => {
  const u = r.util.filter((x) => x.t > 0);
  return u.length ? u.reduce((a, x) => a + x.busy, 0) / u.length / r.nRu : NaN;
};

function base(name: string, title: string, ctx: ExperimentContext, t0: number): Omit<ExperimentResult, 'rows' | 'tables' | 'charts' | 'paper'> {
  return { name, title, quick: ctx.quick, seed: ctx.seed, wallMs: performance.now() - t0 };
}

// ---------------------------------------------------------------------------------------------

const sampleSize: Runner = (ctx) => {
  const t0 = performance.now();
  const loads = ctx.quick ? [0.1, 0.3, 0.5, 0.7, 0.8, 0.9] : [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];
  const Rs = [2, 4, 8, 16, 32, 64];
  const jobs = ctx.quick ? 2500 : 12000;
  const cells = Rs.flatMap((R) => loads.map((load) => ({ R, load })));
  const res = sweep(ctx, cells, (c) => `R=${c.R} load=${c.load}`, (c) => run(w1({ load: c.load, jobs }), `fixed-R${c.R}`, ctx.seed));
  const rows = res.map(({ cell, r }) => ({
    R: cell.R,
    load: cell.load,
    respMeanMs: r.summary.response.mean,
    respP95Ms: r.summary.response.p95,
    overheadMeanMs: r.summary.sched.mean,
    overheadP5Ms: r.summary.sched.p5,
    overheadP25Ms: r.summary.sched.p25,
    overheadP75Ms: r.summary.sched.p75,
    overheadP95Ms: r.summary.sched.p95,
    conflictsPerCommit: r.summary.conflictsPerCommit,
    utilization: meanUtil(r),
  }));
  const tables: Table[] = [
    {
      title: 'Mean response time, ms (100 ms tasks), by R (rows) and load (columns)',
      head: ['R', ...loads.map((l) => `${l * 100}%`)],
      rows: Rs.map((R) => [R, ...loads.map((l) => f1(rows.find((x) => x.R === R && x.load === l)?.respMeanMs ?? NaN))]),
    },
    {
      title: 'Scheduling overhead (submission → start), mean ms [p95]',
      head: ['R', ...loads.map((l) => `${l * 100}%`)],
      rows: Rs.map((R) => [R, ...loads.map((l) => {
        const x = rows.find((y) => y.R === R && y.load === l);
        return x ? `${f2(x.overheadMeanMs)} [${f1(x.overheadP95Ms)}]` : '-';
      })]),
    },
    {
      title: 'Conflicts per commit',
      head: ['R', ...loads.map((l) => `${l * 100}%`)],
      rows: Rs.map((R) => [R, ...loads.map((l) => f3(rows.find((x) => x.R === R && x.load === l)?.conflictsPerCommit ?? NaN))]),
    },
  ];
  const pts = (k: 'respMeanMs' | 'overheadMeanMs' | 'respP95Ms'): Point[] => rows.map((x) => ({ x: x.load * 100, y: x[k], series: `R=${x.R}` }));
  return {
    ...base('sample-size', 'Fig. 9: sampling overhead and response time vs sample size R and load (W1)', ctx, t0),
    rows,
    tables,
    charts: [
      { file: 'sample-size-response.svg', title: 'Mean response time vs load (W1, 10 agents)', xTitle: 'cluster load (%)', yTitle: 'mean response (ms)', points: pts('respMeanMs'), logY: true },
      { file: 'sample-size-p95.svg', title: 'p95 response time vs load (W1, 10 agents)', xTitle: 'cluster load (%)', yTitle: 'p95 response (ms)', points: pts('respP95Ms'), logY: true },
      { file: 'sample-size-overhead.svg', title: 'Scheduling overhead vs load (W1, 10 agents)', xTitle: 'cluster load (%)', yTitle: 'mean overhead (ms)', points: pts('overheadMeanMs'), logY: true },
    ],
    paper:
      'Tarcil Fig. 9 (110-server EC2, 10 agents, 100 ms Spark tasks): overheads marginal up to R = 32 even at high load, substantially higher for R ≥ 64 (conflicts between the 10 agents); response times insensitive to R at low load; R = 2, 4 fail to find good resources at high load; R = 8 best at both low and high load.',
    wallMs: performance.now() - t0,
  };
};

const agentsExp: Runner = (ctx) => {
  const t0 = performance.now();
  const loads = ctx.quick ? [0.5, 0.8, 0.9] : [0.1, 0.3, 0.5, 0.7, 0.8, 0.9];
  const counts = ctx.quick ? [1, 2, 3, 5, 10, 20] : [1, 2, 3, 4, 6, 8, 10, 12, 16, 20];
  const jobs = ctx.quick ? 2500 : 10000;
  const cells = counts.flatMap((agents) => loads.map((load) => ({ agents, load })));
  const res = sweep(ctx, cells, (c) => `agents=${c.agents} load=${c.load}`, (c) => run(w1({ load: c.load, jobs }), 'fixed-R8', ctx.seed, c.agents));
  const rows = res.map(({ cell, r }) => ({
    agents: cell.agents,
    load: cell.load,
    schedMeanMs: r.summary.sched.mean,
    schedP95Ms: r.summary.sched.p95,
    qosMet: r.summary.within10,
    conflictsPerCommit: r.summary.conflictsPerCommit,
  }));
  const grid = (k: 'schedMeanMs' | 'qosMet', fmt: (x: number) => string): (string | number)[][] =>
    counts.map((a) => [a, ...loads.map((l) => fmt(rows.find((x) => x.agents === a && x.load === l)?.[k] ?? NaN))]);
  return {
    ...base('agents', 'Fig. 10: scheduling latency and QoS vs number of agents (W1, R = 8)', ctx, t0),
    rows,
    tables: [
      { title: 'Mean scheduling latency, ms', head: ['agents', ...loads.map((l) => `${l * 100}%`)], rows: grid('schedMeanMs', f2) },
      { title: 'Jobs within 10% of ideal (QoS met)', head: ['agents', ...loads.map((l) => `${l * 100}%`)], rows: grid('qosMet', pc) },
    ],
    charts: [
      { file: 'agents-latency.svg', title: 'Scheduling latency vs agents (W1, R = 8)', xTitle: 'scheduling agents', yTitle: 'mean latency (ms)', points: rows.map((x) => ({ x: x.agents, y: x.schedMeanMs, series: `load ${x.load * 100}%` })), logY: true },
      { file: 'agents-qos.svg', title: 'Jobs meeting QoS vs agents (W1, R = 8)', xTitle: 'scheduling agents', yTitle: 'fraction within 10% of ideal', points: rows.map((x) => ({ x: x.agents, y: x.qosMet, series: `load ${x.load * 100}%` })) },
    ],
    paper:
      'Tarcil Fig. 10: with fewer than 3 agents latency suffers at high load (limited parallelism); latency falls until 12 agents, then rises slowly with conflicts; 3 agents suffice for minimum latency; beyond 80% load QoS violations come from admission queueing, not agent count.',
  };
};

const loadExp: Runner = (ctx) => {
  const t0 = performance.now();
  const loads = ctx.quick ? [0.1, 0.5, 0.8, 0.9] : [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95];
  const jobs = ctx.quick ? 2500 : 15000;
  const res = sweep(ctx, loads, (l) => `load=${l}`, (l) => run(w1({ load: l, jobs }), 'tarcil', ctx.seed));
  const rows = res.map(({ cell, r }) => ({ load: cell, meanMs: r.summary.response.mean, p95Ms: r.summary.response.p95, meanR: r.summary.meanR, queueMs: r.summary.queueMean, conflictsPerCommit: r.summary.conflictsPerCommit }));
  return {
    ...base('load', 'Fig. 11a: response time vs load (W1, adaptive R)', ctx, t0),
    rows,
    tables: [{ title: 'Tarcil (adaptive R, admission control), 100 ms tasks', head: ['load', 'mean ms', 'p95 ms', 'mean R', 'queueing ms', 'conflicts/commit'], rows: rows.map((x) => [`${Math.round(x.load * 100)}%`, f1(x.meanMs), f1(x.p95Ms), f1(x.meanR), f2(x.queueMs), f3(x.conflictsPerCommit)]) }],
    charts: [{ file: 'load.svg', title: 'Response time vs load (W1, Tarcil)', xTitle: 'cluster load (%)', yTitle: 'response (ms)', points: rows.flatMap((x) => [{ x: x.load * 100, y: x.meanMs, series: 'mean' }, { x: x.load * 100, y: x.p95Ms, series: 'p95' }]) }],
    paper: 'Tarcil Fig. 11a: mean response almost constant (≈100 ms) until load > 85%; p95 exceeds 250 ms only above 80% load; slow tasks are those delayed by admission control.',
  };
};

const durationExp: Runner = (ctx) => {
  const t0 = performance.now();
  const durs = [10, 100, 1000, 10_000, 100_000, 600_000];
  const jobs = ctx.quick ? 2000 : 8000;
  const res = sweep(ctx, durs, (d) => `duration=${d}ms`, (d) => run(w1({ load: 0.8, durationMs: d, jobs }), 'tarcil', ctx.seed));
  const rows = res.map(({ cell, r }) => ({ durationMs: cell, meanMs: r.summary.response.mean, p95Ms: r.summary.response.p95, meanRatio: r.summary.ratio.mean, p95Ratio: r.summary.ratio.p95, schedMs: r.summary.sched.mean }));
  return {
    ...base('duration', 'Fig. 11b: response time vs task duration at 80% load (W1)', ctx, t0),
    rows,
    tables: [{ title: 'Tarcil at 80% load', head: ['task duration', 'mean ms', 'p95 ms', 'mean / ideal', 'p95 / ideal', 'overhead ms'], rows: rows.map((x) => [`${x.durationMs} ms`, f1(x.meanMs), f1(x.p95Ms), f3(x.meanRatio), f3(x.p95Ratio), f2(x.schedMs)]) }],
    charts: [{ file: 'duration.svg', title: 'Response / ideal vs task duration (80% load)', xTitle: 'task duration (ms)', yTitle: 'response / ideal', points: rows.flatMap((x) => [{ x: x.durationMs, y: x.meanRatio, series: 'mean' }, { x: x.durationMs, y: x.p95Ratio, series: 'p95' }]), logX: true }],
    paper: 'Tarcil Fig. 11b (10 ms–600 s at 80% load): for long tasks mean and p95 approach the target; below 100 ms scheduling overhead dominates, but mean and tail stay close.',
  };
};

const COMPARE_POLICIES = ['tarcil', 'sparrow', 'centralized', 'random', 'delay-fixed', 'delay-dynamic', 'pigeon'];

function summaryRow(label: string, policy: string, s: Summary, r: RunResult): Record<string, string | number> {
  return {
    workload: label,
    policy,
    jobs: s.jobs,
    meanRatio: s.ratio.mean,
    p95Ratio: s.ratio.p95,
    perfMean: s.perfMean,
    perfWorst: s.perfWorst,
    degraded: s.degraded,
    respMeanMs: s.response.mean,
    respP95Ms: s.response.p95,
    schedMeanMs: s.sched.mean,
    schedP95Ms: s.sched.p95,
    locality: s.locality,
    utilization: meanUtil(r),
    wallMs: r.stats.wallMs,
  };
}

const compare: Runner = (ctx) => {
  const t0 = performance.now();
  const queries = ctx.quick ? 150 : 1500;
  const w3jobs = ctx.quick ? 1000 : 7200;
  const variants = ['unloaded', 'resident', 'hetero'] as const;
  const cells: { wl: string; policy: string }[] = [];
  for (const v of variants) for (const p of COMPARE_POLICIES) cells.push({ wl: `W2-${v}`, policy: p });
  for (const p of ['tarcil', 'sparrow', 'centralized', 'random']) cells.push({ wl: 'W3', policy: p });
  const res = sweep(ctx, cells, (c) => `${c.wl} ${c.policy}`, (c) => {
    const wl = c.wl === 'W3' ? w3({ jobs: w3jobs }) : w2({ variant: c.wl.slice(3) as (typeof variants)[number], queries });
    return run(wl, c.policy, ctx.seed);
  });
  const rows = res.map(({ cell, r }) => summaryRow(cell.wl, cell.policy, r.summary, r));
  // Per query type (Fig. 13 left): mean response per type.
  const perType: Record<string, string | number>[] = [];
  const charts: ChartSpec[] = [];
  for (const v of variants) {
    const pts: Point[] = [];
    for (const { cell, r } of res.filter((x) => x.cell.wl === `W2-${v}`)) {
      const types = [...new Set(r.records.map((x) => x.label))].sort();
      for (const q of types) {
        const sel = r.records.filter((x) => x.label === q);
        const m = sel.reduce((a, x) => a + x.response, 0) / sel.length;
        const ideal = sel.reduce((a, x) => a + x.ideal, 0) / sel.length;
        perType.push({ workload: `W2-${v}`, policy: cell.policy, query: q, meanMs: m, idealMs: ideal });
        pts.push({ x: q, y: m, series: cell.policy });
      }
      if (cell.policy === 'tarcil') {
        for (const q of types) {
          const sel = r.records.filter((x) => x.label === q);
          pts.push({ x: q, y: sel.reduce((a, x) => a + x.ideal, 0) / sel.length, series: 'ideal' });
        }
      }
    }
    charts.push({ file: `compare-w2-${v}.svg`, title: `TPC-H (W2 ${v}): mean query response by type`, xTitle: 'query', yTitle: 'mean response (ms)', points: pts, pointsOnly: true, logY: true });
    const cdf: Point[] = [];
    for (const { cell, r } of res.filter((x) => x.cell.wl === `W2-${v}`)) {
      const xs = r.records.map((x) => x.sched).sort((a, b) => a - b);
      const step = Math.max(1, Math.floor(xs.length / 100));
      for (let i = 0; i < xs.length; i += step) cdf.push({ x: Math.max(0.01, xs[i] as number), y: (i + 1) / xs.length, series: cell.policy });
    }
    charts.push({ file: `compare-w2-${v}-overhead.svg`, title: `TPC-H (W2 ${v}): CDF of scheduling overhead per query`, xTitle: 'overhead (ms)', yTitle: 'CDF', points: cdf, logX: true });
  }
  const w3pts: Point[] = [];
  for (const { cell, r } of res.filter((x) => x.cell.wl === 'W3')) {
    const perf = r.records.map((x) => Math.min(1, x.ideal / x.response)).sort((a, b) => a - b);
    const step = Math.max(1, Math.floor(perf.length / 200));
    for (let i = 0; i < perf.length; i += step) w3pts.push({ x: i, y: perf[i] as number, series: cell.policy });
  }
  charts.push({ file: 'compare-w3.svg', title: 'W3 (400 servers): performance normalised to optimal, worst to best', xTitle: 'job (sorted worst → best)', yTitle: 'ideal / response', points: w3pts });
  const w3util: Point[] = [];
  for (const { cell, r } of res.filter((x) => x.cell.wl === 'W3' && x.cell.policy === 'tarcil')) {
    for (const u of r.util) w3util.push({ x: u.t / 1000, y: u.busy / r.nRu, series: cell.policy });
  }
  charts.push({ file: 'compare-w3-util.svg', title: 'W3: cluster utilisation over time (Tarcil)', xTitle: 'time (s)', yTitle: 'busy RUs / RUs', points: w3util });
  const head = ['workload', 'policy', 'mean resp/ideal', 'p95 resp/ideal', 'mean perf', 'worst perf', '>10% degraded', 'overhead mean ms', 'overhead p95 ms', 'locality'];
  const tables: Table[] = [
    {
      title: 'Policies on W2 (TPC-H, 100 servers) and W3 (400 servers, 4,178 RUs)',
      head,
      rows: rows.map((x) => [x.workload as string, x.policy as string, f3(x.meanRatio as number), f2(x.p95Ratio as number), pc(x.perfMean as number), pc(x.perfWorst as number), pc(x.degraded as number), f1(x.schedMeanMs as number), f1(x.schedP95Ms as number), pc(x.locality as number)]),
    },
  ];
  return {
    ...base('compare', 'Fig. 13/15: Tarcil vs Sparrow vs centralized and the others on W2 and W3', ctx, t0),
    rows,
    tables,
    charts,
    extra: { perType },
    paper:
      'Tarcil §6.2.1 (Fig. 13): unloaded TPC-H — Sparrow within 8% of Tarcil on average, Tarcil p95 80%–2.4× lower; centralized has the highest variability and up to 2 s overhead. With 40% resident load Tarcil stays within 6% of unloaded; heterogeneous + resident: Tarcil close to ideal, centralized sometimes beats Sparrow. Tarcil §6.3 (Fig. 15a): Tarcil 97% of optimal on average, worst job 8% below; centralized 82%; sampling-based degrades >75% of jobs; Tarcil overhead < 150 ms for > 80% of jobs, centralized ≈ 1 s.',
  };
};

const uniformity: Runner = (ctx) => {
  const t0 = performance.now();
  const draws = ctx.quick ? 2000 : 20000;
  const c = catalog();
  const wl = w3({ jobs: 0 });
  const engine = new Engine();
  const rng = new SeededRng(ctx.seed);
  const world = new World(engine, rng, wl.servers, { interference: true, utilEvery: 0 });
  const profiles = [...c.workloads.values()].filter((p) => p.family !== 'tpch');
  const resident = Math.round(0.6 * world.nRu);
  for (let k = 0; k < resident; k++) {
    const ru = world.free.at(rng.int(world.free.size));
    const p = profiles[rng.int(profiles.length)];
    if (p) world.placeResident(makeJob({ id: -k - 1, profile: p, arrival: 0, work: [Infinity], maxPerf: 1 }), ru);
  }
  const view = world.addView(0, false);
  const free = [...view.state.available.values()];
  const rows: Record<string, string | number>[] = [];
  const charts: ChartSpec[] = [];
  const tables: Table[] = [];
  const xs = [0.5, 0.8, 0.9, 0.95, 0.99];
  for (const name of ['memcached', 'spark-lr', 'spec-mcf']) {
    const p = c.workloads.get(name);
    if (!p) continue;
    const target = jobTarget(p.caused);
    const C: number[] = [];
    const scores: RuScore[] = free.map((id) => {
      const s = view.state.serverOfRu(id);
      if (!s) throw new Error('missing server');
      return scoreRu(contention(s.sum, s.ruCount, null, C), target);
    });
    const D = rankD(scores, rng);
    const pts: Point[] = [];
    for (const R of [1, 8, 16]) {
      const best: number[] = [];
      for (let i = 0; i < draws; i++) {
        let b = -1;
        for (let k = 0; k < R; k++) b = Math.max(b, D[rng.int(D.length)] as number);
        best.push(b);
      }
      best.sort((a, b) => a - b);
      let ks = 0;
      for (let i = 0; i < best.length; i++) ks = Math.max(ks, Math.abs((i + 1) / best.length - (best[i] as number) ** R));
      for (const x of xs) {
        const emp = best.filter((b) => b < x).length / best.length;
        rows.push({ profile: name, R, x, empirical: emp, theory: x ** R, ks });
      }
      const step = Math.max(1, Math.floor(best.length / 100));
      for (let i = 0; i < best.length; i += step) pts.push({ x: best[i] as number, y: (i + 1) / best.length, series: `R=${R} sampled` });
      for (let k = 0; k <= 50; k++) pts.push({ x: k / 50, y: (k / 50) ** R, series: `R=${R} x^R` });
    }
    charts.push({ file: `uniformity-${name}.svg`, title: `CDF of D of the best of R samples (${name}, 60% load, hetero-400)`, xTitle: 'D (rank of Q among free RUs)', yTitle: 'P[D_best < x]', points: pts });
    const acc = scores.filter((s) => s.acceptable).length / scores.length;
    tables.push({
      title: `${name}: P[D_best < x], sampled vs x^R (${free.length} free RUs, ${pc(acc)} acceptable)`,
      head: ['R', ...xs.map((x) => `x=${x}`), 'KS distance'],
      rows: [1, 8, 16].map((R) => {
        const sel = rows.filter((r) => r.profile === name && r.R === R);
        return [R, ...sel.map((r) => `${f3(r.empirical as number)} / ${f3(r.theory as number)}`), f3((sel[0]?.ks as number) ?? NaN)];
      }),
    });
  }
  return {
    ...base('uniformity', 'Fig. 4: D is uniform and the best of R follows x^R (on the simulator\'s own samples)', ctx, t0),
    rows,
    tables,
    charts,
    paper: 'Tarcil Fig. 4: the CDF of D for sampled RUs is uniform, so P[D_best < x] = x^R; with R = 8 and 16 the sampled CDFs match the analytical ones (Fig. 16 across EC2 permutations).',
  };
};

const sparrowExp: Runner = (ctx) => {
  const t0 = performance.now();
  const loads = ctx.quick ? [0.5, 0.8, 0.9] : [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];
  const policies = ['random', 'sparrow-per-task', 'sparrow-batch', 'sparrow', 'omniscient'];
  const jobs = ctx.quick ? 1000 : 3000;
  const cells = policies.flatMap((p) => loads.map((load) => ({ p, load })));
  cells.push({ p: 'sparrow-nocancel', load: 0.9 }, { p: 'sparrow-nocancel', load: 0.95 }, { p: 'sparrow', load: 0.95 });
  const res = sweep(ctx, cells, (c) => `${c.p} load=${c.load}`, (c) => run(w4({ load: c.load, jobs }), c.p, ctx.seed));
  const rows = res.map(({ cell, r }) => ({
    policy: cell.p,
    load: cell.load,
    meanMs: r.summary.response.mean,
    p50Ms: r.summary.response.p50,
    p95Ms: r.summary.response.p95,
    idealMs: r.records.reduce((a, x) => a + x.ideal, 0) / Math.max(1, r.records.length),
    probes: r.counters.probes ?? 0,
    cancelled: r.counters.cancelled ?? 0,
    noops: r.counters.noops ?? 0,
    tasksPerSec: r.stats.tasks / (r.stats.wallMs / 1000),
  }));
  const omni = (l: number): number => rows.find((x) => x.policy === 'omniscient' && x.load === l)?.meanMs ?? NaN;
  return {
    ...base('sparrow', 'Sparrow Fig. 3: random, per-task, batch, batch + late binding vs omniscient (W4)', ctx, t0),
    rows,
    tables: [
      { title: 'Mean job response time, ms', head: ['policy', ...loads.map((l) => `${l * 100}%`)], rows: policies.map((p) => [p, ...loads.map((l) => f1(rows.find((x) => x.policy === p && x.load === l)?.meanMs ?? NaN))]) },
      { title: 'Mean response / omniscient', head: ['policy', ...loads.map((l) => `${l * 100}%`)], rows: policies.map((p) => [p, ...loads.map((l) => f3((rows.find((x) => x.policy === p && x.load === l)?.meanMs ?? NaN) / omni(l)))]) },
      {
        title: 'Proactive cancellation (batch + late binding)',
        head: ['variant', 'load', 'median ms', 'mean ms', 'probes', 'cancelled', 'no-ops'],
        rows: rows.filter((x) => x.policy.startsWith('sparrow') && x.policy !== 'sparrow-batch' && x.policy !== 'sparrow-per-task' && x.load >= 0.9).map((x) => [x.policy, x.load, f1(x.p50Ms), f1(x.meanMs), x.probes, x.cancelled, x.noops]),
      },
    ],
    charts: [{ file: 'sparrow.svg', title: 'W4: mean job response vs load (10,000 4-core workers)', xTitle: 'load (%)', yTitle: 'mean response (ms)', points: rows.filter((x) => policies.includes(x.policy)).map((x) => ({ x: x.load * 100, y: x.meanMs, series: x.policy })), logY: true }],
    paper: 'Sparrow Fig. 3 / §3 (10,000 4-core machines, 100-task jobs, exp. 100 ms, 1 ms RTT): at 80% load per-task sampling is >3× better than random but 2.6× omniscient; batch is 0.73× per-task and 1.92× omniscient; batch + late binding is within 5% (4 ms) of omniscient. §3.6: cancellation cuts median response 6% at 95% load.',
  };
};

const pigeonExp: Runner = (ctx) => {
  const t0 = performance.now();
  const traces: TraceName[] = ['yahoo', 'cloudera', 'google'];
  const loads = ctx.quick ? [0.9] : [0.8, 0.9];
  const jobs = ctx.quick ? 400 : 2000;
  const maxFanout = ctx.quick ? 2000 : undefined;
  const cells = traces.flatMap((trace) => loads.flatMap((load) => ['pigeon', 'sparrow'].map((p) => ({ trace, load, p }))));
  const res = sweep(ctx, cells, (c) => `${c.trace} ${c.load} ${c.p}`, (c) =>
    run(w5({ trace: c.trace, load: c.load, jobs, ...(maxFanout ? { maxFanout } : {}) }), c.p, ctx.seed),
  );
  const rows = res.map(({ cell, r }) => {
    const s = pigeonSlowdowns(r.records);
    return {
      trace: cell.trace,
      load: cell.load,
      policy: cell.p,
      shortJobs: s.short.n,
      longJobs: s.long.n,
      shortP50: s.short.p50,
      shortP90: s.short.p90,
      shortP99: s.short.p99,
      longP50: s.long.p50,
      longP90: s.long.p90,
      longP99: s.long.p99,
      tasks: r.stats.tasks,
    };
  });
  return {
    ...base('pigeon', 'Pigeon §4: short and long job slowdowns, Pigeon vs Sparrow (W5)', ctx, t0),
    rows,
    tables: [
      {
        title: 'Slowdown (p-th percentile completion / p-th percentile execution time)',
        head: ['trace', 'load', 'policy', 'short p50', 'short p90', 'short p99', 'long p50', 'long p90', 'long p99', 'short/long jobs'],
        rows: rows.map((x) => [x.trace, x.load, x.policy, f2(x.shortP50), f2(x.shortP90), f2(x.shortP99), f2(x.longP50), f2(x.longP90), f2(x.longP99), `${x.shortJobs}/${x.longJobs}`]),
      },
    ],
    charts: [
      {
        file: 'pigeon-short-p99.svg',
        title: 'W5: short-job p99 slowdown',
        xTitle: 'trace / load',
        yTitle: 'p99 slowdown',
        points: rows.map((x) => ({ x: `${x.trace} ${x.load}`, y: x.shortP99, series: x.policy })),
        pointsOnly: true,
        logY: true,
      },
    ],
    paper: 'Pigeon §4.2/§5: at high load Pigeon keeps short-job slowdowns low (Yahoo at 3K workers: 1.3, 1.5, 5.3 at p50/p90/p99) while Eagle exceeds 70; on EC2 Sparrow gives up to 200× longer short-job completion than Pigeon but up to 15% better long-job times.',
  };
};

const calibrateExp: Runner = (ctx) => {
  const t0 = performance.now();
  const loads = [0.5, 0.8, 0.9];
  const rowsC = calibrate({ loads, seed: ctx.seed });
  const rows = rowsC.map((r) => ({ load: r.load, profile: r.profile, latencyCritical: r.latencyCritical ? 'yes' : 'no', p50: r.slowdown.p50, p95: r.slowdown.p95 }));
  return {
    ...base('calibrate', 'Performance model calibration: slowdown under interference-blind random placement (hetero-400, W3 mix)', ctx, t0),
    rows,
    tables: [{ title: 'Median [p95] slowdown by profile and load', head: ['profile', 'latency-critical', ...loads.map((l) => `${l * 100}%`)], rows: [...new Set(rows.map((r) => r.profile))].map((p) => [p, rows.find((r) => r.profile === p)?.latencyCritical ?? '', ...loads.map((l) => { const x = rows.find((r) => r.profile === p && r.load === l); return x ? `${f2(x.p50)} [${f2(x.p95)}]` : '-'; })]) }],
    charts: [{ file: 'calibrate.svg', title: 'Median slowdown under random placement', xTitle: 'profile', yTitle: 'median slowdown', points: rows.map((r) => ({ x: r.profile, y: r.p50, series: `load ${r.load * 100}%` })), pointsOnly: true }],
    paper: 'DESIGN.md §8 / Tarcil Fig. 1a, 15a: interference-blind placement at 80% load slows sensitive jobs 1.5–3×.',
  };
};

const speed: Runner = (ctx) => {
  const t0 = performance.now();
  const jobs = ctx.quick ? 2000 : 10_000;
  let peak = 0;
  const sample = (): void => {
    const m = process.memoryUsage().rss;
    if (m > peak) peak = m;
  };
  ctx.progress(0, 2, 'W4 sparrow 80%');
  const r4 = runSim({ workload: w4({ load: 0.8, jobs }), policy: { name: 'sparrow' }, seed: ctx.seed, onProgress: sample });
  sample();
  ctx.progress(1, 2, 'W3 tarcil');
  const r3 = runSim({ workload: w3({ jobs: ctx.quick ? 1200 : 7200 }), policy: { name: 'tarcil' }, seed: ctx.seed, onProgress: sample });
  sample();
  ctx.progress(2, 2, 'done');
  const rows = [r4, r3].map((r) => ({
    workload: r.workload,
    policy: r.policy,
    tasks: r.stats.tasks,
    events: r.stats.events,
    wallS: r.stats.wallMs / 1000,
    tasksPerSec: r.stats.tasks / (r.stats.wallMs / 1000),
    tasksPerMin: (60 * r.stats.tasks) / (r.stats.wallMs / 1000),
    eventsPerSec: r.stats.events / (r.stats.wallMs / 1000),
    simS: r.stats.simMs / 1000,
  }));
  return {
    ...base('speed', 'Simulator speed: task placements per second and peak memory', ctx, t0),
    rows,
    tables: [{ title: `Speed (peak RSS of the process ${(peak / 2 ** 20).toFixed(0)} MiB)`, head: ['workload', 'policy', 'tasks', 'events', 'wall s', 'tasks/s', 'tasks/min', 'events/s', 'virtual s'], rows: rows.map((x) => [x.workload, x.policy, x.tasks, x.events, f1(x.wallS), Math.round(x.tasksPerSec), Math.round(x.tasksPerMin), Math.round(x.eventsPerSec), f1(x.simS)]) }],
    charts: [],
    extra: { peakRssMiB: peak / 2 ** 20 },
    paper: 'Target (issue 4): ≥ 1 million simulated tasks a minute; a W3 run in under 30 s.',
  };
};

export const EXPERIMENTS: Record<string, Runner> = {
  'sample-size': sampleSize,
  agents: agentsExp,
  load: loadExp,
  duration: durationExp,
  compare,
  uniformity,
  sparrow: sparrowExp,
  pigeon: pigeonExp,
  calibrate: calibrateExp,
  speed,
};
