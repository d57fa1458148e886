/**
 * A front-end's copy of the namespace records, kept by a list+watch: a submission reads its
 * namespace (limits, quota, whether it is being deleted) from here instead of asking the store
 * first, which was a round trip to etcd ahead of every job. The copy may be a moment behind; the
 * submission transaction compares the record's revision (for any namespace but `default`), so a
 * job is never accepted against a record that has changed: it fails with ABORTED and the retry
 * reads the store. A namespace the copy does not hold (not listed yet, or created a moment ago)
 * is read from the store too.
 */
import { Follower } from '../state/follow.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore, KeyValue } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';

export interface NamespaceViewOptions {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  log: Logger;
}

export class NamespaceView {
  private readonly byKey = new Map<string, KeyValue>();
  private readonly follower: Follower;
  private listed = false;

  constructor(o: NamespaceViewOptions) {
    this.follower = new Follower({
      store: o.store,
      clock: o.clock,
      log: o.log,
      prefix: o.keys.namespaces(),
      onSnapshot: (kvs) => {
        this.byKey.clear();
        for (const kv of kvs) this.byKey.set(kv.key, kv);
        this.listed = true;
      },
      onEvent: (kv, deleted) => {
        if (deleted) this.byKey.delete(kv.key);
        else this.byKey.set(kv.key, kv);
      },
    });
  }

  /** Lists the records, then follows them. */
  async start(): Promise<void> {
    await this.follower.start();
  }

  async close(): Promise<void> {
    await this.follower.close();
  }

  /**
   * The record under `key` as last seen, `null` when the list showed none, or undefined when the
   * copy cannot say (not listed yet).
   */
  get(key: string): KeyValue | null | undefined {
    if (!this.listed) return undefined;
    return this.byKey.get(key) ?? null;
  }
}
