/**
 * What one selection works with: the request and its result, the candidates it scores, and the
 * per-call context that scores an RU against the job's own earlier picks and takes the best
 * candidates greedily (re-scoring those whose server got one of the job's picks).
 */
import { N_RESOURCES, type Constraints, type LocalityMode, type TopologyScope } from '../model/types.ts';
import { compareScores, contention, jobTarget, NEIGHBOUR_HARM, scoreRu, twoSided, type JobTarget, type QualityForm, type RuScore } from '../quality/index.ts';
import type { RuIndex, Occupant, ServerState } from './ru-index.ts';
import { own } from '../util/dict.ts';
import { internVector } from '../util/intern.ts';
import { serverMatches } from './feasibility.ts';

/** What the selection needs to know about a job (a subset of JobSpec, plus its target). */
export interface PlacementRequest {
  jobId: string;
  target: JobTarget;
  caused: readonly number[];
  priority: number;
  platformPerf: Readonly<Record<string, number>>;
  /**
   * With mode 'spread' and `required` not false, no two tasks of the job share a server (or rack):
   * groups where the job already has occupants (RuIndex.jobGroups) are never picked, and
   * fewer than m picks come back when there are not enough other groups.
   */
  locality: { mode: LocalityMode; scope: TopologyScope; required?: boolean };
  constraints: Constraints;
  /** Number of RUs to place now. */
  m: number;
  /** Sample size per RU. */
  R: number;
  form?: QualityForm;
  /**
   * How strongly platform speed weighs against interference quality: score = speed^w on an
   * acceptable RU (Q, the fit, breaks ties), (Q / T_W) · speed^w below T_W.
   */
  platformWeight?: number;
  /** May displace busy RUs of strictly lower priority when no acceptable free RU is found. */
  preempt?: boolean;
  /** With preempt: which occupants' jobs it may displace besides the priority rule (fair share among namespaces). */
  mayDisplace?: (victimJob: string) => boolean;
  /** RU ids that must not be chosen (already picked in this job's current attempt). */
  exclude?: ReadonlySet<number>;
  /**
   * When set, the only RU ids that may be chosen (a freed RU bound to this front-end, see
   * agent/handoff.ts): candidates are drawn among them alone, and nothing is preempted.
   */
  only?: ReadonlySet<number>;
  /**
   * When set, the only servers whose RUs may be chosen or displaced (the front-end's share of a
   * nearly full cell, agent/handoff.ts partition()).
   */
  allow?: (server: ServerState) => boolean;
  /**
   * Judge an RU also by what the newcomer does to the tasks already on its server (each resident's
   * quality once the newcomer's caused pressure joins its contention); off: the paper's one-sided Q.
   */
  twoSided?: boolean;
  /** Two-sided: how much the neighbours' side weighs where no RU is acceptable (quality/index.ts NEIGHBOUR_WEIGHT, the default). */
  neighbourWeight?: number;
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

/** An RU scored for this job (against a victim's departure when it would displace one). */
export interface Candidate {
  id: number;
  server: ServerState;
  index: number;
  score: number;
  quality: RuScore;
  scoredAt: number; // server-local version of the extra load seen when scored
  victim?: Occupant;
}

/** Residents' targets, by their caused vector (an occupant keeps its vector while it stays). */
const residentTargets = new WeakMap<readonly number[], JobTarget>();

function residentTarget(caused: readonly number[]): JobTarget {
  let t = residentTargets.get(caused);
  if (!t) {
    t = jobTarget(caused);
    residentTargets.set(caused, t);
  }
  return t;
}

/**
 * The neighbours' side of a free RU of a server for a newcomer's caused vector (interned), as
 * scored at the server's occupancy `version`: the same for every free RU of the server, and for
 * every job of that vector, until a task starts or ends there. On a nearly full cell the
 * decisions draw again and again from the same few free RUs, each scoring every resident beside
 * them; kept, a server's residents are scored once per workload and change of occupancy.
 */
interface NeighbourSide {
  version: number;
  form: QualityForm;
  worst: number;
  allOk: boolean;
  n: number;
}
const neighbourSides = new WeakMap<ServerState, Map<readonly number[], NeighbourSide>>();
/** Vectors kept per server: more than a cell's workloads; past it the server's entries start again. */
const SIDES_PER_SERVER = 32;
/** A job's caused array → its interned equal, so that the decisions of one job intern it once. */
const sideKeys = new WeakMap<readonly number[], readonly number[]>();

function sideKey(caused: readonly number[]): readonly number[] {
  let k = sideKeys.get(caused);
  if (!k) sideKeys.set(caused, (k = internVector(caused)));
  return k;
}

/** One selection call: the RUs it has taken and the load its own picks add to their servers. */
export class SelectionContext {
  readonly extra = new Map<ServerState, { sum: number[]; count: number; version: number }>();
  readonly taken = new Set<number>();
  readonly C = new Array<number>(N_RESOURCES).fill(0);
  private readonly Cr = new Array<number>(N_RESOURCES).fill(0);
  readonly maxPerf: number;
  /** The job's caused vector, interned: the key of its neighbours' sides. */
  private readonly causedKey: readonly number[];

  constructor(
    readonly state: RuIndex,
    readonly req: PlacementRequest,
  ) {
    let max = 0;
    const allowed = req.constraints.platforms;
    for (const [p, v] of Object.entries(req.platformPerf)) {
      if (allowed && !allowed.includes(p)) continue;
      if (v > max) max = v;
    }
    this.maxPerf = max > 0 ? max : 1;
    this.causedKey = req.twoSided ? sideKey(req.caused) : req.caused;
    if (req.exclude) for (const id of req.exclude) this.taken.add(id);
  }

  eligibleServer(s: ServerState): boolean {
    return serverMatches(s.spec, this.req.constraints) && (this.req.allow === undefined || this.req.allow(s));
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
    let quality = scoreRu(this.C, this.req.target, this.req.form ?? 'monotone');
    if (this.req.twoSided) quality = this.withNeighbours(quality, s, i, sum, victim);
    const perf = (own(this.req.platformPerf, s.spec.platform) ?? this.maxPerf) / this.maxPerf;
    const w = this.req.platformWeight ?? 1;
    const factor = w === 1 ? perf : Math.pow(perf, w);
    // On an acceptable RU the model expects no slowdown from interference: the task runs at its
    // platform's speed, and Q above T_W only says how tight the fit is, a packing preference that
    // breaks ties among equally fast RUs (`better`). Multiplied by the speed, a tight fit on a slow
    // platform beat a loose one on a fast platform (a spark task: 1 × 0.81 against 0.6 × 1). Below
    // T_W, Q / T_W is how far short of that the RU falls.
    const T = this.req.target.T;
    const rel = quality.acceptable ? 1 : T > 0 ? quality.Q / T : quality.Q;
    // Two-sided: an acceptable RU where a resident would be pushed past its tolerance yields to an
    // equally fast one where none would (quality/index.ts twoSided).
    const harms = quality.acceptable && quality.sides !== undefined && !quality.sides.neighboursAcceptable;
    return { score: rel * factor * (harms ? 1 - NEIGHBOUR_HARM : 1), quality };
  }

  /**
   * The neighbours' side: each resident of s (not RU i's own occupant, a victim that leaves) once
   * the newcomer's caused pressure joins its contention, scored against the resident's own target.
   * O(RUs of the server) per candidate, so a decision stays O(R).
   */
  private withNeighbours(self: RuScore, s: ServerState, i: number, sum: readonly number[], victim: Occupant | undefined): RuScore {
    const form = this.req.form ?? 'monotone';
    // A free RU, with no pick of this call on its server: its side is the server's (kept).
    const keep = victim === undefined && s.occupants[i] === null && !this.extra.has(s);
    let sides: Map<readonly number[], NeighbourSide> | undefined;
    if (keep) {
      sides = neighbourSides.get(s);
      const kept = sides?.get(this.causedKey);
      if (kept && kept.version === s.version && kept.form === form)
        return twoSided(self, kept.worst, kept.allOk, kept.n, this.req.target.T, this.req.neighbourWeight);
    }
    const others = s.ruCount - 1;
    let worst = 1;
    let allOk = true;
    let n = 0;
    if (others > 0) {
      const add = this.req.caused;
      const gone = victim?.caused;
      for (let k = 0; k < s.ruCount; k++) {
        if (k === i) continue;
        const occ = s.occupants[k];
        if (!occ) continue;
        for (let r = 0; r < N_RESOURCES; r++) {
          const v = ((sum[r] as number) + (add[r] ?? 0) - (occ.caused[r] ?? 0) - (gone ? (gone[r] ?? 0) : 0)) / others;
          this.Cr[r] = v > 0 ? v : 0;
        }
        const q = scoreRu(this.Cr, residentTarget(occ.caused), form);
        n++;
        if (q.Q < worst) worst = q.Q;
        if (!q.acceptable) allOk = false;
      }
    }
    if (keep) {
      if (!sides) neighbourSides.set(s, (sides = new Map<readonly number[], NeighbourSide>()));
      else if (sides.size >= SIDES_PER_SERVER && !sides.has(this.causedKey)) sides.clear();
      sides.set(this.causedKey, { version: s.version, form, worst, allOk, n });
    }
    return twoSided(self, worst, allOk, n, this.req.target.T, this.req.neighbourWeight);
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

export function better(a: Candidate, b: Candidate): number {
  if (a.score !== b.score) return a.score - b.score;
  return compareScores(a.quality, b.quality);
}

export function toPick(c: Candidate): Pick {
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

export function candidateFor(ctx: SelectionContext, id: number, victim?: Occupant): Candidate | undefined {
  const s = ctx.state.serverOfRu(id);
  if (!s) return undefined;
  const index = id - s.base;
  const { score, quality } = ctx.score(s, index, victim);
  const c: Candidate = { id, server: s, index, score, quality, scoredAt: ctx.extraVersion(s) };
  if (victim) c.victim = victim;
  return c;
}

/** Greedy pick from scored candidates, re-scoring those whose server got one of our picks. */
export function pickBest(
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
