/**
 * Profiles that learn (paper §2: a job's profile is what it tolerates and what it causes; Quasar
 * re-profiles at run time). A workload class's interference vector is corrected online from what
 * the load monitors see: a task of the class, running next to neighbours whose pressure the
 * scheduler knows (C_i, from their own profile estimates), ran at a share of its expected rate.
 *
 * The estimator is online least squares (stochastic gradient on the squared error) of a small
 * model built on the quality model's own notion of tolerance: a task suffers where the pressure
 * around it exceeds what it tolerates (C_i > 99 − c_i), in proportion to the excess,
 *
 *     predicted excess slowdown  ê = g · Σ_i s(C_i + ĉ_i − 99) / 100,     s = softplus, width τ,
 *
 * with the class's vector ĉ and one gain g per class learned; softplus rather than a hard hinge so
 * that a resource whose tolerance is overestimated (prediction 0, yet the task is slow) still gets
 * a gradient. The observed excess is e = 1/share − 1. Each observation moves ĉ and g a step
 * against the error; ĉ stays in [0, 99]. The declared vector is the starting point and nothing
 * else: the estimate follows the observations. This model has the shape of the simulator's ground
 * truth (a damage linear in the tolerance excess), which makes the simulator the best case for it;
 * a real cluster's damage curve is not known to have that shape.
 */
import { N_RESOURCES } from './types.ts';

export interface LearnerConfig {
  /** Step size of the vector (c_i points per unit of error). */
  rate: number;
  /** Step size of the gain. */
  gainRate: number;
  /** Width of the softplus, c_i points. */
  width: number;
}

export const DEFAULT_LEARNER: LearnerConfig = { rate: 40, gainRate: 0.05, width: 4 };

interface ClassEstimate {
  declared: readonly number[];
  c: number[];
  gain: number;
  observations: number;
  /** Mean squared error of the prediction, exponentially weighted (for reports). */
  mse: number;
}

export interface LearnedProfile {
  declared: readonly number[];
  learned: number[];
  gain: number;
  observations: number;
  rmse: number;
}

/** A class's estimate as stored (`profiles/<name>`, state/profiles.ts). */
export interface StoredEstimate {
  declared: number[];
  learned: number[];
  gain: number;
  observations: number;
  /** Exponentially weighted mean squared error of the predicted excess slowdown. */
  mse: number;
}

export class ProfileLearner {
  private readonly classes = new Map<string, ClassEstimate>();
  private readonly x = new Float64Array(N_RESOURCES);
  /** The vector last handed out per class, replaced (not mutated) when it changes by a point or more. */
  private readonly published = new Map<string, readonly number[]>();

  constructor(private readonly cfg: LearnerConfig = DEFAULT_LEARNER) {}

  private get(name: string, declared: readonly number[]): ClassEstimate {
    let e = this.classes.get(name);
    if (!e) {
      e = { declared, c: [...declared], gain: 1, observations: 0, mse: 0 };
      this.classes.set(name, e);
    }
    return e;
  }

  /**
   * The vector to schedule a job of this class with: the declared one until the class has been
   * observed, then the estimate. The same array is returned until the estimate moves by a whole
   * point on some resource, so callers may cache by identity.
   */
  vector(name: string, declared: readonly number[]): readonly number[] {
    const e = this.classes.get(name);
    if (!e || e.observations === 0) return declared;
    const last = this.published.get(name);
    if (last && last.every((v, i) => Math.abs(v - (e.c[i] as number)) < 1)) return last;
    const next = e.c.map((v) => Math.round(v));
    this.published.set(name, next);
    return next;
  }

  /** One observation: a task of class `name` ran at `share` of its expected rate amid pressure C. */
  observe(name: string, declared: readonly number[], C: ArrayLike<number>, share: number): void {
    if (!(share > 0) || !Number.isFinite(share)) return;
    const e = this.get(name, declared);
    const tau = this.cfg.width;
    const x = this.x;
    let sum = 0;
    for (let i = 0; i < N_RESOURCES; i++) {
      const z = ((C[i] as number) + (e.c[i] as number) - 99) / tau;
      // softplus(z)·τ, stable for large |z|
      const sp = z > 30 ? z : Math.log1p(Math.exp(z));
      x[i] = z;
      sum += sp * tau;
    }
    const observed = 1 / share - 1;
    const predicted = (e.gain * sum) / 100;
    const err = predicted - observed;
    for (let i = 0; i < N_RESOURCES; i++) {
      const z = x[i] as number;
      const sig = z > 30 ? 1 : z < -30 ? 0 : 1 / (1 + Math.exp(-z));
      let v = (e.c[i] as number) - (this.cfg.rate * err * e.gain * sig) / 100;
      if (v < 0) v = 0;
      else if (v > 99) v = 99;
      e.c[i] = v;
    }
    let g = e.gain - (this.cfg.gainRate * err * sum) / 100;
    if (g < 0.1) g = 0.1;
    else if (g > 10) g = 10;
    e.gain = g;
    e.observations++;
    e.mse = e.observations === 1 ? err * err : 0.99 * e.mse + 0.01 * err * err;
  }

  /** The class's estimate, to store (undefined before its first observation). */
  export(name: string): StoredEstimate | undefined {
    const e = this.classes.get(name);
    if (!e || e.observations === 0) return undefined;
    return { declared: [...e.declared], learned: e.c.map((v) => Math.round(v * 100) / 100), gain: e.gain, observations: e.observations, mse: e.mse };
  }

  /** Replaces the class's estimate with a stored one (another process may have moved it on). */
  load(name: string, s: StoredEstimate): void {
    this.classes.set(name, { declared: [...s.declared], c: [...s.learned], gain: s.gain, observations: s.observations, mse: s.mse });
    this.published.delete(name);
  }

  /** Forgets a class (its stored estimate was removed). */
  forget(name: string): void {
    this.classes.delete(name);
    this.published.delete(name);
  }

  /** Observations of a class so far (0: never observed). */
  observations(name: string): number {
    return this.classes.get(name)?.observations ?? 0;
  }

  /** Every class observed so far: declared and learned vectors, gain, observations, error. */
  snapshot(): Map<string, LearnedProfile> {
    const out = new Map<string, LearnedProfile>();
    for (const [name, e] of this.classes)
      out.set(name, { declared: e.declared, learned: [...e.c], gain: e.gain, observations: e.observations, rmse: Math.sqrt(e.mse) });
    return out;
  }
}
