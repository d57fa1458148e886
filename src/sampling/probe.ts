/**
 * A sample of free RUs as the arbiter of admission control. The LSH buckets judge a bucket by the
 * mean contention of its free RUs; when nearly every server has a busy neighbour, buckets mix
 * good and bad RUs, their means can fail a sensitive job's target although many of their RUs
 * meet it, and admission would hold a job that a sample places well at once. When the buckets
 * say "wait", a uniform sample of the free RUs the job may use, each scored exactly as a
 * placement would score it, estimates how many are acceptable.
 */
import type { Rng } from '../util/rng.ts';
import { sampleAvailable } from './candidates.ts';
import type { RuIndex } from './ru-index.ts';
import { SelectionContext, type PlacementRequest } from './selection.ts';

export interface ProbeResult {
  /** Free RUs drawn: all of them when at most 4·k are free, else k. */
  drawn: number;
  /** Drawn RUs whose quality meets the job's target. */
  acceptable: number;
  /** Free RUs in the pools drawn from (the job's platforms, or all). */
  freeInPools: number;
  /**
   * A one-sided 95% lower bound on the acceptable free RUs: the Wilson bound on the acceptable
   * fraction times freeInPools; the exact count when every free RU was drawn.
   */
  acceptableLow: number;
}

/** Draws k free RUs the job may use (all of them when at most 4·k are free) and counts those that meet its target. */
export function probeAcceptable(
  state: RuIndex,
  req: Pick<PlacementRequest, 'jobId' | 'target' | 'caused' | 'priority' | 'platformPerf' | 'locality' | 'constraints' | 'form' | 'twoSided'>,
  k: number,
  rng: Rng,
): ProbeResult {
  const ctx = new SelectionContext(state, { ...req, m: 1, R: k });
  let freeInPools = 0;
  if (req.constraints.platforms) for (const p of req.constraints.platforms) freeInPools += state.availableByPlatform.get(p)?.size ?? 0;
  else freeInPools = state.available.size;
  // A small population is scored whole: the count is then exact, not a bound.
  const draw = freeInPools <= 4 * k ? freeInPools : k;
  const ids = sampleAvailable(ctx, draw, rng);
  let acceptable = 0;
  for (const id of ids) {
    const s = state.serverOfRu(id);
    if (s && ctx.score(s, id - s.base).quality.acceptable) acceptable++;
  }
  const drawn = ids.length;
  // Every free RU drawn (or fewer than asked: all that pass the constraints): the count is exact.
  const acceptableLow = draw === freeInPools || drawn < draw ? acceptable : wilsonLower(acceptable, drawn, 1.645) * freeInPools;
  return { drawn, acceptable, freeInPools, acceptableLow };
}

/** Wilson score interval's lower end for `hits` of `n` at normal quantile z. */
export function wilsonLower(hits: number, n: number, z: number): number {
  if (n === 0) return 0;
  const p = hits / n;
  const z2 = z * z;
  const centre = p + z2 / (2 * n);
  const spread = z * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n));
  return Math.max(0, (centre - spread) / (1 + z2 / n));
}
