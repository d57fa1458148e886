/**
 * The cluster as an agent sees it: servers, RUs and occupants, with O(1) uniform sampling of free
 * RUs and claims for in-flight commits.
 */
import { N_RESOURCES, type RuRef, type ServerSpec, type TopologyScope } from '../model/types.ts';
import { namespaceOfJob } from '../tenancy/namespace.ts';
import { IndexedSet } from './indexed-set.ts';

/** What occupies an RU, as far as scheduling is concerned. */
export interface Occupant {
  job: string;
  task: number;
  caused: readonly number[];
  priority: number;
  /** 'reserved' = held by a gang job that has not finished committing. */
  state: 'busy' | 'reserved';
  /** Its quality Q when placed, when the RU record carries it (RuRecord.q). */
  q?: number;
}

export class ServerState {
  readonly spec: ServerSpec;
  /** Dense id of RU 0; RU i has id base + i. */
  readonly base: number;
  readonly occupants: (Occupant | null)[];
  /** modRevision of each RU key as last seen (0 = never written). */
  readonly ruRevs: number[];
  /**
   * A freed RU's last task's outcome as its value carries it (JSON text), at the revision in
   * ruRevs: the next placement copies it (PlacedRuRecord.prev). Made at the first one.
   */
  ruLast: (string | undefined)[] | undefined = undefined;
  readonly ruDown: boolean[];
  /** Sum of the occupants' caused vectors: C_i of a free RU is sum_i / (M − 1). */
  readonly sum: number[];
  busy = 0;
  /** modRevision of the server's epoch key, compared under the `server` conflict scope. */
  epochRev = 0;
  down = false;
  /** Set by the load monitor: a task here runs well below its expected rate (paper §5.2). */
  blocked = false;
  /** Cordoned or draining by an operator (`tarcil node`): no new placements, whatever its monitor says. */
  cordoned = false;
  /**
   * The node's disconnect grace as its server record gives it (live cells only). Written with
   * each placement here, so that an owner that never saw the node knows how long it may keep a
   * task it took up once it is gone.
   */
  disconnectGraceMs: number | undefined = undefined;
  /** Local change counter, bumped on every occupancy change (invalidates cached scores). */
  version = 0;

  constructor(spec: ServerSpec, base: number) {
    this.spec = spec;
    this.base = base;
    this.occupants = new Array<Occupant | null>(spec.rus).fill(null);
    this.ruRevs = new Array<number>(spec.rus).fill(0);
    this.ruDown = new Array<boolean>(spec.rus).fill(false);
    this.sum = new Array<number>(N_RESOURCES).fill(0);
  }
  get id(): string {
    return this.spec.id;
  }
  get rack(): string {
    return this.spec.rack;
  }
  get ruCount(): number {
    return this.spec.rus;
  }
  /** Whether RU i may receive a new task right now. */
  available(i: number): boolean {
    return !this.down && !this.blocked && !this.cordoned && !this.ruDown[i] && this.occupants[i] === null;
  }
  /** RU i is free on a blocked server: it takes a task only when no other server can (candidates.ts). A cordon is not a block: never. */
  freeButBlocked(i: number): boolean {
    return this.blocked && !this.down && !this.cordoned && !this.ruDown[i] && this.occupants[i] === null;
  }
}

export type ServerChangeListener = (server: ServerState) => void;

/** Where one job's occupants are: RU count per server id and per rack. */
interface JobPlacement {
  rus: number;
  servers: Map<string, number>;
  racks: Map<string, number>;
}

const NO_GROUPS: ReadonlyMap<string, number> = new Map();
/** The claimer when none is named (a view used by one caller at a time). */
const DEFAULT_OWNER = Symbol('claim');

/**
 * The agent's view of the cluster: servers, RU occupancy and the revisions read, plus the indexes
 * that make sampling O(R): all available RUs, available RUs per platform, busy RUs per
 * priority (preemption candidates), and the servers and racks each job occupies (spread). Fed
 * by the cache (list + watch) in live agents and by the simulator directly; it never talks to a
 * store itself.
 */
export class RuIndex {
  readonly servers = new Map<string, ServerState>();
  readonly racks = new Map<string, ServerState[]>();
  readonly available = new IndexedSet();
  readonly availableByPlatform = new Map<string, IndexedSet>();
  readonly busyByPriority = new Map<number, IndexedSet>();
  /** Free RUs of blocked servers (not in `available`): the last resort of a draw (candidates.ts). */
  readonly blockedFree = new IndexedSet();
  /**
   * Servers cordoned or draining (`cordons/<id>`), kept apart from the servers themselves: a
   * cordon may be seen before its server registers, and outlives the server's re-registrations.
   */
  private readonly cordonedIds = new Set<string>();
  /** RU id → server; ids are never reused, so a removed server leaves holes. */
  private readonly ruServer: (ServerState | undefined)[] = [];
  private nextBase = 0;
  /**
   * Bumped whenever the set of servers a placement may use changes: one registered or replaced,
   * removed, down or up, cordoned or not. What is derived from that set alone (the eligible
   * capacity of a constraint, feasibility.ts; totalRus) is kept until it moves.
   */
  get serversVersion(): number {
    return this.serversVer;
  }
  private serversVer = 0;
  /** totalRus as counted at a serversVersion. */
  private total = { rus: 0, version: -1 };
  private readonly listeners: ServerChangeListener[] = [];
  /** RU id → the occupant before an in-flight claim, and who claimed it (see claim()). */
  private readonly claims = new Map<number, { prev: Occupant | null; owner: unknown }>();
  private readonly dirty = new Set<ServerState>();
  private batching = 0;
  /**
   * Job id → the servers and racks holding its occupants (busy, reserved or claimed), kept in step
   * by every occupancy change; a job leaves the map when its last occupant goes.
   */
  private readonly jobs = new Map<string, JobPlacement>();
  /** Namespace → RUs its jobs occupy (busy, reserved or claimed): what fair share counts as held. */
  private readonly nsRus = new Map<string, number>();

  /** Called (once per flush) for every server whose occupancy or availability changed. */
  onServerChanged(cb: ServerChangeListener): void {
    this.listeners.push(cb);
  }

  /** Groups many changes (a watch batch, an initial list) into one notification per server. */
  batch<T>(fn: () => T): T {
    this.batching++;
    try {
      return fn();
    } finally {
      this.batching--;
      if (this.batching === 0) this.flush();
    }
  }

  /** RUs of every server known, up or down: counted again only when the set of servers changed. */
  get totalRus(): number {
    if (this.total.version !== this.serversVer) {
      let n = 0;
      for (const s of this.servers.values()) n += s.ruCount;
      this.total = { rus: n, version: this.serversVer };
    }
    return this.total.rus;
  }

  upsertServer(spec: ServerSpec): ServerState {
    const existing = this.servers.get(spec.id);
    if (existing && existing.spec.rus === spec.rus && existing.spec.platform === spec.platform) {
      if (existing.down) this.setServerDown(existing.id, false);
      return existing;
    }
    if (existing) this.removeServer(spec.id);
    const s = new ServerState(spec, this.nextBase);
    this.serversVer++;
    s.cordoned = this.cordonedIds.has(spec.id);
    this.nextBase += spec.rus;
    this.servers.set(spec.id, s);
    let rack = this.racks.get(spec.rack);
    if (!rack) {
      rack = [];
      this.racks.set(spec.rack, rack);
    }
    rack.push(s);
    for (let i = 0; i < spec.rus; i++) {
      this.ruServer[s.base + i] = s;
      this.reindex(s, i);
    }
    this.touch(s);
    return s;
  }

  removeServer(id: string): void {
    const s = this.servers.get(id);
    if (!s) return;
    s.down = true;
    this.serversVer++;
    for (let i = 0; i < s.ruCount; i++) {
      this.countJob(s, s.occupants[i] ?? null, -1);
      this.claims.delete(s.base + i);
      this.unindex(s, i);
      this.ruServer[s.base + i] = undefined;
    }
    this.servers.delete(id);
    const rack = this.racks.get(s.rack);
    if (rack) {
      const k = rack.indexOf(s);
      if (k >= 0) rack.splice(k, 1);
    }
    this.touch(s);
  }

  setServerDown(id: string, down: boolean): void {
    const s = this.servers.get(id);
    if (!s || s.down === down) return;
    s.down = down;
    this.serversVer++;
    for (let i = 0; i < s.ruCount; i++) this.reindex(s, i);
    this.touch(s);
  }

  /** Cordons (or uncordons) a server, known yet or not: its RUs leave (or rejoin) the available set. */
  setCordoned(id: string, cordoned: boolean): void {
    if (cordoned) this.cordonedIds.add(id);
    else this.cordonedIds.delete(id);
    const s = this.servers.get(id);
    if (!s || s.cordoned === cordoned) return;
    s.cordoned = cordoned;
    this.serversVer++;
    for (let i = 0; i < s.ruCount; i++) this.reindex(s, i);
    this.touch(s);
  }

  /** The servers cordoned or draining now. */
  cordoned(): ReadonlySet<string> {
    return this.cordonedIds;
  }

  setBlocked(id: string, blocked: boolean): void {
    const s = this.servers.get(id);
    if (!s || s.blocked === blocked) return;
    s.blocked = blocked;
    for (let i = 0; i < s.ruCount; i++) this.reindex(s, i);
    this.touch(s);
  }

  /**
   * Records the occupant of RU (server, index) as of store revision `rev`. Older revisions than
   * the one already applied are ignored, so a watch event that arrives after the agent applied
   * its own commit (or a fresher read) cannot move the cache backwards. `last`: a freed RU's last
   * task's outcome as its value carries it (ServerState.ruLast).
   */
  setRu(ref: RuRef, occupant: Occupant | null, rev: number, down = false, last?: string): boolean {
    const s = this.servers.get(ref.server);
    if (!s || ref.index < 0 || ref.index >= s.ruCount) return false;
    if (rev < (s.ruRevs[ref.index] as number)) return false;
    if (rev > (s.ruRevs[ref.index] as number)) this.claims.delete(s.base + ref.index);
    else if (this.claims.has(s.base + ref.index)) return false; // same revision: the claim stands
    s.ruRevs[ref.index] = rev;
    if (last !== undefined) (s.ruLast ??= new Array<string | undefined>(s.ruCount))[ref.index] = last;
    else if (s.ruLast) s.ruLast[ref.index] = undefined;
    return this.place(s, ref.index, occupant, down);
  }

  /**
   * Marks an RU as taken by a decision whose commit is in flight, without changing the revision
   * read. Other decisions (of this agent, or of any agent sharing this view) then neither pick it
   * nor score its neighbours as if it were empty; without this, concurrent decisions converge on
   * the same best RUs and conflict with each other. `owner` names the claimer (a scheduling call):
   * only it may release or keep the claim. A newer revision from the store (our commit, or
   * someone else's) replaces the claim; unclaim() restores the previous occupant if the commit
   * failed.
   */
  claim(ref: RuRef, occupant: Occupant, owner: unknown = DEFAULT_OWNER): boolean {
    const s = this.servers.get(ref.server);
    if (!s || ref.index < 0 || ref.index >= s.ruCount) return false;
    const id = s.base + ref.index;
    if (this.claims.has(id)) return false;
    this.claims.set(id, { prev: s.occupants[ref.index] ?? null, owner });
    this.place(s, ref.index, occupant, s.ruDown[ref.index] as boolean);
    return true;
  }

  /** Releases `owner`'s claim on the RU (a claim of another owner, or none, is left alone). */
  unclaim(ref: RuRef, owner: unknown = DEFAULT_OWNER): void {
    const s = this.servers.get(ref.server);
    if (!s) return;
    const id = s.base + ref.index;
    const c = this.claims.get(id);
    if (!c || c.owner !== owner) return;
    this.claims.delete(id);
    this.place(s, ref.index, c.prev, s.ruDown[ref.index] as boolean);
  }

  /** The RU's occupant as the store last showed it: the one before an in-flight claim, if any. */
  storedOccupant(ref: RuRef): Occupant | null {
    const s = this.servers.get(ref.server);
    if (s === undefined || ref.index < 0 || ref.index >= s.ruCount) return null;
    const c = this.claims.get(s.base + ref.index);
    return c !== undefined ? c.prev : (s.occupants[ref.index] ?? null);
  }

  /** Whether the RU is claimed (by `owner`, when given). */
  isClaimed(ref: RuRef, owner?: unknown): boolean {
    const s = this.servers.get(ref.server);
    if (s === undefined) return false;
    const c = this.claims.get(s.base + ref.index);
    return c !== undefined && (owner === undefined || c.owner === owner);
  }

  /** In-flight claims (of every owner). */
  get claimCount(): number {
    return this.claims.size;
  }

  private place(s: ServerState, index: number, occupant: Occupant | null, down: boolean): boolean {
    const ref = { server: s.id, index };
    const prev = s.occupants[ref.index] ?? null;
    const wasDown = s.ruDown[ref.index] as boolean;
    if (sameOccupant(prev, occupant) && wasDown === down) return false;
    this.unindex(s, ref.index);
    if (prev) {
      for (let r = 0; r < N_RESOURCES; r++) s.sum[r] = (s.sum[r] as number) - (prev.caused[r] ?? 0);
      s.busy--;
    }
    if (prev?.job !== occupant?.job) {
      this.countJob(s, prev, -1);
      this.countJob(s, occupant, 1);
    }
    s.occupants[ref.index] = occupant;
    s.ruDown[ref.index] = down;
    if (occupant) {
      for (let r = 0; r < N_RESOURCES; r++) s.sum[r] = (s.sum[r] as number) + (occupant.caused[r] ?? 0);
      s.busy++;
    }
    s.version++;
    this.reindex(s, ref.index);
    this.touch(s);
    return true;
  }

  /**
   * The servers (scope 'server', keyed by id) or racks (scope 'rack', keyed by name) where the job
   * has occupants now — busy, reserved or claimed, on servers up or down — with how many RUs in
   * each. O(1): a live view of the index, not a copy; do not hold it across changes.
   */
  jobGroups(jobId: string, scope: TopologyScope = 'server'): ReadonlyMap<string, number> {
    const j = this.jobs.get(jobId);
    if (!j) return NO_GROUPS;
    return scope === 'rack' ? j.racks : j.servers;
  }

  /** RUs the job occupies now (busy, reserved or claimed). */
  jobRus(jobId: string): number {
    return this.jobs.get(jobId)?.rus ?? 0;
  }

  /** RUs the jobs of namespace `ns` occupy now (busy, reserved or claimed: held or being placed). */
  namespaceRus(ns: string): number {
    return this.nsRus.get(ns) ?? 0;
  }

  /** The namespaces that occupy at least one RU, with how many. A live view: do not hold it across changes. */
  namespacesHolding(): ReadonlyMap<string, number> {
    return this.nsRus;
  }

  /** Jobs with at least one occupant (the size of the per-job index). */
  get jobCount(): number {
    return this.jobs.size;
  }

  private countJob(s: ServerState, occ: Occupant | null, delta: 1 | -1): void {
    if (!occ) return;
    let j = this.jobs.get(occ.job);
    if (!j) {
      if (delta < 0) return;
      j = { rus: 0, servers: new Map(), racks: new Map() };
      this.jobs.set(occ.job, j);
    }
    j.rus += delta;
    bump(this.nsRus, namespaceOfJob(occ.job), delta);
    bump(j.servers, s.id, delta);
    bump(j.racks, s.rack, delta);
    if (j.rus <= 0) this.jobs.delete(occ.job);
  }

  setEpoch(server: string, rev: number): void {
    const s = this.servers.get(server);
    if (s && rev > s.epochRev) s.epochRev = rev;
  }

  server(id: string): ServerState | undefined {
    return this.servers.get(id);
  }
  serverOfRu(id: number): ServerState | undefined {
    return this.ruServer[id];
  }
  ruRef(id: number): RuRef {
    const s = this.ruServer[id];
    if (!s) throw new Error(`unknown RU id ${id}`);
    return { server: s.id, index: id - s.base };
  }

  /** Busy RU count and free-capacity summary (utilisation figures, `tarcil cluster`). */
  usage(): { rus: number; busy: number; available: number; down: number } {
    let rus = 0;
    let busy = 0;
    let down = 0;
    for (const s of this.servers.values()) {
      rus += s.ruCount;
      busy += s.busy;
      if (s.down) down += s.ruCount;
      else for (const d of s.ruDown) if (d) down++;
    }
    return { rus, busy, available: this.available.size, down };
  }

  private reindex(s: ServerState, i: number): void {
    const id = s.base + i;
    const occ = s.occupants[i];
    if (s.available(i)) {
      this.available.add(id);
      platformSet(this.availableByPlatform, s.spec.platform).add(id);
    } else {
      this.available.delete(id);
      this.availableByPlatform.get(s.spec.platform)?.delete(id);
    }
    if (s.freeButBlocked(i)) this.blockedFree.add(id);
    else this.blockedFree.delete(id);
    for (const set of this.busyByPriority.values()) set.delete(id);
    if (occ && occ.state === 'busy' && !s.down) {
      let set = this.busyByPriority.get(occ.priority);
      if (!set) {
        set = new IndexedSet();
        this.busyByPriority.set(occ.priority, set);
      }
      set.add(id);
    }
  }

  private unindex(s: ServerState, i: number): void {
    const id = s.base + i;
    this.available.delete(id);
    this.blockedFree.delete(id);
    this.availableByPlatform.get(s.spec.platform)?.delete(id);
    const occ = s.occupants[i];
    if (occ) this.busyByPriority.get(occ.priority)?.delete(id);
  }

  private touch(s: ServerState): void {
    this.dirty.add(s);
    if (this.batching === 0) this.flush();
  }

  private flush(): void {
    if (this.dirty.size === 0) return;
    const list = [...this.dirty];
    this.dirty.clear();
    for (const s of list) for (const cb of this.listeners) cb(s);
  }
}

function platformSet(map: Map<string, IndexedSet>, platform: string): IndexedSet {
  let set = map.get(platform);
  if (!set) {
    set = new IndexedSet();
    map.set(platform, set);
  }
  return set;
}

function bump(map: Map<string, number>, key: string, delta: number): void {
  const n = (map.get(key) ?? 0) + delta;
  if (n > 0) map.set(key, n);
  else map.delete(key);
}

function sameOccupant(a: Occupant | null, b: Occupant | null): boolean {
  if (a === null || b === null) return a === b;
  return a.job === b.job && a.task === b.task && a.state === b.state && a.priority === b.priority && a.q === b.q;
}
