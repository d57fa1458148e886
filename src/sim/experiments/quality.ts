/**
 * Placement quality: RU quality uniformity (Fig. 4), robustness to profile error, quality of
 * running tasks over time (Fig. 15c, 17) and the ablation of the W3 gap.
 */
import { contention, jobTarget, rankD, scoreRu, type RuScore } from '../../quality/index.ts';
import { SeededRng } from '../../util/rng.ts';
import type { ChartSpec, Point } from '../charts.ts';
import { dist } from '../metrics.ts';
import type { PolicySpec } from '../policies/index.ts';
import { runSim } from '../run.ts';
import { catalog, w3 } from '../workloads.ts';
import { makeJob, World } from '../world.ts';
import { Engine } from '../engine.ts';
import { type Table, type Runner, f1, f3, pc, sweep, meanUtil, base } from './common.ts';

export const uniformity: Runner = (ctx) => {
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
    charts.push({
      file: `uniformity-${name}.svg`,
      title: `CDF of D of the best of R samples (${name}, 60% load, hetero-400)`,
      xTitle: 'D (rank of Q among free RUs)',
      yTitle: 'P[D_best < x]',
      points: pts,
    });
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
    ...base('uniformity', "Fig. 4: D is uniform and the best of R follows x^R (on the simulator's own samples)", ctx, t0),
    rows,
    tables,
    charts,
    paper:
      'Tarcil Fig. 4: the CDF of D for sampled RUs is uniform, so P[D_best < x] = x^R; with R = 8 and 16 the sampled CDFs match the analytical ones (Fig. 16 across EC2 permutations).',
  };
};

/** One run of the robustness sweep: a policy, with or without learned profiles, at one error. */
interface RobustCell {
  sd: number;
  policy: 'tarcil' | 'centralized';
  /** Profiles that learn (tarcil's runtime.learn: src/model/learn.ts). */
  learn: boolean;
}

/**
 * The rows of the sweep and the sds each is run at: every row at every sd. With the error drawn
 * for each job no class estimate can correct it; learning at sd 0 shows what it does to right
 * profiles. The runs at large errors are the longest of the sweep (the cell overloads).
 */
const ROBUST_ROWS: { policy: RobustCell['policy']; learn: boolean; label: string; sds: number[] }[] = [
  { policy: 'tarcil', learn: false, label: 'tarcil', sds: [0, 5, 10, 20] },
  { policy: 'tarcil', learn: true, label: 'tarcil, profiles that learn', sds: [0, 5, 10, 20] },
  { policy: 'centralized', learn: false, label: 'centralized', sds: [0, 5, 10, 20] },
];

/**
 * W3 with profile error drawn for each job (sd 0/5/10/20 c_i points): tarcil with learned
 * profiles off and on, and the centralized scheduler. Every job's real vector is its own draw
 * around the declared one, which no estimate of its class can correct; the error drawn once per
 * workload class, which a learned profile can correct, is `bench mechanisms-error`.
 */
export const robustnessExp: Runner = (ctx) => {
  const t0 = performance.now();
  const sds = [0, 5, 10, 20];
  const jobs = ctx.quick ? 1000 : 7200;
  const cells: RobustCell[] = [];
  for (const sd of sds) for (const r of ROBUST_ROWS) if (r.sds.includes(sd)) cells.push({ sd, policy: r.policy, learn: r.learn });
  // Large errors overload the cell (slow tasks hold RUs longer): those runs are the longest.
  const cost = (c: RobustCell): number => (1 + c.sd) * (c.learn ? 1.5 : 1) * (c.policy === 'centralized' ? 0.2 : 1);
  const res = sweep(
    ctx,
    cells,
    (c) => `W3 profile error sd=${c.sd} ${c.policy}${c.learn ? ' learning' : ''}`,
    (c) => runSim({ workload: w3({ jobs, profileError: c.sd }), policy: { name: c.policy, ...(c.learn ? { runtime: { learn: true } } : {}) }, seed: ctx.seed }),
    { cost },
  );
  const rows = res.map(({ cell, r }) => ({
    profileErrorSd: cell.sd,
    policy: cell.policy,
    learn: cell.learn ? 1 : 0,
    perfMean: r.summary.perfMean,
    perfWorst: r.summary.perfWorst,
    degraded: r.summary.degraded,
    schedMeanMs: r.summary.sched.mean,
    observations: r.counters.observations ?? 0,
    wallMs: r.stats.wallMs,
  }));
  const grid = (fmt: (x: (typeof rows)[number]) => string): (string | number)[][] =>
    ROBUST_ROWS.map((r) => [
      r.label,
      ...sds.map((sd) => {
        const x = rows.find((y) => y.policy === r.policy && y.learn === (r.learn ? 1 : 0) && y.profileErrorSd === sd);
        return x ? fmt(x) : '-';
      }),
    ]);
  return {
    ...base('robustness', 'Robustness: W3 with profiling error drawn for each job (real vectors ≠ declared), with profiles that learn and without', ctx, t0),
    rows,
    tables: [
      {
        title: `W3 (${jobs} jobs): mean performance [worst job] by profile error sd (c_i points), drawn for each job`,
        head: ['policy', ...sds.map((sd) => `sd ${sd}`)],
        rows: grid((x) => `${pc(x.perfMean)} [${pc(x.perfWorst)}]`),
      },
      { title: 'Share of jobs more than 10% slower than ideal', head: ['policy', ...sds.map((sd) => `sd ${sd}`)], rows: grid((x) => pc(x.degraded)) },
    ],
    charts: [
      {
        file: 'robustness.svg',
        title: 'W3: mean performance vs profiling error (drawn for each job)',
        xTitle: 'profile error sd (c_i points)',
        yTitle: 'mean ideal / response',
        points: rows.map((x) => ({ x: x.profileErrorSd, y: x.perfMean, series: `${x.policy}${x.learn ? ', learning' : ''}` })),
      },
    ],
    paper:
      'Tarcil §5 relies on Quasar-style profiles and monitors deviations at run time; the paper reports no profile-error sweep; this one adds error to the declared profiles to test how much placement depends on them, and how much profiles that learn from the monitors recover.',
  };
};

/**
 * Tarcil Fig. 17 and 15c on W3: the quality Q of the RUs held by running tasks, judged at the moment
 * each task started against the truth (so every policy is scored alike), over time and in one
 * snapshot at 8,000 s.
 */
export const qualityExp: Runner = (ctx) => {
  const t0 = performance.now();
  const jobs = ctx.quick ? 1000 : 7200;
  const policies = ['tarcil', 'sparrow'];
  const res = sweep(
    ctx,
    policies,
    (p) => `W3 ${p}`,
    (p) => runSim({ workload: w3({ jobs }), policy: { name: p }, seed: ctx.seed, keepWorld: true, scoreQ: true }),
    { parallel: false },
  );
  const cuts = [0.4, 0.6, 0.8, 0.9];
  const step = ctx.quick ? 200_000 : 1_000_000;
  const rows: Record<string, string | number>[] = [];
  const snapshot: Record<string, string | number>[] = [];
  const snapAt = ctx.quick ? 800_000 : 8_000_000;
  for (const { cell, r } of res) {
    const tasks: { s: number; e: number; q: number }[] = [];
    for (const j of r.world?.completed ?? []) for (const t of j.tasks) if (t.placedQ !== undefined) tasks.push({ s: t.start, e: t.end, q: t.placedQ });
    const end = tasks.reduce((m, t) => Math.max(m, t.e), 0);
    for (let at = step; at < end; at += step) {
      const qs = tasks.filter((t) => t.s <= at && at < t.e).map((t) => t.q);
      if (qs.length === 0) continue;
      const row: Record<string, string | number> = { policy: cell, timeS: at / 1000, busy: qs.length, utilization: qs.length / r.nRu };
      for (const c of cuts) row[`below${Math.round(c * 100)}`] = qs.filter((q) => q < c).length / qs.length;
      rows.push(row);
    }
    const qs = tasks.filter((t) => t.s <= snapAt && snapAt < t.e).map((t) => t.q);
    const d = dist(qs);
    snapshot.push({
      policy: cell,
      timeS: snapAt / 1000,
      utilization: qs.length / r.nRu,
      p5: d.p5,
      p25: d.p25,
      p50: d.p50,
      p75: d.p75,
      below09: qs.filter((q) => q < 0.9).length / Math.max(1, qs.length),
    });
  }
  const at = (p: string, t: number): Record<string, string | number> | undefined => rows.find((x) => x.policy === p && x.timeS === t);
  const times = [...new Set(rows.map((x) => x.timeS as number))].filter((t, k, a) => a.length <= 12 || k % Math.ceil(a.length / 12) === 0);
  return {
    ...base('quality', 'Fig. 17 / 15c: quality of the RUs held by running tasks over time (W3, Q at placement against the truth)', ctx, t0),
    rows,
    tables: [
      {
        title: 'Share of busy RUs whose task started with Q < 0.4 / Q < 0.9 (utilisation)',
        head: ['time (s)', ...policies],
        rows: times.map((t) => [
          t,
          ...policies.map((p) => {
            const x = at(p, t);
            return x ? `${pc(x.below40 as number)} / ${pc(x.below90 as number)} (${pc(x.utilization as number)})` : '-';
          }),
        ]),
      },
      {
        title: `Snapshot at ${snapAt / 1000} s (Fig. 15c): Q of the RUs held, percentiles`,
        head: ['policy', 'utilisation', 'p5', 'p25', 'p50', 'p75', 'Q < 0.9'],
        rows: snapshot.map((x) => [
          x.policy as string,
          pc(x.utilization as number),
          f3(x.p5 as number),
          f3(x.p25 as number),
          f3(x.p50 as number),
          f3(x.p75 as number),
          pc(x.below09 as number),
        ]),
      },
    ],
    charts: [
      {
        file: 'quality-over-time.svg',
        title: 'W3: share of busy RUs with Q below 0.4 and 0.9 over time',
        xTitle: 'time (s)',
        yTitle: 'share of busy RUs',
        points: rows.flatMap((x) => [
          { x: x.timeS as number, y: x.below40 as number, series: `${String(x.policy)} Q<0.4` },
          { x: x.timeS as number, y: x.below90 as number, series: `${String(x.policy)} Q<0.9` },
        ]),
      },
    ],
    extra: { snapshot },
    paper:
      "Tarcil Fig. 17: at 16,000 s (cluster highly loaded) the sampling-based scheduler has 70% of allocated cores at quality < 0.4; with Tarcil only 18% of cores are below 0.9, and its quality stays almost constant over the scenario while the sampling-based scheduler's degrades. Fig. 15c (8,000 s, 75% utilisation): the majority of RUs close to their target quality.",
  };
};

/**
 * W2 load sweep: where each policy saturates on TPC-H with 40% resident load. The query rate is
 * given as the *ideal* work it brings (share of RUs at best platform, no interference); the
 * realised utilisation (resident + queries, measured) is what the queries really impose once
 * interference and remote reads are paid, and it differs by policy.
 */
export const ablation: Runner = (ctx) => {
  const t0 = performance.now();
  const jobs = ctx.quick ? 1000 : 7200;
  const variants: { label: string; spec: PolicySpec; interference?: boolean }[] = [
    { label: 'tarcil (adaptive R, monotone Q, admission off)', spec: { name: 'tarcil' } },
    { label: 'admission on', spec: { name: 'tarcil', core: { admission: true } } },
    { label: 'admission on, buckets alone (no sample arbiter)', spec: { name: 'tarcil', core: { admission: true, arbiterSample: 0 } } },
    { label: "qualityForm 'paper'", spec: { name: 'tarcil', core: { qualityForm: 'paper' } } },
    { label: 'fixed R = 8', spec: { name: 'fixed-R8' } },
    { label: 'fixed R = 32', spec: { name: 'fixed-R32' } },
    { label: 'no interference in the truth', spec: { name: 'tarcil' }, interference: false },
  ];
  const res = sweep(
    ctx,
    variants,
    (v) => v.label,
    (v) => {
      const wl = w3({ jobs });
      return runSim({ workload: v.interference === false ? { ...wl, interference: false } : wl, policy: v.spec, seed: ctx.seed, keepWorld: true });
    },
    { parallel: false },
  );
  const rows = res.map(({ cell, r }) => {
    const s = r.summary;
    const lost = { wait: 0, platform: 0, interference: 0, remote: 0, total: 0 };
    let perfNoPlatform = 0;
    for (const x of r.records) {
      lost.wait += x.loss.wait;
      lost.platform += x.loss.platform;
      lost.interference += x.loss.interference;
      lost.remote += x.loss.remote;
      lost.total += x.response - x.ideal;
      perfNoPlatform += Math.min(1, x.ideal / Math.max(x.ideal, x.response - x.loss.platform));
    }
    const waits = r.records.flatMap((x) => x.waits.map((w) => ({ ...w, bound: Math.min(10_000, Math.max(10, 2 * x.ideal)) })));
    const finite = waits.filter((w) => Number.isFinite(w.estimate));
    const capped = waits.filter((w) => w.realised >= w.bound - 1).length;
    let acc = 0;
    let accSd = 0;
    let un = 0;
    let unSd = 0;
    for (const j of r.world?.completed ?? []) {
      for (const t of j.tasks) {
        if (t.acceptable === undefined) continue;
        const sd = (t.end - t.start) / (t.work / t.speed);
        if (t.acceptable) {
          acc++;
          accSd += sd;
        } else {
          un++;
          unSd += sd;
        }
      }
    }
    const n = r.records.length;
    return {
      variant: cell.label,
      jobs: n,
      perfMean: s.perfMean,
      perfWorst: s.perfWorst,
      degraded: s.degraded,
      perfVsOwnPlatform: perfNoPlatform / Math.max(1, n),
      schedMeanMs: s.sched.mean,
      schedP50Ms: s.sched.p50,
      schedP95Ms: s.sched.p95,
      lostWait: lost.wait / lost.total,
      lostPlatform: lost.platform / lost.total,
      lostInterference: lost.interference / lost.total,
      meanR: s.meanR,
      queuedJobs: r.records.filter((x) => x.waits.length > 0).length / Math.max(1, n),
      waits: waits.length,
      waitEstimateMeanMs: finite.length ? finite.reduce((a, w) => a + w.estimate, 0) / finite.length : NaN,
      waitEstimateP50Ms: finite.length ? dist(finite.map((w) => w.estimate)).p50 : NaN,
      waitRealisedMeanMs: waits.length ? waits.reduce((a, w) => a + w.realised, 0) / waits.length : NaN,
      waitsAtBound: waits.length ? capped / waits.length : NaN,
      acceptableShare: acc + un > 0 ? acc / (acc + un) : NaN,
      slowdownAcceptable: acc > 0 ? accSd / acc : NaN,
      slowdownUnacceptable: un > 0 ? unSd / un : NaN,
      utilization: meanUtil(r),
    };
  });
  return {
    ...base('ablation', "W3 ablation: what separates our Tarcil from the paper's 97% (Fig. 15a)", ctx, t0),
    rows,
    tables: [
      {
        title: `W3 (${jobs} jobs, hetero-400): performance and where the lost time went`,
        head: [
          'variant',
          'mean perf',
          'worst',
          '>10% degraded',
          'perf vs own platform',
          'lost: wait',
          'lost: platform',
          'lost: interference',
          'overhead mean / p50 / p95 ms',
          'mean R',
        ],
        rows: rows.map((x) => [
          x.variant,
          pc(x.perfMean),
          pc(x.perfWorst),
          pc(x.degraded),
          pc(x.perfVsOwnPlatform),
          pc(x.lostWait),
          pc(x.lostPlatform),
          pc(x.lostInterference),
          `${f1(x.schedMeanMs)} / ${f1(x.schedP50Ms)} / ${f1(x.schedP95Ms)}`,
          f1(x.meanR),
        ]),
      },
      {
        title: 'Admission control: estimated vs realised waits, and the quality of what was placed',
        head: [
          'variant',
          'jobs queued',
          'waits',
          'estimate mean / p50 ms',
          'realised mean ms',
          'waits ended by the bound',
          'acceptable placements',
          'slowdown acceptable / not',
        ],
        rows: rows.map((x) => [
          x.variant,
          pc(x.queuedJobs),
          x.waits,
          `${f1(x.waitEstimateMeanMs)} / ${f1(x.waitEstimateP50Ms)}`,
          f1(x.waitRealisedMeanMs),
          pc(x.waitsAtBound),
          pc(x.acceptableShare),
          `${f3(x.slowdownAcceptable)} / ${f3(x.slowdownUnacceptable)}`,
        ]),
      },
    ],
    charts: [
      {
        file: 'ablation-w3.svg',
        title: 'W3 ablation: mean performance and its losses',
        xTitle: 'variant',
        yTitle: 'share',
        points: rows.flatMap((x, i) => [
          { x: `v${i + 1}`, y: x.perfMean, series: 'mean perf' },
          { x: `v${i + 1}`, y: x.perfVsOwnPlatform, series: 'perf vs own platform' },
          { x: `v${i + 1}`, y: x.acceptableShare, series: 'acceptable placements' },
        ]),
        pointsOnly: true,
      },
    ],
    paper:
      'Tarcil Fig. 15a/d: 97% average performance, worst job 8% below optimal; overhead < 150 ms for > 80% of jobs, queueing dominating beyond the first 4,000 jobs.',
  };
};
