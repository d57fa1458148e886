import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TarcilError } from '../../src/util/errors.ts';
import type { ClusterStore, Compare, Lease, Op, WatchBatch, WatchHandle } from '../../src/store/types.ts';

/**
 * The ClusterStore contract, run against every store. A behaviour that only one store has is a
 * bug in that store (the embedded store must behave as etcd does), so store-specific expectations do not belong here.
 */
export interface StoreUnderTest {
  store: ClusterStore;
  /** Unique per test: every key a test touches starts with it. */
  prefix: string;
  /** Moves the store's time forward (a ManualClock); absent for stores on wall-clock time. */
  advance?: (ms: number) => Promise<void>;
  /** Extra cleanup after the store is closed. */
  dispose?: () => Promise<void>;
}

export interface ContractOptions {
  /**
   * A store whose server no other test file uses, for tests that change server-wide state
   * (compaction). Defaults to `make`.
   */
  makeIsolated?: () => Promise<StoreUnderTest>;
}

export function storeContract(name: string, make: () => Promise<StoreUnderTest>, options: ContractOptions = {}): void {
  describe(`ClusterStore contract: ${name}`, () => {
    let t: StoreUnderTest;
    let s: ClusterStore;
    let p: string;
    const extra: StoreUnderTest[] = [];
    const watches: WatchHandle[] = [];

    beforeEach(async () => {
      t = await make();
      s = t.store;
      p = t.prefix;
    });
    afterEach(async () => {
      for (const w of watches.splice(0)) await w.close();
      for (const x of [t, ...extra.splice(0)]) {
        await x.store.close();
        await x.dispose?.();
      }
    });

    /** A store a test may compact: one of its own where compaction would reach other tests' keys (makeIsolated), else the shared one. */
    async function compactable(): Promise<{ store: ClusterStore; prefix: string }> {
      const iso = options.makeIsolated ? await options.makeIsolated() : undefined;
      if (!iso) return { store: s, prefix: p };
      extra.push(iso);
      return { store: iso.store, prefix: iso.prefix };
    }

    /** Lets time pass: the ManualClock when there is one, the wall clock otherwise. */
    async function elapse(ms: number): Promise<void> {
      if (t.advance) await t.advance(ms);
      else await sleep(ms);
    }

    async function watchAll(store: ClusterStore, prefix: string, fromRevision: number): Promise<Recorder> {
      const rec = new Recorder();
      const h = await store.watch({ prefix, fromRevision, onEvents: (b) => rec.batches.push(b), onError: (e) => rec.errors.push(e) });
      watches.push(h);
      rec.handle = h;
      return rec;
    }

    describe('revisions and key metadata', () => {
      it('bumps the revision once per write and tracks create/mod revision and version', async () => {
        const r0 = await s.revision();
        const r1 = await s.put(`${p}a`, '1');
        expect(r1).toBe(r0 + 1);
        expect(await s.revision()).toBe(r1);
        const a1 = await s.get(`${p}a`);
        expect(a1).toEqual({ key: `${p}a`, value: '1', createRevision: r1, modRevision: r1, version: 1, lease: '0' });

        const r2 = await s.put(`${p}a`, '2');
        expect(r2).toBe(r1 + 1);
        expect(await s.get(`${p}a`)).toMatchObject({ value: '2', createRevision: r1, modRevision: r2, version: 2 });

        // Writing the same value again is still a write.
        const r3 = await s.put(`${p}a`, '2');
        expect(r3).toBe(r2 + 1);
        expect(await s.get(`${p}a`)).toMatchObject({ version: 3, modRevision: r3 });

        expect(await s.delete(`${p}a`)).toBe(1);
        expect(await s.revision()).toBe(r3 + 1);
        expect(await s.get(`${p}a`)).toBeUndefined();

        // Recreated: a new life, version starts again.
        const r5 = await s.put(`${p}a`, 'x');
        expect(await s.get(`${p}a`)).toMatchObject({ createRevision: r5, modRevision: r5, version: 1 });
      });

      it('does not bump the revision when nothing changes', async () => {
        await s.put(`${p}keep`, 'v');
        const r = await s.revision();
        expect(await s.delete(`${p}missing`)).toBe(0);
        expect(await s.delete(`${p}nothing/`, { prefix: true })).toBe(0);
        const del = await s.txn({ compare: [], success: [{ type: 'delete', key: `${p}missing` }] });
        expect(del).toMatchObject({ succeeded: true, revision: r });
        const read = await s.txn({ compare: [], success: [{ type: 'get', key: `${p}keep` }] });
        expect(read.revision).toBe(r);
        const failed = await s.txn({
          compare: [{ key: `${p}keep`, target: 'value', op: '==', value: 'other' }],
          success: [{ type: 'put', key: `${p}keep`, value: 'w' }],
        });
        expect(failed).toMatchObject({ succeeded: false, revision: r, responses: [] });
        expect(await s.revision()).toBe(r);
      });

      it('reads a key as it was at a past revision (getAt): its value then, or nothing before it existed or once deleted', async () => {
        const k = `${p}at/a`;
        const r1 = await s.put(k, '1');
        const r2 = await s.put(k, '2');
        const r3 = await s.delete(k);
        // Another key's write: a revision at which this key did not change.
        const r4 = await s.put(`${p}at/b`, 'x');
        const r5 = await s.put(k, '3');
        expect(await s.getAt(k, r1 - 1)).toBeUndefined();
        expect(await s.getAt(k, r1)).toMatchObject({ value: '1', modRevision: r1, createRevision: r1, version: 1 });
        expect(await s.getAt(k, r2)).toMatchObject({ value: '2', modRevision: r2, createRevision: r1, version: 2 });
        expect(await s.getAt(k, r3)).toBeUndefined();
        expect(await s.getAt(k, r4)).toBeUndefined();
        expect(await s.getAt(k, r5)).toMatchObject({ value: '3', modRevision: r5, createRevision: r5, version: 1 });
        expect(await s.getAt(`${p}at/b`, r5)).toMatchObject({ value: 'x', modRevision: r4 });
      });

      it('fails getAt at a compacted revision with COMPACTED', async () => {
        const { store: st, prefix: px } = await compactable();
        const r1 = await st.put(`${px}ca/a`, '1');
        const r2 = await st.put(`${px}ca/a`, '2');
        await st.put(`${px}ca/a`, '3');
        await st.compact(r2);
        await expect(st.getAt(`${px}ca/a`, r1)).rejects.toMatchObject({ code: 'COMPACTED' });
        expect(await st.getAt(`${px}ca/a`, r2)).toMatchObject({ value: '2' });
      });

      it('ranges a prefix sorted by key, at one revision, with a limit', async () => {
        const names = ['m', 'b/2', 'z', 'b/10', 'a', 'b/1', 'b', '~', 'B', '0'];
        for (const n of names) await s.put(`${p}r/${n}`, n);
        await s.put(`${p}q`, 'outside');
        await s.put(`${p}r`, 'the prefix itself minus the slash');
        const rev = await s.revision();
        const res = await s.range(`${p}r/`);
        expect(res.revision).toBe(rev);
        const expected = [...names].sort((x, y) => (Buffer.from(x) < Buffer.from(y) ? -1 : 1));
        expect(res.kvs.map((kv) => kv.key.slice(`${p}r/`.length))).toEqual(expected);
        expect(res.kvs.map((kv) => kv.value)).toEqual(expected);

        const some = await s.range(`${p}r/`, { limit: 3 });
        expect(some.kvs.map((kv) => kv.value)).toEqual(expected.slice(0, 3));
        expect((await s.range(`${p}r/b/`)).kvs.map((kv) => kv.value)).toEqual(['b/1', 'b/10', 'b/2']);
        expect((await s.range(`${p}nothing/`)).kvs).toEqual([]);
      });

      it('snapshots several prefixes at one revision, each sorted, in the order given', async () => {
        for (const n of ['2', '1', '10']) await s.put(`${p}sa/${n}`, `a${n}`);
        for (const n of ['y', 'x']) await s.put(`${p}sb/${n}`, `b${n}`);
        await s.put(`${p}sc`, 'outside both');
        const rev = await s.revision();
        const { revision, byPrefix } = await s.snapshot([`${p}sb/`, `${p}none/`, `${p}sa/`]);
        expect(revision).toBe(rev);
        expect(byPrefix.map((kvs) => kvs.map((kv) => kv.value))).toEqual([['bx', 'by'], [], ['a1', 'a10', 'a2']]);
      });

      it('counts the keys of a prefix at one revision without reading them', async () => {
        for (const n of ['a', 'b/1', 'b/2', 'b/10', 'c']) await s.put(`${p}n/${n}`, n);
        await s.put(`${p}nb`, 'outside');
        const rev = await s.revision();
        expect(await s.count(`${p}n/`)).toEqual({ revision: rev, count: 5 });
        expect((await s.count(`${p}n/b/`)).count).toBe(3);
        expect((await s.count(`${p}n/b/1`)).count).toBe(2);
        expect((await s.count(`${p}nothing/`)).count).toBe(0);
        await s.delete(`${p}n/b/`, { prefix: true });
        expect((await s.count(`${p}n/`)).count).toBe(2);
      });

      it('orders keys by their UTF-8 bytes', async () => {
        const names = ['\u{1F600}', '\uFF21', 'a', '\u00e9'];
        for (const n of names) await s.put(`${p}u/${n}`, n);
        const res = await s.range(`${p}u/`);
        const expected = [...names].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
        expect(res.kvs.map((kv) => kv.value)).toEqual(expected);
      });

      it('deletes a prefix in one revision and counts what it deleted', async () => {
        for (const n of ['a', 'b', 'c']) await s.put(`${p}d/${n}`, n);
        await s.put(`${p}dd`, 'survives');
        const r = await s.revision();
        expect(await s.delete(`${p}d/`, { prefix: true })).toBe(3);
        expect(await s.revision()).toBe(r + 1);
        expect((await s.range(`${p}d`)).kvs.map((kv) => kv.key)).toEqual([`${p}dd`]);
      });
    });

    describe('transactions', () => {
      async function holds(c: Compare): Promise<boolean> {
        const res = await s.txn({ compare: [c], success: [] });
        return res.succeeded;
      }

      it('compares mod, create and version with ==, !=, < and >', async () => {
        const k = `${p}c`;
        const created = await s.put(k, 'v1');
        const modded = await s.put(k, 'v2');
        const cases: Array<[Compare, boolean]> = [];
        for (const [target, actual] of [
          ['mod', modded],
          ['create', created],
          ['version', 2],
        ] as const) {
          cases.push(
            [{ key: k, target, op: '==', value: actual }, true],
            [{ key: k, target, op: '==', value: actual + 1 }, false],
            [{ key: k, target, op: '!=', value: actual }, false],
            [{ key: k, target, op: '!=', value: actual - 1 }, true],
            [{ key: k, target, op: '<', value: actual + 1 }, true],
            [{ key: k, target, op: '<', value: actual }, false],
            [{ key: k, target, op: '>', value: actual - 1 }, true],
            [{ key: k, target, op: '>', value: actual }, false],
          );
        }
        for (const [c, want] of cases) expect([c, await holds(c)]).toEqual([c, want]);
      });

      it('compares value and lease with == and !=', async () => {
        const k = `${p}v`;
        const lease = await s.grantLease(30);
        try {
          await s.put(k, 'hello', { lease: lease.id });
          const cases: Array<[Compare, boolean]> = [
            [{ key: k, target: 'value', op: '==', value: 'hello' }, true],
            [{ key: k, target: 'value', op: '==', value: 'hell' }, false],
            [{ key: k, target: 'value', op: '!=', value: 'hello' }, false],
            [{ key: k, target: 'value', op: '!=', value: '' }, true],
            [{ key: k, target: 'lease', op: '==', value: lease.id }, true],
            [{ key: k, target: 'lease', op: '!=', value: lease.id }, false],
            [{ key: k, target: 'lease', op: '==', value: '0' }, false],
          ];
          for (const [c, want] of cases) expect([c, await holds(c)]).toEqual([c, want]);
          // A put without a lease detaches the key from it.
          await s.put(k, 'hello');
          expect(await holds({ key: k, target: 'lease', op: '==', value: '0' })).toBe(true);
        } finally {
          await lease.revoke();
        }
      });

      it('compares a missing key as revision 0, version 0, lease 0; a value compare on it fails', async () => {
        const k = `${p}missing`;
        const cases: Array<[Compare, boolean]> = [
          [{ key: k, target: 'mod', op: '==', value: 0 }, true],
          [{ key: k, target: 'create', op: '==', value: 0 }, true],
          [{ key: k, target: 'version', op: '==', value: 0 }, true],
          [{ key: k, target: 'version', op: '>', value: 0 }, false],
          [{ key: k, target: 'mod', op: '<', value: 1 }, true],
          [{ key: k, target: 'create', op: '!=', value: 0 }, false],
          [{ key: k, target: 'lease', op: '==', value: '0' }, true],
          // etcd: "no way to represent a missing value", so both operators fail.
          [{ key: k, target: 'value', op: '==', value: '' }, false],
          [{ key: k, target: 'value', op: '!=', value: 'x' }, false],
        ];
        for (const [c, want] of cases) expect([c, await holds(c)]).toEqual([c, want]);
      });

      it('creates a key only if absent (create == 0) and requires every compare', async () => {
        const k = `${p}once`;
        const claim = (v: string): Promise<boolean> =>
          s.txn({ compare: [{ key: k, target: 'create', op: '==', value: 0 }], success: [{ type: 'put', key: k, value: v }] }).then((r) => r.succeeded);
        expect(await claim('first')).toBe(true);
        expect(await claim('second')).toBe(false);
        expect((await s.get(k))?.value).toBe('first');
        const both = await s.txn({
          compare: [
            { key: k, target: 'value', op: '==', value: 'first' },
            { key: k, target: 'version', op: '==', value: 7 },
          ],
          success: [{ type: 'put', key: k, value: 'never' }],
        });
        expect(both.succeeded).toBe(false);
      });

      it('runs the failure branch and returns its reads', async () => {
        await s.put(`${p}f/a`, 'A');
        await s.put(`${p}f/b`, 'B');
        const modA = (await s.get(`${p}f/a`))?.modRevision ?? 0;
        const r = await s.revision();
        const res = await s.txn({
          compare: [{ key: `${p}f/a`, target: 'mod', op: '==', value: modA - 1 }],
          success: [{ type: 'put', key: `${p}f/a`, value: 'won' }],
          failure: [
            { type: 'get', key: `${p}f/a` },
            { type: 'get', key: `${p}f/`, prefix: true },
            { type: 'get', key: `${p}f/none` },
          ],
        });
        expect(res.succeeded).toBe(false);
        expect(res.revision).toBe(r);
        expect(res.responses).toHaveLength(3);
        expect(res.responses[0]?.map((kv) => [kv.key, kv.value, kv.modRevision])).toEqual([[`${p}f/a`, 'A', modA]]);
        expect(res.responses[1]?.map((kv) => kv.value)).toEqual(['A', 'B']);
        expect(res.responses[2]).toEqual([]);
        expect((await s.get(`${p}f/a`))?.value).toBe('A');
      });

      it('applies a multi-op branch as one revision, reads seeing earlier writes', async () => {
        await s.put(`${p}m/old`, 'old');
        const r = await s.revision();
        const rec = await watchAll(s, `${p}m/`, r + 1);
        const res = await s.txn({
          compare: [{ key: `${p}m/old`, target: 'value', op: '==', value: 'old' }],
          success: [
            { type: 'put', key: `${p}m/x`, value: 'X' },
            { type: 'delete', key: `${p}m/old` },
            { type: 'put', key: `${p}m/y`, value: 'Y' },
            { type: 'get', key: `${p}m/`, prefix: true },
          ],
        });
        expect(res.succeeded).toBe(true);
        expect(res.revision).toBe(r + 1);
        expect(res.responses.slice(0, 3)).toEqual([null, null, null]);
        expect(res.responses[3]?.map((kv) => [kv.value, kv.modRevision])).toEqual([
          ['X', r + 1],
          ['Y', r + 1],
        ]);
        await rec.waitFor((b) => b.length >= 1);
        expect(rec.batches).toHaveLength(1);
        expect(rec.batches[0]?.revision).toBe(r + 1);
        expect(rec.batches[0]?.events.map((e) => [e.type, e.kv.key])).toEqual([
          ['put', `${p}m/x`],
          ['delete', `${p}m/old`],
          ['put', `${p}m/y`],
        ]);
      });

      it('refuses a key put twice, or put and deleted, in one branch', async () => {
        const twice: Op[] = [
          { type: 'put', key: `${p}k`, value: '1' },
          { type: 'put', key: `${p}k`, value: '2' },
        ];
        await expectCode(s.txn({ compare: [], success: twice }), 'INVALID_ARGUMENT');
        await expectCode(
          s.txn({
            compare: [],
            success: [],
            failure: [
              { type: 'delete', key: `${p}k/`, prefix: true },
              { type: 'put', key: `${p}k/a`, value: '1' },
            ],
          }),
          'INVALID_ARGUMENT',
        );
        expect(await s.get(`${p}k`)).toBeUndefined();
      });

      it(`accepts maxTxnOps operations and refuses one more (TOO_MANY_OPS)`, async () => {
        const n = s.maxTxnOps;
        expect(n).toBe(128);
        const puts = (count: number): Op[] => Array.from({ length: count }, (_, i) => ({ type: 'put' as const, key: `${p}t/${i}`, value: 'v' }));
        const r = await s.revision();
        const ok = await s.txn({ compare: [], success: puts(n) });
        expect(ok.revision).toBe(r + 1);
        expect((await s.range(`${p}t/`)).kvs).toHaveLength(n);

        await expectCode(s.txn({ compare: [], success: puts(n + 1) }), 'TOO_MANY_OPS');
        await expectCode(s.txn({ compare: [], success: [], failure: puts(n + 1) }), 'TOO_MANY_OPS');
        const compares: Compare[] = Array.from({ length: n + 1 }, (_, i) => ({
          key: `${p}t/${i}`,
          target: 'version',
          op: '>',
          value: 0,
        }));
        await expectCode(s.txn({ compare: compares, success: [] }), 'TOO_MANY_OPS');
        expect(await s.revision()).toBe(r + 1);
      });

      it('runs independent transactions in one request, each with its own outcome, at one revision', async () => {
        await s.put(`${p}n/a`, 'A');
        await s.put(`${p}n/b`, 'B');
        const modA = (await s.get(`${p}n/a`))?.modRevision ?? 0;
        const modB = (await s.get(`${p}n/b`))?.modRevision ?? 0;
        const r = await s.revision();
        const rec = await watchAll(s, `${p}n/`, r + 1);
        const res = await s.txns([
          {
            compare: [{ key: `${p}n/a`, target: 'mod', op: '==', value: modA }],
            success: [{ type: 'put', key: `${p}n/a`, value: 'A2' }],
            failure: [{ type: 'get', key: `${p}n/a` }],
          },
          {
            compare: [{ key: `${p}n/b`, target: 'mod', op: '==', value: modB - 1 }],
            success: [{ type: 'put', key: `${p}n/b`, value: 'B2' }],
            failure: [{ type: 'get', key: `${p}n/b` }],
          },
          {
            compare: [],
            success: [
              { type: 'put', key: `${p}n/c`, value: 'C' },
              { type: 'get', key: `${p}n/c` },
            ],
          },
        ]);
        expect(res.map((x) => x.succeeded)).toEqual([true, false, true]);
        expect(res.map((x) => x.revision)).toEqual([r + 1, r + 1, r + 1]);
        expect(res[0]?.responses).toEqual([null]);
        expect(res[1]?.responses[0]?.map((kv) => [kv.value, kv.modRevision])).toEqual([['B', modB]]);
        expect(res[2]?.responses[1]?.map((kv) => [kv.value, kv.modRevision])).toEqual([['C', r + 1]]);
        expect((await s.get(`${p}n/a`))?.value).toBe('A2');
        expect((await s.get(`${p}n/b`))?.value).toBe('B');
        await rec.waitFor((b) => b.length >= 1);
        expect(rec.batches).toHaveLength(1);
        expect(rec.batches[0]?.events.map((e) => [e.type, e.kv.key, e.kv.modRevision])).toEqual([
          ['put', `${p}n/a`, r + 1],
          ['put', `${p}n/c`, r + 1],
        ]);
      });

      it('evaluates the compares of independent transactions on the state before the request', async () => {
        const r = await s.revision();
        const res = await s.txns([
          { compare: [], success: [{ type: 'put', key: `${p}e/x`, value: '1' }] },
          { compare: [{ key: `${p}e/x`, target: 'create', op: '==', value: 0 }], success: [{ type: 'put', key: `${p}e/y`, value: 'x was absent' }] },
        ]);
        expect(res.map((x) => x.succeeded)).toEqual([true, true]);
        expect((await s.get(`${p}e/y`))?.value).toBe('x was absent');
        // When every transaction fails, nothing is written and the revision stays.
        const none = await s.txns([
          { compare: [{ key: `${p}e/x`, target: 'version', op: '==', value: 0 }], success: [{ type: 'put', key: `${p}e/x`, value: '2' }] },
          { compare: [{ key: `${p}e/y`, target: 'version', op: '==', value: 0 }], success: [{ type: 'put', key: `${p}e/y`, value: '2' }] },
        ]);
        expect(none.map((x) => [x.succeeded, x.revision])).toEqual([
          [false, r + 1],
          [false, r + 1],
        ]);
        expect(await s.revision()).toBe(r + 1);
      });

      it('refuses independent transactions that write one key, or exceed the shared op budget, writing nothing', async () => {
        const r = await s.revision();
        await expectCode(
          s.txns([
            { compare: [], success: [{ type: 'put', key: `${p}d/k`, value: '1' }] },
            { compare: [], success: [{ type: 'put', key: `${p}d/other`, value: '1' }], failure: [{ type: 'put', key: `${p}d/k`, value: '2' }] },
          ]),
          'INVALID_ARGUMENT',
        );
        // Two nested transactions share the budget: each may hold maxTxnOps − 2 ops per list.
        const n = s.maxTxnOps - 2;
        const puts = (tag: string, count: number): Op[] =>
          Array.from({ length: count }, (_, i) => ({ type: 'put' as const, key: `${p}d/${tag}/${i}`, value: 'v' }));
        await expectCode(
          s.txns([
            { compare: [], success: puts('a', n + 1) },
            { compare: [], success: puts('b', 1) },
          ]),
          'TOO_MANY_OPS',
        );
        expect(await s.revision()).toBe(r);
        const ok = await s.txns([
          { compare: [], success: puts('a', n) },
          { compare: [], success: puts('b', n) },
        ]);
        expect(ok.every((x) => x.succeeded && x.revision === r + 1)).toBe(true);
        expect((await s.range(`${p}d/`)).kvs).toHaveLength(2 * n);
      });

      it('refuses a request larger than maxRequestBytes', async () => {
        const big = 'x'.repeat(2 * 1024 * 1024);
        await expectCode(s.put(`${p}big`, big), 'TOO_MANY_OPS');
        await expectCode(s.txn({ compare: [], success: [{ type: 'put', key: `${p}big`, value: big }] }), 'TOO_MANY_OPS');
        expect(await s.get(`${p}big`)).toBeUndefined();
      });
    });

    describe('watches', () => {
      it('catches up from a past revision, then streams, one batch per revision in order', async () => {
        const r1 = await s.put(`${p}w/a`, '1');
        const r2 = await s.put(`${p}w/b`, '2');
        await s.put(`${p}elsewhere`, 'not watched');
        const rec = await watchAll(s, `${p}w/`, r1);
        await rec.waitFor((b) => b.length >= 2);
        const r4 = (
          await s.txn({
            compare: [],
            success: [
              { type: 'put', key: `${p}w/c`, value: '3' },
              { type: 'put', key: `${p}elsewhere`, value: 'still not' },
              { type: 'put', key: `${p}w/d`, value: '4' },
            ],
          })
        ).revision;
        const r5 = await s.put(`${p}w/a`, '5');
        await rec.waitFor((b) => b.length >= 4);
        expect(rec.batches.map((b) => b.revision)).toEqual([r1, r2, r4, r5]);
        expect(rec.batches.map((b) => b.events.map((e) => `${e.type}:${e.kv.key.slice(p.length)}=${e.kv.value}`))).toEqual([
          ['put:w/a=1'],
          ['put:w/b=2'],
          ['put:w/c=3', 'put:w/d=4'],
          ['put:w/a=5'],
        ]);
        expect(rec.batches[3]?.events[0]?.kv).toMatchObject({ createRevision: r1, modRevision: r5, version: 2 });
        expect(rec.errors).toEqual([]);
      });

      it('from the next revision delivers only what happens after', async () => {
        await s.put(`${p}n/before`, '1');
        const rev = await s.revision();
        const rec = await watchAll(s, `${p}n/`, rev + 1);
        const r = await s.put(`${p}n/after`, '2');
        await rec.waitFor((b) => b.length >= 1);
        await sleep(50);
        expect(rec.batches.map((b) => b.revision)).toEqual([r]);
      });

      it('delivers delete events with the delete revision and an empty value', async () => {
        await s.put(`${p}x/a`, '1');
        await s.put(`${p}x/b`, '2');
        await s.put(`${p}x/c`, '3');
        const from = (await s.revision()) + 1;
        const rec = await watchAll(s, `${p}x/`, from);
        const r1 = (await s.revision()) + 1;
        await s.delete(`${p}x/a`);
        const r2 = r1 + 1;
        await s.delete(`${p}x/`, { prefix: true });
        await rec.waitFor((b) => b.length >= 2);
        expect(rec.batches).toHaveLength(2);
        expect(rec.batches[0]).toEqual({
          revision: r1,
          events: [{ type: 'delete', kv: { key: `${p}x/a`, value: '', createRevision: 0, modRevision: r1, version: 0, lease: '0' } }],
        });
        expect(rec.batches[1]?.revision).toBe(r2);
        expect(rec.batches[1]?.events.map((e) => [e.type, e.kv.key, e.kv.modRevision])).toEqual([
          ['delete', `${p}x/b`, r2],
          ['delete', `${p}x/c`, r2],
        ]);
      });

      it('never calls back inside the writer and stops after close', async () => {
        const rec = await watchAll(s, `${p}s/`, (await s.revision()) + 1);
        const pending = s.put(`${p}s/a`, '1');
        expect(rec.batches).toHaveLength(0);
        await pending;
        await rec.waitFor((b) => b.length >= 1);
        await rec.handle?.close();
        await s.put(`${p}s/b`, '2');
        await sleep(100);
        expect(rec.batches).toHaveLength(1);
        expect(rec.errors).toEqual([]);
      });

      it('keeps several watches independent', async () => {
        const from = (await s.revision()) + 1;
        const a = await watchAll(s, `${p}i/a/`, from);
        const b = await watchAll(s, `${p}i/`, from);
        await s.put(`${p}i/a/1`, '1');
        await s.put(`${p}i/b/1`, '2');
        await b.waitFor((x) => x.length >= 2);
        await a.waitFor((x) => x.length >= 1);
        await sleep(50);
        expect(a.batches.map((x) => x.events.map((e) => e.kv.value))).toEqual([['1']]);
        expect(b.batches.map((x) => x.events.map((e) => e.kv.value))).toEqual([['1'], ['2']]);
      });

      it('fails a watch from compacted history with COMPACTED, and only that watch', async () => {
        const { store: st, prefix: px } = await compactable();
        const r1 = await st.put(`${px}h/a`, '1');
        const r2 = await st.put(`${px}h/a`, '2');
        const r3 = await st.put(`${px}h/a`, '3');
        const live = await watchAll(st, `${px}h/`, r3 + 1);
        await st.compact(r2);
        // Compacting again, or to an older revision, is a no-op.
        await st.compact(r1);

        const old = await watchAll(st, `${px}h/`, r1);
        const at = await watchAll(st, `${px}h/`, r2);
        const after = await watchAll(st, `${px}h/`, r3);
        await old.waitForError();
        await at.waitForError();
        expect(old.errors.map((e) => e.code)).toEqual(['COMPACTED']);
        expect(at.errors.map((e) => e.code)).toEqual(['COMPACTED']);
        expect(old.batches).toEqual([]);
        expect(at.batches).toEqual([]);

        await after.waitFor((b) => b.length >= 1);
        const r4 = await st.put(`${px}h/a`, '4');
        await live.waitFor((b) => b.length >= 1);
        await after.waitFor((b) => b.length >= 2);
        expect(after.batches.map((b) => b.revision)).toEqual([r3, r4]);
        expect(live.batches.map((b) => b.revision)).toEqual([r4]);
        expect([...after.errors, ...live.errors]).toEqual([]);
        await sleep(50);
        expect(old.errors).toHaveLength(1);

        // The data itself survives compaction.
        expect((await st.get(`${px}h/a`))?.value).toBe('4');
        await expectCode(st.compact((await st.revision()) + 10), 'INVALID_ARGUMENT');
        await expectCode(st.compact(0), 'INVALID_ARGUMENT');
      });
    });

    describe('leases', () => {
      it('expiry deletes the attached keys in one revision and reports onLost; keepalive holds', async () => {
        const ttl = 2;
        const dying = await s.grantLease(ttl, { keepAlive: false });
        const living = await s.grantLease(ttl);
        expect(dying.id).toMatch(/^\d+$/);
        expect(dying.id).not.toBe('0');
        expect(dying.ttlSeconds).toBeGreaterThanOrEqual(ttl);
        const lost: Error[] = [];
        dying.onLost((e) => lost.push(e));
        const livingLost: Error[] = [];
        living.onLost((e) => livingLost.push(e));

        await s.put(`${p}l/a`, 'a', { lease: dying.id });
        await s.put(`${p}l/b`, 'b', { lease: dying.id });
        await s.put(`${p}l/c`, 'c', { lease: living.id });
        await s.put(`${p}l/d`, 'd');
        expect((await s.get(`${p}l/a`))?.lease).toBe(dying.id);
        const rec = await watchAll(s, `${p}l/`, (await s.revision()) + 1);

        // etcd rounds a TTL up to its minimum and checks expiry every 500 ms: allow some seconds.
        const deadline = Date.now() + 10_000;
        await elapse(ttl * 1000 + 100);
        while (rec.batches.length === 0 && Date.now() < deadline) await elapse(t.advance ? 1000 : 100);
        expect(rec.batches).toHaveLength(1);
        expect(rec.batches[0]?.events.map((e) => [e.type, e.kv.key])).toEqual([
          ['delete', `${p}l/a`],
          ['delete', `${p}l/b`],
        ]);
        await waitUntil(() => lost.length > 0, 5000);
        expect(lost).toHaveLength(1);
        expect(lost[0]).toBeInstanceOf(TarcilError);
        expect((lost[0] as TarcilError).code).toBe('LEASE_NOT_FOUND');

        // Late registration still hears about it, once.
        const late: Error[] = [];
        dying.onLost((e) => late.push(e));
        await waitUntil(() => late.length > 0, 1000);

        await expectCode(dying.keepAliveOnce(), 'LEASE_NOT_FOUND');
        await expectCode(s.put(`${p}l/e`, 'e', { lease: dying.id }), 'LEASE_NOT_FOUND');
        expect(await s.get(`${p}l/a`)).toBeUndefined();
        expect((await s.get(`${p}l/d`))?.value).toBe('d');

        // The kept-alive lease outlives its TTL by far.
        await elapse(ttl * 1000 + 500);
        expect((await s.get(`${p}l/c`))?.lease).toBe(living.id);
        await living.keepAliveOnce();
        await living.revoke();
        expect(livingLost).toEqual([]);
      }, 30_000);

      it('revoke deletes the keys at once, in one revision, without onLost; it is idempotent', async () => {
        const lease = await s.grantLease(30);
        const lost: Error[] = [];
        lease.onLost((e) => lost.push(e));
        await s.put(`${p}v/a`, 'a', { lease: lease.id });
        await s.txn({ compare: [], success: [{ type: 'put', key: `${p}v/b`, value: 'b', lease: lease.id }] });
        const r = await s.revision();
        const rec = await watchAll(s, `${p}v/`, r + 1);
        await lease.revoke();
        expect(await s.revision()).toBe(r + 1);
        expect((await s.range(`${p}v/`)).kvs).toEqual([]);
        await rec.waitFor((b) => b.length >= 1);
        expect(rec.batches[0]?.events.map((e) => [e.type, e.kv.key])).toEqual([
          ['delete', `${p}v/a`],
          ['delete', `${p}v/b`],
        ]);
        await lease.revoke();
        await sleep(50);
        expect(lost).toEqual([]);
        await expectCode(s.put(`${p}v/c`, 'c', { lease: lease.id }), 'LEASE_NOT_FOUND');
      });

      it('revoking a lease without keys does not bump the revision', async () => {
        const lease = await s.grantLease(30);
        const r = await s.revision();
        await lease.revoke();
        expect(await s.revision()).toBe(r);
      });

      it('refuses a put on an unknown lease, in a txn too, writing nothing', async () => {
        const r = await s.revision();
        await expectCode(s.put(`${p}u`, 'u', { lease: '123456789' }), 'LEASE_NOT_FOUND');
        await expectCode(
          s.txn({
            compare: [],
            success: [
              { type: 'put', key: `${p}u1`, value: 'u' },
              { type: 'put', key: `${p}u2`, value: 'u', lease: '123456789' },
            ],
          }),
          'LEASE_NOT_FOUND',
        );
        expect(await s.revision()).toBe(r);
      });

      it('fencing: a write guarded by the lease of an owner key fails once the lease is gone', async () => {
        const lease = await s.grantLease(30);
        const owner = `${p}owners/job`;
        await s.put(owner, 'agent-1', { lease: lease.id });
        const guarded = (): Promise<boolean> =>
          s
            .txn({
              compare: [{ key: owner, target: 'lease', op: '==', value: lease.id }],
              success: [{ type: 'put', key: `${p}jobs/job`, value: 'placed' }],
            })
            .then((res) => res.succeeded);
        expect(await guarded()).toBe(true);
        await lease.revoke();
        expect(await guarded()).toBe(false);
      });
    });

    describe('elections', () => {
      it('the oldest candidate leads; the next one leads once it resigns, and leader() follows', async () => {
        const name = `${p}election`;
        expect(await s.leader(name)).toBeUndefined();
        const a = s.campaign(name, 'a', 5);
        await a.elected();
        expect(await s.leader(name)).toBe('a');
        const b = s.campaign(name, 'b', 5);
        let bLeads = false;
        void b.elected().then(() => (bLeads = true));
        // Candidates are ordered by the creation of their keys: c stands once b's key exists.
        const candidates = async (): Promise<number> => (await s.range(`election/${name}/`)).kvs.length;
        for (let i = 0; i < 100 && (await candidates()) < 2; i++) await elapse(50);
        const c = s.campaign(name, 'c', 5);
        let cLeads = false;
        void c.elected().then(() => (cLeads = true));
        await elapse(300);
        await sleep(100);
        expect([bLeads, cLeads]).toEqual([false, false]);
        expect(await s.leader(name)).toBe('a');

        await a.resign();
        await waitUntil(() => bLeads, 5000);
        expect(cLeads).toBe(false);
        expect(await s.leader(name)).toBe('b');
        await a.resign();

        // A waiting candidate that resigns is never elected and does not hold up the others.
        await c.resign();
        await b.resign();
        await sleep(100);
        expect(cLeads).toBe(false);
        expect(await s.leader(name)).toBeUndefined();
        const d = s.campaign(name, 'd', 5);
        await d.elected();
        expect(await s.leader(name)).toBe('d');
        await d.resign();
      });

      it('elections of different names do not interfere', async () => {
        const one = s.campaign(`${p}one`, '1', 5);
        const two = s.campaign(`${p}two`, '2', 5);
        await Promise.all([one.elected(), two.elected()]);
        expect(await s.leader(`${p}one`)).toBe('1');
        expect(await s.leader(`${p}two`)).toBe('2');
        await one.resign();
        expect(await s.leader(`${p}one`)).toBeUndefined();
        expect(await s.leader(`${p}two`)).toBe('2');
        await two.resign();
      });
    });

    describe('lifecycle', () => {
      it('refuses every call after close with CLOSED', async () => {
        const lease: Lease = await s.grantLease(30);
        await s.put(`${p}c`, 'c', { lease: lease.id });
        await s.close();
        await expectCode(s.get(`${p}c`), 'CLOSED');
        await expectCode(s.put(`${p}c`, 'c'), 'CLOSED');
        await expectCode(s.txn({ compare: [], success: [] }), 'CLOSED');
        await expectCode(s.watch({ prefix: p, fromRevision: 1, onEvents: () => {}, onError: () => {} }), 'CLOSED');
        await s.close();
      });

      it('rejects bad arguments with INVALID_ARGUMENT', async () => {
        await expectCode(s.put('', 'v'), 'INVALID_ARGUMENT');
        await expectCode(s.get(''), 'INVALID_ARGUMENT');
        await expectCode(s.grantLease(0), 'INVALID_ARGUMENT');
        await expectCode(s.txn({ compare: [{ key: `${p}a`, target: 'value', op: '<', value: 'x' } as unknown as Compare], success: [] }), 'INVALID_ARGUMENT');
      });
    });
  });
}

export class Recorder {
  readonly batches: WatchBatch[] = [];
  readonly errors: TarcilError[] = [];
  handle: WatchHandle | undefined;

  async waitFor(pred: (b: WatchBatch[]) => boolean, timeoutMs = 5000): Promise<void> {
    await waitUntil(() => pred(this.batches) || this.errors.length > 0, timeoutMs);
    if (!pred(this.batches)) {
      throw new Error(`watch ended or timed out: ${JSON.stringify({ batches: this.batches, errors: this.errors.map((e) => e.message) })}`);
    }
  }

  async waitForError(timeoutMs = 5000): Promise<void> {
    await waitUntil(() => this.errors.length > 0, timeoutMs);
  }
}

export async function waitUntil(cond: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(10);
  }
}

export async function expectCode(p: Promise<unknown>, code: TarcilError['code']): Promise<void> {
  let caught: unknown;
  try {
    await p;
  } catch (err) {
    caught = err;
  }
  expect(caught, `expected a ${code} error`).toBeInstanceOf(TarcilError);
  expect((caught as TarcilError).code).toBe(code);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
