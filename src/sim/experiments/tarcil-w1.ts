/**
 * Tarcil's own figures on W1: sample size (Fig. 9), agents (Fig. 10), load (Fig. 11a), task
 * duration (Fig. 11b) and priorities (Fig. 12).
 */
import type { Point } from '../charts.ts';
import { dist } from '../metrics.ts';
import { runSim, type RunResult } from '../run.ts';
import { w1 } from '../workloads.ts';
import { type Table, type Runner, f1, f2, f3, pc, sweep, run, meanUtil, base } from './common.ts';

const meanOf = (xs: number[]): number => (xs.length > 0 ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

export const sampleSize: Runner = (ctx) => {
  const t0 = performance.now();
  const loads = ctx.quick ? [0.1, 0.3, 0.5, 0.7, 0.8, 0.9] : [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];
  const Rs = [2, 4, 8, 16, 32, 64];
  const jobs = ctx.quick ? 2500 : 12000;
  // The ablation: one agent instead of ten at 50% load (R ≤ 16, which one agent decides in time),
  // so that no decision misses another agent's picks still in flight.
  const soloRs = Rs.filter((R) => R <= 16);
  // The second ablation: ten agents at 80% load whose commits are applied and seen by all at once
  // (no round trip, no watch delay), so that no agent decides on a view without the others' picks.
  const cells = [
    ...Rs.flatMap((R) => loads.map((load) => ({ R, load, agents: 10, fresh: false }))),
    ...soloRs.map((R) => ({ R, load: 0.5, agents: 1, fresh: false })),
    ...Rs.map((R) => ({ R, load: 0.8, agents: 10, fresh: true })),
  ];
  const all = sweep(
    ctx,
    cells,
    (c) => `R=${c.R} load=${c.load} agents=${c.agents}${c.fresh ? ' fresh views' : ''}`,
    (c) =>
      runSim({
        workload: w1({ load: c.load, jobs }),
        policy: { name: `fixed-R${c.R}`, agents: c.agents, ...(c.fresh ? { freshViews: true } : {}) },
        seed: ctx.seed,
      }),
  );
  const res = all.filter((x) => x.cell.agents === 10 && !x.cell.fresh);
  const fresh = all
    .filter((x) => x.cell.fresh)
    .map(({ cell, r }) => ({
      R: cell.R,
      respMeanMs: r.summary.response.mean,
      interferenceMs: meanOf(r.records.map((x) => x.loss.interference)),
      waitMs: meanOf(r.records.map((x) => x.loss.wait)),
      conflictsPerCommit: r.summary.conflictsPerCommit,
      placedAcceptable: r.counters.placedAcceptable ?? NaN,
      admissionWaits: r.counters.queued ?? 0,
    }));
  const solo = all
    .filter((x) => x.cell.agents === 1)
    .map(({ cell, r }) => ({
      R: cell.R,
      respMeanMs: r.summary.response.mean,
      interferenceMs: meanOf(r.records.map((x) => x.loss.interference)),
      placedAcceptable: r.counters.placedAcceptable ?? NaN,
    }));
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
    // What R buys and costs: RUs the scheduler judged acceptable when it placed (and their mean
    // Q), against the time the tasks then lost to interference over their run and to waiting.
    placedAcceptable: r.counters.placedAcceptable ?? NaN,
    placedQ: r.counters.placedQ ?? NaN,
    interferenceMs: meanOf(r.records.map((x) => x.loss.interference)),
    waitMs: meanOf(r.records.map((x) => x.loss.wait)),
    admissionWaits: r.counters.queued ?? 0,
  }));
  const heavy = loads.filter((l) => [0.5, 0.8, 0.9].includes(l));
  const tables: Table[] = [
    {
      title: 'Mean response time, ms (100 ms tasks), by R (rows) and load (columns)',
      head: ['R', ...loads.map((l) => `${l * 100}%`)],
      rows: Rs.map((R) => [R, ...loads.map((l) => f1(rows.find((x) => x.R === R && x.load === l)?.respMeanMs ?? NaN))]),
    },
    {
      title: 'Scheduling overhead (submission → start), mean ms [p95]',
      head: ['R', ...loads.map((l) => `${l * 100}%`)],
      rows: Rs.map((R) => [
        R,
        ...loads.map((l) => {
          const x = rows.find((y) => y.R === R && y.load === l);
          return x ? `${f2(x.overheadMeanMs)} [${f1(x.overheadP95Ms)}]` : '-';
        }),
      ]),
    },
    {
      title: 'Conflicts per commit',
      head: ['R', ...loads.map((l) => `${l * 100}%`)],
      rows: Rs.map((R) => [R, ...loads.map((l) => f3(rows.find((x) => x.R === R && x.load === l)?.conflictsPerCommit ?? NaN))]),
    },
    ...heavy.map((l) => ({
      title: `What R buys and costs at ${l * 100}% load: placements on RUs judged acceptable, their mean Q, then the mean ms lost to interference and to waiting`,
      head: ['R', 'acceptable when placed', 'mean Q when placed', 'interference ms', 'wait ms', 'conflicts per commit'],
      rows: Rs.map((R) => {
        const x = rows.find((y) => y.R === R && y.load === l);
        return x ? [R, pc(x.placedAcceptable), f3(x.placedQ), f2(x.interferenceMs), f2(x.waitMs), f3(x.conflictsPerCommit)] : [R, '-', '-', '-', '-', '-'];
      }),
    })),
    {
      title: 'Ablation at 50% load: one agent against ten, mean ms lost to interference [mean response ms]',
      head: ['R', 'acceptable when placed, 1 agent', '1 agent', '10 agents'],
      rows: solo.map((x) => {
        const ten = rows.find((y) => y.R === x.R && y.load === 0.5);
        return [x.R, pc(x.placedAcceptable), `${f2(x.interferenceMs)} [${f1(x.respMeanMs)}]`, ten ? `${f2(ten.interferenceMs)} [${f1(ten.respMeanMs)}]` : '-'];
      }),
    },
    {
      title:
        'Ablation at 80% load, ten agents: views as modelled (a commit seen by the others about 2.3 ms after the decision) [fresh views: applied and seen at once]',
      head: ['R', 'mean response ms', 'interference ms', 'wait ms', 'conflicts per commit', 'acceptable when placed', 'admission waits'],
      rows: fresh.map((x) => {
        const m = rows.find((y) => y.R === x.R && y.load === 0.8);
        const two = (a: string, b: string): string => `${a} [${b}]`;
        if (!m) return [x.R, '-', '-', '-', '-', '-', '-'];
        return [
          x.R,
          two(f1(m.respMeanMs), f1(x.respMeanMs)),
          two(f2(m.interferenceMs), f2(x.interferenceMs)),
          two(f2(m.waitMs), f2(x.waitMs)),
          two(f3(m.conflictsPerCommit), f3(x.conflictsPerCommit)),
          two(pc(m.placedAcceptable), pc(x.placedAcceptable)),
          two(String(m.admissionWaits), String(x.admissionWaits)),
        ];
      }),
    },
  ];
  const pts = (k: 'respMeanMs' | 'overheadMeanMs' | 'respP95Ms'): Point[] => rows.map((x) => ({ x: x.load * 100, y: x[k], series: `R=${x.R}` }));
  return {
    ...base('sample-size', 'Fig. 9: sampling overhead and response time vs sample size R and load (W1)', ctx, t0),
    rows,
    extra: { oneAgentAt50: solo, freshViewsAt80: fresh },
    tables,
    charts: [
      {
        file: 'sample-size-response.svg',
        title: 'Mean response time vs load (W1, 10 agents)',
        xTitle: 'cluster load (%)',
        yTitle: 'mean response (ms)',
        points: pts('respMeanMs'),
        logY: true,
      },
      {
        file: 'sample-size-p95.svg',
        title: 'p95 response time vs load (W1, 10 agents)',
        xTitle: 'cluster load (%)',
        yTitle: 'p95 response (ms)',
        points: pts('respP95Ms'),
        logY: true,
      },
      {
        file: 'sample-size-overhead.svg',
        title: 'Scheduling overhead vs load (W1, 10 agents)',
        xTitle: 'cluster load (%)',
        yTitle: 'mean overhead (ms)',
        points: pts('overheadMeanMs'),
        logY: true,
      },
    ],
    paper:
      'Tarcil Fig. 9 (110-server EC2, 10 agents, 100 ms Spark tasks): overheads marginal up to R = 32 even at high load, substantially higher for R ≥ 64 (conflicts between the 10 agents); response times insensitive to R at low load; R = 2, 4 fail to find good resources at high load; R = 8 best at both low and high load.',
    wallMs: performance.now() - t0,
  };
};

export const agentsExp: Runner = (ctx) => {
  const t0 = performance.now();
  const loads = ctx.quick ? [0.5, 0.8, 0.9] : [0.1, 0.3, 0.5, 0.7, 0.8, 0.9];
  const counts = ctx.quick ? [1, 2, 3, 5, 10, 20] : [1, 2, 3, 4, 6, 8, 10, 12, 16, 20];
  const jobs = ctx.quick ? 2500 : 10000;
  const cells = counts.flatMap((agents) => loads.map((load) => ({ agents, load })));
  const res = sweep(
    ctx,
    cells,
    (c) => `agents=${c.agents} load=${c.load}`,
    (c) => run(w1({ load: c.load, jobs }), 'fixed-R8', ctx.seed, c.agents),
  );
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
      {
        file: 'agents-latency.svg',
        title: 'Scheduling latency vs agents (W1, R = 8)',
        xTitle: 'scheduling agents',
        yTitle: 'mean latency (ms)',
        points: rows.map((x) => ({ x: x.agents, y: x.schedMeanMs, series: `load ${x.load * 100}%` })),
        logY: true,
      },
      {
        file: 'agents-qos.svg',
        title: 'Jobs meeting QoS vs agents (W1, R = 8)',
        xTitle: 'scheduling agents',
        yTitle: 'fraction within 10% of ideal',
        points: rows.map((x) => ({ x: x.agents, y: x.qosMet, series: `load ${x.load * 100}%` })),
      },
    ],
    paper:
      'Tarcil Fig. 10: with fewer than 3 agents latency suffers at high load (limited parallelism); latency falls until 12 agents, then rises slowly with conflicts; 3 agents suffice for minimum latency; beyond 80% load QoS violations come from admission queueing, not agent count.',
  };
};

export const loadExp: Runner = (ctx) => {
  const t0 = performance.now();
  const loads = ctx.quick ? [0.1, 0.5, 0.8, 0.9] : [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95];
  const jobs = ctx.quick ? 2500 : 15000;
  const res = sweep(
    ctx,
    loads,
    (l) => `load=${l}`,
    (l) => run(w1({ load: l, jobs }), 'tarcil', ctx.seed),
  );
  const rows = res.map(({ cell, r }) => ({
    load: cell,
    meanMs: r.summary.response.mean,
    p95Ms: r.summary.response.p95,
    meanR: r.summary.meanR,
    queueMs: r.summary.queueMean,
    conflictsPerCommit: r.summary.conflictsPerCommit,
  }));
  return {
    ...base('load', 'Fig. 11a: response time vs load (W1, adaptive R)', ctx, t0),
    rows,
    tables: [
      {
        title: 'Tarcil (adaptive R, admission control), 100 ms tasks',
        head: ['load', 'mean ms', 'p95 ms', 'mean R', 'queueing ms', 'conflicts/commit'],
        rows: rows.map((x) => [`${Math.round(x.load * 100)}%`, f1(x.meanMs), f1(x.p95Ms), f1(x.meanR), f2(x.queueMs), f3(x.conflictsPerCommit)]),
      },
    ],
    charts: [
      {
        file: 'load.svg',
        title: 'Response time vs load (W1, Tarcil)',
        xTitle: 'cluster load (%)',
        yTitle: 'response (ms)',
        points: rows.flatMap((x) => [
          { x: x.load * 100, y: x.meanMs, series: 'mean' },
          { x: x.load * 100, y: x.p95Ms, series: 'p95' },
        ]),
      },
    ],
    paper:
      'Tarcil Fig. 11a: mean response almost constant (≈100 ms) until load > 85%; p95 exceeds 250 ms only above 80% load; slow tasks are those delayed by admission control.',
  };
};

export const durationExp: Runner = (ctx) => {
  const t0 = performance.now();
  const durs = [10, 100, 1000, 10_000, 100_000, 600_000];
  const jobs = ctx.quick ? 2000 : 8000;
  const res = sweep(
    ctx,
    durs,
    (d) => `duration=${d}ms`,
    (d) => run(w1({ load: 0.8, durationMs: d, jobs }), 'tarcil', ctx.seed),
  );
  const rows = res.map(({ cell, r }) => ({
    durationMs: cell,
    meanMs: r.summary.response.mean,
    p95Ms: r.summary.response.p95,
    meanRatio: r.summary.ratio.mean,
    p95Ratio: r.summary.ratio.p95,
    schedMs: r.summary.sched.mean,
  }));
  return {
    ...base('duration', 'Fig. 11b: response time vs task duration at 80% load (W1)', ctx, t0),
    rows,
    tables: [
      {
        title: 'Tarcil at 80% load',
        head: ['task duration', 'mean ms', 'p95 ms', 'mean / ideal', 'p95 / ideal', 'overhead ms'],
        rows: rows.map((x) => [`${x.durationMs} ms`, f1(x.meanMs), f1(x.p95Ms), f3(x.meanRatio), f3(x.p95Ratio), f2(x.schedMs)]),
      },
    ],
    charts: [
      {
        file: 'duration.svg',
        title: 'Response / ideal vs task duration (80% load)',
        xTitle: 'task duration (ms)',
        yTitle: 'response / ideal',
        points: rows.flatMap((x) => [
          { x: x.durationMs, y: x.meanRatio, series: 'mean' },
          { x: x.durationMs, y: x.p95Ratio, series: 'p95' },
        ]),
        logX: true,
      },
    ],
    paper:
      'Tarcil Fig. 11b (10 ms–600 s at 80% load): for long tasks mean and p95 approach the target; below 100 ms scheduling overhead dominates, but mean and tail stay close.',
  };
};

/**
 * Tarcil Fig. 12: W1 with a share of jobs at high priority, each compared one to one with the
 * same jobs in a run without priorities. High priority goes ahead in the agents' queues, bypasses
 * admission control and, having lost a commit race, waits for the next freed RU ahead of lower
 * priorities; preemption is off (the simulator does not kill and restart victims). Each cell runs
 * the same jobs three ways: with priorities; with priorities but a high-priority request that
 * loses a race backing off like any other (the ablation); and without priorities.
 */
export const prioritiesExp: Runner = (ctx) => {
  const t0 = performance.now();
  const shares = ctx.quick ? [0.1, 0.3, 0.5] : [0.1, 0.2, 0.3, 0.4, 0.5];
  const jobs = ctx.quick ? 2500 : 12000;
  // 80% is the paper's load; 90% is added because at 80% our W1 barely queues (Fig. 11a).
  const loads = [0.8, 0.9];
  const variants = ['priorities', 'backoff', 'none'] as const;
  const cells = loads.flatMap((load) => shares.flatMap((share) => variants.map((variant) => ({ load, share, variant }))));
  const res = sweep(
    ctx,
    cells,
    (c) => `load=${c.load} high=${c.share} ${c.variant}`,
    (c) =>
      runSim({
        workload: w1({ load: c.load, jobs, highShare: c.share, priorities: c.variant !== 'none' }),
        policy: { name: 'tarcil', core: { preemption: false }, ...(c.variant === 'backoff' ? { priorityWaits: false } : {}) },
        seed: ctx.seed,
      }),
  );
  const rows: Record<string, string | number>[] = [];
  for (const load of loads) {
    for (const share of shares) {
      const get = (v: (typeof variants)[number]): RunResult | undefined =>
        res.find((x) => x.cell.load === load && x.cell.share === share && x.cell.variant === v)?.r;
      const on = get('priorities');
      const back = get('backoff');
      const off = get('none');
      if (!on || !back || !off) continue;
      for (const cls of ['high', 'low']) {
        const of = (r: RunResult, k: 'response' | 'sched'): ReturnType<typeof dist> => dist(r.records.filter((x) => x.label === cls).map((x) => x[k]));
        const a = of(on, 'response');
        const b = of(off, 'response');
        const c = of(back, 'response');
        rows.push({
          load,
          highShare: share,
          class: cls,
          jobs: a.n,
          meanMs: a.mean,
          p50Ms: a.p50,
          p95Ms: a.p95,
          p99Ms: a.p99,
          waitMs: of(on, 'sched').mean,
          noPrioMeanMs: b.mean,
          noPrioP95Ms: b.p95,
          noPrioP99Ms: b.p99,
          noPrioWaitMs: of(off, 'sched').mean,
          backoffMeanMs: c.mean,
          backoffP95Ms: c.p95,
          backoffWaitMs: of(back, 'sched').mean,
          conflictsPerCommit: off.summary.conflictsPerCommit,
          admissionWaits: off.counters.queued ?? 0,
          capacityWaits: off.counters.capacityWaits ?? 0,
        });
      }
    }
  }
  return {
    ...base('priorities', 'Fig. 12: response of high- and low-priority tasks vs no priorities (W1, 80% and 90% load)', ctx, t0),
    rows,
    tables: [
      {
        title: 'Response, ms: with priorities [without], 100 ms tasks',
        head: ['load', 'high-priority share', 'class', 'mean', 'p95', 'p99'],
        rows: rows.map((x) => [
          pc(x.load as number),
          pc(x.highShare as number),
          x.class as string,
          `${f1(x.meanMs as number)} [${f1(x.noPrioMeanMs as number)}]`,
          `${f1(x.p95Ms as number)} [${f1(x.noPrioP95Ms as number)}]`,
          `${f1(x.p99Ms as number)} [${f1(x.noPrioP99Ms as number)}]`,
        ]),
      },
      {
        title:
          'Ablation: mean response [mean wait, submission → start], ms, with priorities; with priorities but a high-priority request that loses a commit race backing off like any other; without priorities',
        head: [
          'load',
          'high-priority share',
          'class',
          'priorities',
          'priorities, backoff',
          'none',
          'none: conflicts per commit, admission waits, capacity waits',
        ],
        rows: rows.map((x) => [
          pc(x.load as number),
          pc(x.highShare as number),
          x.class as string,
          `${f1(x.meanMs as number)} [${f1(x.waitMs as number)}]`,
          `${f1(x.backoffMeanMs as number)} [${f1(x.backoffWaitMs as number)}]`,
          `${f1(x.noPrioMeanMs as number)} [${f1(x.noPrioWaitMs as number)}]`,
          `${f3(x.conflictsPerCommit as number)}, ${x.admissionWaits}, ${x.capacityWaits}`,
        ]),
      },
    ],
    charts: [
      {
        file: 'priorities.svg',
        title: 'W1 at 90%: p95 response with priorities vs without',
        xTitle: 'share of high-priority tasks (%)',
        yTitle: 'p95 response (ms)',
        points: rows
          .filter((x) => x.load === 0.9)
          .flatMap((x) => [
            { x: (x.highShare as number) * 100, y: x.p95Ms as number, series: `${String(x.class)} (priorities)` },
            { x: (x.highShare as number) * 100, y: x.noPrioP95Ms as number, series: `${String(x.class)} (no priorities)` },
          ]),
      },
    ],
    paper:
      'Tarcil Fig. 12 (100 ms Spark tasks, 80% load, 10–50% high priority): high-priority tasks bypass all prior-enqueued tasks and their response time falls; low-priority tasks may queue longer, especially when more than a third of tasks have high priority.',
  };
};

/**
 * Robustness to profiling error: every W3 job's real interference vector differs from the declared
 * one the scheduler sees by Gaussian noise of the given standard deviation (c_i points).
 */
