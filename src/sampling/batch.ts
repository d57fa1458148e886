/**
 * Batch sampling and selection (paper §3.4): draw R candidates per task, score them with Q, and
 * pick placements under the job's constraints and locality.
 */
import { N_RESOURCES, type Constraints, type LocalityMode, type TopologyScope } from '../model/types.ts';
import {
  compareScores,
  contention,
  scoreRu,
  type JobTarget,
  type QualityForm,
  type RuScore,
} from '../quality/index.ts';
import type { Rng } from '../util/rng.ts';
import type { ClusterState, Occupant, ServerState } from './cluster-state.ts';
import { hardSpread, serverMatches } from './feasibility.ts';
import type { IndexedSet } from './indexed-set.ts';

/** What the selection needs to know about a job (a subset of JobSpec, plus its target). */
export interface PlacementRequest {
  jobId: string;
  target: JobTarget;
  caused: readonly number[];
  priority: number;
  platformPerf: Readonly<Record<string, number>>;
  /**
   * With mode 'spread' and `required` not false, no two tasks of the job share a server (or rack):
   * groups where the job already has occupants (ClusterState.jobGroups) are never picked, and
   * fewer than m picks come back when there are not enough other groups.
   */
  locality: { mode: LocalityMode; scope: TopologyScope; required?: boolean };
  constraints: Constraints;
  /** Number of RUs to place now. */
  m: number;
  /** Sample size per RU. */
  R: number;
  form?: QualityForm;
  /** How strongly platform speed weighs against interference quality (score = Q · speed^w). */
  platformWeight?: number;
  /** May displace busy RUs of strictly lower priority when no acceptable free RU is found. */
  preempt?: boolean;
  /** RU ids that must not be chosen (already picked in this job's current attempt). */
  exclude?: ReadonlySet<number>;
}

export interface Pick {
  id: number;
  server: ServerState;
  index: number;
  score: number;
  quality: RuScore;
  /** Revisions read when the pick was scored: the commit compares them. */
  ruRev: number;
  epochRev: number;
  /** Set when the pick displaces a lower-priority task. */
  victim?: Occupant;
}

export interface SelectionResult {
  picks: Pick[];
  candidatesSeen: number;
  /** Candidates drawn from the busy lower-priority population. */
  preemptionCandidates: number;
}

interface Candidate {
  id: number;
  server: ServerState;
  index: number;
  score: number;
  quality: RuScore;
  scoredAt: number; // server-local version of the extra load seen when scored
  victim?: Occupant;
}

/**
 * Batch sampling (paper §3.3, Fig. 5): draw R·m distinct candidates uniformly from the eligible
 * available RUs, score each, keep the m best. Picks on one server change the neighbourhood of the
 * other candidates on that server, so a candidate is re-scored against the job's own earlier picks
 * before it is taken (two tasks of one job are never scored against the same neighbourhood).
 */
export function selectPlacements(state: ClusterState, req: PlacementRequest, rng: Rng): SelectionResult {
  const ctx = new SelectionContext(state, req);
  const out: SelectionResult = { picks: [], candidatesSeen: 0, preemptionCandidates: 0 };
  if (req.m <= 0) return out;

  if (req.locality.mode === 'pack') selectPacked(ctx, req, rng, out);
  else selectIndependent(ctx, req, rng, out);

  if (req.preempt) preemptWhereNeeded(ctx, req, rng, out);
  return out;
}

class SelectionContext {
  readonly extra = new Map<ServerState, { sum: number[]; count: number; version: number }>();
  readonly taken = new Set<number>();
  readonly C = new Array<number>(N_RESOURCES).fill(0);
  readonly maxPerf: number;

  constructor(
    readonly state: ClusterState,
    readonly req: PlacementRequest,
  ) {
    let max = 0;
    const allowed = req.constraints.platforms;
    for (const [p, v] of Object.entries(req.platformPerf)) {
      if (allowed && !allowed.includes(p)) continue;
      if (v > max) max = v;
    }
    this.maxPerf = max > 0 ? max : 1;
    if (req.exclude) for (const id of req.exclude) this.taken.add(id);
  }

  eligibleServer(s: ServerState): boolean {
    return serverMatches(s.spec, this.req.constraints);
  }

  extraVersion(s: ServerState): number {
    return this.extra.get(s)?.version ?? 0;
  }

  /** Scores RU i of server s for this job, counting the job's own earlier picks on s. */
  score(s: ServerState, i: number, victim?: Occupant): { score: number; quality: RuScore } {
    const ex = this.extra.get(s);
    let sum: readonly number[] = s.sum;
    if (ex) {
      const merged = new Array<number>(N_RESOURCES);
      for (let r = 0; r < N_RESOURCES; r++) merged[r] = (s.sum[r] as number) + (ex.sum[r] as number);
      sum = merged;
    }
    // A victim's own load leaves with it; a free RU has no self term.
    contention(sum, s.ruCount, victim ? victim.caused : null, this.C);
    const quality = scoreRu(this.C, this.req.target, this.req.form ?? 'monotone');
    const perf = (this.req.platformPerf[s.spec.platform] ?? this.maxPerf) / this.maxPerf;
    const w = this.req.platformWeight ?? 1;
    const factor = w === 1 ? perf : Math.pow(perf, w);
    return { score: quality.Q * factor, quality };
  }

  /** Counts a pick on s in the neighbourhood of later candidates. */
  commitLocal(s: ServerState): void {
    let ex = this.extra.get(s);
    if (!ex) {
      ex = { sum: new Array<number>(N_RESOURCES).fill(0), count: 0, version: 0 };
      this.extra.set(s, ex);
    }
    for (let r = 0; r < N_RESOURCES; r++) ex.sum[r] = (ex.sum[r] as number) + (this.req.caused[r] ?? 0);
    ex.count++;
    ex.version++;
  }
}

function better(a: Candidate, b: Candidate): number {
  if (a.score !== b.score) return a.score - b.score;
  return compareScores(a.quality, b.quality);
}

function toPick(c: Candidate): Pick {
  const p: Pick = {
    id: c.id,
    server: c.server,
    index: c.index,
    score: c.score,
    quality: c.quality,
    ruRev: c.server.ruRevs[c.index] as number,
    epochRev: c.server.epochRev,
  };
  if (c.victim) p.victim = c.victim;
  return p;
}

/**
 * Draws up to k distinct available RUs satisfying the job's hard constraints, uniformly. Platform
 * constraints select per-platform pools (weighted by size, so the union stays uniform); attribute
 * constraints are checked by rejection and, if most RUs fail them, by one scan of the pools.
 */
function sampleAvailable(ctx: SelectionContext, k: number, rng: Rng, allowServer?: (s: ServerState) => boolean): number[] {
  const state = ctx.state;
  const c = ctx.req.constraints;
  const pools: IndexedSet[] = [];
  if (c.platforms) {
    for (const p of c.platforms) {
      const set = state.availableByPlatform.get(p);
      if (set && set.size > 0) pools.push(set);
    }
  } else {
    pools.push(state.available);
  }
  return drawDistinct(ctx, pools, k, rng, (id) => {
    const s = state.serverOfRu(id);
    return s !== undefined && ctx.eligibleServer(s) && s.available(id - s.base) && (allowServer === undefined || allowServer(s));
  });
}

function drawDistinct(
  ctx: SelectionContext,
  pools: readonly IndexedSet[],
  k: number,
  rng: Rng,
  ok: (id: number) => boolean,
): number[] {
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
    let pool = pools[0] as IndexedSet;
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

function shuffleInPlace<T>(a: T[], rng: Rng): void {
  for (let i = a.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    const t = a[i] as T;
    a[i] = a[j] as T;
    a[j] = t;
  }
}

/** Uniform draw of k distinct eligible available RU ids (used by the x^R measurements). */
export function drawCandidates(state: ClusterState, req: PlacementRequest, k: number, rng: Rng): number[] {
  return sampleAvailable(new SelectionContext(state, req), k, rng);
}

function candidateFor(ctx: SelectionContext, id: number, victim?: Occupant): Candidate | undefined {
  const s = ctx.state.serverOfRu(id);
  if (!s) return undefined;
  const index = id - s.base;
  const { score, quality } = ctx.score(s, index, victim);
  const c: Candidate = { id, server: s, index, score, quality, scoredAt: ctx.extraVersion(s) };
  if (victim) c.victim = victim;
  return c;
}

/** Greedy pick from scored candidates, re-scoring those whose server got one of our picks. */
function pickBest(
  ctx: SelectionContext,
  cands: Candidate[],
  want: number,
  groupOf: ((c: Candidate) => string) | undefined,
  usedGroups: Set<string>,
): Candidate[] {
  cands.sort((a, b) => better(b, a));
  const picked: Candidate[] = [];
  const deferred: Candidate[] = [];
  while (picked.length < want && cands.length > 0) {
    const c = cands.shift() as Candidate;
    if (ctx.taken.has(c.id)) continue;
    if (c.scoredAt !== ctx.extraVersion(c.server)) {
      const { score, quality } = ctx.score(c.server, c.index, c.victim);
      c.score = score;
      c.quality = quality;
      c.scoredAt = ctx.extraVersion(c.server);
      insertSorted(cands, c);
      continue;
    }
    if (groupOf && usedGroups.has(groupOf(c))) {
      deferred.push(c);
      continue;
    }
    picked.push(c);
    ctx.taken.add(c.id);
    ctx.commitLocal(c.server);
    if (groupOf) usedGroups.add(groupOf(c));
  }
  cands.unshift(...deferred);
  return picked;
}

function insertSorted(cands: Candidate[], c: Candidate): void {
  let lo = 0;
  let hi = cands.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (better(cands[mid] as Candidate, c) >= 0) lo = mid + 1;
    else hi = mid;
  }
  cands.splice(lo, 0, c);
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

/** R·m uniform candidates, plus free RUs on the job's data servers; allowServer narrows both. */
function initialCandidates(ctx: SelectionContext, req: PlacementRequest, rng: Rng, allowServer?: (s: ServerState) => boolean): Candidate[] {
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

/** Rounds of fresh draws a spread makes for tasks whose candidates all fell in closed groups. */
const SPREAD_ROUNDS = 4;

/** The spread group of a server: itself, or its rack. */
function spreadGroupOf(req: PlacementRequest): (s: ServerState) => string {
  return req.locality.scope === 'rack' ? (s) => s.rack : (s) => s.id;
}

/**
 * Groups (servers or racks) the job holds now, in the cluster view: its busy, reserved and claimed
 * RUs. With a hard spread they are closed to this call; a preference avoids them first.
 */
function heldGroups(ctx: SelectionContext, req: PlacementRequest): Set<string> {
  return new Set(ctx.state.jobGroups(req.jobId, req.locality.scope).keys());
}

/**
 * Locality "spread": one task per group (server or rack), never in a group the job already holds.
 * Candidates in closed groups are deferred; fresh draws (restricted to open groups) top up the
 * rest. A required spread returns fewer than m picks rather than share a group. A preference
 * (`required: false`) then shares: first groups the job holds but this call did not pick, then any.
 */
function selectSpread(ctx: SelectionContext, req: PlacementRequest, rng: Rng, out: SelectionResult): void {
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

/** Free RUs on the job's data servers join the candidates: locality is then judged by quality. */
function dataLocalCandidates(ctx: SelectionContext, limit: number, rng: Rng): Candidate[] {
  const servers = ctx.req.constraints.dataServers;
  if (!servers || servers.length === 0) return [];
  const ids: number[] = [];
  for (const sid of servers) {
    const s = ctx.state.server(sid);
    if (!s || !ctx.eligibleServer(s)) continue;
    for (let i = 0; i < s.ruCount; i++) if (s.available(i) && !ctx.taken.has(s.base + i)) ids.push(s.base + i);
  }
  shuffleInPlace(ids, rng);
  const out: Candidate[] = [];
  for (const id of ids.slice(0, limit)) {
    const c = candidateFor(ctx, id);
    if (c) out.push(c);
  }
  return out;
}

/**
 * Locality "pack" (Fig. 5b): each sampled RU stands for its server (or rack); the group is judged
 * by the aggregate quality of the best RUs it can give the job, discounted by the share of the
 * remaining tasks it cannot hold. The best group takes what it can; repeat for the rest.
 */
function selectPacked(ctx: SelectionContext, req: PlacementRequest, rng: Rng, out: SelectionResult): void {
  let remaining = req.m;
  const dataSet = new Set(req.constraints.dataServers ?? []);
  const triedGroups = new Set<string>();
  let rounds = 0;
  while (remaining > 0 && rounds < 4 * req.m + 8) {
    rounds++;
    const anchors = sampleAvailable(ctx, req.R, rng);
    const dataServers = (req.constraints.dataServers ?? [])
      .map((id) => ctx.state.server(id))
      .filter((s): s is ServerState => s !== undefined);
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
          if (s.available(i) && !ctx.taken.has(s.base + i)) {
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

/**
 * Priorities (paper §5.3): a job above others may displace strictly lower-priority tasks when the
 * free RUs found are not acceptable or too few. Victims are sampled like free RUs (R per missing
 * or unacceptable pick) and scored as if their occupant had left; only acceptable ones are taken.
 */
function preemptWhereNeeded(ctx: SelectionContext, req: PlacementRequest, rng: Rng, out: SelectionResult): void {
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
    if (!s || !ctx.eligibleServer(s) || s.down || s.blocked) return false;
    if (spread && closed.has(groupOf(s))) return false;
    const occ = s.occupants[id - s.base];
    return occ !== null && occ !== undefined && occ.state === 'busy' && occ.priority < req.priority;
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
