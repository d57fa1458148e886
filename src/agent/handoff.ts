/**
 * Freed RUs among front-ends. Every front-end follows the same cell, so an RU that a task gives
 * back reaches all of them at once; on a full cell each wakes a waiting job for it, and all but one
 * of their commits conflict. Each server therefore has a home: one of the front-ends that own jobs
 * now (the distinct leases of the `owners/` keys, which every front-end follows), chosen by a hash
 * of the server's id. For `windowMs` after an RU is freed, only the home front-end wakes a waiting
 * job for it and only its agents sample it; the others leave it alone and, if it is still free
 * when the window ends, wake one of their own waiters for it then. A front-end alone in the cell
 * (or the window 0) takes every freed RU at once, as before.
 *
 * Front-ends may see the set of owners change at different moments (a watch lags): for a while a
 * server may then have two homes (a conflict, as without the handoff) or none (the RU waits out the
 * window). Neither places anything twice: the commit's compare decides, as always.
 */
import type { ClusterState, ServerState } from '../sampling/cluster-state.ts';
import type { Clock, Timer } from '../util/clock.ts';

export interface HandoffOptions {
  state: ClusterState;
  clock: Clock;
  /** How long a freed RU belongs to its home front-end (0: no handoff). */
  windowMs: number;
  /** Wakes a waiter of this process for a freed RU (FreedWaiters.freed). */
  wake: (server: ServerState, index: number) => void;
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

export class FreedHandoff {
  /** Lease → owner keys bound to it: the front-ends that own jobs now. */
  private readonly owners = new Map<string, number>();
  private self: string | undefined;
  /** Sorted leases of the front-ends sharing the cell (this one included), rebuilt when they change. */
  private members: string[] = [];
  private membersStale = true;
  /** RU id → end of its window, in freeing order (the window is the same for all: oldest first). */
  private readonly held = new Map<number, number>();
  private timer: Timer | undefined;
  readonly stats = { handedOff: 0, wokenAfterWindow: 0, takenMeanwhile: 0 };

  constructor(private readonly o: HandoffOptions) {}

  /** This process's owner lease (undefined: it owns nothing, and hands nothing off). */
  setSelf(lease: string | undefined): void {
    if (lease === this.self) return;
    this.self = lease;
    this.membersStale = true;
  }

  /** An owner key now names `lease` (`previous`: the lease it named before, if any). */
  ownerSet(lease: string, previous: string | undefined): void {
    if (previous === lease) return;
    if (previous !== undefined) this.ownerGone(previous);
    const n = this.owners.get(lease) ?? 0;
    this.owners.set(lease, n + 1);
    if (n === 0) this.membersStale = true;
  }

  /** An owner key naming `lease` was deleted. */
  ownerGone(lease: string): void {
    const n = this.owners.get(lease);
    if (n === undefined) return;
    if (n > 1) this.owners.set(lease, n - 1);
    else {
      this.owners.delete(lease);
      this.membersStale = true;
    }
  }

  /** Every owner key is listed again. */
  ownersCleared(): void {
    this.owners.clear();
    this.membersStale = true;
  }

  /** Front-ends sharing the cell now, as this one sees them. */
  memberCount(): number {
    return this.currentMembers().length;
  }

  private currentMembers(): string[] {
    if (this.membersStale) {
      const set = new Set(this.owners.keys());
      if (this.self !== undefined) set.add(this.self);
      this.members = [...set].sort();
      this.membersStale = false;
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

  /** RU `index` of `server` became available: wake a waiter now if this is its home, else after the window. */
  freed(server: ServerState, index: number): void {
    if (this.isHome(server)) {
      this.o.wake(server, index);
      return;
    }
    const id = server.base + index;
    this.held.delete(id);
    this.held.set(id, this.o.clock.now() + this.o.windowMs);
    this.stats.handedOff++;
    this.timer ??= this.o.clock.setTimer(this.o.windowMs, () => this.expire());
  }

  /** RUs freed within the window whose home is another front-end: not to be sampled here yet. */
  excluded(): ReadonlySet<number> | undefined {
    if (this.held.size === 0) return undefined;
    this.expire();
    return this.held.size === 0 ? undefined : new Set(this.held.keys());
  }

  /** Windows that ended: a held RU still free wakes one of this process's waiters. */
  private expire(): void {
    if (this.timer) {
      this.timer.cancel();
      this.timer = undefined;
    }
    const now = this.o.clock.now();
    for (const [id, end] of this.held) {
      if (end > now) {
        this.timer = this.o.clock.setTimer(end - now, () => this.expire());
        return;
      }
      this.held.delete(id);
      const s = this.o.state.serverOfRu(id);
      const index = s ? id - s.base : -1;
      if (s && s.available(index)) {
        this.stats.wokenAfterWindow++;
        this.o.wake(s, index);
      } else this.stats.takenMeanwhile++;
    }
  }

  /** Drops every held RU and its timer (the process closes). */
  close(): void {
    this.timer?.cancel();
    this.timer = undefined;
    this.held.clear();
  }
}

/** Job id → lease of its `owners/<job>` key, keeping the handoff's set of owners in step. */
export class OwnerKeys extends Map<string, string> {
  private handoff: FreedHandoff | undefined;

  constructor(handoff: FreedHandoff) {
    super();
    this.handoff = handoff;
  }

  override set(job: string, lease: string): this {
    const previous = super.get(job);
    if (previous !== lease) this.handoff?.ownerSet(lease, previous);
    return super.set(job, lease);
  }

  override delete(job: string): boolean {
    const previous = super.get(job);
    if (previous !== undefined) this.handoff?.ownerGone(previous);
    return super.delete(job);
  }

  override clear(): void {
    this.handoff?.ownersCleared();
    super.clear();
  }
}
