/**
 * Locality "pack" with `required`: every task of the job in one group (a server, or a rack with
 * scope 'rack'), all or nothing. The live agents and the simulator's trace replay both place such
 * jobs here, so the two run the same rule.
 *
 * Where the job already holds RUs on a group that is up (tasks running, a gang's first chunk
 * reserved), its other tasks go to that group or nowhere: a task placed again after a loss goes
 * back beside the job's other tasks. Otherwise each sampled RU stands for its group (paper Fig. 5b,
 * as in pack.ts); groups without room for all m tasks are passed over, and the best of the rest,
 * judged by the mean score of the m best RUs it can give, takes all m picks; between groups that
 * score alike, the quieter, then one the job fills at most half of, then the tightest fit
 * (`tieBefore`), so that large groups stay whole for jobs that need them.
 */
import { compareScores, type RuScore } from '../quality/index.ts';
import type { TopologyScope } from '../model/types.ts';
import type { Rng } from '../util/rng.ts';
import { sampleAvailable, shuffleInPlace } from './candidates.ts';
import type { RuIndex, ServerState } from './ru-index.ts';
import { candidateFor, toPick, type Candidate, type SelectionContext, type PlacementRequest, type SelectionResult } from './selection.ts';

/** Rounds of R sampled anchors before giving up (each tries only groups not tried before). */
const ROUNDS = 3;

/** The key of a server's group for the scope. */
export function groupOf(scope: TopologyScope, s: ServerState): string {
  return scope === 'rack' ? s.rack : s.id;
}

/** The servers of a group. */
function serversOf(state: RuIndex, scope: TopologyScope, key: string): ServerState[] {
  if (scope === 'rack') return state.racks.get(key) ?? [];
  const s = state.server(key);
  return s ? [s] : [];
}

/**
 * The groups where the job holds RUs now on a server that is up: its other tasks must join them.
 * A server that is down holds only tasks that are lost (their owner places them again).
 */
export function packGroupsHeld(state: RuIndex, jobId: string, scope: TopologyScope): string[] {
  const out: string[] = [];
  for (const key of state.jobGroups(jobId, scope).keys()) {
    if (serversOf(state, scope, key).some((s) => !s.down)) out.push(key);
  }
  return out;
}

/** Whether RU i of s may take one of the job's tasks now (a blocked server's too: see candidates.ts). */
function usable(ctx: SelectionContext, s: ServerState, i: number): boolean {
  return !ctx.taken.has(s.base + i) && (s.available(i) || s.freeButBlocked(i)) && (!ctx.req.only || ctx.req.only.has(s.base + i));
}

/** Free RUs of the group the job may take now (for the capacity waiter and the reason). */
export function groupRoom(state: RuIndex, servers: readonly ServerState[], ok: (s: ServerState) => boolean): number {
  let n = 0;
  for (const s of servers) {
    if (!ok(s)) continue;
    for (let i = 0; i < s.ruCount; i++) if (s.available(i) || s.freeButBlocked(i)) n++;
  }
  return n;
}

/** The room the job has now: free RUs it may use in its held group, or in the roomiest eligible group. */
export function bestRoom(state: RuIndex, jobId: string, scope: TopologyScope, ok: (s: ServerState) => boolean): { held?: string; room: number } {
  const held = packGroupsHeld(state, jobId, scope)[0];
  if (held !== undefined) return { held, room: groupRoom(state, serversOf(state, scope, held), ok) };
  let room = 0;
  if (scope === 'rack') for (const servers of state.racks.values()) room = Math.max(room, groupRoom(state, servers, ok));
  else for (const s of state.servers.values()) room = Math.max(room, groupRoom(state, [s], ok));
  return { room };
}

/** Up to `max` groups not yet tried with room for m of the job's tasks now, found from a random server on. O(RUs of the view). */
function groupsWithRoom(ctx: SelectionContext, scope: TopologyScope, m: number, max: number, rng: Rng, tried: ReadonlySet<string>): string[] {
  const groups = scope === 'rack' ? [...ctx.state.racks.entries()] : [...ctx.state.servers.values()].map((s) => [s.id, [s]] as const);
  const out: string[] = [];
  const n = groups.length;
  const start = n > 0 ? rng.int(n) : 0;
  for (let k = 0; k < n && out.length < max; k++) {
    const [key, servers] = groups[(start + k) % n] as readonly [string, readonly ServerState[]];
    if (tried.has(key)) continue;
    let room = 0;
    for (const s of servers) {
      if (!ctx.eligibleServer(s)) continue;
      for (let i = 0; i < s.ruCount && room < m; i++) if (usable(ctx, s, i)) room++;
      if (room >= m) break;
    }
    if (room >= m) out.push(key);
  }
  return out;
}

interface Choice {
  /** The RUs it would take, best server first: [server, RU index]. */
  rus: [ServerState, number][];
  /** Free RUs the group has for the job now. */
  room: number;
  /** Its servers as scored (their residents' pressure is computed only when another group ties with it). */
  scored: readonly { s: ServerState }[];
  pressure?: number;
  agg: number;
  quality: RuScore;
  local: boolean;
}

/**
 * Between two groups that score alike for a job of m tasks: the better quality; then the less
 * pressure from residents (the encoding a score compares is coarse: a server with a few residents
 * may score as an empty one); then a group with room for at least twice the job over one without;
 * then the tighter fit (less room). So among equally quiet groups, empty servers above all, a job
 * takes the smallest that it fills at most half of, and large servers stay whole for the jobs
 * that need them. Without it a small job took any empty server: on a production trace every one
 * of the largest servers came to hold a few small long-lived jobs, and jobs needing nearly all of
 * one waited up to half an hour for one to drain (bench/README, trace). The half: a tighter fit
 * puts the job's own tasks closer together, and in the quality model a task's own neighbours
 * weigh more on a small server (a plain best fit cost 0.017 of the mean Q on the trace's
 * near-empty recorded replay; the half costs none).
 */
function tieBefore(quality: RuScore, scored: readonly { s: ServerState }[], room: number, m: number, best: Choice): boolean {
  const c = compareScores(quality, best.quality);
  if (c !== 0) return c > 0;
  const pressure = groupPressure(scored);
  best.pressure ??= groupPressure(best.scored);
  if (pressure !== best.pressure) return pressure < best.pressure;
  const twice = room >= 2 * m;
  if (twice !== best.room >= 2 * m) return twice;
  return room < best.room;
}

/** The residents' caused pressure per RU over the servers of a group (0 for idle servers). */
function groupPressure(servers: readonly { s: ServerState }[]): number {
  let sum = 0;
  let rus = 0;
  for (const { s } of servers) {
    rus += s.ruCount;
    if (s.busy === 0) continue;
    for (const x of s.sum) sum += x;
  }
  return rus > 0 ? sum / rus : 0;
}

/**
 * All m picks in one group, or none. The free RUs of one server score alike (they see the same
 * contention), so a server is scored once, by one of its free RUs; a group's servers give their
 * free RUs best first, and the group is judged by the mean score over the m RUs it would give.
 * O(R·ROUNDS + RUs of the groups looked at) per call, and O(RUs of the view) when no sampled group has room.
 */
export function selectOneGroup(ctx: SelectionContext, req: PlacementRequest, rng: Rng, out: SelectionResult): void {
  const scope = req.locality.scope;
  const m = req.m;
  const held = packGroupsHeld(ctx.state, req.jobId, scope);
  const dataSet = new Set(req.constraints.dataServers ?? []);
  const tried = new Set<string>();
  let best: Choice | undefined;
  const judge = (key: string): void => {
    if (tried.has(key)) return;
    tried.add(key);
    const servers = serversOf(ctx.state, scope, key);
    const scored: { s: ServerState; free: number[]; score: number; quality: RuScore }[] = [];
    let room = 0;
    for (const s of servers) {
      if (!ctx.eligibleServer(s)) continue;
      const free: number[] = [];
      for (let i = 0; i < s.ruCount; i++) if (usable(ctx, s, i)) free.push(i);
      if (free.length === 0) continue;
      room += free.length;
      const { score, quality } = ctx.score(s, free[0] as number);
      scored.push({ s, free, score, quality });
    }
    if (room < m) return;
    scored.sort((a, b) => b.score - a.score || compareScores(b.quality, a.quality));
    const rus: [ServerState, number][] = [];
    let sum = 0;
    let quality: RuScore | undefined;
    for (const g of scored) {
      if (rus.length >= m) break;
      // Free RUs of one server in a random order, so that agents choosing the same server rarely take the same RU.
      shuffleInPlace(g.free, rng);
      const take = Math.min(m - rus.length, g.free.length);
      for (let k = 0; k < take; k++) rus.push([g.s, g.free[k] as number]);
      sum += take * g.score;
      quality = g.quality;
    }
    const agg = sum / m;
    const local = dataSet.size > 0 && servers.some((x) => dataSet.has(x.id)) && scored.every((g) => g.quality.acceptable);
    if (
      !best ||
      (local && !best.local) ||
      (local === best.local && (agg > best.agg || (agg === best.agg && tieBefore(quality as RuScore, scored, room, m, best))))
    ) {
      best = { rus, agg, quality: quality as RuScore, local, room, scored };
    }
  };
  if (held.length > 0) {
    for (const key of held) judge(key);
    out.candidatesSeen += held.length;
  } else {
    for (const id of req.constraints.dataServers ?? []) {
      const s = ctx.state.server(id);
      if (s) judge(groupOf(scope, s));
    }
    for (let round = 0; round < ROUNDS && !best; round++) {
      const anchors = sampleAvailable(ctx, req.R, rng, (s) => !tried.has(groupOf(scope, s)));
      out.candidatesSeen += anchors.length;
      if (anchors.length === 0) break;
      for (const id of anchors) {
        const s = ctx.state.serverOfRu(id);
        if (s) judge(groupOf(scope, s));
      }
    }
    if (!best) {
      // No sampled group has room for all m. Where only a few groups have it (a job that needs
      // most of a large server), a sample rarely meets them, and the job would wait for one
      // freed RU after another to land it there: look for them in the whole view instead, and
      // judge up to R of them as the sample's would have been.
      const roomy = groupsWithRoom(ctx, scope, m, req.R, rng, tried);
      out.candidatesSeen += roomy.length;
      for (const key of roomy) judge(key);
    }
  }
  if (!best) return;
  for (const [s, i] of best.rus) {
    // Scored with the job's earlier picks on the server (the record shows what each task sees).
    const c = candidateFor(ctx, s.base + i) as Candidate;
    ctx.taken.add(c.id);
    ctx.commitLocal(s);
    out.picks.push(toPick(c));
  }
}
