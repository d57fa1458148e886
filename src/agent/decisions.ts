/**
 * What a decision record keeps when it is stored or explained: every field, but at most
 * MAX_PLACEMENTS placements (the first ones), with the number left out. A 100,000-task job's full
 * list would exceed etcd's request size and gRPC's message size; its tasks carry their RUs anyway.
 */
import type { DecisionRecord } from './agent.ts';

export const MAX_PLACEMENTS = 200;

export function trimDecision(r: DecisionRecord, max = MAX_PLACEMENTS): DecisionRecord {
  if (r.placements.length <= max) return r;
  return { ...r, placements: r.placements.slice(0, max), omittedPlacements: (r.omittedPlacements ?? 0) + r.placements.length - max };
}
