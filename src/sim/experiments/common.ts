/**
 * What every experiment shares: the result types, the runner signature, number formats and the
 * helpers that run a sweep of simulations.
 */
import type { ChartSpec } from '../charts.ts';
import { runCells } from '../parallel/pool.ts';
import { runSim, type RunResult } from '../run.ts';
import { type Workload } from '../workloads.ts';

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
  /** The fixed warm-up of every run, when one was set (else each workload's own). */
  warmupMs?: number;
  extra?: Record<string, unknown>;
  /**
   * Further files of the results folder, written as given (e.g. a summary another tool reads); one
   * with `merge` that the folder already holds is written as merge(what it holds), so a summary kept
   * across runs (several seeds) is added to, not replaced.
   */
  files?: { name: string; text: string; merge?: (previous: string) => string }[];
}

export interface ExperimentContext {
  quick: boolean;
  seed: number;
  progress: (done: number, total: number, label: string) => void;
  /** The experiment's name in the registry: worker threads run it again to compute single cells. */
  experiment?: string;
  /** Worker threads for a sweep's independent runs (1: one by one in this thread). */
  workers?: number;
  /** A fixed warm-up for every run (ms), passed on to the worker threads (see run.ts setWarmup). */
  warmupMs?: number;
  /** In a worker thread: compute this one cell of the sweep, hand its result to `done`, stop. */
  only?: { cell: number; done: (r: RunResult) => void };
}

/** Thrown by sweep() in a worker once its one cell is computed: the rest of the runner is not run. */
export class SweepCellDone extends Error {
  constructor() {
    super('sweep cell done');
  }
}

export type Runner = (ctx: ExperimentContext) => ExperimentResult;

export const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : '-');
export const f2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : '-');
export const f3 = (x: number): string => (Number.isFinite(x) ? x.toFixed(3) : '-');
export const pc = (x: number): string => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : '-');

/**
 * Runs fn on every cell: one by one, or on ctx.workers worker threads (each cell is a seeded run of
 * its own, so the results are the same either way). `parallel: false` for sweeps whose results
 * cannot cross threads (runs that keep their World). `cost`: a rough relative cost per cell; on
 * worker threads the costliest cells are handed out first (ties in the cells' order), so that a
 * long cell does not start last while the other threads run out of work.
 */
export function sweep<T>(
  ctx: ExperimentContext,
  cells: T[],
  label: (c: T) => string,
  fn: (c: T) => RunResult,
  opts: { parallel?: boolean; cost?: (c: T) => number } = {},
): { cell: T; r: RunResult }[] {
  if (ctx.only) {
    const c = cells[ctx.only.cell];
    if (c === undefined) throw new Error(`no cell ${ctx.only.cell} in a sweep of ${cells.length}`);
    ctx.only.done(fn(c));
    throw new SweepCellDone();
  }
  const workers = ctx.workers ?? 1;
  if (opts.parallel !== false && workers > 1 && ctx.experiment !== undefined && cells.length > 1) {
    const n = Math.min(workers, cells.length);
    ctx.progress(0, cells.length, `${cells.length} runs on ${n} worker threads`);
    const rs = runCells<RunResult>({
      experiment: ctx.experiment,
      quick: ctx.quick,
      seed: ctx.seed,
      ...(ctx.warmupMs === undefined ? {} : { warmupMs: ctx.warmupMs }),
      cells: cells.length,
      workers: n,
      ...(opts.cost ? { order: longestFirst(cells, opts.cost) } : {}),
      onResult: (i, done) => ctx.progress(done, cells.length, label(cells[i] as T)),
    });
    ctx.progress(cells.length, cells.length, 'done');
    return cells.map((c, i) => ({ cell: c, r: rs[i] as RunResult }));
  }
  const out: { cell: T; r: RunResult }[] = [];
  cells.forEach((c, i) => {
    ctx.progress(i, cells.length, label(c));
    out.push({ cell: c, r: fn(c) });
  });
  ctx.progress(cells.length, cells.length, 'done');
  return out;
}

/** Cell indices by decreasing cost, ties in the cells' order. */
export function longestFirst<T>(cells: readonly T[], cost: (c: T) => number): number[] {
  const c = cells.map(cost);
  return cells.map((_, i) => i).sort((a, b) => (c[b] as number) - (c[a] as number) || a - b);
}

export function run(wl: Workload, policy: string, seed: number, agents?: number): RunResult {
  return runSim({ workload: wl, policy: { name: policy, ...(agents === undefined ? {} : { agents }) }, seed });
}

export const meanUtil = (r: RunResult): number => {
  const u = r.util.filter((x) => x.t > 0);
  return u.length ? u.reduce((a, x) => a + x.busy, 0) / u.length / r.nRu : NaN;
};

export function base(name: string, title: string, ctx: ExperimentContext, t0: number): Omit<ExperimentResult, 'rows' | 'tables' | 'charts' | 'paper'> {
  return { name, title, quick: ctx.quick, seed: ctx.seed, wallMs: performance.now() - t0, ...(ctx.warmupMs === undefined ? {} : { warmupMs: ctx.warmupMs }) };
}
