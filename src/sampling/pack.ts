/**
 * Locality "pack" (paper Fig. 5b): sampled RUs stand for their server (or rack), each group is
 * judged by the best RUs it can give the job, and the best group takes what it can.
 */
import { compareScores, type RuScore } from '../quality/index.ts';
import type { Rng } from '../util/rng.ts';
import type { ServerState } from './ru-index.ts';
import { sampleAvailable, shuffleInPlace } from './candidates.ts';
import { better, candidateFor, pickBest, SelectionContext, toPick, type Candidate, type PlacementRequest, type SelectionResult } from './selection.ts';

/**
 * Locality "pack" (Fig. 5b): each sampled RU stands for its server (or rack); the group is judged
 * by the aggregate quality of the best RUs it can give the job, discounted by the share of the
 * remaining tasks it cannot hold. The best group takes what it can; repeat for the rest.
 */
export function selectPacked(ctx: SelectionContext, req: PlacementRequest, rng: Rng, out: SelectionResult): void {
  let remaining = req.m;
  const dataSet = new Set(req.constraints.dataServers ?? []);
  const triedGroups = new Set<string>();
  let rounds = 0;
  while (remaining > 0 && rounds < 4 * req.m + 8) {
    rounds++;
    const anchors = sampleAvailable(ctx, req.R, rng);
    const dataServers = (req.constraints.dataServers ?? []).map((id) => ctx.state.server(id)).filter((s): s is ServerState => s !== undefined);
    const groups = new Map<string, ServerState[]>();
    for (const s of dataServers) groupKey(req, s, groups, ctx);
    for (const id of anchors) {
      const s = ctx.state.serverOfRu(id);
      if (s) groupKey(req, s, groups, ctx);
    }
    let best: { key: string; picks: Candidate[]; agg: number; quality: RuScore; local: boolean } | undefined;
    for (const [key, servers] of groups) {
      if (triedGroups.has(key)) continue;
      const cands: Candidate[] = [];
      for (const s of servers) {
        if (!ctx.eligibleServer(s)) continue;
        for (let i = 0; i < s.ruCount; i++) {
          if (s.available(i) && !ctx.taken.has(s.base + i) && (!req.only || req.only.has(s.base + i))) {
            const c = candidateFor(ctx, s.base + i);
            if (c) cands.push(c);
          }
        }
      }
      // Free RUs of one server score alike; enumerated in index order, every agent that chose
      // the server would take the same RU and all but one would conflict. Shuffle so equal
      // scores are broken at random, as in the independent path.
      shuffleInPlace(cands, rng);
      out.candidatesSeen += cands.length;
      if (cands.length === 0) continue;
      // Trial pick on a scratch context so the group's own picks count against each other.
      const trial = new SelectionContext(ctx.state, req);
      for (const id of ctx.taken) trial.taken.add(id);
      for (const [srv, ex] of ctx.extra) trial.extra.set(srv, { sum: [...ex.sum], count: ex.count, version: ex.version });
      const picks = pickBest(trial, cands, remaining, undefined, new Set());
      if (picks.length === 0) continue;
      const mean = picks.reduce((a, c) => a + c.score, 0) / picks.length;
      const agg = mean * (picks.length / remaining);
      const worst = picks.reduce((w, c) => (better(c, w) < 0 ? c : w));
      // A group holding the job's data wins over remote ones as long as every pick in it is
      // acceptable: locality then costs no interference.
      const local = dataSet.size > 0 && servers.some((x) => dataSet.has(x.id)) && picks.every((c) => c.quality.acceptable);
      if (
        !best ||
        (local && !best.local) ||
        (local === best.local && (agg > best.agg || (agg === best.agg && compareScores(worst.quality, best.quality) > 0)))
      ) {
        best = { key, picks, agg, quality: worst.quality, local };
      }
    }
    if (!best) {
      if (anchors.length === 0) break;
      continue;
    }
    triedGroups.add(best.key);
    for (const c of best.picks) {
      // Re-score on the real context (same neighbourhood as in the trial) and take it.
      const { score, quality } = ctx.score(c.server, c.index);
      c.score = score;
      c.quality = quality;
      ctx.taken.add(c.id);
      ctx.commitLocal(c.server);
      out.picks.push(toPick(c));
    }
    remaining -= best.picks.length;
  }
}

function groupKey(req: PlacementRequest, s: ServerState, groups: Map<string, ServerState[]>, ctx: SelectionContext): void {
  if (req.locality.scope === 'rack') {
    const key = `rack:${s.rack}`;
    if (!groups.has(key)) groups.set(key, ctx.state.racks.get(s.rack) ?? [s]);
  } else {
    const key = `server:${s.id}`;
    if (!groups.has(key)) groups.set(key, [s]);
  }
}
