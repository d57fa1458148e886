/**
 * Batch sampling and selection (paper §3.4): draw R candidates per task, score them with Q, and
 * pick placements under the job's constraints and locality. The parts: selection.ts (request,
 * result, scoring context, greedy pick), candidates.ts (uniform draws), spread.ts, pack.ts,
 * one-group.ts (a required pack) and preempt.ts.
 */
import type { Rng } from '../util/rng.ts';
import type { RuIndex } from './ru-index.ts';
import { initialCandidates } from './candidates.ts';
import { hardPack } from './feasibility.ts';
import { selectOneGroup } from './one-group.ts';
import { selectPacked } from './pack.ts';
import { preemptWhereNeeded } from './preempt.ts';
import { SelectionContext, pickBest, toPick, type PlacementRequest, type SelectionResult } from './selection.ts';
import { selectSpread } from './spread.ts';

export type { Pick, PlacementRequest, SelectionResult } from './selection.ts';
export { drawCandidates } from './candidates.ts';

/**
 * Batch sampling (paper §3.3, Fig. 5): draw R·m distinct candidates uniformly from the eligible
 * available RUs, score each, keep the m best. Picks on one server change the neighbourhood of the
 * other candidates on that server, so a candidate is re-scored against the job's own earlier picks
 * before it is taken (two tasks of one job are never scored against the same neighbourhood).
 */
export function selectPlacements(state: RuIndex, req: PlacementRequest, rng: Rng): SelectionResult {
  const ctx = new SelectionContext(state, req);
  const out: SelectionResult = { picks: [], candidatesSeen: 0, preemptionCandidates: 0 };
  if (req.m <= 0) return out;

  if (hardPack(req.locality)) {
    // All m in one group or none; no preemption (a victim elsewhere would split the job).
    selectOneGroup(ctx, req, rng, out);
    return out;
  }
  if (req.locality.mode === 'pack') selectPacked(ctx, req, rng, out);
  else selectIndependent(ctx, req, rng, out);

  // A selection restricted to given RUs (`only`) takes what they offer and displaces nobody.
  if (req.preempt && !req.only) preemptWhereNeeded(ctx, req, rng, out);
  return out;
}

function selectIndependent(ctx: SelectionContext, req: PlacementRequest, rng: Rng, out: SelectionResult): void {
  if (req.locality.mode === 'spread') {
    selectSpread(ctx, req, rng, out);
    return;
  }
  const cands = initialCandidates(ctx, req, rng);
  out.candidatesSeen += cands.length;
  for (const c of pickBest(ctx, cands, req.m, undefined, new Set())) out.picks.push(toPick(c));
}
