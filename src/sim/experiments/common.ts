/**
 * What every experiment shares: the result types, the runner signature, number formats and the
 * helpers that run a sweep of simulations.
 */
import type { ChartSpec } from '../charts.ts';
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
  extra?: Record<string, unknown>;
}

export interface ExperimentContext {
  quick: boolean;
  seed: number;
  progress: (done: number, total: number, label: string) => void;
}

export type Runner = (ctx: ExperimentContext) => ExperimentResult;

export const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : '-');
export const f2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : '-');
export const f3 = (x: number): string => (Number.isFinite(x) ? x.toFixed(3) : '-');
export const pc = (x: number): string => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : '-');

export function sweep<T>(ctx: ExperimentContext, cells: T[], label: (c: T) => string, fn: (c: T) => RunResult): { cell: T; r: RunResult }[] {
  const out: { cell: T; r: RunResult }[] = [];
  cells.forEach((c, i) => {
    ctx.progress(i, cells.length, label(c));
    out.push({ cell: c, r: fn(c) });
  });
  ctx.progress(cells.length, cells.length, 'done');
  return out;
}

export function run(wl: Workload, policy: string, seed: number, agents?: number): RunResult {
  return runSim({ workload: wl, policy: { name: policy, ...(agents === undefined ? {} : { agents }) }, seed });
}

export const meanUtil = (r: RunResult): number => {
  const u = r.util.filter((x) => x.t > 0);
  return u.length ? u.reduce((a, x) => a + x.busy, 0) / u.length / r.nRu : NaN;
};

export function base(name: string, title: string, ctx: ExperimentContext, t0: number): Omit<ExperimentResult, 'rows' | 'tables' | 'charts' | 'paper'> {
  return { name, title, quick: ctx.quick, seed: ctx.seed, wallMs: performance.now() - t0 };
}

