/**
 * Where a selection's candidates come from: uniform draws of distinct available RUs that pass the
 * job's hard constraints (by rejection, or by enumeration when the draw is a large share of the
 * population), and the free RUs on the job's data servers.
 */
import type { Rng } from '../util/rng.ts';
import type { RuIndex, ServerState } from './ru-index.ts';
import type { IndexedSet } from './indexed-set.ts';
import { candidateFor, SelectionContext, type Candidate, type PlacementRequest } from './selection.ts';

/**
 * Draws up to k distinct available RUs satisfying the job's hard constraints, uniformly. Platform
 * constraints select per-platform pools (weighted by size, so the union stays uniform); attribute
 * constraints are checked by rejection and, if most RUs fail them, by one scan of the pools. Only
 * when none is found are free RUs of blocked servers drawn from.
 */
export function sampleAvailable(ctx: SelectionContext, k: number, rng: Rng, allowServer?: (s: ServerState) => boolean): number[] {
  const state = ctx.state;
  const c = ctx.req.constraints;
  const pools: Pool[] = [];
  if (c.platforms) {
    for (const p of c.platforms) {
      const set = state.availableByPlatform.get(p);
      if (set && set.size > 0) pools.push(set);
    }
  } else {
    pools.push(state.available);
  }
  const only = ctx.req.only;
  if (only) restrictPools(pools, only);
  const drawn = drawDistinct(ctx, pools, k, rng, (id) => {
    const s = state.serverOfRu(id);
    return s !== undefined && ctx.eligibleServer(s) && s.available(id - s.base) && (allowServer === undefined || allowServer(s));
  });
  if (drawn.length > 0 || state.blockedFree.size === 0) return drawn;
  // A blocked server (a task there runs well below its rate) is avoided, not forbidden: when no
  // other server can take the job now (its constraints allow only blocked ones, or the rest is
  // full), its free RUs are drawn from, rather than leave the job waiting for the block to end.
  const blocked: Pool[] = [state.blockedFree];
  if (only) restrictPools(blocked, only);
  return drawDistinct(ctx, blocked, k, rng, (id) => {
    const s = state.serverOfRu(id);
    return (
      s !== undefined &&
      (!c.platforms || c.platforms.includes(s.spec.platform)) &&
      ctx.eligibleServer(s) &&
      s.freeButBlocked(id - s.base) &&
      (allowServer === undefined || allowServer(s))
    );
  });
}

/** What a draw reads of a pool of RU ids. */
export type Pool = Pick<IndexedSet, 'size' | 'has' | 'at' | 'values'>;

/** A pool's members that are in `only`, in the pool's order (a selection restricted to given RUs). */
class OnlyPool implements Pool {
  private readonly items: number[] = [];
  private readonly set: Set<number>;
  constructor(pool: Pool, only: ReadonlySet<number>) {
    for (const id of only) if (pool.has(id)) this.items.push(id);
    this.set = new Set(this.items);
  }
  get size(): number {
    return this.items.length;
  }
  has(id: number): boolean {
    return this.set.has(id);
  }
  at(i: number): number {
    return this.items[i] as number;
  }
  values(): readonly number[] {
    return this.items;
  }
}

/** Replaces each pool by its members that are in `only`. */
function restrictPools(pools: Pool[], only: ReadonlySet<number>): void {
  for (let k = 0; k < pools.length; k++) pools[k] = new OnlyPool(pools[k] as Pool, only);
}

export function drawDistinct(ctx: SelectionContext, pools: readonly Pool[], k: number, rng: Rng, ok: (id: number) => boolean): number[] {
  let total = 0;
  for (const p of pools) total += p.size;
  const out: number[] = [];
  if (total === 0 || k <= 0) return out;
  const chosen = new Set<number>();
  const accept = (id: number): void => {
    if (chosen.has(id) || ctx.taken.has(id) || !ok(id)) return;
    chosen.add(id);
    out.push(id);
  };
  // When the request is a large share of the population, enumerate instead of rejecting. Only
  // excluded RUs that are in the pools shrink it (an excluded RU may already be busy in the view).
  let excluded = 0;
  for (const id of ctx.taken) if (pools.some((p) => p.has(id))) excluded++;
  if (k * 2 >= total - excluded) {
    const all: number[] = [];
    for (const p of pools) for (const id of p.values()) all.push(id);
    shuffleInPlace(all, rng);
    for (const id of all) {
      if (out.length >= k) break;
      accept(id);
    }
    return out;
  }
  let attempts = 0;
  const maxAttempts = 8 * k + 64;
  while (out.length < k && attempts < maxAttempts) {
    attempts++;
    let r = rng.int(total);
    let pool = pools[0] as Pool;
    for (const p of pools) {
      if (r < p.size) {
        pool = p;
        break;
      }
      r -= p.size;
    }
    accept(pool.at(r));
  }
  if (out.length < k) {
    // Rejection kept failing (restrictive attributes): scan once, then draw from the survivors.
    const all: number[] = [];
    for (const p of pools) for (const id of p.values()) if (!chosen.has(id) && !ctx.taken.has(id) && ok(id)) all.push(id);
    shuffleInPlace(all, rng);
    for (const id of all) {
      if (out.length >= k) break;
      accept(id);
    }
  }
  return out;
}

export function shuffleInPlace<T>(a: T[], rng: Rng): void {
  for (let i = a.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    const t = a[i] as T;
    a[i] = a[j] as T;
    a[j] = t;
  }
}

/** Uniform draw of k distinct eligible available RU ids (used by the x^R measurements). */
export function drawCandidates(state: RuIndex, req: PlacementRequest, k: number, rng: Rng): number[] {
  return sampleAvailable(new SelectionContext(state, req), k, rng);
}

/** R·m uniform candidates, plus free RUs on the job's data servers; allowServer narrows both. */
export function initialCandidates(ctx: SelectionContext, req: PlacementRequest, rng: Rng, allowServer?: (s: ServerState) => boolean): Candidate[] {
  const cands: Candidate[] = [];
  for (const id of sampleAvailable(ctx, req.R * req.m, rng, allowServer)) {
    const c = candidateFor(ctx, id);
    if (c) cands.push(c);
  }
  for (const c of dataLocalCandidates(ctx, req.R * req.m, rng)) {
    if (allowServer === undefined || allowServer(c.server)) cands.push(c);
  }
  return cands;
}

/** Free RUs on the job's data servers join the candidates: locality is then judged by quality. */
function dataLocalCandidates(ctx: SelectionContext, limit: number, rng: Rng): Candidate[] {
  const servers = ctx.req.constraints.dataServers;
  if (!servers || servers.length === 0) return [];
  const ids: number[] = [];
  for (const sid of servers) {
    const s = ctx.state.server(sid);
    if (!s || !ctx.eligibleServer(s)) continue;
    for (let i = 0; i < s.ruCount; i++)
      if (s.available(i) && !ctx.taken.has(s.base + i) && (!ctx.req.only || ctx.req.only.has(s.base + i))) ids.push(s.base + i);
  }
  shuffleInPlace(ids, rng);
  const out: Candidate[] = [];
  for (const id of ids.slice(0, limit)) {
    const c = candidateFor(ctx, id);
    if (c) out.push(c);
  }
  return out;
}
