/**
 * Whether a job can ever fit the cell a RuIndex describes, judged from the job's hard
 * constraints alone (platforms, attributes, gang size, required spread), not from what is free.
 *
 * The cell is every server the state holds, up or not: a server that is down or blocked is
 * expected back, so a job that needs it is possible but has to wait. The verdict therefore comes
 * twice: `ok` for the whole cell, `upOk` for the servers that may take a task right now.
 */
import type { Constraints, JobSpec, ServerSpec } from '../model/types.ts';
import { own } from '../util/dict.ts';
import type { RuIndex } from './ru-index.ts';

/**
 * Whether a server passes the job's platform and attribute constraints (the one definition). An
 * attribute is the server's own or absent: a name such as `constructor` or `__proto__` matches
 * only a server that has it (both maps may come straight from JSON.parse, see util/dict.ts).
 */
export function serverMatches(spec: ServerSpec, constraints: Constraints): boolean {
  const platforms = constraints.platforms;
  if (platforms && !platforms.includes(spec.platform)) return false;
  const attrs = constraints.attributes;
  if (attrs) {
    for (const k in attrs) {
      if (!Object.hasOwn(attrs, k)) continue;
      if (own(spec.attributes, k) !== attrs[k]) return false;
    }
  }
  return true;
}

/** Servers, racks and RUs that pass the job's constraints. */
export interface EligibleCount {
  servers: number;
  racks: number;
  rus: number;
  /** The most eligible RUs one server, and one rack, has (a required pack needs them all in one). */
  serverRus: number;
  rackRus: number;
}

export interface EligibleGroups {
  /** Servers in the state (matching or not). */
  cellServers: number;
  /** Everything eligible, down or blocked included. */
  cell: EligibleCount;
  /**
   * Eligible and able to take a task now: server not down, RU not down (a blocked server counts:
   * it takes a task when no other server can, see candidates.ts).
   */
  up: EligibleCount;
}

/** Counts the eligible servers, racks and RUs for the constraints: one pass over the servers. */
export function eligibleGroups(state: RuIndex, constraints: Constraints): EligibleGroups {
  const cellRacks = new Map<string, number>();
  const upRacks = new Map<string, number>();
  const cell: EligibleCount = { servers: 0, racks: 0, rus: 0, serverRus: 0, rackRus: 0 };
  const up: EligibleCount = { servers: 0, racks: 0, rus: 0, serverRus: 0, rackRus: 0 };
  for (const s of state.servers.values()) {
    if (!serverMatches(s.spec, constraints)) continue;
    cell.servers++;
    cell.rus += s.ruCount;
    cell.serverRus = Math.max(cell.serverRus, s.ruCount);
    cellRacks.set(s.rack, (cellRacks.get(s.rack) ?? 0) + s.ruCount);
    if (s.down || s.cordoned) continue;
    let rus = 0;
    for (let i = 0; i < s.ruCount; i++) if (!s.ruDown[i]) rus++;
    if (rus === 0) continue;
    up.servers++;
    up.rus += rus;
    up.serverRus = Math.max(up.serverRus, rus);
    upRacks.set(s.rack, (upRacks.get(s.rack) ?? 0) + rus);
  }
  cell.racks = cellRacks.size;
  up.racks = upRacks.size;
  for (const n of cellRacks.values()) cell.rackRus = Math.max(cell.rackRus, n);
  for (const n of upRacks.values()) up.rackRus = Math.max(up.rackRus, n);
  return { cellServers: state.servers.size, cell, up };
}

/**
 * RUs that could ever hold a job with these constraints: eligible servers that are not down, nor
 * cordoned by an operator (until uncordoned, a cordoned server is as good as down to a new job).
 */
export function eligibleCapacity(state: RuIndex, constraints: Constraints): number {
  // Asked at every admission verdict, for every wake of a waiting job: a count over every server
  // each time cost a front-end of a 10,000-server cell a fifth of its CPU once jobs queued. The
  // count depends on the server set alone, so it is kept per constraint until that set changes.
  let memo = capacityMemo.get(state);
  if (!memo || memo.version !== state.serversVersion) capacityMemo.set(state, (memo = { version: state.serversVersion, byKey: new Map() }));
  const key = constraintKey(constraints);
  let n = memo.byKey.get(key);
  if (n === undefined) {
    n = 0;
    for (const s of state.servers.values()) {
      if (s.down || s.cordoned || !serverMatches(s.spec, constraints)) continue;
      n += s.ruCount;
    }
    // Bounded: constraints come from job specs, and a cell sees few distinct ones at a time.
    if (memo.byKey.size >= CAPACITY_MEMO_KEYS) memo.byKey.clear();
    memo.byKey.set(key, n);
  }
  return n;
}

/** Distinct constraints whose eligible capacity is kept at once per state (eligibleCapacity). */
const CAPACITY_MEMO_KEYS = 1024;
const capacityMemo = new WeakMap<RuIndex, { version: number; byKey: Map<string, number> }>();

/** What serverMatches reads of the constraints, as one string ('' for none). */
function constraintKey(c: Constraints): string {
  if (!c.platforms && !c.attributes) return '';
  const attrs = c.attributes ? Object.keys(c.attributes).filter((k) => Object.hasOwn(c.attributes as object, k)) : [];
  return JSON.stringify([c.platforms ?? null, attrs.sort().map((k) => [k, (c.attributes as Record<string, string>)[k]])]);
}

export type FeasibilityJob = Pick<JobSpec, 'tasks' | 'mode' | 'locality' | 'constraints'>;

interface FeasibilityCommon {
  /** Whether the servers that are up now suffice (false whenever `ok` is false). */
  upOk: boolean;
  /** Why not, when `upOk` is false: the rule broken by the servers up now. */
  upReason?: string;
  upField?: string;
  eligible: EligibleGroups;
}

export type Feasibility = (FeasibilityCommon & { ok: true }) | (FeasibilityCommon & { ok: false; reason: string; field: string });

/** Whether a spread job is a hard constraint: spread, and `required` not false. */
export function hardSpread(locality: { mode: string; required?: boolean }): boolean {
  return locality.mode === 'spread' && locality.required !== false;
}

/** Whether a pack job is a hard constraint (all its tasks on one server or rack): pack, and `required` true. */
export function hardPack(locality: { mode: string; required?: boolean }): boolean {
  return locality.mode === 'pack' && locality.required === true;
}

/**
 * Whether the job can ever run in the cell (`ok`) and whether it can run on what is up now
 * (`upOk`). Checked in order: some server passes the platform/attribute constraints; a gang fits
 * the eligible RUs at once; a required spread of n tasks has n distinct eligible servers (or
 * racks); a required pack of n tasks has a server (or rack) of n eligible RUs. O(servers).
 */
export function feasibility(state: RuIndex, job: FeasibilityJob): Feasibility {
  const eligible = eligibleGroups(state, job.constraints);
  const never = shortfall(job, eligible.cell);
  const now = shortfall(job, eligible.up);
  let upPart: Pick<FeasibilityCommon, 'upOk' | 'upReason' | 'upField'> = { upOk: true };
  if (now) {
    const cellHas = never ? '' : ` (the cell has ${now.have(eligible.cell)} counting servers that are down)`;
    const upReason =
      now.field === 'constraints'
        ? `no server matching the constraints is up now${never ? '' : ` (${eligible.cell.servers} eligible ${eligible.cell.servers === 1 ? 'is' : 'are'} down)`}`
        : `${now.need}; the servers up now have ${now.have(eligible.up)} eligible${cellHas}`;
    upPart = { upOk: false, upReason, upField: now.field };
  }
  if (never) {
    const reason =
      never.field === 'constraints'
        ? noMatchReason(state, job.constraints, eligible.cellServers)
        : `${never.need}; the cell has ${never.have(eligible.cell)} eligible`;
    return { ok: false, reason, field: never.field, ...upPart, eligible };
  }
  return { ok: true, ...upPart, eligible };
}

interface Shortfall {
  field: 'constraints' | 'tasks' | 'locality';
  /** What the job needs, e.g. "a gang of 25 tasks needs 25 RUs at once". */
  need: string;
  /** The count the rule compares with, in a tally. */
  have: (n: EligibleCount) => number;
}

/** The first rule a tally breaks, if any. */
function shortfall(job: FeasibilityJob, n: EligibleCount): Shortfall | undefined {
  if (n.servers === 0) return { field: 'constraints', need: 'a server matching the constraints', have: (t) => t.servers };
  if (job.mode === 'gang' && job.tasks > n.rus) {
    return { field: 'tasks', need: `a gang of ${job.tasks} tasks needs ${job.tasks} RUs at once`, have: (t) => t.rus };
  }
  if (hardSpread(job.locality)) {
    const rack = job.locality.scope === 'rack';
    const groups = rack ? n.racks : n.servers;
    if (job.tasks > groups) {
      const what = rack ? 'racks' : 'servers';
      return { field: 'locality', need: `spread over ${what} needs ${job.tasks} distinct ${what}`, have: (t) => (rack ? t.racks : t.servers) };
    }
  }
  if (hardPack(job.locality)) {
    const rack = job.locality.scope === 'rack';
    const room = rack ? n.rackRus : n.serverRus;
    if (job.tasks > room) {
      const what = rack ? 'rack' : 'server';
      return {
        field: 'locality',
        need: `a required pack puts all ${job.tasks} tasks on one ${what}, which needs a ${what} of ${job.tasks} RUs`,
        have: (t) => (rack ? t.rackRus : t.serverRus),
      };
    }
  }
  return undefined;
}

const MAX_VALUES = 10;

/** "no server has zone=nowhere (zone values in the cell: demo-a)": a second pass, only on failure. */
function noMatchReason(state: RuIndex, c: Constraints, cellServers: number): string {
  if (cellServers === 0) return 'the cell has no servers';
  const wanted: string[] = [];
  if (c.platforms) wanted.push(c.platforms.length === 1 ? `platform ${c.platforms[0]}` : `platform in {${c.platforms.join(', ')}}`);
  const keys = Object.keys(c.attributes ?? {});
  for (const k of keys) wanted.push(`${k}=${own(c.attributes, k) ?? ''}`);
  const platforms = new Set<string>();
  const values = new Map<string, Set<string>>(keys.map((k) => [k, new Set<string>()]));
  for (const s of state.servers.values()) {
    platforms.add(s.spec.platform);
    for (const k of keys) {
      const v = own(s.spec.attributes, k);
      if (v !== undefined) values.get(k)?.add(v);
    }
  }
  const list = (set: Set<string>): string => {
    const all = [...set].sort();
    if (all.length === 0) return 'none';
    return all.length > MAX_VALUES ? `${all.slice(0, MAX_VALUES).join(', ')}, …` : all.join(', ');
  };
  const offered: string[] = [];
  if (c.platforms) offered.push(`platforms in the cell: ${list(platforms)}`);
  for (const k of keys) offered.push(`${k} values in the cell: ${list(values.get(k) ?? new Set())}`);
  return `no server has ${wanted.join(' and ')} (${offered.join('; ')})`;
}
