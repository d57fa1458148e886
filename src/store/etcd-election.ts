/**
 * A candidacy in an etcd election through the etcd3 package's Campaign (the Go client's
 * concurrency election: lease-bound keys under `election/<name>/`, the oldest leads), adapted to
 * the ClusterStore's Campaign: elected() as a promise, loss reported once, resign() idempotent.
 */
import type { Campaign as Etcd3Campaign } from 'etcd3';
import type { Campaign } from './types.ts';
import { runCallback, toTarcil } from './etcd-convert.ts';
import type { TarcilError } from '../util/errors.ts';

/**
 * etcd3's Campaign keeps its lease alive by itself (every TTL/3) and emits `error` when the lease
 * is lost (etcd says it expired, or nothing was heard for 2 x TTL) or the campaign's own requests
 * fail; etcd3 then resigns, deleting the key. A leader told so must stop: another candidate may
 * lead already.
 */
export class EtcdCampaign implements Campaign {
  private readonly done: Promise<void>;
  private failure: TarcilError | undefined;
  private callbacks: Array<(err: Error) => void> = [];
  private resigned = false;

  constructor(
    private readonly inner: Etcd3Campaign,
    private readonly forget: () => void,
  ) {
    this.done = new Promise<void>((resolve, reject) => {
      inner.on('elected', () => {
        if (!this.resigned) resolve();
      });
      inner.on('error', (err: Error) => {
        const e = toTarcil(err, 'election');
        reject(e);
        this.lost(e);
      });
    });
    this.done.catch(() => undefined);
  }

  elected(): Promise<void> {
    return this.done;
  }

  onLost(cb: (err: Error) => void): void {
    if (this.resigned) return;
    const err = this.failure;
    if (err) queueMicrotask(() => runCallback(cb, err));
    else this.callbacks.push(cb);
  }

  async resign(): Promise<void> {
    if (this.resigned) return;
    this.resigned = true;
    this.callbacks = [];
    this.forget();
    try {
      await this.inner.resign();
    } catch (err) {
      throw toTarcil(err, 'resign');
    }
  }

  /**
   * Stops the keepalive without revoking (the store is closing): the key lives until the lease's
   * TTL runs out, as when the process dies. etcd3 keeps the lease private; it is reached here.
   */
  release(): void {
    this.resigned = true;
    this.callbacks = [];
    this.forget();
    (this.inner as unknown as { lease?: { release(): void } }).lease?.release();
  }

  private lost(err: TarcilError): void {
    if (this.resigned || this.failure) return;
    this.failure = err;
    this.forget();
    const callbacks = this.callbacks;
    this.callbacks = [];
    for (const cb of callbacks) runCallback(cb, err);
  }
}
