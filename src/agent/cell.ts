/**
 * Whether a job can ever run in the cell, or only once servers that are down come back: the
 * check behind FAILED_PRECONDITION at submit and behind the reason a waiting job shows.
 *
 * The cell is every server a front-end knows of: those registered now (up, or marked down) and
 * those whose registration ended recently (remembered for a while, see JobManagerOptions
 * `departedMemoryMs`), so a node that is restarting does not turn a good job into a refused one.
 */
import type { JobSpec, ServerSpec } from '../model/types.ts';
import type { LiveServerRecord } from '../state/live-records.ts';
import { hardPack, serverMatches } from '../sampling/feasibility.ts';
import { own } from '../util/dict.ts';

export interface CellServer {
  spec: ServerSpec;
  /** Registered and not marked down now. */
  up: boolean;
}

export type Feasibility =
  | { kind: 'ok' }
  /** Impossible in this cell whatever comes back: refuse at submit. */
  | { kind: 'never'; field: string; reason: string }
  /** Possible only once servers that are down now come back: wait, with this reason. */
  | { kind: 'not-now'; field: string; reason: string };

type JobShape = Pick<JobSpec, 'tasks' | 'mode' | 'locality' | 'constraints'>;

interface Tally {
  servers: number;
  rus: number;
  racks: Set<string>;
  /** The most RUs one server, and one rack, has (a required pack needs all its tasks in one). */
  serverRus: number;
  rackRus: Map<string, number>;
}

function describeConstraints(c: JobSpec['constraints']): string {
  const parts: string[] = [];
  if (c.platforms) parts.push(`platforms ${c.platforms.join(', ')}`);
  if (c.attributes && Object.keys(c.attributes).length > 0) {
    parts.push(
      Object.entries(c.attributes)
        .map(([k, v]) => `${k}=${v}`)
        .join(', '),
    );
  }
  return parts.join('; ');
}

/** What the cell offers for each attribute the job asks for, for the message. */
function offered(servers: readonly CellServer[], c: JobSpec['constraints']): string {
  const parts: string[] = [];
  if (c.platforms) parts.push(`platforms in the cell: ${[...new Set(servers.map((s) => s.spec.platform))].sort().join(', ') || 'none'}`);
  for (const key of Object.keys(c.attributes ?? {})) {
    const values = [...new Set(servers.map((s) => own(s.spec.attributes, key)).filter((v): v is string => v !== undefined))].sort();
    parts.push(`${key} values in the cell: ${values.length > 0 ? values.slice(0, 10).join(', ') : 'none'}`);
  }
  return parts.join('; ');
}

/** The first rule the tally breaks, if any. */
function shortfall(job: JobShape, t: Tally): { field: string; what: string } | undefined {
  if (t.servers === 0) return { field: 'constraints', what: 'no server' };
  if (job.mode === 'gang' && job.tasks > t.rus) {
    return { field: 'tasks', what: `a gang of ${job.tasks} tasks needs ${job.tasks} RUs at once; there are ${t.rus} it may use` };
  }
  if (job.locality.mode === 'spread' && job.locality.required !== false) {
    const rack = job.locality.scope === 'rack';
    const groups = rack ? t.racks.size : t.servers;
    if (job.tasks > groups) {
      return {
        field: 'locality',
        what: `a required spread over ${rack ? 'racks' : 'servers'} puts each of the ${job.tasks} tasks on its own ${rack ? 'rack' : 'server'}; there are ${groups} it may use (set locality.required to false to make spread a preference)`,
      };
    }
  }
  if (hardPack(job.locality)) {
    const rack = job.locality.scope === 'rack';
    const room = rack ? Math.max(0, ...t.rackRus.values()) : t.serverRus;
    if (job.tasks > room) {
      const what = rack ? 'rack' : 'server';
      return {
        field: 'locality',
        what: `a required pack puts all ${job.tasks} tasks on one ${what}; the largest ${what} it may use has ${room} RUs (set locality.required to false to make pack a preference)`,
      };
    }
  }
  return undefined;
}

export function cellFeasibility(cell: Iterable<CellServer>, job: JobShape): Feasibility {
  const servers = [...cell];
  if (servers.length === 0) return { kind: 'not-now', field: 'constraints', reason: 'no node has registered with the cell yet' };
  const all: Tally = { servers: 0, rus: 0, racks: new Set(), serverRus: 0, rackRus: new Map() };
  const up: Tally = { servers: 0, rus: 0, racks: new Set(), serverRus: 0, rackRus: new Map() };
  for (const s of servers) {
    if (!serverMatches(s.spec, job.constraints)) continue;
    for (const t of s.up ? [all, up] : [all]) {
      t.servers++;
      t.rus += s.spec.rus;
      t.racks.add(s.spec.rack);
      t.serverRus = Math.max(t.serverRus, s.spec.rus);
      t.rackRus.set(s.spec.rack, (t.rackRus.get(s.spec.rack) ?? 0) + s.spec.rus);
    }
  }
  const never = shortfall(job, all);
  if (never) {
    const reason =
      never.what === 'no server'
        ? `no server in the cell matches the constraints (${describeConstraints(job.constraints)}); ${offered(servers, job.constraints)}`
        : never.what;
    return { kind: 'never', field: never.field, reason };
  }
  const now = shortfall(job, up);
  if (now) {
    const down = all.servers - up.servers;
    const what = now.what === 'no server' ? 'no server it may use is up' : now.what;
    return { kind: 'not-now', field: now.field, reason: `${what} now (${down} server${down === 1 ? '' : 's'} it may use ${down === 1 ? 'is' : 'are'} down)` };
  }
  return { kind: 'ok' };
}

/**
 * Every server a front-end knows of (see above), with feasibility cached by job shape: a large
 * cell makes each check O(servers), and evaluations ask at every turn.
 */
export class KnownCell extends Map<string, CellServer & { leftAt?: number }> {
  /** Bumped whenever the cell changes in a way feasibility can see (a server joins, leaves, goes up or down, changes shape). */
  version = 0;
  private feasible = new Map<string, Feasibility>();
  private feasibleVersion = -1;
  private lastPrune = 0;

  /** Can a job of this shape run in the cell, and now? Servers gone for longer than `memoryMs` are forgotten first. */
  feasibility(spec: JobShape, now: number, memoryMs: number): Feasibility {
    // Looked for once a second: the cell may hold tens of thousands of servers.
    if (now - this.lastPrune >= 1000) {
      this.lastPrune = now;
      for (const [id, c] of this) {
        if (c.leftAt !== undefined && c.leftAt < now - memoryMs) {
          this.delete(id);
          this.version++;
        }
      }
    }
    if (this.feasibleVersion !== this.version) {
      this.feasible.clear();
      this.feasibleVersion = this.version;
    }
    const shape = JSON.stringify([spec.tasks, spec.mode, spec.locality, spec.constraints]);
    let f = this.feasible.get(shape);
    if (!f) {
      f = cellFeasibility(this.values(), spec);
      // Bounded: job shapes are few in practice, but a client may send many distinct ones.
      if (this.feasible.size >= 10_000) this.feasible.clear();
      this.feasible.set(shape, f);
    }
    return f;
  }
}

/** Whether two records of a server offer the same to feasibility (platform, rack, RUs, attributes). */
export function sameShape(a: LiveServerRecord | CellServer['spec'], b: LiveServerRecord): boolean {
  if (a.platform !== b.platform || a.rack !== b.rack || a.rus !== b.rus) return false;
  const ka = Object.keys(a.attributes);
  const kb = Object.keys(b.attributes);
  return ka.length === kb.length && ka.every((k) => own(b.attributes, k) === a.attributes[k]);
}
