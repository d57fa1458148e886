/**
 * The node monitor's hold on the store: its lease, whether the node is registered under it, and
 * what happens when the store cannot be reached. The lease rides out a lost confirmation
 * (HeldLease `rideOut`): the monitor is told it is disconnected (start nothing new) and, when a
 * keepalive succeeds again on the same lease, reconnected (carry on). When the store says the
 * lease is gone, registration is tried again under a new lease until it succeeds. Meanwhile a
 * grace timer runs from the last confirmation of the lease the node is registered under:
 * confirmed-at + TTL + grace, after which the monitor kills its tasks. It also keeps the node's
 * server record, bound to the lease, in step with the node's state.
 */
import { HeldLease } from '../state/lease.ts';
import { nodeDeadline } from '../state/node-fence.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock, Timer } from '../util/clock.ts';
import { errorMessage } from '../util/errors.ts';
import { withBindings, type Logger } from '../util/log.ts';

export interface NodeConnectionOptions {
  store: ClusterStore;
  clock: Clock;
  log: Logger;
  server: string;
  ttlSeconds: number;
  graceMs: number;
  /** Puts the node's server record (or a hollow process's changed ones) as it is now, under `lease`. */
  writeServer: (lease: string) => Promise<void>;
  /** Registers the node under `lease` (reconciling what runs here); throws if it could not. */
  register: (lease: HeldLease) => Promise<void>;
  /** After a registration that followed a lost lease, and after a reconnection. */
  resume: () => void;
  /** The lease went unconfirmed or gone (once per outage). */
  onDisconnected: (why: string) => void;
  /** The grace ran out without the store: kill what runs. */
  onGraceOut: (why: string) => void;
}

export class NodeConnection {
  /** The lease writes go under (a new one as soon as it is granted). */
  private held: HeldLease | undefined;
  /** The lease the node is registered under: its last confirmation bounds the grace. */
  private graceBase: HeldLease | undefined;
  private graceTimer: Timer | undefined;
  private registering: Promise<void> | undefined;
  private isRegistered = false;
  private disconnected = false;
  private closed = false;
  private serverSync: Promise<void> | undefined;
  private serverDirty = false;

  /** The connection's logger, naming the server (a monitor's logger names it already). */
  private readonly log: Logger;

  constructor(private readonly o: NodeConnectionOptions) {
    this.log = withBindings(o.log, { server: o.server });
  }

  get lease(): HeldLease | undefined {
    return this.held;
  }

  /** The lease to write under, if the store may still hold it. */
  usableLeaseId(): string | undefined {
    return this.held && !this.held.fenced ? this.held.id : undefined;
  }

  get registered(): boolean {
    return this.isRegistered;
  }

  /** Registered and the lease confirmed: the node may start tasks. */
  get connected(): boolean {
    return this.isRegistered && !!this.held && this.held.confirmed;
  }

  /** A registration or a server record put under way (close() waits for them). */
  get pending(): Promise<unknown> {
    return Promise.allSettled([this.registering, this.serverSync]);
  }

  /** Registers under a new lease (or the one a failed attempt left). */
  async registerOnce(): Promise<void> {
    if (!this.held || this.held.fenced) this.held = await this.grant();
    const lease = this.held;
    await this.o.register(lease);
    if (this.closed || lease !== this.held) return;
    if (lease.fenced) throw new Error(`lease ${lease.id} went while registering`);
    this.graceBase = lease;
    this.isRegistered = true;
    this.disconnected = false;
    this.graceTimer?.cancel();
    this.graceTimer = undefined;
  }

  /** Puts the server record now, under the lease, if the node is registered. */
  async putServer(): Promise<void> {
    const lease = this.usableLeaseId();
    if (!lease || !this.isRegistered) return;
    await this.o.writeServer(lease);
  }

  /**
   * Puts the server record with the node's state as it is when the put leaves, one put at a time
   * and until it lands: a late put can never leave an older state (`blocked`) behind a newer one,
   * and a record left `blocked` would keep placements away for good.
   */
  syncServer(): void {
    this.serverDirty = true;
    if (this.serverSync) return;
    this.serverSync = (async () => {
      for (let delay = 200; this.serverDirty && !this.closed;) {
        this.serverDirty = false;
        try {
          await this.putServer();
        } catch {
          this.serverDirty = true;
          await this.o.clock.sleep(delay);
          delay = Math.min(delay * 2, 2000);
        }
      }
    })().finally(() => {
      this.serverSync = undefined;
    });
  }

  /** Stops (the lease is kept until revoke()); `pending` then says what is still under way. */
  close(): void {
    this.closed = true;
    this.graceTimer?.cancel();
  }

  /**
   * The node's deadline on this connection's clock (state/node-fence.ts): the last confirmed
   * keepalive of the lease it is registered under + TTL + grace. Undefined before registration.
   */
  deadline(): number | undefined {
    const base = this.graceBase;
    return base ? nodeDeadline(base.lastConfirmedAt, base.ttlSeconds, this.o.graceMs) : undefined;
  }

  async revoke(): Promise<void> {
    await this.held?.revoke();
  }

  private async grant(): Promise<HeldLease> {
    const me: { lease?: HeldLease } = {};
    const current = (): boolean => me.lease !== undefined && me.lease === this.held;
    me.lease = await HeldLease.grant({
      store: this.o.store,
      clock: this.o.clock,
      log: this.log.child({ part: 'lease' }),
      ttlSeconds: this.o.ttlSeconds,
      onFenced: (why) => current() && this.gone(why),
      rideOut: {
        onUnconfirmed: (why) => current() && this.lost(why),
        onConfirmed: () => current() && this.back(),
      },
    });
    return me.lease;
  }

  /** The lease is not confirmed: the grace starts counting. */
  private lost(why: string): void {
    if (this.closed) return;
    if (!this.disconnected) {
      this.disconnected = true;
      this.o.onDisconnected(why);
    }
    this.armGrace();
  }

  /** The same lease answered again: carry on. */
  private back(): void {
    if (this.closed || !this.isRegistered) return;
    this.disconnected = false;
    this.graceTimer?.cancel();
    this.graceTimer = undefined;
    this.log.info({ lease: this.held?.id }, 'lease confirmed again; carrying on');
    this.o.resume();
  }

  /** The store says the lease is gone: register under a new one until that works. */
  private gone(why: string): void {
    this.lost(why);
    this.isRegistered = false;
    if (this.closed || this.registering) return;
    this.log.warn({ why }, 'lease gone; registering again, keeping running tasks');
    const again = async (): Promise<void> => {
      let delay = 200;
      while (!this.closed && !this.isRegistered) {
        try {
          await this.registerOnce();
          if (this.isRegistered) this.o.resume();
          return;
        } catch (err) {
          this.log.warn({ err: errorMessage(err) }, 'registration failed; retrying');
          await this.o.clock.sleep(delay);
          delay = Math.min(delay * 2, 3000);
        }
      }
    };
    this.registering = again().finally(() => {
      this.registering = undefined;
    });
  }

  private armGrace(): void {
    const base = this.graceBase;
    if (this.graceTimer || !base) return;
    const deadline = nodeDeadline(base.lastConfirmedAt, base.ttlSeconds, this.o.graceMs);
    this.graceTimer = this.o.clock.setTimer(Math.max(0, deadline - this.o.clock.now()), () => {
      this.graceTimer = undefined;
      if (this.closed || this.connected) return;
      this.o.onGraceOut(`no contact with the store for the lease TTL (${base.ttlSeconds} s) and the grace (${this.o.graceMs / 1000} s)`);
    });
  }
}
