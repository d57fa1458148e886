/**
 * Why a placement commit conflicted, from what its failed transaction read back: which of the
 * picks changed since the decision read them, and who holds them now. Counted per cause
 * (`tarcil_commit_conflicts_by_cause_total`), so that an operator can tell a race between
 * front-ends for the same few free RUs from a view that lags behind the store.
 */
import type { RuRecord, RuRef } from '../model/types.ts';
import type { Keys } from '../state/keys.ts';
import { parseJson } from '../state/records.ts';
import type { KeyValue } from '../store/types.ts';

/**
 * - `front-end`: another front-end's agent placed a task (or a gang's reservation) on a pick;
 * - `sibling`: another agent of this front-end did (their claims in the shared view should keep them apart);
 * - `stale`: a pick changed otherwise (placed and freed again since the view saw it, or, under the
 *   `server` scope, another RU of its server was placed);
 * - `other`: no pick changed: the fence, a quota, a task record or a move's source did.
 */
export type ConflictCause = 'front-end' | 'sibling' | 'stale' | 'other';

export const CONFLICT_CAUSES: readonly ConflictCause[] = ['front-end', 'sibling', 'stale', 'other'];

/** The process part of an agent id (`<process>/a<n>`). */
function processOf(agent: string): string {
  const slash = agent.lastIndexOf('/');
  return slash < 0 ? agent : agent.slice(0, slash);
}

/**
 * What a failed placement transaction read back, each RU record parsed once:
 * - `cause`, the conflict's: the most telling among the changed picks (another front-end, then a
 *   sibling, then stale). A pick changed if the store's record, as read back, is not at the
 *   revision the commit compared (`compared[i]`; gone counts as changed unless it was compared
 *   absent), or if the view no longer shows it as the decision saw it (`unchanged(i)` false). The
 *   store decides even when the view lags behind it: a view that has not yet seen the rival's
 *   placement must not make a pick conflict look like a fence's;
 * - among the picks another front-end's agent now holds, the one placed last (`rivalPick`, its
 *   index) and when (`rivalSince`, the rival's clock); both undefined when none does.
 */
export function conflictRead(
  agent: string,
  keys: Keys,
  refs: readonly RuRef[],
  compared: readonly number[],
  reads: readonly (KeyValue[] | null | undefined)[],
  unchanged: (i: number) => boolean,
): { cause: ConflictCause; rivalSince: number | undefined; rivalPick: number | undefined } {
  const byKey = new Map<string, KeyValue>();
  for (const r of reads) for (const kv of r ?? []) byKey.set(kv.key, kv);
  const mine = processOf(agent);
  let cause: ConflictCause = 'other';
  let rivalSince: number | undefined;
  let rivalPick: number | undefined;
  refs.forEach((ref, i) => {
    const kv = byKey.get(keys.ru(ref));
    const rec = parseJson<RuRecord & { agent?: string }>(kv);
    const holder = rec && (rec.state === 'busy' || rec.state === 'reserved') && rec.agent !== undefined ? processOf(rec.agent) : undefined;
    if (holder !== undefined && holder !== mine && typeof rec?.since === 'number' && (rivalSince === undefined || rec.since > rivalSince)) {
      rivalSince = rec.since;
      rivalPick = i;
    }
    if (cause === 'front-end') return;
    const inStore = (kv?.modRevision ?? 0) === compared[i];
    if (inStore && unchanged(i)) return;
    if (holder !== undefined && holder !== mine) cause = 'front-end';
    else if (holder !== undefined && rec?.agent !== agent) cause = 'sibling';
    else if (cause === 'other') cause = 'stale';
  });
  return { cause, rivalSince, rivalPick };
}

/**
 * Of a conflict between front-ends, where the rival's pick stood between its placement and this
 * commit's build:
 * - `turn`: the pick's server changed home in between (handoff.ts), and this view had not yet seen
 *   the rival's commit when it sampled the server as its own;
 * - `split`: the same home throughout, while this front-end's sampling was split among the homes
 *   (the two disagreed on the homes, or the pick was not bound by the split: a gang, a move);
 * - `unsplit`: the same home throughout, the sampling not split here (free RUs were not scarce in this view).
 */
export type FrontEndRace = 'turn' | 'split' | 'unsplit';

export const FRONT_END_RACES: readonly FrontEndRace[] = ['turn', 'split', 'unsplit'];

/** Which race a conflict between front-ends was (FrontEndRace): whether the pick's server changed home in between, and whether the sampling was split here. */
export function frontEndRace(moved: boolean, split: boolean): FrontEndRace {
  if (moved) return 'turn';
  return split ? 'split' : 'unsplit';
}
