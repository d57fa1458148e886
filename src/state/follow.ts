/**
 * The one list+watch loop of tarcil: every component that follows part of the store (an agent's
 * cluster cache, a job owner, a node monitor, the simulated runner, the preempted-task queue)
 * follows it through a Follower.
 */
import type { ClusterStore, KeyValue, WatchBatch, WatchHandle } from '../store/types.ts';
import type { TarcilError } from '../util/errors.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';

export interface FollowOptions {
  store: ClusterStore;
  clock: Clock;
  log: Logger;
  /** One prefix, or several listed at one revision and watched from the next. */
  prefix: string | readonly string[];
  /**
   * Every key under the prefixes at one revision: after start and after every re-list. `byPrefix`
   * holds them per prefix, in the order given.
   */
  onSnapshot(kvs: KeyValue[], revision: number, byPrefix: KeyValue[][]): void;
  /** Each change, in order (used when onBatch is not given). */
  onEvent?(kv: KeyValue, deleted: boolean, revision: number): void;
  /** Each batch of changes applied at one revision, whole (takes the place of onEvent). */
  onBatch?(batch: WatchBatch): void;
  /** First and longest pause between failed re-lists (default 50 ms doubling to 2 s). */
  backoffMs?: { first: number; max: number };
}

/**
 * List a prefix, then watch it from the list's revision + 1; when the watch ends (etcd restarted,
 * history compacted, connection lost) list again and re-watch, with backoff, until closed.
 * etcd3 does not resume a broken watch by itself, and a component that silently stops following
 * the store is the worst kind of failure: it keeps answering from stale state.
 */
export class Follower {
  private watches: WatchHandle[] = [];
  private closed = false;
  private restarting = false;
  relists = 0;

  constructor(private readonly o: FollowOptions) {}

  async start(): Promise<void> {
    await this.listAndWatch();
  }

  async close(): Promise<void> {
    this.closed = true;
    const ws = this.watches;
    this.watches = [];
    await Promise.allSettled(ws.map((w) => w.close()));
  }

  private get prefixes(): readonly string[] {
    return typeof this.o.prefix === 'string' ? [this.o.prefix] : this.o.prefix;
  }

  private async listAndWatch(): Promise<void> {
    const prefixes = this.prefixes;
    let byPrefix: KeyValue[][];
    let revision: number;
    if (prefixes.length === 1) {
      const res = await this.o.store.range(prefixes[0] as string);
      byPrefix = [res.kvs];
      revision = res.revision;
    } else {
      const res = await this.o.store.txn({ compare: [], success: prefixes.map((key) => ({ type: 'get' as const, key, prefix: true })) });
      byPrefix = res.responses.map((r) => r ?? []);
      revision = res.revision;
    }
    if (this.closed) return;
    this.o.onSnapshot(byPrefix.flat(), revision, byPrefix);
    const onEvents = (b: WatchBatch): void => {
      if (this.o.onBatch) this.o.onBatch(b);
      else for (const ev of b.events) this.o.onEvent?.(ev.kv, ev.type === 'delete', b.revision);
    };
    const onError = (err: TarcilError): void => {
      if (this.closed) return;
      this.o.log.warn({ prefix: prefixes.join(','), code: err.code, err: err.message }, 'watch ended; re-listing');
      void this.restart();
    };
    this.watches = await Promise.all(prefixes.map((prefix) => this.o.store.watch({ prefix, fromRevision: revision + 1, onEvents, onError })));
    if (this.closed) await Promise.allSettled(this.watches.map((w) => w.close()));
  }

  private async restart(): Promise<void> {
    if (this.restarting || this.closed) return;
    this.restarting = true;
    try {
      const old = this.watches;
      this.watches = [];
      await Promise.allSettled(old.map((w) => w.close()));
      const backoff = this.o.backoffMs ?? { first: 50, max: 2000 };
      let delay = backoff.first;
      while (!this.closed) {
        try {
          await this.listAndWatch();
          this.relists++;
          return;
        } catch (err) {
          this.o.log.warn({ prefix: this.prefixes.join(','), err: (err as Error).message, delay }, 're-list failed; retrying');
          await this.o.clock.sleep(delay);
          delay = Math.min(delay * 2, backoff.max);
        }
      }
    } finally {
      this.restarting = false;
    }
  }
}
