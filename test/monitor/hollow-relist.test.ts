import { describe, expect, it } from 'vitest';
import { expandCluster, loadCatalog, parseJobSpec, resolveCluster, scaleCluster } from '../../src/model/catalog.ts';
import type { RuRef } from '../../src/model/types.ts';
import { HollowNodes } from '../../src/monitor/hollow.ts';
import { Keys } from '../../src/state/keys.ts';
import { placementTxn } from '../../src/state/placement.ts';
import { isFreeRuValue } from '../../src/state/records.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { endableWatches } from '../support/wrap-store.ts';
import { until as pollUntil } from '../support/until.ts';

/**
 * The hollow nodes follow the RUs and the cordons with two watches. When one ends (the cordons'
 * start revision compacted away, as after etcd restarts: that prefix rarely changes), only its
 * prefix is read again; the RUs' watch goes on and no RU is listed again.
 */
const catalog = loadCatalog();
const clock = new SystemClock();
const log = createLogger('test', 'silent');
const until = (what: string, cond: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> => pollUntil(what, cond, ms, 20);

describe('hollow nodes: a watch that ends', () => {
  it('lists its own prefix again, and the RUs are still followed: a task placed afterwards starts', async () => {
    const mem = new MemoryStore();
    const keys = new Keys('/hr/');
    const { store, reads, watches } = endableWatches(mem);
    const servers = expandCluster(scaleCluster(resolveCluster('hetero-400', catalog), 4), catalog.platforms);
    const hollow = new HollowNodes({ store, keys, clock, log, servers, leaseTtlSeconds: 5 });
    try {
      await hollow.setEndpoint('127.0.0.1:1');
      await hollow.start();
      reads.length = 0;
      const made = watches.length;
      watches.find((w) => w.prefix === keys.cordons())!.end();
      await until('the cordons listed again and watched', () => watches.length === made + 1);
      expect(reads).toEqual([keys.cordons()]);
      expect(watches.at(-1)?.prefix).toBe(keys.cordons());
      // Placed after: the RUs' first watch carries it to its node, which starts it.
      const free = (await mem.range(keys.rus())).kvs.filter((kv) => isFreeRuValue(kv.value)).slice(0, 2);
      const job = parseJobSpec({ name: 'r', profile: 'spark-lr', tasks: free.length, durationMs: 60_000 }, catalog, { id: 'r-1', now: Date.now() });
      const items = free.map((kv, task) => ({ ref: keys.parseRu(kv.key) as RuRef, task, attempt: 0, ruRev: kv.modRevision, basedOn: 0 }));
      const { req } = placementTxn({ keys, agent: 't', commitId: 'c1', now: Date.now(), job, items, scope: 'ru', ruState: 'busy' });
      expect((await mem.txn(req)).succeeded).toBe(true);
      await until('both tasks running', () => hollow.snapshot().running === 2);
      expect(reads.filter((p) => p === keys.rus())).toEqual([]);
    } finally {
      await hollow.close();
    }
  });
});
