/**
 * The ground-truth performance model (DESIGN.md §8). It decides how long a task really runs and is
 * deliberately *not* the scheduler's quality Q: Q compares encoded vectors lexicographically, most
 * sensitive resource first, on the *declared* profile; the truth adds up the damage on every
 * resource, from the *real* vectors of the neighbours, and includes the platform's speed for this
 * job. A scheduler that trusts Q is judged by a model it cannot see.
 *
 *   rate     = platformPerf[platform] / slowdown
 *   slowdown = min(MAX, 1 + GAIN · Σ_i (max(0, C_i − t_i) / 100)^POWER),  t_i = 99 − c_i
 *   C_i      = Σ_{other occupants of the server} c_i / (M − 1)             (same physical pressure as eq. 3)
 *
 * so a job suffers only where its neighbours' pressure exceeds its tolerance, and suffers more the
 * further it exceeds it. The rate is recomputed for every task of a server whenever a neighbour
 * arrives or leaves (world.ts), so a new task slows the old ones too.
 */
import { N_RESOURCES } from '../model/types.ts';
import { PERF } from './constants.ts';
import type { Rng } from '../util/rng.ts';

export interface PerfParams {
  gain: number;
  power: number;
  maxSlowdown: number;
}

export const DEFAULT_PERF: PerfParams = { gain: PERF.GAIN, power: PERF.POWER, maxSlowdown: PERF.MAX_SLOWDOWN };

/** Slowdown of a task with real vector `own` on a server of `ruCount` RUs whose occupants' real vectors sum to `sum` (own included). */
export function slowdown(own: ArrayLike<number>, sum: ArrayLike<number>, ruCount: number, p: PerfParams = DEFAULT_PERF): number {
  if (ruCount <= 1) return 1;
  const others = ruCount - 1;
  let acc = 0;
  for (let i = 0; i < N_RESOURCES; i++) {
    const c = own[i] as number;
    const C = ((sum[i] as number) - c) / others;
    const excess = C - (99 - c);
    if (excess > 0) acc += p.power === 1 ? excess / 100 : Math.pow(excess / 100, p.power);
  }
  const s = 1 + p.gain * acc;
  return s > p.maxSlowdown ? p.maxSlowdown : s;
}

/** A job's real vector: the declared one plus Gaussian error of `sd` points, clamped to [0, 99]. */
export function realVector(declared: readonly number[], sd: number, rng: Rng): number[] {
  if (sd <= 0) return [...declared];
  return declared.map((c) => {
    // Box–Muller; one normal per resource is plenty here.
    const u = 1 - rng.next();
    const v = rng.next();
    const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
    const x = c + sd * z;
    return x < 0 ? 0 : x > 99 ? 99 : x;
  });
}
