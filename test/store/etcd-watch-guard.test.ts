/**
 * The watch stream guard on a real etcd: a response for a watch id the etcd3 package does not
 * track (here a progress notification, id -1) must not stop the stream, and a stream that stops
 * delivering for any other reason is re-opened with every watch resuming where it was.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { EtcdStore } from '../../src/store/etcd.ts';
import { Recorder, waitUntil } from './contract.ts';

const endpoint = inject('etcdEndpoint');
const uniquePrefix = (): string => `/tarcil-test/watch-guard/${randomUUID()}/`;

/** etcd3's watch stream under the store (internal: the stall is simulated on it). */
function watchStream(store: EtcdStore): NodeJS.ReadableStream {
  const manager = (store as unknown as { watchClient: { watchManager: { stream: NodeJS.ReadableStream } } }).watchClient.watchManager;
  return manager.stream;
}

describe('the etcd watch stream guard', () => {
  it('a progress notification (a watch id etcd3 does not track) leaves every watch on the stream delivering', async () => {
    // No timer: the one probe is sent by hand.
    const store = await EtcdStore.connect({ endpoints: [endpoint], watchProbeMs: 0 });
    try {
      const p = uniquePrefix();
      const a = new Recorder();
      const b = new Recorder();
      const ha = await store.watch({ prefix: `${p}a/`, fromRevision: 0, onEvents: (x) => a.batches.push(x), onError: (e) => a.errors.push(e) });
      const hb = await store.watch({ prefix: `${p}b/`, fromRevision: 0, onEvents: (x) => b.batches.push(x), onError: (e) => b.errors.push(e) });
      await store.put(`${p}a/1`, '1');
      await a.waitFor((x) => x.length >= 1, 5000);
      // A progress request: etcd answers it on the stream with watch id -1.
      (watchStream(store) as unknown as { write(req: unknown): void }).write({ progress_request: {} });
      await waitUntil(() => store.watchGuard.stats.progress >= 1, 5000);
      await store.put(`${p}a/2`, '2');
      await store.put(`${p}b/1`, '3');
      await a.waitFor((x) => x.length >= 2, 5000);
      await b.waitFor((x) => x.length >= 1, 5000);
      expect(a.batches.map((x) => x.events[0]?.kv.key)).toEqual([`${p}a/1`, `${p}a/2`]);
      expect(a.errors).toEqual([]);
      expect(b.errors).toEqual([]);
      expect(store.watchGuard.stats.stalls).toBe(0);
      await ha.close();
      await hb.close();
    } finally {
      await store.close();
    }
  }, 30_000);

  it('a stream that stops delivering is re-opened and its watches resume without gap or repeat', async () => {
    const store = await EtcdStore.connect({ endpoints: [endpoint], watchProbeMs: 100, watchStallMs: 500 });
    try {
      const p = uniquePrefix();
      const rec = new Recorder();
      const h = await store.watch({ prefix: p, fromRevision: 0, onEvents: (x) => rec.batches.push(x), onError: (e) => rec.errors.push(e) });
      await store.put(`${p}0`, '0');
      await rec.waitFor((x) => x.length >= 1, 5000);
      // The stream stops delivering without an error (as it did when etcd3 threw in its handler).
      watchStream(store).pause();
      for (let i = 1; i <= 5; i++) await store.put(`${p}${i}`, String(i));
      await waitUntil(() => store.watchGuard.stats.stalls >= 1, 10_000);
      await rec.waitFor((x) => x.length >= 6, 10_000);
      await store.put(`${p}6`, '6');
      await rec.waitFor((x) => x.length >= 7, 10_000);
      const revs = rec.batches.map((x) => x.revision);
      expect(new Set(revs).size).toBe(7);
      expect(revs).toEqual([...revs].sort((x, y) => x - y));
      expect(rec.batches.map((x) => x.events[0]?.kv.value)).toEqual(['0', '1', '2', '3', '4', '5', '6']);
      expect(rec.errors).toEqual([]);
      await h.close();
    } finally {
      await store.close();
    }
  }, 30_000);

  it('rejects a negative probe interval with the field named', async () => {
    await expect(EtcdStore.connect({ endpoints: [endpoint], watchProbeMs: -1 })).rejects.toThrow(/watchProbeMs/);
  });
});
