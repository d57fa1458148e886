import { describe, expect, it } from 'vitest';
import { loadCatalog, parseJobSpec } from '../../src/model/catalog.ts';
import { SimulatedExecutor } from '../../src/monitor/executor.ts';
import { LocalMonitor } from '../../src/monitor/monitor.ts';
import { Keys } from '../../src/state/keys.ts';
import { placementTxn } from '../../src/state/placement.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { endableWatches } from '../support/wrap-store.ts';
import { until as pollUntil } from '../support/until.ts';

/**
 * A node monitor follows its RUs and its cordon with two watches, both of prefixes that change
 * rarely (a watch of one resumes from a revision compaction may have passed). When one ends, only
 * its prefix is read again, and the other goes on.
 */
const catalog = loadCatalog();
const clock = new SystemClock();
const log = createLogger('test', 'silent');
const until = (what: string, cond: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> => pollUntil(what, cond, ms, 20);

describe('a node monitor whose watch ends', () => {
  it('lists that prefix alone and watches it again; a task placed afterwards starts', async () => {
    const mem = new MemoryStore();
    const keys = new Keys('/mr/');
    const { store, reads, watches } = endableWatches(mem);
    const server = { id: 'm0', platform: 'r3-xlarge', rack: 'r0', rus: 2, speed: 1, attributes: {} };
    const mon = new LocalMonitor({ store, keys, clock, log, server, executor: new SimulatedExecutor(clock), leaseTtlSeconds: 5 });
    await mon.start();
    try {
      for (const prefix of [keys.serverRus('m0'), keys.cordon('m0')]) {
        reads.length = 0;
        const made = watches.length;
        watches
          .filter((w) => w.prefix === prefix)
          .at(-1)!
          .end();
        await until(`${prefix} listed again and watched`, () => watches.length === made + 1);
        expect(reads).toEqual([prefix]);
        expect(watches.at(-1)?.prefix).toBe(prefix);
      }
      const ru = keys.ru({ server: 'm0', index: 0 });
      const kv = await mem.get(ru);
      const job = parseJobSpec({ name: 'r', profile: 'spark-lr', tasks: 1, durationMs: 60_000 }, catalog, { id: 'r-1', now: Date.now() });
      const { req } = placementTxn({
        keys,
        agent: 't',
        commitId: 'c1',
        now: Date.now(),
        job,
        items: [{ ref: { server: 'm0', index: 0 }, task: 0, attempt: 0, ruRev: kv?.modRevision ?? 0, basedOn: 0 }],
        scope: 'ru',
        ruState: 'busy',
      });
      expect((await mem.txn(req)).succeeded).toBe(true);
      await until('the task running', () => mon.snapshot().running.length === 1);
    } finally {
      await mon.close();
    }
  });
});
