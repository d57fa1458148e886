import { describe, expect, it } from 'vitest';
import { expandCluster, loadCatalog, parseJobSpec, resolveCluster, scaleCluster } from '../../src/model/catalog.ts';
import type { RuRef } from '../../src/model/types.ts';
import { HollowMetrics } from '../../src/node/metrics.ts';
import { HollowNodes } from '../../src/monitor/hollow.ts';
import { Keys } from '../../src/state/keys.ts';
import { placementTxn } from '../../src/state/placement.ts';
import { isFreeRuValue } from '../../src/state/records.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import type { TxnRequest } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { wrapStore } from '../support/wrap-store.ts';
import { until as pollUntil } from '../support/until.ts';

/**
 * The hollow nodes' task starts (a node confirms its RU holds the task, or records it running, then starts it) pass a
 * queue of at most `maxWrites` in flight. When the store answers slowly the queue is what delays
 * tasks; its length, its oldest wait and the writes' total time are in the snapshot and in the
 * process's /metrics, so an operator (and the soak) can see it.
 */
const catalog = loadCatalog();
const clock = new SystemClock();
const log = createLogger('test', 'warn');

const until = (what: string, cond: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> => pollUntil(what, cond, ms, 20);

/** A node's start: the compare of its RU's revision and a read of it (the placement recorded the task running). */
const isStart = (req: TxnRequest): boolean =>
  req.success.length === 1 && req.success[0]?.type === 'get' && req.compare.length === 1 && req.compare[0]?.key.includes('/rus/') === true;

describe('hollow nodes: the task-start queue', () => {
  it('counts the writes waiting and in flight while the store holds them, and their time once answered', async () => {
    const mem = new MemoryStore();
    const keys = new Keys('/hq/');
    let holding = true;
    const held: (() => void)[] = [];
    const hold = async <T>(starts: boolean, send: () => Promise<T>): Promise<T> => {
      if (starts && holding) await new Promise<void>((go) => held.push(go));
      return send();
    };
    const store = wrapStore(mem, {
      txn: (req) => hold(isStart(req), () => mem.txn(req)),
      txns: (reqs) => hold(reqs.some(isStart), () => mem.txns(reqs)),
    });
    const servers = expandCluster(scaleCluster(resolveCluster('hetero-400', catalog), 4), catalog.platforms);
    const hollow = new HollowNodes({ store, keys, clock, log, servers, leaseTtlSeconds: 5, maxWrites: 2, maxWriteRequests: 1 });
    const metrics = new HollowMetrics(hollow);
    try {
      await hollow.setEndpoint('127.0.0.1:1');
      await hollow.start();
      expect(hollow.snapshot().startWrites).toEqual({ inFlight: 0, waiting: 0, oldestWaitMs: 0, done: 0, totalMs: 0 });
      // Six tasks placed on free RUs with the agents' placement transaction.
      const free = (await mem.range(keys.rus())).kvs.filter((kv) => isFreeRuValue(kv.value)).slice(0, 6);
      const job = parseJobSpec({ name: 'q', profile: 'spark-lr', tasks: free.length, durationMs: 60_000 }, catalog, { id: 'q-1', now: Date.now() });
      const items = free.map((kv, task) => ({ ref: keys.parseRu(kv.key) as RuRef, task, attempt: 0, ruRev: kv.modRevision, basedOn: 0 }));
      const { req } = placementTxn({ keys, agent: 't', commitId: 'c1', now: Date.now(), job, items, scope: 'ru', ruState: 'busy' });
      expect((await mem.txn(req)).succeeded).toBe(true);

      // Two in flight (held by the store), the other four waiting for a slot.
      await until('two starts in flight, four waiting', () => {
        const w = hollow.snapshot().startWrites;
        return w.inFlight === 2 && w.waiting === 4;
      });
      await new Promise((r) => setTimeout(r, 120));
      const waiting = hollow.snapshot().startWrites;
      expect(waiting.oldestWaitMs).toBeGreaterThanOrEqual(100);
      expect(waiting.done).toBe(0);
      const port = await metrics.listen('127.0.0.1', 0);
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const value = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
      expect(value('tarcil_hollow_start_writes_in_flight')).toBe(2);
      expect(value('tarcil_hollow_start_writes_waiting')).toBe(4);
      expect(value('tarcil_hollow_start_write_oldest_wait_seconds')).toBeGreaterThanOrEqual(0.1);
      // No task has started yet: a node starts its task only once the store has confirmed its RU.
      expect(hollow.snapshot().stats.started).toBe(0);

      holding = false;
      for (const go of held.splice(0)) go();
      await until('every start written', () => hollow.snapshot().startWrites.done === 6);
      const after = hollow.snapshot().startWrites;
      expect(after).toMatchObject({ inFlight: 0, waiting: 0, oldestWaitMs: 0 });
      // Each of the six waited at least the ~120 ms the first two were held.
      expect(after.totalMs).toBeGreaterThanOrEqual(6 * 100);
      expect(hollow.snapshot().running).toBe(6);
      // A scrape reads a snapshot at most 250 ms old.
      await new Promise((r) => setTimeout(r, 300));
      const text2 = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(Number(/^tarcil_hollow_start_writes_total (\S+)$/m.exec(text2)?.[1])).toBe(6);
      expect(Number(/^tarcil_hollow_start_write_seconds_total (\S+)$/m.exec(text2)?.[1])).toBeGreaterThanOrEqual(0.6);
    } finally {
      holding = false;
      for (const go of held.splice(0)) go();
      await metrics.close();
      await hollow.close();
      await mem.close();
    }
  });
});
