/**
 * The dashboard's view of the cell, read from the agents' shared view (the same list+watch the
 * scheduler places from; nothing is read from the store): one summary per rack (platform/rack)
 * with its RUs by state and the mean quality Q of their occupants, and, on demand, the RUs of the
 * servers of one rack. An occupant's Q is the one its RU record carries (written by the commit
 * that placed it, whichever front-end made it), so every front-end colours every busy RU; an RU
 * record written without it has no colour. A 10,000-server cell is sent to a browser as a few
 * hundred rack summaries; after the first, only the racks that changed. A server's summary is
 * recomputed only when its occupancy version or its flags changed.
 */
import type { JobManager } from '../../owner/manager.ts';
import type { ServerState } from '../../sampling/ru-index.ts';

export interface RackSummary {
  /** `platform/rack`. */
  key: string;
  platform: string;
  rack: string;
  servers: number;
  rus: number;
  free: number;
  busy: number;
  reserved: number;
  down: number;
  /** Free RUs of blocked, cordoned or draining servers: they take no placements. */
  unschedulable: number;
  blocked: number;
  cordoned: number;
  /** Mean Q of the occupants whose RU records carry it (null: none). */
  q: number | null;
}

export type CellTotals = Omit<RackSummary, 'key' | 'platform' | 'rack' | 'q'> & { racks: number };

/** One RU of a rack's drill-down: f(ree), b(usy), r(eserved), d(own), u(nschedulable). */
export interface RuCell {
  s: 'f' | 'b' | 'r' | 'd' | 'u';
  job?: string;
  task?: number;
  q?: number;
}

export interface ServerDetail {
  id: string;
  state: 'up' | 'down' | 'blocked' | 'cordoned';
  rus: RuCell[];
}

interface ServerSummary {
  /** `platform/rack`. */
  key: string;
  version: number;
  flags: number;
  free: number;
  busy: number;
  reserved: number;
  down: number;
  unschedulable: number;
  qSum: number;
  qN: number;
}

/** Names in natural order (r2 before r10); one collator (localeCompare with options builds one per call). */
const NUMERIC = new Intl.Collator(undefined, { numeric: true });

export class CellView {
  private readonly perServer = new Map<string, ServerSummary>();
  private last: { racks: RackSummary[]; totals: CellTotals } | undefined;
  private lastSig = 0;

  constructor(private readonly manager: JobManager) {}

  private summary(s: ServerState): ServerSummary {
    const flags = (s.down ? 1 : 0) | (s.blocked ? 2 : 0) | (s.cordoned ? 4 : 0);
    const prev = this.perServer.get(s.spec.id);
    if (prev && prev.version === s.version && prev.flags === flags) return prev;
    const out: ServerSummary = {
      key: prev?.key ?? `${s.spec.platform}/${s.spec.rack}`,
      version: s.version,
      flags,
      free: 0,
      busy: 0,
      reserved: 0,
      down: 0,
      unschedulable: 0,
      qSum: 0,
      qN: 0,
    };
    for (let i = 0; i < s.ruCount; i++) {
      const o = s.occupants[i];
      if (s.down || s.ruDown[i]) out.down++;
      else if (o) {
        if (o.state === 'reserved') out.reserved++;
        else out.busy++;
        const q = o.q;
        if (q !== undefined) {
          out.qSum += q;
          out.qN++;
        }
      } else if (s.blocked || s.cordoned) out.unschedulable++;
      else out.free++;
    }
    this.perServer.set(s.spec.id, out);
    return out;
  }

  /**
   * Every rack's summary and the cell's totals, as the view has them now: the same object as the
   * last call when no server's occupancy version or flags changed (a hash of them, one pass over
   * the servers without allocating).
   */
  racks(): { racks: RackSummary[]; totals: CellTotals } {
    const all = this.manager.view.state.servers;
    let sig = all.size;
    for (const s of all.values()) sig = (Math.imul(sig, 31) + s.version * 8 + (s.down ? 1 : 0) + (s.blocked ? 2 : 0) + (s.cordoned ? 4 : 0)) | 0;
    if (this.last && sig === this.lastSig) return this.last;
    this.lastSig = sig;
    const byRack = new Map<string, RackSummary & { qSum: number; qN: number }>();
    for (const s of all.values()) {
      const x = this.summary(s);
      const key = x.key;
      let r = byRack.get(key);
      if (!r) {
        r = {
          key,
          platform: s.spec.platform,
          rack: s.spec.rack,
          servers: 0,
          rus: 0,
          free: 0,
          busy: 0,
          reserved: 0,
          down: 0,
          unschedulable: 0,
          blocked: 0,
          cordoned: 0,
          q: null,
          qSum: 0,
          qN: 0,
        };
        byRack.set(key, r);
      }
      r.servers++;
      r.rus += s.ruCount;
      r.free += x.free;
      r.busy += x.busy;
      r.reserved += x.reserved;
      r.down += x.down;
      r.unschedulable += x.unschedulable;
      if (s.blocked && !s.down) r.blocked++;
      if (s.cordoned && !s.down) r.cordoned++;
      r.qSum += x.qSum;
      r.qN += x.qN;
    }
    if (this.perServer.size > all.size) for (const id of this.perServer.keys()) if (!all.has(id)) this.perServer.delete(id);
    const totals: CellTotals = { racks: byRack.size, servers: 0, rus: 0, free: 0, busy: 0, reserved: 0, down: 0, unschedulable: 0, blocked: 0, cordoned: 0 };
    const racks: RackSummary[] = [];
    for (const { qSum, qN, ...r } of byRack.values()) {
      r.q = qN > 0 ? Math.round((qSum / qN) * 1000) / 1000 : null;
      racks.push(r);
      for (const k of ['servers', 'rus', 'free', 'busy', 'reserved', 'down', 'unschedulable', 'blocked', 'cordoned'] as const) totals[k] += r[k];
    }
    racks.sort((a, b) => (a.platform === b.platform ? NUMERIC.compare(a.rack, b.rack) : NUMERIC.compare(a.platform, b.platform)));
    this.last = { racks, totals };
    return this.last;
  }

  /** The servers of one rack, RU by RU (the drill-down). */
  rack(key: string): ServerDetail[] {
    const out: ServerDetail[] = [];
    for (const s of this.manager.view.state.servers.values()) {
      if (`${s.spec.platform}/${s.spec.rack}` !== key) continue;
      const rus: RuCell[] = [];
      for (let i = 0; i < s.ruCount; i++) {
        const o = s.occupants[i];
        if (s.down || s.ruDown[i]) rus.push({ s: 'd' });
        else if (o) rus.push({ s: o.state === 'reserved' ? 'r' : 'b', job: o.job, task: o.task, ...(o.q !== undefined ? { q: o.q } : {}) });
        else rus.push({ s: s.blocked || s.cordoned ? 'u' : 'f' });
      }
      out.push({ id: s.spec.id, state: s.down ? 'down' : s.cordoned ? 'cordoned' : s.blocked ? 'blocked' : 'up', rus });
    }
    return out.sort((a, b) => NUMERIC.compare(a.id, b.id));
  }
}
