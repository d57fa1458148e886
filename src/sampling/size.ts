/**
 * Sample sizes from the guarantee of Tarcil §3.3. The rank D of a uniformly drawn RU is uniform on
 * [0, 1], so the best of R independent draws has P[D_best < x] = x^R (eq. 6). Two readings:
 *
 * - quantile: to find an RU in the top 1 − x with failure probability p, x^R ≤ p;
 * - fraction: if a fraction f of the population is acceptable, P[none of R acceptable] = (1 − f)^R,
 *   which is the same formula with x = 1 − f. This is how the agent sizes its sample: f comes from
 *   the admission buckets (acceptable free RUs / free RUs).
 *
 * Both give the smallest integer R with x^R ≤ p, i.e. ceil(ln p / ln x). Sampling is with
 * replacement in the analysis; sampling distinct RUs only does better, so the bound is safe.
 */
import { invalid } from '../util/errors.ts';

export interface SampleSizeOptions {
  /** Accepted probability that no acceptable RU is among the R candidates, in (0, 1). */
  failProb: number;
  /** Floor on R, even when f says fewer would do (paper §6.1 uses R = 8 at low load). Default 8. */
  min?: number;
  /** Ceiling on R (paper §6.1: 32); past it admission control decides. Default 32. */
  cap?: number;
}

export const DEFAULT_MIN_SAMPLES = 8;
export const DEFAULT_MAX_SAMPLES = 32;

function checkProb(failProb: number): void {
  if (typeof failProb !== 'number' || !(failProb > 0 && failProb < 1)) {
    throw invalid('failProb', 'must be a probability in (0, 1)', { value: failProb });
  }
}

function checkUnit(field: string, v: number): void {
  if (typeof v !== 'number' || !(v >= 0 && v <= 1)) throw invalid(field, 'must be in [0, 1]', { value: v });
}

/**
 * Smallest R ≥ 1 with x^R ≤ p. ln p / ln x can land an ulp above an integer when x^R = p exactly
 * (x = 0.5, p = 0.125 gives 3.0000000000000004), so the candidate one below the ceiling is checked
 * directly before settling on the ceiling.
 */
function smallestR(x: number, failProb: number): number {
  if (x <= 0) return 1;
  if (x >= 1) return Infinity;
  const r = Math.max(1, Math.ceil(Math.log(failProb) / Math.log(x)));
  return r > 1 && x ** (r - 1) <= failProb * (1 + 1e-12) ? r - 1 : r;
}

/**
 * Samples needed so that the best of them ranks at or above quantile x (D ≥ x) except with
 * probability failProb: ceil(ln p / ln x). x = 0.8, p = 1e-3 → 31 (ln 1e-3 / ln 0.8 = 30.96); the
 * paper quotes 32 because it rounds up to the next power of two, its grid of sample sizes
 * (8, 16, 32, 64). x = 0 → 1 (any RU will do); x = 1 → Infinity (no finite sample guarantees the
 * single best RU).
 */
export function samplesForQuantile(x: number, failProb: number): number {
  checkUnit('x', x);
  checkProb(failProb);
  return smallestR(x, failProb);
}

/**
 * Samples needed so that at least one is in the acceptable fraction f of the population except with
 * probability failProb: ceil(ln p / ln(1 − f)). f ≤ 0 → Infinity (nothing acceptable to find);
 * f ≥ 1 → 1. f slightly outside [0, 1] is tolerated (it is a ratio of counters); NaN is not.
 */
export function samplesForFraction(f: number, failProb: number): number {
  if (typeof f !== 'number' || Number.isNaN(f)) throw invalid('f', 'must be a number', { value: f });
  checkProb(failProb);
  if (f <= 0) return Infinity;
  if (f >= 1) return 1;
  return smallestR(1 - f, failProb);
}

/**
 * The paper's loaded-cluster example: `good` acceptable RUs among `population` (8 of the top 20
 * still free, out of 100). 8 of 100 at p = 1e-3 → 83: ln(1e-3) / ln(0.92) = 82.85, which the paper
 * truncates to 82 — but 0.92^82 = 1.07e-3 misses the target, so 83 is the smallest that meets it.
 */
export function samplesForGoodOfPopulation(good: number, population: number, failProb: number): number {
  if (!Number.isInteger(population) || population < 1) {
    throw invalid('population', 'must be a positive integer', { value: population });
  }
  if (!Number.isInteger(good) || good < 0 || good > population) {
    throw invalid('good', 'must be an integer in [0, population]', { value: good, population });
  }
  checkProb(failProb);
  if (good === 0) return Infinity;
  return smallestR(1 - good / population, failProb);
}

/**
 * P[the best of R uniform draws ranks below x] = x^R (eq. 6). R = 64, x = 0.8 → 6.3e-7, which the
 * paper rounds to "10^-6".
 */
export function guarantee(R: number, x: number): number {
  if (!Number.isInteger(R) || R < 0) throw invalid('R', 'must be a non-negative integer', { value: R });
  checkUnit('x', x);
  return x ** R;
}

export interface SampleSize {
  /** Samples to draw per RU needed, in [min, cap]. */
  R: number;
  /** What the guarantee alone asks for (may be Infinity when nothing is acceptable). */
  uncapped: number;
  /** The cap cut R short: the guarantee is not met, admission control should have a say. */
  capped: boolean;
  /** (1 − f)^R: the failure probability R actually gives (≤ failProb unless capped). */
  failProbAchieved: number;
}

/** R for an acceptable fraction f, clamped to [min, cap]. */
export function sampleSize(f: number, opts: SampleSizeOptions): SampleSize {
  const min = opts.min ?? DEFAULT_MIN_SAMPLES;
  const cap = opts.cap ?? DEFAULT_MAX_SAMPLES;
  if (!Number.isInteger(min) || min < 1) throw invalid('min', 'must be a positive integer', { value: min });
  if (!Number.isInteger(cap) || cap < min) throw invalid('cap', 'must be an integer ≥ min', { value: cap, min });
  const uncapped = samplesForFraction(f, opts.failProb);
  const R = Math.min(cap, Math.max(min, uncapped));
  const miss = f <= 0 ? 1 : f >= 1 ? 0 : 1 - f;
  return { R, uncapped, capped: uncapped > cap, failProbAchieved: miss ** R };
}
