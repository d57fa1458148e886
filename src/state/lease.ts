/**
 * A lease held by a live component (a job owner, a node monitor), kept alive (each keepalive
 * given a third of the TTL to answer) and self-fenced before etcd can expire it, or (node
 * monitors, `rideOut`) told when it goes unconfirmed and when it is confirmed again.
 */
import type { ClusterStore, Lease } from '../store/types.ts';
import type { Clock, Timer } from '../util/clock.ts';
import { errorMessage, TarcilError } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';

/**
 * A lease held by a live component (a job owner, a node monitor), kept alive by its own loop so
 * that the holder knows how fresh its claim is.
 *
 * Why not etcd3's automatic keepalive: it reports a lost lease only after about 2×TTL, while etcd
 * may have expired it (and handed the holder's work to someone else) after 1×TTL. A lease timer is
 * not mutual exclusion, so two rules are applied together:
 *   1. every write made on behalf of the holder compares the lease (or the owner key's revision):
 *      after expiry those writes fail, whatever the holder believes;
 *   2. the holder *self-fences*: if no keepalive has been confirmed for TTL − margin, counted from
 *      the moment the last successful keepalive was *sent* (etcd restarts the TTL on receipt, which
 *      is later), it stops its work (`onFenced`) before etcd can expire the lease. That keeps side
 *      effects outside etcd (a running process) from overlapping with the next holder's, assuming
 *      clocks advance at the same rate.
 *
 * A node monitor rides out an outage instead (`rideOut`): at the same moment it is told the lease
 * is unconfirmed, keepalives go on, and it is told again when one succeeds on the same lease. The
 * lease is fenced only when the store says it is gone (expired or revoked). What the holder keeps
 * doing meanwhile is its own affair: the monitor keeps its tasks for a grace period counted from
 * {@link HeldLease.lastConfirmedAt} + TTL, and the front-ends wait that long after the lease's
 * expiry before they place its tasks elsewhere.
 */
/** TTL of a component's lease when none is configured (front-ends and monitors alike). */
export const DEFAULT_LEASE_TTL_S = 10;

export interface HeldLeaseOptions {
  store: ClusterStore;
  clock: Clock;
  log: Logger;
  ttlSeconds: number;
  /**
   * Called once when the lease can no longer be trusted: expired or lost, or (without `rideOut`)
   * not confirmed in time.
   */
  onFenced: (reason: string) => void;
  /**
   * Do not fence when a keepalive is not confirmed in time: call `onUnconfirmed` (once per
   * episode) and go on sending keepalives; call `onConfirmed` when one succeeds again on the same
   * lease. The lease is fenced (`onFenced`) only when the store says it is gone.
   */
  rideOut?: { onUnconfirmed: (reason: string) => void; onConfirmed: () => void };
}

export class HeldLease {
  readonly ttlSeconds: number;
  private lease: Lease | undefined;
  private lastOk = 0;
  private loop: Timer | undefined;
  private watchdog: Timer | undefined;
  private fencedReason: string | undefined;
  private closed = false;
  private inflight: Promise<void> | undefined;
  private lastFailed = false;
  private lastSent = 0;
  private unconfirmed = false;

  private constructor(private readonly opts: HeldLeaseOptions) {
    this.ttlSeconds = opts.ttlSeconds;
  }

  static async grant(opts: HeldLeaseOptions): Promise<HeldLease> {
    const h = new HeldLease(opts);
    const sent = opts.clock.now();
    h.lease = await opts.store.grantLease(opts.ttlSeconds, { keepAlive: false });
    h.lastOk = sent;
    h.lastSent = sent;
    h.lease.onLost((err) => h.fence(`lease lost: ${err.message}`));
    h.armWatchdog();
    h.scheduleKeepAlive();
    return h;
  }

  get id(): string {
    if (!this.lease) throw new TarcilError('INTERNAL', 'lease not granted');
    return this.lease.id;
  }

  get fenced(): boolean {
    return this.fencedReason !== undefined;
  }

  /** Confirmed within the budget (TTL − margin) and not fenced. */
  get confirmed(): boolean {
    return !this.fenced && !this.unconfirmed;
  }

  /**
   * When the last keepalive that the store confirmed was sent (the grant's send time at first):
   * the store cannot have expired the lease before this + TTL.
   */
  get lastConfirmedAt(): number {
    return this.lastOk;
  }

  /** Milliseconds the holder may still act for, by its own conservative count. */
  remainingMs(): number {
    return this.lastOk + this.budgetMs() - this.opts.clock.now();
  }

  /** Revokes the lease: its keys go at once, so others take over without waiting for the TTL. */
  async revoke(): Promise<void> {
    this.stop();
    if (!this.lease) return;
    try {
      await this.lease.revoke();
    } catch (err) {
      this.opts.log.warn({ err: errorMessage(err) }, 'lease revoke failed; it will expire');
    }
  }

  /** Stops keeping the lease alive without revoking it (keys live until the TTL runs out). */
  release(): void {
    this.stop();
    this.lease?.release();
  }

  private stop(): void {
    this.closed = true;
    this.loop?.cancel();
    this.watchdog?.cancel();
  }

  private budgetMs(): number {
    const ttl = this.ttlSeconds * 1000;
    return ttl - Math.min(1000, ttl / 4);
  }

  private armWatchdog(): void {
    this.watchdog?.cancel();
    const due = Math.max(0, this.remainingMs());
    this.watchdog = this.opts.clock.setTimer(due, () => {
      if (this.closed || this.fenced || this.unconfirmed) return;
      if (this.remainingMs() > 0) this.armWatchdog();
      else if (this.opts.rideOut) this.goUnconfirmed();
      else this.fence('keepalive not confirmed within the lease TTL');
    });
  }

  private scheduleKeepAlive(): void {
    if (this.closed || this.fenced) return;
    // The cadence counts from when the last keepalive was sent, and a failed one is tried again
    // soon: the budget runs from the send time, so waiting a full TTL/4 after a slow answer or a
    // TTL/3 timeout would let a short outage eat the whole budget of a 5 s lease.
    const every = (this.ttlSeconds * 1000) / 4;
    const due = this.lastFailed ? Math.min(250, every) : Math.max(50, this.lastSent + every - this.opts.clock.now());
    this.loop = this.opts.clock.setTimer(due, () => {
      this.inflight = this.keepAlive().finally(() => {
        this.inflight = undefined;
        this.scheduleKeepAlive();
      });
    });
  }

  private async keepAlive(): Promise<void> {
    if (this.closed || this.fenced || !this.lease || this.inflight) return;
    const sent = this.opts.clock.now();
    this.lastSent = sent;
    try {
      await withTimeout(this.lease.keepAliveOnce(), (this.ttlSeconds * 1000) / 3, this.opts.clock);
      if (this.closed || this.fenced) return;
      if (sent > this.lastOk) this.lastOk = sent;
      this.lastFailed = false;
      this.armWatchdog();
      if (this.unconfirmed && this.remainingMs() > 0) {
        this.unconfirmed = false;
        this.opts.log.info({ lease: this.lease.id }, 'lease confirmed again');
        this.callback(() => this.opts.rideOut?.onConfirmed());
      }
    } catch (err) {
      this.lastFailed = true;
      const e = err as TarcilError;
      if (e.code === 'LEASE_NOT_FOUND') this.fence(`lease expired: ${e.message}`);
      else this.opts.log.warn({ err: e.message, remainingMs: Math.round(this.remainingMs()) }, 'keepalive failed; retrying');
    }
  }

  private goUnconfirmed(): void {
    this.unconfirmed = true;
    const reason = 'keepalive not confirmed within the lease TTL';
    this.opts.log.warn({ reason, lease: this.lease?.id }, 'lease unconfirmed: riding it out, keepalives go on');
    this.callback(() => this.opts.rideOut?.onUnconfirmed(reason));
  }

  private fence(reason: string): void {
    if (this.fencedReason !== undefined || this.closed) return;
    this.fencedReason = reason;
    this.loop?.cancel();
    this.watchdog?.cancel();
    this.opts.log.warn({ reason }, this.opts.rideOut ? 'lease gone' : 'lease fenced: stopping work done under it');
    this.callback(() => this.opts.onFenced(reason));
  }

  private callback(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.opts.log.error({ err: errorMessage(err) }, 'lease callback threw');
    }
  }
}

/** p, or UNAVAILABLE once ms have passed without its answer. */
function withTimeout<T>(p: Promise<T>, ms: number, clock: Clock): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = clock.setTimer(ms, () => reject(new TarcilError('UNAVAILABLE', `no answer within ${Math.round(ms)} ms`)));
    p.then(
      (v) => {
        t.cancel();
        resolve(v);
      },
      (e: unknown) => {
        t.cancel();
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}
