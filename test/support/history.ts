import type { ClusterStore, WatchEvent } from '../../src/store/types.ts';

/**
 * Every write under a prefix since `from`, from etcd's history. The newest revision may belong to
 * another prefix, so the replay ends at that revision or after a quiet second, whichever first.
 */
export async function history(store: ClusterStore, prefix: string, from: number): Promise<WatchEvent[]> {
  const until = await store.revision();
  const events: WatchEvent[] = [];
  let handle: { close(): Promise<void> } | undefined;
  await new Promise<void>((resolve, reject) => {
    let idle = setTimeout(resolve, 1500);
    store
      .watch({
        prefix,
        fromRevision: from,
        onEvents: (b) => {
          events.push(...b.events);
          clearTimeout(idle);
          if (b.revision >= until) resolve();
          else idle = setTimeout(resolve, 1500);
        },
        onError: (e) => reject(e),
      })
      .then((h) => {
        handle = h;
      }, reject);
  });
  await handle?.close();
  return events;
}
