/**
 * A lease granted by EtcdStore: keepalive on request, loss reported once to its callbacks. Grant,
 * revoke and time-to-live are unary calls and carry the store's default deadline; a keepalive on
 * request is a stream of its own, given the same deadline here. A keepalive or revoke that etcd
 * never received is sent to another endpoint (both are idempotent anyway).
 */
import { Etcd3, type Lease as Etcd3Lease } from 'etcd3';
import { SystemClock, type Timer } from '../util/clock.ts';
import { TarcilError } from '../util/errors.ts';
import type { Lease } from './types.ts';
import { LEASE_CHECK_SLACK_MS, runCallback, toTarcil, unlessSent } from './etcd-convert.ts';

/** How the store makes its calls: their deadline, and the runs a call etcd never received gets. */
export interface LeaseCalls {
  requestTimeoutMs: number;
  attempts: number;
  /** The same for a stream call (unsentStreamAttempts). */
  streamAttempts: number;
}

export class EtcdLeaseHandle implements Lease {
  id = '0';
  readonly ttlSeconds: number;
  private callbacks: Array<(err: Error) => void> = [];
  private lostError: TarcilError | undefined;
  private stopped = false;
  private check: Timer | undefined;
  private readonly clock = new SystemClock();

  constructor(
    private readonly client: Etcd3,
    private readonly inner: Etcd3Lease,
    ttlSeconds: number,
    private readonly keepAlive: boolean,
    private readonly calls: LeaseCalls,
    private readonly forget: () => void,
  ) {
    this.ttlSeconds = ttlSeconds;
    inner.on('lost', (err: Error) => this.lost(err));
  }

  granted(id: string): void {
    this.id = id;
    if (!this.keepAlive) this.scheduleCheck(this.ttlSeconds * 1000);
  }

  onLost(cb: (err: Error) => void): void {
    const err = this.lostError;
    if (err) queueMicrotask(() => runCallback(cb, err));
    else this.callbacks.push(cb);
  }

  async keepAliveOnce(): Promise<void> {
    if (this.lostError) throw this.lostError;
    try {
      // Without a deadline a keepalive that etcd never answers (a leader election, a paused
      // member) would hang, and its stream stay open, for as long as the connection lives.
      await unlessSent(this.calls.streamAttempts, () => this.inner.keepaliveOnce({ deadline: Date.now() + this.calls.requestTimeoutMs }));
    } catch (err) {
      throw toTarcil(err, `keep lease ${this.id} alive`);
    }
  }

  async revoke(): Promise<void> {
    this.stop();
    try {
      await unlessSent(this.calls.attempts, () => this.inner.revoke());
    } catch (err) {
      throw toTarcil(err, `revoke lease ${this.id}`);
    }
  }

  release(): void {
    this.stop();
    this.inner.release();
  }

  private stop(): void {
    this.stopped = true;
    this.check?.cancel();
    this.check = undefined;
    this.forget();
  }

  private lost(err: Error): void {
    if (this.stopped || this.lostError) return;
    this.stop();
    const e = new TarcilError('LEASE_NOT_FOUND', `lease ${this.id} lost: ${err.message}`, { cause: err, details: { lease: this.id } });
    this.lostError = e;
    const callbacks = this.callbacks;
    this.callbacks = [];
    for (const cb of callbacks) runCallback(cb, e);
  }

  /** keepAlive: false: etcd3 will not notice the expiry, so ask etcd when it is due. */
  private scheduleCheck(ms: number): void {
    if (this.stopped) return;
    this.check = this.clock.setTimer(ms + LEASE_CHECK_SLACK_MS, () => {
      this.check = undefined;
      this.client.leaseClient.leaseTimeToLive({ ID: this.id }).then(
        (res) => {
          const left = Number(res.TTL);
          if (left <= 0) this.lost(new Error('the lease expired'));
          else this.scheduleCheck(left * 1000);
        },
        (err: unknown) => {
          const e = toTarcil(err, 'lease time-to-live');
          if (e.code === 'LEASE_NOT_FOUND') this.lost(e);
          else this.scheduleCheck(1000 - LEASE_CHECK_SLACK_MS);
        },
      );
    });
  }
}
