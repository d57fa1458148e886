/**
 * Fair share among namespaces (`tarcil bench fairshare`): two namespaces of equal weight, A
 * offering ten times B's load, the cell overloaded while both submit. B's job wait (submission to
 * its last task's start) with fair share, without, and with A absent; the share of RUs each
 * namespace holds over time once B starts; how long until B holds what it holds alone.
 */
import { DEFAULT_CORE_CONFIG } from '../../agent/defaults.ts';
import { dist } from '../metrics.ts';
import { runSim, type RunResult } from '../run.ts';
import { tenants, type TenantStream } from '../tenants.ts';
import type { World } from '../world.ts';
import { base, f1, pc, type Runner, type Table } from './common.ts';

/** The scenario: A alone first, then A and B together. */
export interface FairshareScenario {
  servers: number;
  aLoad: number;
  bLoad: number;
  /** B starts here; both stop submitting at `endMs`. */
  bStartMs: number;
  endMs: number;
  tasksPerJob: number;
  taskMs: number;
  /** Held RUs are sampled this often. */
  sampleMs: number;
}

export const FAIRSHARE_FULL: FairshareScenario = {
  servers: 50,
  aLoad: 1.2,
  bLoad: 0.12,
  bStartMs: 20_000,
  endMs: 100_000,
  tasksPerJob: 4,
  taskMs: 1000,
  sampleMs: 250,
};
export const FAIRSHARE_QUICK: FairshareScenario = {
  servers: 25,
  aLoad: 1.2,
  bLoad: 0.12,
  bStartMs: 10_000,
  endMs: 50_000,
  tasksPerJob: 4,
  taskMs: 1000,
  sampleMs: 250,
};

export type FairshareCell = 'fair' | 'no-fair' | 'b-alone';

export interface FairshareRun {
  cell: FairshareCell;
  admission: boolean;
  r: RunResult;
  /** RUs held per namespace at each sample. */
  samples: { t: number; A: number; B: number }[];
}

/** One run of the scenario: both namespaces with fair share on or off, or B alone. */
export function runFairshare(sc: FairshareScenario, cell: FairshareCell, seed: number, admission = DEFAULT_CORE_CONFIG.admission): FairshareRun {
  const streams: TenantStream[] = [];
  if (cell !== 'b-alone') streams.push({ namespace: 'a', load: sc.aLoad, fromMs: 0, toMs: sc.endMs });
  streams.push({ namespace: 'b', load: sc.bLoad, fromMs: sc.bStartMs, toMs: sc.endMs });
  const wl = tenants({ servers: sc.servers, streams, tasksPerJob: sc.tasksPerJob, taskMs: sc.taskMs });
  const samples: FairshareRun['samples'] = [];
  const sample = (world: World): void => {
    let A = 0;
    let B = 0;
    for (const t of world.occ) {
      if (t === null) continue;
      if (t.job.namespace === 'a') A++;
      else if (t.job.namespace === 'b') B++;
    }
    samples.push({ t: world.engine.now(), A, B });
    if (world.engine.now() + sc.sampleMs <= sc.endMs) world.engine.after(sc.sampleMs, () => sample(world));
  };
  const r = runSim({
    workload: { ...wl, setup: (world) => world.engine.after(0, () => sample(world)) },
    policy: { name: 'tarcil', core: { fairShare: cell !== 'no-fair', admission } },
    seed,
  });
  return { cell, admission, r, samples };
}

/** Mean RUs B holds from its start to the end of submissions. */
function meanHeld(run: FairshareRun, sc: FairshareScenario, ns: 'A' | 'B', from = sc.bStartMs): number {
  const s = run.samples.filter((x) => x.t >= from && x.t <= sc.endMs);
  return s.length ? s.reduce((n, x) => n + x[ns], 0) / s.length : NaN;
}

/**
 * Time from B's start until B first holds `target` RUs, averaged over a second of samples (NaN:
 * never by the end of submissions).
 */
function timeTo(run: FairshareRun, sc: FairshareScenario, target: number): number {
  const s = run.samples.filter((x) => x.t >= sc.bStartMs && x.t <= sc.endMs);
  const w = Math.max(1, Math.round(1000 / sc.sampleMs));
  for (let i = 0; i + w <= s.length; i++) {
    let sum = 0;
    for (let k = i; k < i + w; k++) sum += (s[k] as { B: number }).B;
    if (sum / w >= target) return (s[i] as { t: number }).t - sc.bStartMs;
  }
  return NaN;
}

export const fairshareExp: Runner = (ctx) => {
  const t0 = performance.now();
  const sc = ctx.quick ? FAIRSHARE_QUICK : FAIRSHARE_FULL;
  // Admission control as by default (off), then the other way: admission holds a job while
  // acceptable RUs are scarce, whatever its namespace, which is part of B's wait in an overloaded cell.
  const DEF = DEFAULT_CORE_CONFIG.admission;
  const cells = [DEF, !DEF].flatMap((admission) => (['fair', 'no-fair', 'b-alone'] as FairshareCell[]).map((cell) => ({ cell, admission })));
  const runs = cells.map((c, i) => {
    ctx.progress(i, cells.length, `${c.cell} admission=${c.admission}`);
    return runFairshare(sc, c.cell, ctx.seed, c.admission);
  });
  ctx.progress(cells.length, cells.length, 'done');
  const nRu = runs[0]?.r.nRu ?? 0;
  const alone = runs.find((x) => x.cell === 'b-alone' && x.admission === DEF) as FairshareRun;
  // B's share: what it holds alone (its demand), at most its guaranteed half of the cell.
  const bTarget = Math.min(nRu / 2, meanHeld(alone, sc, 'B'));
  const rows = runs.map((run) => {
    const b = dist(run.r.records.filter((x) => x.label === 'b').map((x) => x.sched));
    const a = dist(run.r.records.filter((x) => x.label === 'a').map((x) => x.sched));
    const contention = run.samples.filter((x) => x.t >= sc.bStartMs && x.t <= sc.endMs);
    const busy = contention.length ? contention.reduce((n, x) => n + x.A + x.B, 0) / contention.length : NaN;
    return {
      cell: run.cell,
      admission: run.admission ? 'on' : 'off',
      bJobs: b.n,
      bWaitMeanMs: b.mean,
      bWaitP50Ms: b.p50,
      bWaitP99Ms: b.p99,
      aJobs: a.n,
      aWaitMeanMs: a.mean,
      aWaitP50Ms: a.p50,
      aWaitP99Ms: a.p99,
      aHeldShare: meanHeld(run, sc, 'A') / nRu,
      bHeldShare: meanHeld(run, sc, 'B') / nRu,
      busyShare: busy / nRu,
      // 90% of B's target, averaged over one second.
      bToShareMs: timeTo(run, sc, 0.9 * bTarget),
      unfinished: run.r.stats.unfinished,
      simMs: run.r.stats.simMs,
      fairYields: run.r.counters.fairYields ?? 0,
    };
  });
  const tables: Table[] = [
    {
      title: `B's job wait, submission → last task started (ms), and the RUs each namespace holds while both submit (${nRu} RUs, A ${pc(sc.aLoad)} + B ${pc(sc.bLoad)} of the cell)`,
      head: ['run', 'admission', 'B jobs', 'B p50', 'B p99', 'B mean', 'A p50', 'A p99', 'A holds', 'B holds', 'B reaches 90% of its share after'],
      rows: rows.map((x) => [
        x.cell,
        x.admission,
        x.bJobs,
        f1(x.bWaitP50Ms),
        f1(x.bWaitP99Ms),
        f1(x.bWaitMeanMs),
        f1(x.aWaitP50Ms),
        f1(x.aWaitP99Ms),
        pc(x.aHeldShare),
        pc(x.bHeldShare),
        Number.isFinite(x.bToShareMs) ? `${f1(x.bToShareMs)} ms` : 'never',
      ]),
    },
  ];
  // Held share over time, one point per second (mean of its samples), from B's start.
  const perSecond = (run: FairshareRun, ns: 'A' | 'B'): { x: number; y: number }[] => {
    const bins = new Map<number, { n: number; sum: number }>();
    for (const s of run.samples) {
      if (s.t < sc.bStartMs - 5000) continue;
      const k = Math.floor((s.t - sc.bStartMs) / 1000);
      const b = bins.get(k) ?? { n: 0, sum: 0 };
      b.n++;
      b.sum += s[ns];
      bins.set(k, b);
    }
    return [...bins.entries()].map(([k, b]) => ({ x: k, y: (100 * b.sum) / b.n / nRu }));
  };
  const series = runs
    .filter((run) => run.admission === DEF)
    .flatMap((run) => (['A', 'B'] as const).filter((ns) => run.cell !== 'b-alone' || ns === 'B').map((ns) => ({ run, ns })));
  return {
    ...base('fairshare', 'Fair share between two namespaces of equal weight, A offering 10× B’s load, cell overloaded', ctx, t0),
    rows,
    tables,
    charts: [
      {
        file: 'fairshare-held.svg',
        title: `Share of RUs held per namespace, from B’s start (1-s means, admission ${DEF ? 'on' : 'off'})`,
        xTitle: 'seconds since B started',
        yTitle: 'RUs held (% of the cell)',
        points: series.flatMap(({ run, ns }) => perSecond(run, ns).map((p) => ({ ...p, series: `${ns} (${run.cell})` }))),
      },
    ],
    paper: 'Not in the paper (Tarcil has no namespaces). Expected: with fair share B waits about as long as alone; without, B queues behind A’s backlog.',
    extra: { scenario: sc, bTargetRus: bTarget },
  };
};
