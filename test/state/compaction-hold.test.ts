/**
 * The housekeeper holds compaction back while the job owner says it still needs the history since
 * some time (adoptions under way), never more than its bound; on the embedded store, a manual clock.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Housekeeper } from '../../src/state/housekeeping.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { ManualClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { until as pollUntil } from '../support/until.ts';

const log = createLogger('test', 'silent');
const keys = new Keys('/hold/');
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

describe('compaction held back for adoptions', () => {
  it('does not pass the revision of the time whose history is needed, within the bound; then goes on', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new MemoryStore();
    let since: number | undefined;
    const hk = new Housekeeper({
      store,
      keys,
      clock,
      log,
      process: 'hk',
      retainMs: 60_000,
      compactMarginMs: 1000,
      compactEveryMs: 100,
      compactHoldMaxMs: 3000,
      electionTtlSeconds: 5,
      keepHistorySince: () => since,
    });
    closers.push(async () => {
      await hk.close();
      await store.close();
    });
    hk.start();
    await pollUntil('elected', () => hk.leading, 10_000, 10);
    // A write every 100 ms of virtual time; the revision each time was reached.
    const revAt: { at: number; rev: number }[] = [];
    const tick = async (ms: number): Promise<void> => {
      for (let t = 0; t < ms; t += 100) {
        revAt.push({ at: clock.now(), rev: await store.put(`${keys.prefix}data/k`, String(t)) });
        clock.advance(100);
        await new Promise((r) => setTimeout(r, 2));
      }
    };
    await tick(500);
    since = clock.now();
    const needed = revAt.at(-1)!.rev;
    await tick(3000);
    // The margin alone would have compacted to about 2.5 s of writes past `since`.
    expect(hk.stats.compactions).toBeGreaterThan(0);
    expect(hk.stats.compactedTo).toBeLessThanOrEqual(needed + 1);
    expect(hk.stats.held).toBe(1);
    // Needed no more: compaction catches up to the margin.
    since = undefined;
    await tick(500);
    expect(hk.stats.compactedTo).toBeGreaterThan(needed + 20);
    // Needed since long ago: held at most the bound (3 s) behind the margin (1 s).
    since = clock.now() - 3_600_000;
    const at = clock.now();
    await tick(6000);
    const bound = revAt.filter((x) => x.at <= at + 6000 - 1000 - 3000).at(-1)!.rev;
    expect(hk.stats.compactedTo).toBeGreaterThanOrEqual(bound - 3);
    expect(hk.stats.compactedTo).toBeLessThan(revAt.at(-1)!.rev - 30);
  });
});
