import type { ClusterStore, KeyValue, WatchHandle } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';

export interface FollowOptions {
  store: ClusterStore;
  clock: Clock;
  log: Logger;
  prefix: string;
  /** Every key under the prefix at one revision: after start and after every re-list. */
  onSnapshot(kvs: KeyValue[], revision: number): void;
  onEvent(kv: KeyValue, deleted: boolean, revision: number): void;
}

/**
 * List a prefix, then watch it from the list's revision + 1; when the watch ends (etcd restarted,
 * history compacted, connection lost) list again and re-watch, with backoff, until closed.
 * etcd3 does not resume a broken watch by itself, and a component that silently stops following
 * the store is the worst kind of failure: it keeps answering from stale state.
 */
export class Follower {
  private watch: WatchHandle | undefined;
  private closed = false;
  private restarting = false;
  relists = 0;

  constructor(private readonly o: FollowOptions) {}

  async start(): Promise<void> {
    await this.listAndWatch();
  }

  async close(): Promise<void> {
    this.closed = true;
    const w = this.watch;
    this.watch = undefined;
    await w?.close().catch(() => undefined);
  }

  private async listAndWatch(): Promise<void> {
    const res = await this.o.store.range(this.o.prefix);
    if (this.closed) return;
    this.o.onSnapshot(res.kvs, res.revision);
    this.watch = await this.o.store.watch({
      prefix: this.o.prefix,
      fromRevision: res.revision + 1,
      onEvents: (b) => {
        for (const ev of b.events) this.o.onEvent(ev.kv, ev.type === 'delete', b.revision);
      },
      onError: (err) => {
        if (this.closed) return;
        this.o.log.warn({ prefix: this.o.prefix, code: err.code, err: err.message }, 'watch ended; re-listing');
        void this.restart();
      },
    });
    if (this.closed) await this.watch.close().catch(() => undefined);
  }

  private async restart(): Promise<void> {
    if (this.restarting || this.closed) return;
    this.restarting = true;
    try {
      const old = this.watch;
      this.watch = undefined;
      await old?.close().catch(() => undefined);
      let delay = 50;
      while (!this.closed) {
        try {
          await this.listAndWatch();
          this.relists++;
          return;
        } catch (err) {
          this.o.log.warn({ prefix: this.o.prefix, err: (err as Error).message, delay }, 're-list failed; retrying');
          await this.o.clock.sleep(delay);
          delay = Math.min(delay * 2, 2000);
        }
      }
    } finally {
      this.restarting = false;
    }
  }
}
