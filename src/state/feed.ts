/**
 * One process's follow of a prefix, passed on to other readers in the same process, so that the
 * store sends each change to that process once: the job owner's follow of `jobs/` also feeds the
 * housekeeper's retention, which would otherwise watch every job record a second time.
 */
import type { ClusterStore, KeyValue } from '../store/types.ts';

export interface FeedListener {
  /** Every key under the prefix at one revision (the first, and each re-list of the source). */
  snapshot(kvs: readonly KeyValue[], revision: number): void;
  /** Each change after it, in order. */
  event(kv: KeyValue, deleted: boolean, revision: number): void;
}

export class KeyFeed {
  private readonly listeners = new Set<FeedListener>();

  constructor(readonly prefix: string) {}

  /** Called by the source's follower for each snapshot. */
  snapshot(kvs: readonly KeyValue[], revision: number): void {
    for (const l of this.listeners) l.snapshot(kvs, revision);
  }

  /** Called by the source's follower for each change. */
  event(kv: KeyValue, deleted: boolean, revision: number): void {
    for (const l of this.listeners) l.event(kv, deleted, revision);
  }

  /**
   * Follows the feed from now on: a snapshot read from the store first (the source's last one
   * may be long past), then the changes after it. What the source delivers during that read is
   * held and passed on only if newer than the read. Returns what stops it.
   */
  follow(store: ClusterStore, l: FeedListener): { ready: Promise<void>; stop(): void } {
    const held: ({ kvs: readonly KeyValue[]; revision: number } | { kv: KeyValue; deleted: boolean; revision: number })[] = [];
    let live = false;
    const relay: FeedListener = {
      snapshot: (kvs, revision) => (live ? l.snapshot(kvs, revision) : held.push({ kvs, revision })),
      event: (kv, deleted, revision) => (live ? l.event(kv, deleted, revision) : held.push({ kv, deleted, revision })),
    };
    this.listeners.add(relay);
    const stop = (): void => void this.listeners.delete(relay);
    const ready = store.snapshot([this.prefix]).then(
      ({ revision, byPrefix }) => {
        if (!this.listeners.has(relay)) return;
        l.snapshot(byPrefix[0] ?? [], revision);
        let at = revision;
        for (const h of held.splice(0)) {
          if (h.revision <= at) continue;
          if ('kvs' in h) {
            l.snapshot(h.kvs, h.revision);
            at = h.revision;
          } else l.event(h.kv, h.deleted, h.revision);
        }
        live = true;
      },
      (err: unknown) => {
        stop();
        throw err;
      },
    );
    return { ready, stop };
  }
}
