import { describe, expect, it } from 'vitest';
import { expandCluster, loadCatalog, parseJobSpec, resolveCluster, scaleCluster } from '../../src/model/catalog.ts';
import type { RuRef } from '../../src/model/types.ts';
import { HollowNodes } from '../../src/monitor/hollow.ts';
import { HOLLOW_DEFAULTS, hollowMaxWrites } from '../../src/monitor/options.ts';
import { Keys } from '../../src/state/keys.ts';
import { placementTxn } from '../../src/state/placement.ts';
import { isFreeRuValue } from '../../src/state/records.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import type { KeyValue, TxnRequest } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { wrapStore } from '../support/wrap-store.ts';
import { until as pollUntil } from '../support/until.ts';
import { taskRecords } from '../support/task-records.ts';

/**
 * How many task starts the hollow nodes keep in flight. Starts leave through the process's group
 * commit (4 requests in flight, each as many transactions as the store's op budget takes); a
 * separate bound of 128 starts left those requests a quarter full, so a slow store capped starts
 * at 128 per round trip. The bound now follows what the requests carry; starts still leave in the
 * order the nodes asked, and none is lost.
 */
const catalog = loadCatalog();
const clock = new SystemClock();
const log = createLogger('test', 'warn');

const until = (what: string, cond: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> => pollUntil(what, cond, ms, 10);

/** The RU whose task a request starts: a start compares the RU's revision and reads it, writing nothing (its placement recorded the task running). */
const startedTask = (req: TxnRequest): string | undefined =>
  req.success.length === 1 && req.success[0]?.type === 'get' && req.compare.length === 1 ? req.compare[0]?.key : undefined;

/**
 * A MemoryStore whose requests carrying task starts are held until released, in the order they
 * came; records each request's started tasks, in order.
 */
function slowStarts(mem: MemoryStore) {
  const held: (() => void)[] = [];
  const requests: string[][] = [];
  let holding = true;
  const hold = async <T>(reqs: TxnRequest[], send: () => Promise<T>): Promise<T> => {
    const started = reqs.map(startedTask).filter((k): k is string => k !== undefined);
    if (started.length > 0) {
      requests.push(started);
      if (holding) await new Promise<void>((go) => held.push(go));
    }
    return send();
  };
  const store = wrapStore(mem, {
    txn: (req) => hold([req], () => mem.txn(req)),
    txns: (reqs) => hold(reqs, () => mem.txns(reqs)),
  });
  return {
    store,
    held,
    requests,
    releaseOldest: () => held.shift()?.(),
    releaseAll: () => {
      holding = false;
      for (const go of held.splice(0)) go();
    },
  };
}

/** Places `count` tasks on free RUs in placement transactions of `per` picks, in order; returns their RU keys in that order. */
async function place(mem: MemoryStore, keys: Keys, free: KeyValue[], count: number, per: number, tag: string): Promise<string[]> {
  const order: string[] = [];
  for (let n = 0; order.length < count; n++) {
    const chunk = free.splice(0, Math.min(per, count - order.length));
    const job = parseJobSpec({ name: `${tag}${n}`, profile: 'spark-lr', tasks: chunk.length, durationMs: 600_000 }, catalog, {
      id: `${tag}-${n}`,
      now: Date.now(),
    });
    const items = chunk.map((kv, task) => ({ ref: keys.parseRu(kv.key) as RuRef, task, attempt: 0, ruRev: kv.modRevision, basedOn: 0 }));
    const { req } = placementTxn({ keys, agent: 't', commitId: `${tag}${n}`, now: Date.now(), job, items, scope: 'ru', ruState: 'busy' });
    expect((await mem.txn(req)).succeeded).toBe(true);
    order.push(...chunk.map((kv) => kv.key));
  }
  return order;
}

async function runningTasks(mem: MemoryStore, keys: Keys): Promise<number> {
  return (await taskRecords(mem, keys)).filter((t) => t.state === 'running').length;
}

describe('hollow nodes: the bound on task starts in flight', () => {
  it('by default lets the group commit fill its requests: more than 128 starts in flight, groups as large as the op budget takes, all written in order', async () => {
    const mem = new MemoryStore();
    const keys = new Keys('/hb/');
    const slow = slowStarts(mem);
    // 50 nodes of 16 RUs.
    const servers = expandCluster(scaleCluster(resolveCluster('hollow-10k', catalog), 50), catalog.platforms);
    const hollow = new HollowNodes({ store: slow.store, keys, clock, log, servers, leaseTtlSeconds: 5 });
    const requests = HOLLOW_DEFAULTS.maxWriteRequests;
    const perRequest = mem.maxTxnOps - 1;
    expect(hollow.maxWrites).toBe(hollowMaxWrites(requests, mem.maxTxnOps));
    expect(hollow.maxWrites).toBe(2 * requests * perRequest);
    try {
      await hollow.setEndpoint('127.0.0.1:1');
      await hollow.start();
      const free = (await mem.range(keys.rus())).kvs.filter((kv) => isFreeRuValue(kv.value));
      const total = 600;
      expect(free.length).toBeGreaterThanOrEqual(total);
      const order = await place(mem, keys, free, total, 40, 'b');

      // The store holds every request: all 600 starts are in flight (in the requests or queued in
      // the group commit), none waits behind the bound, which the old 128 would not have allowed.
      await until('every start asked and let through', () => {
        const w = hollow.snapshot().startWrites;
        return w.inFlight === total && slow.held.length === requests;
      });
      expect(hollow.snapshot().startWrites).toMatchObject({ inFlight: total, waiting: 0, oldestWaitMs: 0, done: 0 });
      expect(total).toBeGreaterThan(128);

      // The store answers one request at a time: each freed slot takes a full group.
      while (slow.requests.flat().length < total || slow.held.length > 0) {
        const sent = slow.requests.length;
        slow.releaseOldest();
        await until('the next request', () => slow.requests.length > sent || slow.requests.flat().length === total);
      }
      await until('every start written', () => hollow.snapshot().startWrites.done === total);
      const sizes = slow.requests.map((r) => r.length);
      // The first starts found free slots: the starts of one commit (40 tasks, one watch response)
      // left together, not one per free slot; every later request but the last was full.
      expect(sizes.slice(0, requests).every((n) => n >= 40 && n % 40 === 0)).toBe(true);
      const later = sizes.slice(requests);
      expect(later.slice(0, -1).every((n) => n === perRequest)).toBe(true);
      expect(Math.max(...later)).toBe(perRequest);
      expect(hollow.snapshot().writes.largestGroup).toBe(perRequest);
      // In the order the tasks were placed, each once, and every task is running.
      expect(slow.requests.flat()).toEqual(order);
      expect(await runningTasks(mem, keys)).toBe(total);
      expect(hollow.snapshot().running).toBe(total);
      expect(hollow.snapshot().stats.started).toBe(total);
      expect(hollow.snapshot().startWrites).toMatchObject({ inFlight: 0, waiting: 0, done: total });
    } finally {
      slow.releaseAll();
      await hollow.close();
      await mem.close();
    }
  });

  it('with a small bound, starts asked while others wait go behind them: written in the order asked, none lost', async () => {
    const mem = new MemoryStore();
    const keys = new Keys('/hs/');
    const slow = slowStarts(mem);
    const servers = expandCluster(scaleCluster(resolveCluster('hollow-10k', catalog), 10), catalog.platforms);
    const hollow = new HollowNodes({ store: slow.store, keys, clock, log, servers, leaseTtlSeconds: 5, maxWrites: 8, maxWriteRequests: 2 });
    expect(hollow.maxWrites).toBe(8);
    try {
      await hollow.setEndpoint('127.0.0.1:1');
      await hollow.start();
      const free = (await mem.range(keys.rus())).kvs.filter((kv) => isFreeRuValue(kv.value));
      const first = await place(mem, keys, free, 30, 10, 'x');
      await until('8 in flight, 22 waiting', () => {
        const w = hollow.snapshot().startWrites;
        return w.inFlight === 8 && w.waiting === 22;
      });
      // Let a few through: the slots pass to the oldest waiting ones.
      slow.releaseOldest();
      await until('a slot passed on', () => hollow.snapshot().startWrites.done > 0 && hollow.snapshot().startWrites.inFlight === 8);
      const second = await place(mem, keys, free, 30, 10, 'y');
      await until(
        'the second batch waiting too',
        () => hollow.snapshot().startWrites.inFlight + hollow.snapshot().startWrites.waiting + hollow.snapshot().startWrites.done === 60,
      );
      expect(hollow.snapshot().startWrites.inFlight).toBe(8);
      slow.releaseAll();
      await until('every start written', () => hollow.snapshot().startWrites.done === 60);
      expect(slow.requests.flat()).toEqual([...first, ...second]);
      expect(await runningTasks(mem, keys)).toBe(60);
      expect(hollow.snapshot().stats.started).toBe(60);
      expect(hollow.snapshot().startWrites).toMatchObject({ inFlight: 0, waiting: 0, oldestWaitMs: 0, done: 60 });
    } finally {
      slow.releaseAll();
      await hollow.close();
      await mem.close();
    }
  });
});
