import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { EtcdStore } from '../../src/store/etcd.ts';
import { GroupCommit } from '../../src/store/group-commit.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import type { ClusterStore, TxnRequest, TxnResult } from '../../src/store/types.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { wrapStore } from '../support/wrap-store.ts';

const endpoint = inject('etcdEndpoint');

/** A conditional placement-like transaction: claim `key` if it is still at `rev`, else read it. */
function claim(key: string, rev: number, value: string): TxnRequest {
  return {
    compare: [{ key, target: 'mod', op: '==', value: rev }],
    success: [{ type: 'put', key, value }],
    failure: [{ type: 'get', key }],
  };
}

const stores: ClusterStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

/** A store from `open` (closed after the test) holding `n` fresh keys set to 'free', and their revisions. */
async function freeKeys(open: () => Promise<ClusterStore>, n: number): Promise<{ store: ClusterStore; keys: string[]; revs: number[] }> {
  const store = await open();
  stores.push(store);
  const p = `/tarcil-test/gc/${randomUUID()}/`;
  const keys = Array.from({ length: n }, (_, i) => `${p}ru/${i}`);
  for (const k of keys) await store.put(k, 'free');
  const revs = await Promise.all(keys.map(async (k) => (await store.get(k))?.modRevision ?? 0));
  return { store, keys, revs };
}

describe.each([
  ['MemoryStore', (): Promise<ClusterStore> => Promise.resolve(new MemoryStore())],
  ['EtcdStore', async (): Promise<ClusterStore> => EtcdStore.connect({ endpoints: [endpoint] })],
])('group commit on %s', (_name, open) => {
  it('merges transactions that wait into one request, each with the outcome it would have had alone', async () => {
    const { store, keys, revs } = await freeKeys(open, 20);
    // Every third transaction compares a stale revision: it must fail, and only it.
    const reqs = keys.map((k, i) => claim(k, (revs[i] as number) - (i % 3 === 0 ? 1 : 0), `taken-${i}`));
    const alone = new GroupCommit(store, { maxInFlight: 1 });
    const results = await Promise.all(reqs.map((r) => alone.txn(r)));
    // The first left on its own; the other 19 waited for it and left together.
    expect(alone.stats).toEqual({ requests: 2, transactions: 20, largestGroup: 19 });
    results.forEach((res: TxnResult, i) => {
      expect(res.succeeded).toBe(i % 3 !== 0);
      if (i % 3 === 0) expect(res.responses[0]?.map((kv) => [kv.key, kv.value])).toEqual([[keys[i], 'free']]);
      else expect(res.responses).toEqual([null]);
    });
    // The 19 share one revision, one after the first's.
    expect(new Set(results.slice(1).map((r) => r.revision)).size).toBe(1);
    for (const [i, k] of keys.entries()) expect((await store.get(k))?.value).toBe(i % 3 === 0 ? 'free' : `taken-${i}`);
  });

  it('with gather, sends the transactions asked for in one tick in one request, even with every slot free', async () => {
    const { store, keys, revs } = await freeKeys(open, 11);
    const gc = new GroupCommit(store, { maxInFlight: 4, gather: true });
    // As a hollow process's nodes start their tasks: each after an await of its own, all in the
    // microtasks of one watch response.
    const burst = keys.map(async (k, i) => {
      await Promise.resolve();
      return gc.txn(claim(k, (revs[i] as number) - (i === 5 ? 1 : 0), `taken-${i}`));
    });
    const results = await Promise.all(burst);
    expect(gc.stats).toEqual({ requests: 1, transactions: 11, largestGroup: 11 });
    expect(results.map((r) => r.succeeded)).toEqual(keys.map((_, i) => i !== 5));
    expect(new Set(results.map((r) => r.revision)).size).toBe(1);
    // A transaction asked for later, alone in its tick, leaves alone at once.
    const alone = await gc.txn(claim(keys[5] as string, revs[5] as number, 'taken-5'));
    expect(alone.succeeded).toBe(true);
    expect(gc.stats).toEqual({ requests: 2, transactions: 12, largestGroup: 11 });
    // Without gather, the same burst takes a request for each free slot, and the rest wait.
    const eager = new GroupCommit(store, { maxInFlight: 4 });
    await Promise.all(
      keys.map(async (k) => {
        await Promise.resolve();
        return eager.txn({ compare: [], success: [{ type: 'put', key: k, value: 'again' }] });
      }),
    );
    expect(eager.stats.requests).toBeGreaterThan(1);
  });

  it('never puts two transactions that write one key in the same request, and keeps their order', async () => {
    const store = await open();
    stores.push(store);
    const p = `/tarcil-test/gc/${randomUUID()}/`;
    const gc = new GroupCommit(store, { maxInFlight: 1 });
    const epoch = `${p}epoch`;
    const bump = (ru: string, v: string): TxnRequest => ({
      compare: [],
      success: [
        { type: 'put', key: `${p}${ru}`, value: v },
        { type: 'put', key: epoch, value: v },
      ],
    });
    const res = await Promise.all([
      gc.txn(bump('a', '1')),
      gc.txn(bump('b', '2')),
      gc.txn(bump('c', '3')),
      gc.txn({ compare: [], success: [{ type: 'put', key: `${p}d`, value: '4' }] }),
    ]);
    expect(res.every((r) => r.succeeded)).toBe(true);
    // a alone; b with d; c after b (both write the epoch).
    expect(gc.stats.requests).toBe(3);
    expect(res[1]?.revision).toBe(res[3]?.revision);
    expect(res[2]?.revision).toBeGreaterThan(res[1]?.revision ?? Infinity);
    expect((await store.get(epoch))?.value).toBe('3');
  });
});

describe('group commit limits and errors', () => {
  it("stays within the store's op budget, which nested transactions share", async () => {
    const store = new MemoryStore({ maxTxnOps: 16 });
    stores.push(store);
    const gc = new GroupCommit(store);
    const eight = (g: number): TxnRequest => ({
      compare: [],
      success: Array.from({ length: 8 }, (_, i) => ({ type: 'put' as const, key: `/g${g}/${i}`, value: 'v' })),
    });
    const res = await Promise.all(Array.from({ length: 11 }, (_, g) => gc.txn(eight(g))));
    expect(res.every((r) => r.succeeded)).toBe(true);
    // One alone, then 8 (each within 16 − 8 ops), then the last 2.
    expect(gc.stats).toEqual({ requests: 3, transactions: 11, largestGroup: 8 });
    expect((await store.range('/g')).kvs).toHaveLength(88);
  });

  it('lets callers wait for their turn, build their transactions then, and leave together', async () => {
    const store = new MemoryStore();
    stores.push(store);
    const gc = new GroupCommit(store, { maxInFlight: 1 });
    const put = (k: string): TxnRequest => ({ compare: [], success: [{ type: 'put', key: k, value: 'v' }] });
    let firstDone = false;
    const first = gc.txn(put('/first')).then((r) => {
      firstDone = true;
      return r;
    });
    const builtAfterFirst: boolean[] = [];
    const later = Array.from({ length: 5 }, async (_, i) => {
      await gc.turn();
      // Built once the slot is free: a decision made here sees everything the first request did.
      builtAfterFirst.push(firstDone);
      return gc.txn(put(`/later/${i}`));
    });
    const res = await Promise.all([first, ...later]);
    expect(builtAfterFirst).toEqual([true, true, true, true, true]);
    expect(gc.stats).toEqual({ requests: 2, transactions: 6, largestGroup: 5 });
    expect(new Set(res.slice(1).map((r) => r.revision)).size).toBe(1);
    // With a free slot and nothing queued, a turn comes at once.
    await gc.turn();
  });

  it('passes an error to every transaction of the request, and goes on with the next ones', async () => {
    const inner = new MemoryStore();
    stores.push(inner);
    let fail = true;
    const store = wrapStore(inner, {
      txns: (reqs) => (fail ? Promise.reject(new TarcilError('UNAVAILABLE', 'connection lost')) : inner.txns(reqs)),
    });
    const gc = new GroupCommit(store);
    const put = (k: string): TxnRequest => ({ compare: [], success: [{ type: 'put', key: k, value: 'v' }] });
    const settled = await Promise.allSettled([gc.txn(put('/a')), gc.txn(put('/b')), gc.txn(put('/c'))]);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'rejected']);
    expect(await inner.get('/b')).toBeUndefined();
    fail = false;
    const later = await Promise.all([gc.txn(put('/d')), gc.txn(put('/e')), gc.txn(put('/f'))]);
    expect(later.every((r) => r.succeeded)).toBe(true);
    expect((await inner.range('/')).kvs.map((kv) => kv.key)).toEqual(['/a', '/d', '/e', '/f']);
  });
});
