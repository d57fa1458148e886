/**
 * The quality model of Tarcil §3.2 (equations 1–5) and the rank D of §3.3.
 *
 * Exactness. With N = 10 resources the order-preserving encoding is a 20-digit decimal number,
 * past Number.MAX_SAFE_INTEGER (~9.007e15, 16 digits). Every *decision* made here (is an RU
 * acceptable, which of two RUs is better) is therefore taken on an exact two-part integer
 * {@link Encoding}; the normalised doubles T_W, U_H and Q are kept for reporting and as a fast
 * first comparison, and where they are used the code says that they are approximations.
 *
 * The functions accept 1 ≤ N ≤ 10 resources (the vector length is taken from `order`), so that the
 * paper's two-resource example `[84, 31] → 8431 / 9999` can be checked literally; the project
 * itself always uses N = 10, for which the normaliser is {@link ENCODING_MAX} = 10^20 − 1.
 */
import type { Rng } from '../util/rng.ts';
import { invalid } from '../util/errors.ts';

/**
 * An encoded vector: the exact integer `hi * 1e6 + lo`. `lo` holds the last (up to) 3 resource
 * pairs — 6 decimal digits — and `hi` the leading ones (at most 7 pairs = 14 digits < 2^53), so
 * both parts are exact doubles and additions of two encodings stay exact (< 2^53) too.
 */
export interface Encoding {
  hi: number;
  lo: number;
}

/** The largest number of resources the two-part encoding holds exactly (7 + 3 pairs). */
export const MAX_RESOURCES = 10;
const LO_PAIRS = 3;

/** 10^(2N) − 1 split like an {@link Encoding}, for N = 0..10. */
const MAX_BY_N: readonly Encoding[] = Array.from({ length: MAX_RESOURCES + 1 }, (_, n) => {
  const loPairs = Math.min(LO_PAIRS, n);
  const hiPairs = n - loPairs;
  return { hi: 100 ** hiPairs - 1, lo: 100 ** loPairs - 1 };
});
/** 10^(2·lo pairs): the modulus of the `lo` part, for N = 0..10. */
const LO_BASE_BY_N: readonly number[] = Array.from({ length: MAX_RESOURCES + 1 }, (_, n) => 100 ** Math.min(LO_PAIRS, n));
/** 10^(2N) − 1 as the nearest double; the normaliser of eq. 2 and 4. */
const MAX_DOUBLE_BY_N: readonly number[] = Array.from({ length: MAX_RESOURCES + 1 }, (_, n) => 100 ** n - 1);

/** 10^20 − 1: the encoding of a vector of ten 99s. */
export const ENCODING_MAX: Encoding = Object.freeze({ ...(MAX_BY_N[MAX_RESOURCES] as Encoding) });

/** 10^(2n) − 1 as an {@link Encoding}, for the generalisation to n < 10 resources. */
export function encodingMax(n: number = MAX_RESOURCES): Encoding {
  const m = MAX_BY_N[n];
  if (m === undefined || n < 1) throw invalid('resources', `must be an integer in [1, ${MAX_RESOURCES}]`, { n });
  return { hi: m.hi, lo: m.lo };
}

/** The paper's c_i and C_i are integers in [0, 99]; measured means are rounded to the nearest one. */
function digitPair(v: number): number {
  // NaN (a missing value) counts as no contention, rather than poisoning the whole encoding.
  return v > 0 ? (v < 99 ? Math.round(v) : 99) : 0;
}

function checkOrder(order: readonly number[], len: number, field: string): void {
  const n = order.length;
  if (n < 1 || n > MAX_RESOURCES) throw invalid(field, `must list 1 to ${MAX_RESOURCES} resources`, { n });
  const seen = new Set<number>();
  for (const i of order) {
    if (!Number.isInteger(i) || i < 0 || i >= len || seen.has(i)) {
      throw invalid(field, `must be a permutation of indices into a vector of length ${len}`, { index: i });
    }
    seen.add(i);
  }
}

/**
 * Indices of `caused` by decreasing c_i (V'_W of eq. 1); equal values keep their resource order, so
 * the same profile always gives the same order (Array.prototype.sort is stable).
 */
export function resourceOrder(caused: readonly number[]): number[] {
  const idx = caused.map((_, i) => i);
  // Compare the rounded values: the encoding only sees those, and ties must then fall back to the
  // resource index rather than to sub-integer noise.
  return idx.sort((a, b) => digitPair(caused[b] ?? 0) - digitPair(caused[a] ?? 0) || a - b);
}

/** Hot-path encoder: no validation, no allocation beyond the result. */
function encodeInto(values: readonly number[], order: readonly number[]): Encoding {
  const n = order.length;
  const hiPairs = n > LO_PAIRS ? n - LO_PAIRS : 0;
  let hi = 0;
  let lo = 0;
  for (let k = 0; k < n; k++) {
    const v = digitPair(values[order[k] as number] as number);
    if (k < hiPairs) hi = hi * 100 + v;
    else lo = lo * 100 + v;
  }
  return { hi, lo };
}

/** Eq. 1: the values, rounded and clamped to [0, 99], concatenated two digits each in `order`. */
export function encode(values: readonly number[], order: readonly number[]): Encoding {
  checkOrder(order, values.length, 'order');
  return encodeInto(values, order);
}

/** The same number as {@link encode}, as an exact BigInt: the reference the tests check against. */
export function encodeBigInt(values: readonly number[], order: readonly number[]): bigint {
  checkOrder(order, values.length, 'order');
  let e = 0n;
  for (const i of order) e = e * 100n + BigInt(digitPair(values[i] as number));
  return e;
}

/** The exact value of an encoding as a BigInt. */
export function encodingToBigInt(e: Encoding): bigint {
  return BigInt(e.hi) * 1_000_000n + BigInt(e.lo);
}

/** Exact order of two encodings of the same length. */
export function compareEncoding(a: Encoding, b: Encoding): number {
  return a.hi !== b.hi ? (a.hi < b.hi ? -1 : 1) : a.lo !== b.lo ? (a.lo < b.lo ? -1 : 1) : 0;
}

/**
 * e / (10^(2n) − 1), the normalisation of eq. 2 and 4. APPROXIMATION: a double holds about 16
 * significant decimal digits, i.e. the first ~8 of the 10 resource pairs; two vectors that differ
 * only in the last resources can map to the same double. The map is monotone (never inverts an
 * order), which is what lets {@link compareScores} use the doubles first and the exact encodings
 * only on ties. Exact at the ends: 0 → 0, the maximum → 1.
 */
export function encodingToUnit(e: Encoding, n: number = MAX_RESOURCES): number {
  const max = MAX_DOUBLE_BY_N[n];
  if (max === undefined || n < 1) throw invalid('resources', `must be an integer in [1, ${MAX_RESOURCES}]`, { n });
  return encodingToDouble(e) / max;
}

/**
 * The encoding as the nearest double. `hi * 1e6 + lo` would round twice (the product, then the
 * sum), which can invert the order of two encodings near a rounding boundary. Split instead so
 * that both terms are exact: hi = h1·1e8 + h2 with h1 < 1e6, then h1·1e14 = h1·5^14·2^14 needs at
 * most 20 + 33 bits and h2·1e6 + lo < 1e14: one correctly rounded addition, hence monotone.
 */
function encodingToDouble(e: Encoding): number {
  const h1 = Math.floor(e.hi / 1e8);
  const h2 = e.hi - h1 * 1e8;
  return h1 * 1e14 + (h2 * 1e6 + e.lo);
}

/** What a job needs, computed once per job (eq. 1–2). */
export interface JobTarget {
  /** The job's profile c_i as given. */
  caused: number[];
  /** Resources by decreasing c_i: the job's most interference-sensitive resource first. */
  order: number[];
  /** V_W_enc, exact. */
  enc: Encoding;
  /** T_W = V_W_enc / (10^(2N) − 1), a double (approximation, see {@link encodingToUnit}). */
  T: number;
}

/** T_W of eq. 1–2 for a job that causes pressure `caused[i]` ∈ [0, 99] on resource i. */
export function jobTarget(caused: readonly number[]): JobTarget {
  if (caused.length < 1 || caused.length > MAX_RESOURCES) {
    throw invalid('caused', `must have 1 to ${MAX_RESOURCES} entries`, { length: caused.length });
  }
  caused.forEach((c, i) => {
    if (typeof c !== 'number' || !Number.isFinite(c) || c < 0 || c > 99) {
      throw invalid(`caused[${i}]`, 'must be a number in [0, 99]', { value: c });
    }
  });
  const order = resourceOrder(caused);
  const enc = encodeInto(caused, order);
  return { caused: [...caused], order, enc, T: encodingToUnit(enc, order.length) };
}

/**
 * Eq. 3: the contention RU H sees on each resource, C_i = Σ_{m≠H} c_i / (M − 1), i.e. the mean over
 * the *other* M − 1 RUs of the server, free ones counting 0. `serverSum` is Σ c_i over every
 * occupied RU of the server; `self` is H's own occupant (null/undefined when H is free), removed
 * from the sum because a task does not interfere with itself. A one-RU server has no neighbours:
 * zeros. `out` is reused when given, so the scoring loop allocates nothing here.
 */
export function contention(serverSum: readonly number[], ruCount: number, self?: readonly number[] | null, out?: number[]): number[] {
  const n = serverSum.length;
  const res = out ?? new Array<number>(n);
  if (res.length !== n) res.length = n;
  if (ruCount <= 1) {
    res.fill(0);
    return res;
  }
  const others = ruCount - 1;
  for (let i = 0; i < n; i++) {
    const s = (serverSum[i] as number) - (self ? (self[i] ?? 0) : 0);
    // Incremental sums drift by an ulp or so; a negative contention would be meaningless.
    res[i] = s > 0 ? s / others : 0;
  }
  return res;
}

/**
 * Eq. 5 comes in two forms.
 *
 * As printed, Q = T_W − U_H when U_H < T_W. That value *grows* as the RU gets worse (lower U_H),
 * so a sampler that keeps the highest Q would prefer the most contended RU among the unacceptable
 * ones, and an RU just below the target (Q ≈ 0) would lose to a terrible one (Q ≈ T_W) — the
 * opposite of the text around it ("if Q is within [0, T_W], selecting RU H will degrade the job's
 * performance", with 1 ideal). We read it as a typo and by default use the 'monotone' form:
 *
 *   Q = 1 − (U_H − T_W)   if U_H ≥ T_W   → [T_W, 1], 1 ideal (the RU tolerates exactly the job)
 *   Q = U_H               if U_H < T_W   → [0, T_W), increasing in U_H
 *
 * which keeps the paper's ranges and the meaning of "1 is ideal, below T_W degrades", and is
 * monotone within each branch, so "best Q" always means "least degrading" below the target and
 * "tightest fit" above it. 'paper' keeps the literal formula for reproducing the paper.
 */
export type QualityForm = 'monotone' | 'paper';

/** One RU judged for one job. */
export interface RuScore {
  /** V_H_enc: the RU's contention encoded in the job's resource order, exact. */
  enc: Encoding;
  /** U_H of eq. 4 (double, approximate beyond ~8 resources). */
  U: number;
  /** Q of eq. 5 (double), in [0, 1]. */
  Q: number;
  /** U_H ≥ T_W, decided exactly on the encodings. */
  acceptable: boolean;
  /** Set when the RU was also judged by its future neighbours ({@link twoSided}). */
  sides?: QualitySides;
}

/** The two sides of a two-sided score: the newcomer's own, and its worst-off future neighbour's. */
export interface QualitySides {
  /** The newcomer's own Q and acceptability (the paper's one-sided score). */
  selfQ: number;
  selfAcceptable: boolean;
  /** The lowest Q among the residents once the newcomer has joined (1 with no residents). */
  neighboursQ: number;
  /** Every resident still within its tolerance once the newcomer has joined. */
  neighboursAcceptable: boolean;
  /** Residents judged. */
  neighbours: number;
}

/**
 * Combines the newcomer's own score with its neighbours' side (each resident's Q against its own
 * target once the newcomer has joined; `neighboursQ` the lowest of them). The newcomer's own
 * tolerance decides acceptability, as in the paper; the neighbours decide the rest:
 *
 *   acceptable for the newcomer → Q = Q_self ∈ [T_W, 1]; among equally fast acceptable RUs one
 *                                 that pushes no resident past its tolerance ranks first
 *                                 ({@link NEIGHBOUR_HARM}, applied by the selection's score)
 *   otherwise                   → Q = Q_self · f ∈ [0, T_W),  f = 1 if the neighbours all stay
 *                                 within their tolerance, else their lowest Q to the power `weight`
 *                                 ({@link NEIGHBOUR_WEIGHT} by default)
 *
 * so where no RU suits the newcomer (a full cell, a placement at best effort) the one that hurts
 * its neighbours least ranks first. Judging acceptability on both sides instead (an RU acceptable
 * only if every resident stays within its tolerance) left almost no acceptable RU once residents
 * placed at best effort were past their own, and ranked a fast platform below a slow one there:
 * below this rule in the mean under every ground truth of `tarcil bench truths` (bench/README).
 */
export function twoSided(
  self: RuScore,
  neighboursQ: number,
  neighboursAcceptable: boolean,
  neighbours: number,
  T: number,
  /** The neighbours' weight below T_W; undefined: NEIGHBOUR_WEIGHT. */
  weight: number = NEIGHBOUR_WEIGHT,
): RuScore {
  const sides: QualitySides = { selfQ: self.Q, selfAcceptable: self.acceptable, neighboursQ, neighboursAcceptable, neighbours };
  if (self.acceptable) return { enc: self.enc, U: self.U, Q: self.Q, acceptable: true, sides };
  const base = self.Q < T ? self.Q : T;
  const f = neighboursAcceptable || weight === 0 ? 1 : weight === 1 ? neighboursQ : Math.pow(neighboursQ, weight);
  return { enc: self.enc, U: self.U, Q: base * f, acceptable: false, sides };
}

/**
 * How much the neighbours' side weighs below T_W: the newcomer's own Q is multiplied by the worst
 * resident's Q to this power. At 1 (the plain product) a resident's fall counted as much as the
 * newcomer's own and sent newcomers to slow RUs of their own to spare residents; at 0 the
 * neighbours do not count there. Chosen across the truths and seeds of `tarcil bench truths`
 * (`bench/neighbour-weight.ts`; bench/README, truths): of the weights whose mean and 5th-percentile
 * job are at or above the plain product's in every truth and seed, the best in mean rank.
 */
export const NEIGHBOUR_WEIGHT = 0.5;

/**
 * The share of its score an acceptable RU gives up when the newcomer would push a resident there
 * past its tolerance: small enough never to outrank a faster platform, so it only orders RUs of
 * the same speed (before the fit).
 */
export const NEIGHBOUR_HARM = 1e-9;

/**
 * Eq. 4–5 for an RU with contention `C` (from {@link contention}) and a job. `C` is encoded in the
 * *job's* order so that the resource the job is most sensitive to leads the comparison.
 *
 * U_H ≥ T_W ⇔ 1 − enc_H/max ≥ enc_W/max ⇔ enc_H + enc_W ≤ max, decided on the two-part integers
 * with the carry from `lo` into `hi`. Equivalently (each pair sum is in [0, 198]): the first
 * resource, in the job's order, where C_j + c_j ≠ 99 has C_j + c_j < 99 — the RU's contention is
 * lexicographically within the job's tolerance t = 99 − c.
 */
export function scoreRu(C: readonly number[], job: JobTarget, form: QualityForm = 'monotone'): RuScore {
  const n = job.order.length;
  const enc = encodeInto(C, job.order);
  const max = MAX_BY_N[n] as Encoding;
  const loBase = LO_BASE_BY_N[n] as number;
  const loSum = enc.lo + job.enc.lo;
  const carry = loSum >= loBase ? 1 : 0;
  const acceptable = enc.hi + job.enc.hi + carry <= max.hi;
  const U = 1 - encodingToUnit(enc, n);
  const T = job.T;
  let Q: number;
  if (form === 'paper') {
    // The literal eq. 5; the branch follows the exact decision, not the rounded doubles.
    Q = acceptable ? 1 - (U - T) : T - U;
  } else {
    // The branch is chosen exactly, so the ranges are clamped to stay consistent with it when the
    // doubles of U and T round across each other: acceptable ⇒ Q ∈ [T, 1], otherwise Q ∈ [0, T].
    Q = acceptable ? 1 - (U - T) : U;
    Q = acceptable ? (Q > 1 ? 1 : Q < T ? T : Q) : Q > T ? T : Q;
  }
  if (Q < 0) Q = 0;
  else if (Q > 1) Q = 1;
  return { enc, U, Q, acceptable };
}

/**
 * > 0 if `a` is the better RU for the job both were scored for. Higher Q first; where the doubles
 * tie (they can: see {@link encodingToUnit}) the exact encodings decide, in the order of the
 * 'monotone' form: acceptable beats unacceptable; among acceptable RUs the larger enc_H (lower U_H,
 * the one closest to T_W) wins; among unacceptable ones the smaller enc_H (least contended) wins.
 * 0 only for identical encodings.
 */
export function compareScores(a: RuScore, b: RuScore): number {
  if (a.Q !== b.Q) return a.Q > b.Q ? 1 : -1;
  if (a.acceptable !== b.acceptable) return a.acceptable ? 1 : -1;
  const c = compareEncoding(a.enc, b.enc);
  return a.acceptable ? c : -c;
}

/**
 * The rank D ∈ [0, 1] of each score among all given (§3.3): sorted by {@link compareScores}
 * ascending, the i-th gets D = i / (n − 1), so D is uniform by construction; exact ties are broken
 * by a fair coin from `rng`. A single entry gets D = 1 (it is the best there is). O(n log n) over
 * the whole cluster: for benchmarks and tests, never for the scheduling path.
 */
export function rankD(scores: readonly RuScore[], rng: Rng): number[] {
  const n = scores.length;
  if (n === 0) return [];
  if (n === 1) return [1];
  const coin = Float64Array.from({ length: n }, () => rng.next());
  const idx = Array.from({ length: n }, (_, i) => i);
  idx.sort((i, j) => compareScores(scores[i] as RuScore, scores[j] as RuScore) || (coin[i] as number) - (coin[j] as number) || i - j);
  const D = new Array<number>(n);
  for (let r = 0; r < n; r++) D[idx[r] as number] = r / (n - 1);
  return D;
}
