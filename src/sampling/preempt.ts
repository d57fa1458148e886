/**
 * Preemption (paper §5.3), the last step of a selection for a job allowed to displace others: it
 * fills missing picks and replaces unacceptable ones with tasks of strictly lower priority.
 */
import type { Rng } from '../util/rng.ts';
import { hardSpread } from './feasibility.ts';
import type { IndexedSet } from './indexed-set.ts';
import { drawDistinct } from './candidates.ts';
import { heldGroups, spreadGroupOf } from './spread.ts';
import { candidateFor, pickBest, toPick, type Candidate, type PlacementRequest, type SelectionContext, type SelectionResult } from './selection.ts';

/**
 * Priorities (paper §5.3): a job above others may displace strictly lower-priority tasks when the
 * free RUs found are not acceptable or too few. Victims are sampled like free RUs (R per missing
 * or unacceptable pick) and scored as if their occupant had left; only acceptable ones are taken.
 */
export function preemptWhereNeeded(ctx: SelectionContext, req: PlacementRequest, rng: Rng, out: SelectionResult): void {
  const unacceptable = out.picks.filter((p) => !p.quality.acceptable);
  const missing = req.m - out.picks.length;
  const need = missing + unacceptable.length;
  if (need <= 0) return;
  const pools: IndexedSet[] = [];
  for (const [prio, set] of ctx.state.busyByPriority) if (prio < req.priority && set.size > 0) pools.push(set);
  if (pools.length === 0) return;
  // A required spread: victims only in groups the job neither holds nor got a pick in. (A free
  // pick replaced below frees its group too late to count; the next decision may use it.)
  const spread = hardSpread(req.locality);
  const groupOf = spreadGroupOf(req);
  const closed = spread ? heldGroups(ctx, req) : new Set<string>();
  if (spread) for (const p of out.picks) closed.add(groupOf(p.server));
  const ids = drawDistinct(ctx, pools, req.R * need, rng, (id) => {
    const s = ctx.state.serverOfRu(id);
    if (!s || !ctx.eligibleServer(s) || s.down || s.blocked || s.cordoned) return false;
    if (spread && closed.has(groupOf(s))) return false;
    const occ = s.occupants[id - s.base];
    return (
      occ !== null && occ !== undefined && occ.state === 'busy' && occ.priority < req.priority && (req.mayDisplace === undefined || req.mayDisplace(occ.job))
    );
  });
  const all: Candidate[] = [];
  for (const id of ids) {
    const s = ctx.state.serverOfRu(id);
    const occ = s?.occupants[id - (s?.base ?? 0)];
    if (!s || !occ) continue;
    const c = candidateFor(ctx, id, occ);
    if (c) all.push(c);
  }
  out.candidatesSeen += ids.length;
  out.preemptionCandidates += ids.length;
  const groupOfCand = spread ? (c: Candidate): string => groupOf(c.server) : undefined;
  // Missing slots take the best victims found: a job that outranks everything running must not
  // starve. Replacing a free but unacceptable pick is only worth it for an acceptable victim.
  const fill = pickBest(ctx, all, missing, groupOfCand, closed);
  for (const c of fill) out.picks.push(toPick(c));
  const victims = pickBest(
    ctx,
    all.filter((c) => c.quality.acceptable && !ctx.taken.has(c.id)),
    unacceptable.length,
    groupOfCand,
    closed,
  );
  let v = 0;
  unacceptable.sort((a, b) => a.score - b.score);
  for (const bad of unacceptable) {
    if (v >= victims.length) break;
    const k = out.picks.indexOf(bad);
    if (k < 0) continue;
    ctx.taken.delete(bad.id);
    out.picks[k] = toPick(victims[v++] as Candidate);
  }
}
