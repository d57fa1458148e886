/**
 * The leases and watches MemoryStore hands out, and the small helpers they share with it.
 */
import { type Timer } from '../util/clock.ts';
import { errorMessage, TarcilError, invalid } from '../util/errors.ts';
import { rootLogger } from '../util/log.ts';
import type { KeyValue, Lease, WatchBatch, WatchEvent, WatchHandle, WatchOptions } from './types.ts';

export interface Entry {
  value: string;
  createRevision: number;
  modRevision: number;
  version: number;
  lease: string;
}

export interface LeaseState {
  readonly id: string;
  readonly ttlSeconds: number;
  deadline: number;
  readonly keys: Set<string>;
  status: 'alive' | 'revoked' | 'expired';
  released: boolean;
  expiryTimer: Timer | undefined;
  keepAliveTimer: Timer | undefined;
  lostCallbacks: Array<(err: Error) => void>;
  lostError: Error | undefined;
}

export const log = rootLogger.child({ component: 'memory-store' });

export interface LeaseControl {
  keepAliveOnce(): void;
  revoke(): void;
  release(): void;
  onLost(cb: (err: Error) => void): void;
}

export class MemoryLease implements Lease {
  readonly id: string;
  readonly ttlSeconds: number;

  constructor(
    state: LeaseState,
    private readonly control: LeaseControl,
  ) {
    this.id = state.id;
    this.ttlSeconds = state.ttlSeconds;
  }

  onLost(cb: (err: Error) => void): void {
    this.control.onLost(cb);
  }
  keepAliveOnce(): Promise<void> {
    return settle(() => {
      this.control.keepAliveOnce();
    });
  }
  revoke(): Promise<void> {
    return settle(() => {
      this.control.revoke();
    });
  }
  release(): void {
    this.control.release();
  }
}

/**
 * One watcher: batches queue up and are handed over from a microtask, so a write never runs a
 * watch callback inside the writer's own stack, and order is the order of revisions.
 */
export class MemoryWatch {
  private queue: WatchBatch[] = [];
  private scheduled = false;
  private done = false;
  private failure: TarcilError | undefined;

  constructor(
    private readonly opts: WatchOptions,
    private readonly detach: () => void,
  ) {}

  push(batch: WatchBatch): void {
    if (this.done || this.failure) return;
    const p = this.opts.prefix;
    if (p !== '') {
      // Every write reaches every watch: the common cases (all of the batch under the prefix, or
      // none of it, as for a one-key write) are told apart in one pass, without a closure or a
      // copy; only a batch that is partly under the prefix is filtered into a batch of its own.
      const all = batch.events;
      let inside = 0;
      for (const e of all) if (e.kv.key.startsWith(p)) inside++;
      if (inside === 0) return;
      if (inside < all.length) {
        const events: WatchEvent[] = [];
        for (const e of all) if (e.kv.key.startsWith(p)) events.push(e);
        batch = Object.freeze({ revision: batch.revision, events: Object.freeze(events) as WatchEvent[] });
      }
    }
    this.queue.push(batch);
    this.schedule();
  }

  fail(err: TarcilError): void {
    if (this.done || this.failure) return;
    this.failure = err;
    this.detach();
    this.schedule();
  }

  close(): void {
    this.done = true;
    this.queue = [];
    this.detach();
  }

  handle(): WatchHandle {
    return {
      close: () =>
        settle(() => {
          this.close();
        }),
    };
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    // Batches pushed by a callback (it wrote to the store) join this same loop, in order.
    for (let i = 0; i < this.queue.length && !this.done; i++) {
      const batch = this.queue[i];
      if (!batch) continue;
      try {
        this.opts.onEvents(batch);
      } catch (err) {
        log.error({ err, revision: batch.revision, prefix: this.opts.prefix }, 'watch callback threw');
      }
    }
    this.queue = [];
    if (this.failure && !this.done) {
      this.done = true;
      try {
        this.opts.onError(this.failure);
      } catch (err) {
        log.error({ err, prefix: this.opts.prefix }, 'watch error callback threw');
      }
    }
  }
}

export function toKv(key: string, e: Entry): KeyValue {
  return {
    key,
    value: e.value,
    createRevision: e.createRevision,
    modRevision: e.modRevision,
    version: e.version,
    lease: e.lease,
  };
}

export function stopTimers(s: LeaseState): void {
  s.expiryTimer?.cancel();
  s.expiryTimer = undefined;
  s.keepAliveTimer?.cancel();
  s.keepAliveTimer = undefined;
}

export function leaseGone(s: LeaseState): TarcilError {
  return new TarcilError('LEASE_NOT_FOUND', `lease ${s.id} is ${s.status}`, { details: { lease: s.id } });
}

export function runLost(cb: (err: Error) => void, err: Error): void {
  queueMicrotask(() => {
    try {
      cb(err);
    } catch (e) {
      log.error({ err: e }, 'lease onLost callback threw');
    }
  });
}

/** Runs synchronous store work as a promise, so a thrown TarcilError becomes a rejection. */
export function settle<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(errorMessage(err)));
  }
}

export function positiveInt(n: number, field: string): number {
  if (!Number.isSafeInteger(n) || n < 1) throw invalid(field, `must be a positive integer, got ${n}`);
  return n;
}
