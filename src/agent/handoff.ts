/**
 * Freed RUs among front-ends. Every front-end follows the same cell, so an RU that a task gives
 * back reaches all of them at once; on a full cell each wakes a waiting job for it, and all but one
 * of their commits conflict. Each server therefore has a home: one of the front-ends that have jobs
 * to place now, chosen by a hash of the server's id. Which front-ends those are, every front-end
 * knows from the one small record each keeps while its lease lives, `members/<lease>`, whose
 * `placing` says whether it owns jobs with tasks not yet placed. For `windowMs` after an RU is freed, only
 * the home front-end wakes a waiting job for it and only its agents sample it; the others leave it
 * alone and, if it is still free when the window ends, wake one of their own waiters for it then.
 * A front-end that is the only one with jobs to place (or with the window 0) takes every freed RU
 * at once, as before.
 *
 * When free RUs are scarce (fewer than `partitionBelow` of the cell's), the homes also split the
 * sampling: each front-end draws only from the servers it is the home of. On a nearly full cell
 * every front-end otherwise samples the same few free RUs, and most of their commits conflict over
 * RUs another front-end took a moment before (its commit not yet in this view). A server keeps a
 * home for HOME_TURN_MS, then moves to the next front-end (its hash plus its tenure's number picks
 * the home), so an RU that only another front-end's jobs can use reaches it within a few turns.
 * The moves are staggered (a quarter of the servers at each HOME_TICK_MS, by another part of the
 * hash), and in the last tick of its tenure a server is sampled by nobody: its home's last commits
 * are then answered and in every view before its next home samples it, instead of looking free
 * there for as long as that view lags. At each tick, the free RUs that came home wake a waiter
 * here (at most CAME_HOME_WAKES of them, and none when nothing waits).
 *
 * Front-ends may see the set change at different moments (a watch lags, a front-end rewrites its
 * record a moment after its demand changes, a turn ends on one clock before another): for a while a
 * server may then have two homes (a conflict, as without the handoff) or none (the RU waits out the
 * window or the turn). Neither places anything twice: the commit's compare decides, as always.
 */
import type { RuIndex, ServerState } from '../sampling/ru-index.ts';
import type { Clock, Timer } from '../util/clock.ts';

export interface HandoffOptions {
  state: RuIndex;
  clock: Clock;
  /** How long a freed RU belongs to its home front-end (0: no handoff). */
  windowMs: number;
  /** Wakes a waiter of this process for a freed RU (FreedWaiters.freed). */
  wake: (server: ServerState, index: number) => void;
  /** Waiters of this process now (FreedWaiters.size): a tick wakes none when there are none. Default: unknown, as many as there are RUs. */
  waiting?: () => number;
  /** Below this share of the cell's RUs free, each front-end samples only the servers it is home of (0: never). Default 0. */
  partitionBelow?: number;
}

/**
 * How long a server keeps one home (its tenure): well above the time a commit takes to reach
 * every view (tens to hundreds of ms on a loaded cell), so that the moments when two front-ends
 * disagree are rare, and short enough that an RU only another front-end can use waits little.
 */
export const HOME_TURN_MS = 2000;
/** Ticks of a tenure: a quarter of the servers move at each; the last is a server's quiet one. */
export const HOME_TICKS = 4;
export const HOME_TICK_MS = HOME_TURN_MS / HOME_TICKS;
/**
 * Free RUs that came home woken for at one tick, at most: while free RUs are many (up to the
 * split's threshold), a tick brings thousands home, and a wake for each (a scan of the waiting
 * jobs' classes, a decision for each woken) took the front-ends' event loops to p99s of
 * hundreds of ms (bench/results/soak/s80-overload/). The rest stay sampled here as usual.
 */
export const CAME_HOME_WAKES = 64;

/** The tick of the homes at clock time `t`. */
function tickAt(t: number): number {
  return Math.floor(t / HOME_TICK_MS);
}

/** FNV-1a of a server id: the same on every front-end. */
function hashId(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    h ^= id.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The front-ends with jobs to place: the leases that own at least one job with tasks not yet placed. */
export interface Demand {
  /** Changes whenever the set of leases does. */
  readonly version: number;
  leases(): Iterable<string>;
}

/** The outcomes of a freed RU held for its home front-end, as /metrics labels them, and the count each is. */
export const HANDOFF_OUTCOMES = {
  'handed-off': 'handedOff',
  'woken-after-window': 'wokenAfterWindow',
  'taken-meanwhile': 'takenMeanwhile',
  'left-to-home': 'leftToHome',
  'came-home': 'cameHome',
} as const;

export class FreedHandoff {
  private self: string | undefined;
  private demand: Demand | undefined;
  /** Sorted leases of the front-ends with jobs to place (this one included), rebuilt when they change. */
  private members: string[] = [];
  private membersFor: { version: number; self: string | undefined } | undefined;
  /**
   * RU id → end of its window, and whether it is the RU that was freed (woken for when the window
   * ends) or another free RU of its server, in freeing order (the window is the same for all:
   * oldest first).
   */
  private readonly held = new Map<number, { end: number; freed: boolean }>();
  private timer: Timer | undefined;
  /** The next tick of the homes, while the sampling is split (partition()). */
  private tickTimer: Timer | undefined;
  private readonly hashes = new WeakMap<ServerState, number>();
  /**
   * handedOff: freed RUs held for their home; of those, wokenAfterWindow (still free, woken for
   * here), takenMeanwhile, leftToHome (still free, but the sampling is split and its home is
   * another front-end). cameHome: free RUs woken for when their server's home moved here.
   */
  readonly stats = { handedOff: 0, wokenAfterWindow: 0, takenMeanwhile: 0, leftToHome: 0, cameHome: 0 };

  constructor(private readonly o: HandoffOptions) {}

  /** This process's owner lease (undefined: it owns nothing, and hands nothing off). */
  setSelf(lease: string | undefined): void {
    this.self = lease;
  }

  /** Where the front-ends with jobs to place are counted (the members' records, MemberDemand). */
  setDemand(demand: Demand): void {
    this.demand = demand;
  }

  /** Front-ends with jobs to place now, this one included, as this one sees them. */
  memberCount(): number {
    return this.currentMembers().length;
  }

  private currentMembers(): string[] {
    const version = this.demand?.version ?? 0;
    if (this.membersFor?.version !== version || this.membersFor.self !== this.self) {
      const set = new Set(this.demand?.leases() ?? []);
      if (this.self !== undefined) set.add(this.self);
      this.members = [...set].sort();
      this.membersFor = { version, self: this.self };
    }
    return this.members;
  }

  /**
   * Is this front-end the home of `server` (always, when it is alone or the handoff is off)? While
   * the sampling is split, nobody is in the server's quiet tick.
   */
  isHome(server: ServerState): boolean {
    if (this.o.windowMs <= 0 || this.self === undefined) return true;
    const m = this.currentMembers();
    if (m.length <= 1) return true;
    const tick = this.tick();
    return (this.splitting() ? this.activeHome(server, m, tick) : this.homeOf(server, m, tick)) === this.self;
  }

  /** The tick of the homes now: one every HOME_TICK_MS of the clock, the same on every front-end. */
  private tick(): number {
    return tickAt(this.o.clock.now());
  }

  /** Arms the timer of the next tick of the homes. */
  private armTick(): Timer {
    return this.o.clock.setTimer(HOME_TICK_MS - (this.o.clock.now() % HOME_TICK_MS), () => this.nextTick());
  }

  private hashOf(server: ServerState): number {
    let h = this.hashes.get(server);
    if (h === undefined) {
      h = hashId(server.id);
      this.hashes.set(server, h);
    }
    return h;
  }

  /** `tick` shifted by the server's stagger (the hash's high bits): its tenure is this / HOME_TICKS, and its last tick the quiet one. */
  private shifted(hash: number, tick: number): number {
    return tick + ((hash >>> 16) % HOME_TICKS);
  }

  /** The server's home at `tick`; with `quiet`, none in the server's quiet tick (who may sample it while the sampling is split). */
  private homeOf(server: ServerState, members: readonly string[], tick: number, quiet = false): string | undefined {
    const h = this.hashOf(server);
    const t = this.shifted(h, tick);
    if (quiet && t % HOME_TICKS === HOME_TICKS - 1) return undefined;
    return members[(h + Math.floor(t / HOME_TICKS)) % members.length];
  }

  /** The home that may sample the server at `tick` while the sampling is split: none in its quiet tick. */
  private activeHome(server: ServerState, members: readonly string[], tick: number): string | undefined {
    return this.homeOf(server, members, tick, true);
  }

  /** Whether `server` changed home between clock times `t0` and `t1` (another tenure). */
  homeMoved(server: ServerState, t0: number, t1: number): boolean {
    const h = this.hashOf(server);
    return Math.floor(this.shifted(h, tickAt(t0)) / HOME_TICKS) !== Math.floor(this.shifted(h, tickAt(t1)) / HOME_TICKS);
  }

  /** Are free RUs scarce enough, and front-ends with tasks to place several, for the sampling to be split? */
  splitting(): boolean {
    const below = this.o.partitionBelow ?? 0;
    if (below <= 0 || this.o.windowMs <= 0 || this.self === undefined || this.currentMembers().length <= 1) return false;
    return this.o.state.available.size < below * this.o.state.totalRus;
  }

  /**
   * While free RUs are scarce and several front-ends place (partitionBelow): the servers this
   * front-end may sample now, those it is the home of this tick (not in their quiet one).
   * Undefined: every server.
   */
  partition(): ((server: ServerState) => boolean) | undefined {
    if (!this.splitting()) return undefined;
    this.tickTimer ??= this.armTick();
    const members = this.currentMembers();
    const self = this.self;
    const tick = this.tick();
    return (s) => this.activeHome(s, members, tick) === self;
  }

  /** A tick of the homes while the sampling is split: each free RU that came home wakes a waiter here. */
  private nextTick(): void {
    this.tickTimer = undefined;
    if (!this.splitting()) return;
    const members = this.currentMembers();
    const tick = this.tick();
    const waiting = this.o.waiting;
    let budget = CAME_HOME_WAKES;
    for (const id of waiting?.() === 0 ? [] : [...this.o.state.available.values()]) {
      const s = this.o.state.serverOfRu(id);
      if (!s || this.activeHome(s, members, tick) !== this.self || this.activeHome(s, members, tick - 1) === this.self) continue;
      this.stats.cameHome++;
      this.o.wake(s, id - s.base);
      if (--budget === 0 || waiting?.() === 0) break;
    }
    this.tickTimer = this.armTick();
  }

  /**
   * RU `index` of `server` became available: wake a waiter now if this is its home, else after the
   * window. The server's other free RUs are left to its home for the window too: a task that ends
   * lowers the pressure on its server, and free RUs there that no waiting job would take a moment
   * ago may now suit one in every front-end at once.
   */
  freed(server: ServerState, index: number): void {
    if (this.isHome(server)) {
      this.o.wake(server, index);
      return;
    }
    const end = this.o.clock.now() + this.o.windowMs;
    for (let i = 0; i < server.ruCount; i++) {
      const id = server.base + i;
      if (i !== index && !server.available(i)) continue;
      const was = this.held.get(id);
      this.held.delete(id);
      this.held.set(id, { end, freed: i === index || was?.freed === true });
    }
    this.stats.handedOff++;
    this.timer ??= this.o.clock.setTimer(this.o.windowMs, () => this.expire());
  }

  /** RUs freed within the window whose home is another front-end: not to be sampled here yet. */
  excluded(): ReadonlySet<number> | undefined {
    const out = this.excludedWith([]);
    return out.size === 0 ? undefined : out;
  }

  /** `ids` and the RUs held for another front-end (excluded()), as one set for decide(). */
  excludedWith(ids: readonly number[]): Set<number> {
    const out = new Set(ids);
    if (this.held.size > 0) {
      this.expire();
      for (const id of this.held.keys()) out.add(id);
    }
    return out;
  }

  /** Windows that ended: a held RU still free wakes one of this process's waiters. */
  private expire(): void {
    if (this.timer) {
      this.timer.cancel();
      this.timer = undefined;
    }
    const now = this.o.clock.now();
    for (const [id, { end, freed }] of this.held) {
      if (end > now) {
        this.timer = this.o.clock.setTimer(end - now, () => this.expire());
        return;
      }
      this.held.delete(id);
      if (!freed) continue;
      const s = this.o.state.serverOfRu(id);
      const index = s ? id - s.base : -1;
      if (!s || !s.available(index)) this.stats.takenMeanwhile++;
      else if (this.splitting() && !this.isHome(s)) this.stats.leftToHome++;
      else {
        this.stats.wokenAfterWindow++;
        this.o.wake(s, index);
      }
    }
  }

  /** Drops every held RU and its timer (the process closes). */
  close(): void {
    this.timer?.cancel();
    this.timer = undefined;
    this.tickTimer?.cancel();
    this.tickTimer = undefined;
    this.held.clear();
  }
}

/** The leases whose `members/<lease>` record says they have tasks to place (owner/members.ts keeps it). */
export class MemberDemand implements Demand {
  private readonly placing = new Set<string>();
  version = 0;

  set(lease: string, placing: boolean): void {
    if (placing === this.placing.has(lease)) return;
    if (placing) this.placing.add(lease);
    else this.placing.delete(lease);
    this.version++;
  }

  clear(): void {
    if (this.placing.size > 0) this.version++;
    this.placing.clear();
  }

  leases(): Iterable<string> {
    return this.placing;
  }
}
