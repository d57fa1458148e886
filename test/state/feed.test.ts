import { describe, expect, it } from 'vitest';
import { KeyFeed, type FeedListener } from '../../src/state/feed.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import type { KeyValue } from '../../src/store/types.ts';
import { wrapStore } from '../support/wrap-store.ts';

const kv = (key: string, modRevision: number): KeyValue => ({ key, value: 'v', createRevision: modRevision, modRevision, version: 1, lease: '0' });

/** What a listener was given, in order. */
function recorder(): { seen: string[]; l: FeedListener } {
  const seen: string[] = [];
  return {
    seen,
    l: {
      snapshot: (kvs, rev) => seen.push(`snapshot@${rev}:${kvs.map((k) => k.key).join(',')}`),
      event: (k, deleted, rev) => seen.push(`${deleted ? 'delete' : 'put'} ${k.key}@${rev}`),
    },
  };
}

describe('a feed passed on to a late reader', () => {
  it('gives its own read first, then only what the source delivered after that read, in order', async () => {
    const store = new MemoryStore();
    await store.put('/p/a', 'v');
    await store.put('/p/b', 'v');
    const at = await store.revision();
    const feed = new KeyFeed('/p/');
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    // The read answers at revision `at`, after the source has passed on changes from both sides of it.
    const slow = wrapStore(store, { snapshot: async (prefixes) => (await gate, store.snapshot(prefixes)) });
    const r = recorder();
    const f = feed.follow(slow, r.l);
    feed.event(kv('/p/b', at), false, at);
    feed.event(kv('/p/c', at + 1), false, at + 1);
    feed.snapshot([kv('/p/a', 1), kv('/p/c', at + 1), kv('/p/d', at + 2)], at + 2);
    feed.event(kv('/p/d', at + 2), false, at + 2);
    feed.event(kv('/p/a', at + 3), true, at + 3);
    release();
    await f.ready;
    feed.event(kv('/p/e', at + 4), false, at + 4);
    expect(r.seen).toEqual([`snapshot@${at}:/p/a,/p/b`, `put /p/c@${at + 1}`, `snapshot@${at + 2}:/p/a,/p/c,/p/d`, `delete /p/a@${at + 3}`, `put /p/e@${at + 4}`]);
    f.stop();
    feed.event(kv('/p/f', at + 5), false, at + 5);
    expect(r.seen).toHaveLength(5);
  });

  it('a reader stopped before its read answers gets nothing; a failed read stops it', async () => {
    const store = new MemoryStore();
    const feed = new KeyFeed('/p/');
    const r = recorder();
    const f = feed.follow(store, r.l);
    f.stop();
    await f.ready;
    feed.event(kv('/p/a', 1), false, 1);
    expect(r.seen).toEqual([]);
    const failing = wrapStore(store, { snapshot: () => Promise.reject(new Error('unavailable')) });
    const g = feed.follow(failing, r.l);
    await expect(g.ready).rejects.toThrow('unavailable');
    feed.event(kv('/p/b', 2), false, 2);
    expect(r.seen).toEqual([]);
  });
});
