/**
 * Locality "spread": the groups (servers or racks) a job holds, and the selection that keeps its
 * tasks in distinct groups. Preemption uses the same groups for a required spread.
 */
import type { Rng } from '../util/rng.ts';
import type { ServerState } from './ru-index.ts';
import { hardSpread } from './feasibility.ts';
import { initialCandidates, sampleAvailable } from './candidates.ts';
import { candidateFor, pickBest, toPick, type Candidate, type PlacementRequest, type SelectionContext, type SelectionResult } from './selection.ts';

/** Rounds of fresh draws a spread makes for tasks whose candidates all fell in closed groups. */
const SPREAD_ROUNDS = 4;

/** The spread group of a server: itself, or its rack. */
export function spreadGroupOf(req: PlacementRequest): (s: ServerState) => string {
  return req.locality.scope === 'rack' ? (s) => s.rack : (s) => s.id;
}

/**
 * Groups (servers or racks) the job holds now, in the cluster view: its busy, reserved and claimed
 * RUs. With a hard spread they are closed to this call; a preference avoids them first.
 */
export function heldGroups(ctx: SelectionContext, req: PlacementRequest): Set<string> {
  return new Set(ctx.state.jobGroups(req.jobId, req.locality.scope).keys());
}

/**
 * Locality "spread": one task per group (server or rack), never in a group the job already holds.
 * Candidates in closed groups are deferred; fresh draws (restricted to open groups) top up the
 * rest. A required spread returns fewer than m picks rather than share a group. A preference
 * (`required: false`) then shares: first groups the job holds but this call did not pick, then any.
 */
export function selectSpread(ctx: SelectionContext, req: PlacementRequest, rng: Rng, out: SelectionResult): void {
  const groupOf = spreadGroupOf(req);
  const groupOfCand = (c: Candidate): string => groupOf(c.server);
  const hard = hardSpread(req.locality);
  // Held groups, then also the groups picked below: pickBest adds each pick's group.
  const closed = heldGroups(ctx, req);
  const open = (s: ServerState): boolean => !closed.has(groupOf(s));
  // A preference keeps candidates in held groups for the sharing steps at the end.
  const cands = initialCandidates(ctx, req, rng, hard ? open : undefined);
  out.candidatesSeen += cands.length;
  const mine = new Set<string>(); // groups picked in this call
  let picked = pickBest(ctx, cands, req.m, groupOfCand, closed);
  for (const c of picked) mine.add(groupOfCand(c));
  // Every fresh candidate is in an open group, so each round picks at least one while any is left.
  for (let round = 0; round < SPREAD_ROUNDS && picked.length < req.m; round++) {
    const more = sampleAvailable(ctx, req.R * (req.m - picked.length), rng, open)
      .map((id) => candidateFor(ctx, id))
      .filter((c): c is Candidate => c !== undefined);
    if (more.length === 0) break;
    out.candidatesSeen += more.length;
    cands.push(...more);
    const got = pickBest(ctx, cands, req.m - picked.length, groupOfCand, closed);
    for (const c of got) mine.add(groupOfCand(c));
    picked = picked.concat(got);
  }
  if (!hard && picked.length < req.m) {
    // Groups the job holds from earlier calls, one task each, before doubling up anywhere.
    const got = pickBest(ctx, cands, req.m - picked.length, groupOfCand, mine);
    picked = picked.concat(got);
    if (picked.length < req.m) picked = picked.concat(pickBest(ctx, cands, req.m - picked.length, undefined, mine));
  }
  for (const c of picked) out.picks.push(toPick(c));
}
