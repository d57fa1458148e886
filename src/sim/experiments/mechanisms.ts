/**
 * The ablation of placement-quality mechanisms beyond the paper's decision: the admission rule
 * against the job's own bound, two-sided quality, and the run-time loop (block slow servers, move
 * slow tasks, autoscale scale-out jobs), each alone and all together, on W3 and on W2 with
 * resident load and on the heterogeneous cell; plus W3 with each class's profile wrong (sd 5, 10,
 * 20) with learned profiles off and on. The ground truth (src/model/perf.ts) is the same in every
 * run.
 *
 * W3 runs with its long-running classes marked scale-out (w3's `scaleOut`: memcached, cassandra
 * and storm-wordcount jobs may grow to twice their tasks), which changes nothing for the variants
 * that do not autoscale. W2's query stages are not scale-out: the autoscale variants run on W3 only.
 */
import type { RuntimeLoopConfig } from '../../monitor/runtime-loop.ts';
import type { PolicySpec } from '../policies/index.ts';
import { runSim } from '../run.ts';
import { w2, w3 } from '../workloads.ts';
import { base, f1, pc, sweep, type ExperimentContext, type ExperimentResult, type Runner } from './common.ts';

/** The run-time loop's shares in these runs: a task below 80% of its expected rate is slow. */
const SIM_RT: Partial<RuntimeLoopConfig> = { slowBelow: 0.8, recoverAbove: 0.9 };

interface Variant {
  label: string;
  spec: PolicySpec;
  /** Only on W3 (autoscale: W2 has no scale-out jobs, so these runs would repeat others). */
  w3Only?: boolean;
}

/** The paper's rules: admission on, queueing to the statistical bound, and Q one-sided (the default has admission off and two-sided Q). */
const PAPER: PolicySpec = { name: 'tarcil', core: { admission: true, admissionRule: 'paper', twoSided: false } };

export const VARIANTS: Variant[] = [
  { label: "paper's rules (queue to the bound, one-sided Q)", spec: PAPER },
  { label: 'the default (admission off, two-sided Q)', spec: { name: 'tarcil' } },
  { label: 'admission on, against the own bound', spec: { name: 'tarcil', core: { admission: true } } },
  { label: 'two-sided quality', spec: { name: 'tarcil', core: { twoSided: true } } },
  { label: 'block slow servers', spec: { name: 'tarcil', runtime: { block: true, config: SIM_RT } } },
  { label: 'move slow tasks', spec: { name: 'tarcil', runtime: { move: true, config: SIM_RT } } },
  { label: 'all together', spec: { name: 'tarcil', core: { twoSided: true }, runtime: { block: true, move: true, config: SIM_RT } } },
  { label: 'all together, live default shares (0.5 / 0.6)', spec: { name: 'tarcil', core: { twoSided: true }, runtime: { block: true, move: true } } },
  { label: 'autoscale scale-out jobs', spec: { name: 'tarcil', runtime: { autoscale: true, config: SIM_RT } }, w3Only: true },
  {
    label: 'all together, with autoscale',
    spec: { name: 'tarcil', core: { twoSided: true }, runtime: { block: true, move: true, autoscale: true, config: SIM_RT } },
    w3Only: true,
  },
];

type Wl = 'W3' | 'W2-resident' | 'W2-hetero';

interface Cell {
  wl: Wl;
  variant: Variant;
  /** Profile error (W3 only), per job or per workload class. */
  sd: number;
  scope: 'job' | 'class';
}

const LEARN: Variant = { label: 'profiles that learn', spec: { name: 'tarcil', runtime: { learn: true } } };
const ALL_LEARN: Variant = {
  label: 'all together, and profiles that learn',
  spec: { name: 'tarcil', core: { twoSided: true }, runtime: { block: true, move: true, learn: true, config: SIM_RT } },
};

/** The mechanisms on W3 and W2 with profiles as declared (`bench mechanisms`). */
export const mechanisms: Runner = (ctx) => {
  const cells: Cell[] = [];
  for (const wl of ['W3', 'W2-resident', 'W2-hetero'] as const)
    for (const v of VARIANTS) if (wl === 'W3' || !v.w3Only) cells.push({ wl, variant: v, sd: 0, scope: 'job' });
  return runMechanisms(ctx, 'mechanisms', cells);
};

/** The profile-error sds of `bench mechanisms-error` (sd 0 is `bench mechanisms`' W3 default row). */
const ERROR_SDS = [5, 10, 20];

/**
 * W3 with profile error drawn once per workload class, the same for all its jobs (`bench
 * mechanisms-error`): the error a learned class profile can correct, at sd 5, 10 and 20, with
 * learning off and on, and with everything on. The error drawn for each job, which no class
 * estimate can correct, is `bench robustness` (with learning off and on). Separate from
 * `mechanisms` because these runs are long.
 */
export const mechanismsError: Runner = (ctx) => {
  const cells: Cell[] = [];
  // The default (VARIANTS[1]) against the learners.
  for (const sd of ERROR_SDS) for (const v of [VARIANTS[1] as Variant, LEARN, ALL_LEARN]) cells.push({ wl: 'W3', variant: v, sd, scope: 'class' });
  return runMechanisms(ctx, 'mechanisms-error', cells);
};

function runMechanisms(ctx: ExperimentContext, name: string, cells: Cell[]): ExperimentResult {
  const t0 = performance.now();
  const w3jobs = ctx.quick ? 1000 : 7200;
  const queries = ctx.quick ? 150 : 1500;
  const res = sweep(
    ctx,
    cells,
    (c) => `${c.wl} sd ${c.sd}/${c.scope} ${c.variant.label}`,
    (c) => {
      const wl =
        c.wl === 'W3'
          ? w3({ jobs: w3jobs, profileError: c.sd, profileErrorScope: c.scope, scaleOut: true })
          : w2({ variant: c.wl === 'W2-resident' ? 'resident' : 'hetero', queries });
      return runSim({ workload: wl, policy: c.variant.spec, seed: ctx.seed });
    },
    { cost: (c) => (1 + c.sd / 5) * (c.variant.spec.runtime || c.variant.spec.core?.twoSided ? 3 : 1) * (c.wl === 'W3' ? 2 : 1) },
  );
  const rows = res.map(({ cell, r }) => {
    const s = r.summary;
    const c = r.counters;
    return {
      workload: cell.wl,
      profileErrorSd: cell.sd,
      profileErrorScope: cell.scope,
      variant: cell.variant.label,
      jobs: s.jobs,
      perfMean: s.perfMean,
      perfWorst: s.perfWorst,
      degraded: s.degraded,
      meanRatio: s.ratio.mean,
      p95Ratio: s.ratio.p95,
      schedMeanMs: s.sched.mean,
      schedP95Ms: s.sched.p95,
      queued: c.queued ?? 0,
      bestEffort: c.bestEffort ?? 0,
      blocks: c.blocks ?? 0,
      moves: c.moves ?? 0,
      moveAsks: c.moveAsks ?? 0,
      moveNoBetterRu: c.moveNoBetterRu ?? 0,
      moveLostTaskHours: (c.moveLostWorkMs ?? 0) / 3_600_000,
      scaleOuts: c.scaleOuts ?? 0,
      scaleOutAsks: c.scaleOutAsks ?? 0,
      declaredErrorPts: c.declaredError ?? NaN,
      learnedErrorPts: c.learnedError ?? NaN,
      tasks: r.stats.tasks,
      wallMs: r.stats.wallMs,
    };
  });
  const table = (wl: Wl, sd: number, title: string) => ({
    title,
    head: [
      'variant',
      'mean perf',
      'worst',
      '>10% degraded',
      'mean / p95 response ratio',
      'overhead mean / p95 ms',
      'jobs held / best effort',
      'blocks',
      'moves (asked)',
      'work lost to moves (task-h)',
      'tasks added by autoscale (asked)',
    ],
    rows: rows
      .filter((x) => x.workload === wl && x.profileErrorSd === sd && x.profileErrorScope === 'job')
      .map((x) => [
        x.variant,
        pc(x.perfMean),
        pc(x.perfWorst),
        pc(x.degraded),
        `${x.meanRatio.toFixed(2)} / ${x.p95Ratio.toFixed(2)}`,
        `${f1(x.schedMeanMs)} / ${f1(x.schedP95Ms)}`,
        `${x.queued} / ${x.bestEffort}`,
        x.blocks,
        `${x.moves} (${x.moveAsks})`,
        x.moveLostTaskHours.toFixed(1),
        `${x.scaleOuts} (${x.scaleOutAsks})`,
      ]),
  });
  const withError = rows.some((x) => x.profileErrorSd > 0);
  return {
    ...base(name, 'Placement quality: admission rule, two-sided Q, the run-time loop and learned profiles, alone and together', ctx, t0),
    rows,
    tables: [
      ...(withError
        ? []
        : [
            table('W3', 0, `W3 (${w3jobs} jobs, hetero-400; memcached, cassandra and storm-wordcount jobs scale-out, up to twice their tasks)`),
            table('W2-resident', 0, `W2 with resident load (${queries} queries)`),
            table('W2-hetero', 0, `W2 on the heterogeneous cell (${queries} queries)`),
          ]),
      ...(!withError
        ? []
        : [
            {
              title: `W3 (${w3jobs} jobs) with profile error: each workload class's real vector drawn once around its declared one (sd in c_i points), the same for all its jobs; the learned error is the mean distance of the declared and of the learned vectors from the real ones, over the classes observed`,
              head: ['sd', 'drawn for each', 'variant', 'mean perf', 'worst', '>10% degraded', 'moves', 'blocks', 'profile error declared → learned (pts)'],
              rows: rows
                .filter((x) => x.workload === 'W3' && x.profileErrorSd > 0)
                .map((x) => [
                  x.profileErrorSd,
                  x.profileErrorScope,
                  x.variant,
                  pc(x.perfMean),
                  pc(x.perfWorst),
                  pc(x.degraded),
                  x.moves,
                  x.blocks,
                  Number.isFinite(x.learnedErrorPts) ? `${x.declaredErrorPts.toFixed(1)} → ${x.learnedErrorPts.toFixed(1)}` : '-',
                ]),
            },
          ]),
    ],
    charts: [],
    paper:
      'Tarcil §5.2: "If a job runs significantly below its expected performance, the scheduler adjusts the scheduling decisions, first locally and then via migration"; Fig. 15a (W3): 97% of optimal performance on average, worst job 8% below.',
  };
}
