/**
 * The Erlang quantile behind the admission wait estimate: when k RUs are free, at a given
 * probability, if frees arrive as a Poisson process of unit rate.
 */
import { probit } from 'simple-statistics';

/** Above this k, erlangQuantile uses the Wilson–Hilferty approximation. */
export const EXACT_ERLANG_MAX_K = 500;

/**
 * Smallest x ≥ 0 with P[Poisson(x) ≥ k] ≥ q, i.e. the q-quantile of an Erlang(k, 1) (the time of
 * the k-th event of a unit-rate Poisson process). P[Poisson(x) ≥ k] = 1 − Σ_{i<k} e^{-x} x^i / i!,
 * summed in log space so large x and k neither underflow nor overflow; found by bisection on
 * [0, k + 10√k + 10], which holds every quantile we ask for (q < 1 − 1e-12 is validated).
 *
 * The exact sum costs O(k) per step of the bisection; above EXACT_ERLANG_MAX_K the Wilson–Hilferty
 * approximation of the gamma quantile, k·(1 − 1/(9k) + z_q/(3√k))³, is used instead (relative
 * error below 1e-4 there), so a verdict for a job of 100,000 tasks stays cheap.
 */
export function erlangQuantile(k: number, q: number): number {
  if (k <= 0) return 0;
  if (k === 1) return -Math.log1p(-q);
  if (k > EXACT_ERLANG_MAX_K) {
    const c = 1 - 1 / (9 * k) + probit(q) / (3 * Math.sqrt(k));
    return k * c * c * c;
  }
  // A pure function of (k, q), asked again by every recheck of a waiting job: remembered.
  const key = q * 1024 + k;
  const known = erlangKnown.get(key);
  if (known !== undefined && known.k === k && known.q === q) return known.x;
  const x = exactErlangQuantile(k, q);
  if (erlangKnown.size >= 4096) erlangKnown.clear();
  erlangKnown.set(key, { k, q, x });
  return x;
}

const erlangKnown = new Map<number, { k: number; q: number; x: number }>();

function exactErlangQuantile(k: number, q: number): number {
  const atLeastK = (x: number): number => {
    if (x <= 0) return 0;
    const lx = Math.log(x);
    let logFact = 0;
    let s = 0;
    for (let i = 0; i < k; i++) {
      if (i > 0) logFact += Math.log(i);
      s += Math.exp(i * lx - x - logFact);
    }
    return 1 - s;
  };
  let lo = 0;
  let hi = k + 10 * Math.sqrt(k) + 10;
  for (let it = 0; it < 60 && hi - lo > 1e-9 * hi; it++) {
    const mid = (lo + hi) / 2;
    if (atLeastK(mid) >= q) hi = mid;
    else lo = mid;
  }
  return hi;
}
