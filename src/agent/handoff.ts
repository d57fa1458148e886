/**
 * Freed RUs among front-ends. Every front-end follows the same cell, so an RU that a task gives
 * back reaches all of them at once; on a full cell each wakes a waiting job for it, and all but one
 * of their commits conflict. Each server therefore has a home: one of the front-ends that have jobs
 * to place now, chosen by a hash of the server's id. Which front-ends those are, every front-end
 * knows already from what it follows: the owner of each job (the lease of `owners/<job>`) and
 * whether the job's record shows tasks not yet placed. For `windowMs` after an RU is freed, only
 * the home front-end wakes a waiting job for it and only its agents sample it; the others leave it
 * alone and, if it is still free when the window ends, wake one of their own waiters for it then.
 * A front-end that is the only one with jobs to place (or with the window 0) takes every freed RU
 * at once, as before.
 *
 * Front-ends may see the set change at different moments (a watch lags, a job record is rewritten
 * at most every PROGRESS_WRITE_MS): for a while a server may then have two homes (a conflict, as
 * without the handoff) or none (the RU waits out the window). Neither places anything twice: the
 * commit's compare decides, as always.
 *
 * On a loaded cell the views lag by more than any window, so the node names the taker itself: a
 * front-end with jobs waiting for a freed RU keeps `takers/<lease>` (state/takers.ts), and the node
 * freeing an RU names one of them in the freed record. An RU named for this front-end wakes a
 * waiter here at once; one named for another is left alone for HANDED_MS from when this view saw it
 * freed, then treated as above. The name arrives with the event that frees the RU, so a late view
 * learns both together. An RU freed with no name (no front-end waited, as the node saw it) has a
 * home by hash as before.
 */
import type { ClusterState, ServerState } from '../sampling/cluster-state.ts';
import type { Keys } from '../state/keys.ts';
import { chooseTaker } from '../state/takers.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock, Timer } from '../util/clock.ts';
import { errorMessage } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';

/**
 * How long an RU its node named for another front-end is left to that one. Longer than the
 * handoff's window: the taker holds it by the record, not by a guess every front-end makes, and a
 * loaded front-end may take a second or more to wake a waiter, decide and commit.
 */
export const HANDED_MS = 2000;
/** How long a front-end keeps its takers key once no job of its waits (so brief gaps write nothing). */
export const TAKER_LINGER_MS = 2000;
/** The pause before a failed write of the takers key is tried again. */
const TAKER_RETRY_MS = 1000;

export interface HandoffOptions {
  state: ClusterState;
  clock: Clock;
  /** How long a freed RU belongs to its home front-end (0: no handoff). */
  windowMs: number;
  /** Wakes a waiter of this process for a freed RU (FreedWaiters.freed). */
  wake: (server: ServerState, index: number) => void;
  /** Where this front-end keeps its takers key while its jobs wait (none: it names itself nowhere). */
  takers?: { store: ClusterStore; keys: Keys; log: Logger };
}

/** RUs held back for another front-end, each until its end, in the order they were held (one window each). */
class HeldQueue extends Map<number, number> {
  constructor(readonly ms: number) {
    super();
  }
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

export class FreedHandoff {
  private self: string | undefined;
  private demand: Demand | undefined;
  /** Sorted leases of the front-ends with jobs to place (this one included), rebuilt when they change. */
  private members: string[] = [];
  private membersFor: { version: number; self: string | undefined } | undefined;
  /** RU id → end of its window, in freeing order, per window: homed elsewhere by hash, named for another. */
  private readonly homedAway: HeldQueue;
  private readonly named = new HeldQueue(HANDED_MS);
  /** Named RUs whose taker did not take them in time, held for the next choice among the others. */
  private readonly second = new HeldQueue(HANDED_MS);
  /** The taker each RU of `named` was named for. */
  private readonly namedTo = new Map<number, string>();
  private timer: Timer | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  /** The takers key: whether this front-end's jobs wait, and what the store holds (as last written). */
  private waiting = false;
  private published: string | undefined;
  private writing = false;
  private lingerTimer: Timer | undefined;
  private closed = false;
  readonly stats = { handedOff: 0, wokenAfterWindow: 0, takenMeanwhile: 0, namedHere: 0, namedAway: 0, secondAway: 0, takerWrites: 0 };

  constructor(private readonly o: HandoffOptions) {
    this.homedAway = new HeldQueue(o.windowMs);
  }

  /** This process's owner lease (undefined: it owns nothing, and hands nothing off). */
  setSelf(lease: string | undefined): void {
    this.self = lease;
    this.syncTaker();
  }

  /** Whether jobs of this front-end wait for a freed RU now (FreedWaiters.onBusy): keeps the takers key. */
  setWaiting(waiting: boolean): void {
    if (waiting === this.waiting) return;
    this.waiting = waiting;
    if (waiting) {
      this.lingerTimer?.cancel();
      this.lingerTimer = undefined;
      this.syncTaker();
    } else {
      this.lingerTimer ??= this.o.clock.setTimer(TAKER_LINGER_MS, () => {
        this.lingerTimer = undefined;
        this.syncTaker();
      });
    }
  }

  /** Brings the takers key in line with `waiting` (one write at a time; a failed one is tried again). */
  private syncTaker(): void {
    const t = this.o.takers;
    if (!t || this.writing || this.o.windowMs <= 0) return;
    const want = this.waiting && !this.closed && this.self !== undefined ? this.self : undefined;
    if (want === this.published) return;
    if (want === undefined && this.lingerTimer) return;
    const old = this.published;
    this.writing = true;
    this.stats.takerWrites++;
    const write = async (): Promise<void> => {
      if (old !== undefined) await t.store.delete(t.keys.taker(old));
      if (want !== undefined) await t.store.put(t.keys.taker(want), JSON.stringify({ since: this.o.clock.now() }), { lease: want });
    };
    write().then(
      () => {
        this.published = want;
        this.writing = false;
        this.syncTaker();
      },
      (err: unknown) => {
        this.writing = false;
        t.log.debug({ err: errorMessage(err) }, 'writing the takers key failed; trying again');
        if (!this.closed) this.lingerTimer ??= this.o.clock.setTimer(TAKER_RETRY_MS, () => {
          this.lingerTimer = undefined;
          this.syncTaker();
        });
      },
    );
  }

  /** Where the front-ends with jobs to place are counted (the job owner's OwnerKeys). */
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

  /** Is this front-end the home of `server` (always, when it is alone or the handoff is off)? */
  isHome(server: ServerState): boolean {
    if (this.o.windowMs <= 0 || this.self === undefined) return true;
    const m = this.currentMembers();
    if (m.length <= 1) return true;
    return m[hashId(server.id) % m.length] === this.self;
  }

  /**
   * RU `index` of `server` became available, named by its node for front-end `to` (or for none):
   * wake a waiter now if it is this front-end's, else after its window.
   */
  freed(server: ServerState, index: number, to?: string): void {
    const named = to !== undefined && this.o.windowMs > 0 && this.self !== undefined;
    if (named ? to === this.self : this.isHome(server)) {
      if (named) this.stats.namedHere++;
      this.o.wake(server, index);
      return;
    }
    const q = named ? this.named : this.homedAway;
    const id = server.base + index;
    this.homedAway.delete(id);
    this.named.delete(id);
    this.second.delete(id);
    const end = this.o.clock.now() + q.ms;
    q.set(id, end);
    if (named) {
      this.namedTo.set(id, to);
      this.stats.namedAway++;
    } else this.namedTo.delete(id);
    this.stats.handedOff++;
    if (end < this.timerAt) this.expireAt(end);
  }

  private expireAt(end: number): void {
    this.timer?.cancel();
    this.timerAt = end;
    this.timer = this.o.clock.setTimer(Math.max(0, end - this.o.clock.now()), () => this.expire());
  }

  /** RUs freed within the window whose home is another front-end: not to be sampled here yet. */
  excluded(): ReadonlySet<number> | undefined {
    const out = this.excludedWith([]);
    return out.size === 0 ? undefined : out;
  }

  /** `ids` and the RUs held for another front-end (excluded()), as one set for decide(). */
  excludedWith(ids: readonly number[]): Set<number> {
    const out = new Set(ids);
    if (this.homedAway.size > 0 || this.named.size > 0 || this.second.size > 0) {
      this.expire();
      for (const q of [this.homedAway, this.named, this.second]) for (const id of q.keys()) out.add(id);
    }
    return out;
  }

  /**
   * Windows that ended: a held RU still free wakes one of this process's waiters. One its taker
   * did not take goes next to one of the other front-ends with jobs to place (the highest
   * rendezvous weight of the RU among them, the same choice on each), and to any after a second
   * window: otherwise every other front-end would wake a waiter for it at once, and all but one
   * of their commits conflict.
   */
  private expire(): void {
    if (this.timer) {
      this.timer.cancel();
      this.timer = undefined;
      this.timerAt = Number.POSITIVE_INFINITY;
    }
    const now = this.o.clock.now();
    let next = Number.POSITIVE_INFINITY;
    for (const q of [this.homedAway, this.named, this.second]) {
      for (const [id, end] of q) {
        if (end > now) {
          next = Math.min(next, end);
          break;
        }
        q.delete(id);
        const to = q === this.named ? this.namedTo.get(id) : undefined;
        this.namedTo.delete(id);
        const s = this.o.state.serverOfRu(id);
        const index = s ? id - s.base : -1;
        if (!s || !s.available(index)) {
          this.stats.takenMeanwhile++;
          continue;
        }
        if (to !== undefined) {
          const next2 = chooseTaker(`${s.id}/${index}`, this.currentMembers().filter((m) => m !== to));
          if (next2 !== undefined && next2 !== this.self) {
            this.second.set(id, now + HANDED_MS);
            next = Math.min(next, now + HANDED_MS);
            this.stats.secondAway++;
            continue;
          }
        }
        this.stats.wokenAfterWindow++;
        this.o.wake(s, index);
      }
    }
    if (next < Number.POSITIVE_INFINITY) this.expireAt(next);
  }

  /** Drops every held RU and its timers, and the takers key (the process closes; its lease would too). */
  close(): void {
    this.closed = true;
    this.timer?.cancel();
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    this.lingerTimer?.cancel();
    this.lingerTimer = undefined;
    this.homedAway.clear();
    this.named.clear();
    this.second.clear();
    this.namedTo.clear();
    const t = this.o.takers;
    const held = this.published;
    if (t && held !== undefined && !this.writing) {
      this.published = undefined;
      t.store.delete(t.keys.taker(held)).catch(() => undefined);
    }
  }
}

/**
 * Job id → lease of its `owners/<job>` key, and which jobs have tasks not yet placed: together,
 * the leases of the front-ends with jobs to place (Demand), kept up to date as either changes.
 */
export class OwnerKeys extends Map<string, string> implements Demand {
  private readonly pending = new Set<string>();
  /** Lease → its jobs with tasks not yet placed (only leases with at least one). */
  private readonly counts = new Map<string, number>();
  version = 0;

  override set(job: string, lease: string): this {
    const previous = super.get(job);
    if (previous !== lease && this.pending.has(job)) {
      if (previous !== undefined) this.count(previous, -1);
      this.count(lease, 1);
    }
    return super.set(job, lease);
  }

  override delete(job: string): boolean {
    const previous = super.get(job);
    if (previous !== undefined && this.pending.has(job)) this.count(previous, -1);
    return super.delete(job);
  }

  override clear(): void {
    if (this.counts.size > 0) this.version++;
    this.counts.clear();
    super.clear();
  }

  /** Whether job `job` has tasks not yet placed (from its record: not final, placed < tasks). */
  setPending(job: string, pending: boolean): void {
    if (pending === this.pending.has(job)) return;
    if (pending) this.pending.add(job);
    else this.pending.delete(job);
    const lease = super.get(job);
    if (lease !== undefined) this.count(lease, pending ? 1 : -1);
  }

  leases(): Iterable<string> {
    return this.counts.keys();
  }

  private count(lease: string, d: number): void {
    const n = (this.counts.get(lease) ?? 0) + d;
    if (n > 0) {
      if (!this.counts.has(lease)) this.version++;
      this.counts.set(lease, n);
    } else if (this.counts.delete(lease)) this.version++;
  }
}
