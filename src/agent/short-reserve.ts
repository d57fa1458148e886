/**
 * The short-task reserve: on a nearly full cell, the last free RUs are kept for jobs whose tasks
 * are short. A job of a long workload class (its tasks' expected run time above `longFactor` times
 * the mean over every task seen to end, RunTimes in wait-order.ts) does not take an RU, and a
 * freed RU does not wake it, while the free RUs are at or below `shortReserve` of the cell's RUs;
 * it waits for the free RUs to rise above the reserve (a freed RU counts itself: the freed-RU
 * waiters read the view once it holds the RU). A job whose priority bypasses others'
 * (above `bypassAbove`) is never held, and neither is one of a class with no run time known.
 *
 * Why: a wait costs a job a share of its response time in proportion to how short the job is. On
 * a cell that long-running jobs fill, a wide job of short tasks otherwise starts one freed RU
 * after another and takes many times its own run time, while a long job held a few seconds loses
 * a fraction of a percent. The same rule, with the same numbers, in the live agents (the
 * attempt loop's first step and the freed-RU waiters, shared-view.ts) and in the simulator's
 * tarcil (sim/policies/tarcil.ts). bench/README (truths) measured it across ground truths.
 */
import type { RunTimes } from './wait-order.ts';

export interface ReserveConfig {
  /** Share of the cell's RUs kept free for short classes, in [0, 1); 0: no reserve. */
  shortReserve: number;
  /** A class is long when its expected run time is above this many times the mean over every task. */
  longFactor: number;
  /** Priorities above this bypass others (AgentConfig.bypassAbove): never held. */
  bypassAbove: number;
}

/** What the reserve reads of the cell now. */
export interface ReserveCell {
  /** Free RUs in the view. */
  available: number;
  /** The cell's RUs. */
  total: number;
}

/** Why a job waits for the reserve (explain, the decision record). */
export const RESERVE_WHY = 'its tasks are long and the free RUs are at or below the share kept for short tasks (shortReserve)';

/**
 * Is a class of `runClass` long now: its expected run time above `longFactor` times the mean over
 * every task? Never while it is the only class seen (its moving mean against the mean of all its
 * ends would otherwise decide by rounding, or by its latest ends), and not within rounding of the
 * bound.
 */
export function isLongClass(runTimes: RunTimes, runClass: string, longFactor: number): boolean {
  const mean = runTimes.overall();
  const e = runTimes.expected(runClass);
  if (mean === undefined || e === undefined || runTimes.classes < 2) return false;
  return e > longFactor * mean * (1 + 1e-9);
}

/** Does the reserve hold a job of `runClass` and `priority` back now? */
export function reserveHolds(cfg: ReserveConfig, runTimes: RunTimes, cell: ReserveCell, runClass: string | undefined, priority: number): boolean {
  if (!(cfg.shortReserve > 0) || runClass === undefined || priority > cfg.bypassAbove) return false;
  // Nothing free: nothing to keep (the job waits for capacity, and says so).
  if (cell.available <= 0 || cell.available > cfg.shortReserve * cell.total) return false;
  return isLongClass(runTimes, runClass, cfg.longFactor);
}
