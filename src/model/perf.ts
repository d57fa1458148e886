/**
 * The ground-truth performance model, shared by the simulator and the monitor's simulated executor.
 * It decides how long a task really runs and is deliberately *not* the scheduler's quality Q: Q
 * compares encoded vectors lexicographically, most sensitive resource first, on the *declared*
 * profile; the truth adds up the damage on every resource, from the *real* vectors of the
 * neighbours, and includes the platform's speed for this job. A scheduler that trusts Q is judged
 * by a model it cannot see.
 *
 *   rate     = platformPerf[platform] / slowdown
 *   slowdown = min(MAX, 1 + GAIN · Σ_i (max(0, C_i − t_i) / 100)^POWER),  t_i = 99 − c_i
 *   C_i      = Σ_{other occupants of the server} c_i / (M − 1)             (same physical pressure as eq. 3)
 *
 * so a job suffers only where its neighbours' pressure exceeds its tolerance, and suffers more the
 * further it exceeds it. The rate is recomputed for every task of a server whenever a neighbour
 * arrives or leaves (src/sim/world.ts), so a new task slows the old ones too.
 */
import { N_RESOURCES } from './types.ts';
import { invalid } from '../util/errors.ts';
import type { Rng } from '../util/rng.ts';

/** Constants of the ground-truth interference model. */
export const PERF = {
  /**
   * Slowdown = 1 + GAIN · Σ_i (max(0, C_i − t_i) / 100)^POWER, t_i = 99 − c_i: a resource hurts a
   * task only once the pressure on it exceeds what the task tolerates.
   * GAIN was set from the calibration run (`tarcil bench calibrate`): interference-blind random
   * placement of the W3 mix at 80% load on hetero-400 slows the latency-critical jobs by a median
   * of about 2× (Tarcil Fig. 1a/15a: 1.5–3×). It was fixed before any policy comparison.
   */
  GAIN: 1.5,
  POWER: 1,
  /** No task runs slower than this multiple of its interference-free time. */
  MAX_SLOWDOWN: 10,
  /** Standard deviation (in c_i points) of the difference between a job's real and declared vector. */
  PROFILE_ERROR_SD: 0,
  /** A data-constrained task run away from its data reads it remotely: this share of its ideal time. */
  REMOTE_READ_FRACTION: 0.5,
} as const;

export interface PerfParams {
  gain: number;
  power: number;
  maxSlowdown: number;
}

export const DEFAULT_PERF: PerfParams = { gain: PERF.GAIN, power: PERF.POWER, maxSlowdown: PERF.MAX_SLOWDOWN };

/**
 * The ground truth a simulation is judged by: the interference model's constants and how far each
 * job's real vector strays from the one it declares. A run takes one (src/sim/run.ts `truth`); the
 * committed one is the default, so that a different truth is a parameter of a run and never an edit
 * of the constants above.
 */
export interface Truth {
  /** What tables call it ('committed', 'gain 2.5', ...). */
  name: string;
  perf: PerfParams;
  /**
   * Standard deviation (c_i points) of each job's real vector around its declared one, drawn for
   * each job by the workload (realVector) where the workload does not set its own.
   */
  profileErrorSd: number;
}

export const COMMITTED_TRUTH: Truth = { name: 'committed', perf: DEFAULT_PERF, profileErrorSd: PERF.PROFILE_ERROR_SD };

/** What a truth may change of the committed one. */
export interface TruthChange {
  gain?: number;
  power?: number;
  maxSlowdown?: number;
  profileErrorSd?: number;
}

/** The committed truth with `change` applied; every field checked (a finite number in its range). */
export function makeTruth(name: string, change: TruthChange): Truth {
  const num = (field: keyof TruthChange, v: number | undefined, dflt: number, ok: (x: number) => boolean, rule: string): number => {
    if (v === undefined) return dflt;
    if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) throw invalid(`truth.${field}`, `must be ${rule} (got ${String(v)})`);
    return v;
  };
  if (typeof name !== 'string' || name.trim() === '') throw invalid('truth.name', 'must be a non-empty string');
  const c = COMMITTED_TRUTH;
  return {
    name,
    perf: {
      gain: num('gain', change.gain, c.perf.gain, (x) => x >= 0, 'a finite number ≥ 0'),
      power: num('power', change.power, c.perf.power, (x) => x > 0, 'a finite number > 0'),
      maxSlowdown: num('maxSlowdown', change.maxSlowdown, c.perf.maxSlowdown, (x) => x >= 1, 'a finite number ≥ 1'),
    },
    profileErrorSd: num('profileErrorSd', change.profileErrorSd, c.profileErrorSd, (x) => x >= 0, 'a finite number ≥ 0 (c_i points)'),
  };
}

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
