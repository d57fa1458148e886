/**
 * The Follower, the one list+watch loop every component follows the store with: re-listing after
 * a watch ends, its jittered backoff while re-listing fails, and the races around a re-list.
 */
import { describe, expect, it } from 'vitest';
import { Follower, relistBackoffMs } from '../../src/state/follow.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import type { ClusterStore, KeyValue, WatchHandle, WatchOptions } from '../../src/store/types.ts';
import { ManualClock } from '../../src/util/clock.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { createLogger } from '../../src/util/log.ts';
import { wrapStore } from '../support/wrap-store.ts';
import { until as pollUntil } from '../support/until.ts';

const log = createLogger('test', 'silent');

const until = (what: string, cond: () => boolean | Promise<boolean>, ms = 5000): Promise<void> => pollUntil(what, cond, ms, 2);

/** A ManualClock that remembers every pause asked of it. */
class RecordingClock extends ManualClock {
  readonly sleeps: number[] = [];
  override sleep(ms: number): Promise<void> {
    this.sleeps.push(ms);
    return super.sleep(ms);
  }
}

/**
 * A MemoryStore whose watches can be ended as the server would end them, whose lists can be made
 * to fail, and which counts the watches left open.
 */
function faultyStore(): {
  store: ClusterStore;
  inner: MemoryStore;
  ranges: { count: number; failNext: number };
  watches: { open: number; made: number; failNextFor: string | undefined; endAtOnce: number };
  endAll: (which?: (prefix: string) => boolean) => void;
} {
  const inner = new MemoryStore();
  const ranges = { count: 0, failNext: 0 };
  const watches = { open: 0, made: 0, failNextFor: undefined as string | undefined, endAtOnce: 0 };
  const live: { opts: WatchOptions; handle: WatchHandle }[] = [];
  const store = wrapStore(inner, {
    range: (prefix, opts) => {
      ranges.count++;
      if (ranges.failNext > 0) {
        ranges.failNext--;
        return Promise.reject(new TarcilError('UNAVAILABLE', 'store unreachable'));
      }
      return inner.range(prefix, opts);
    },
    txn: (req) => {
      // The Follower lists several prefixes in one read-only transaction.
      if (req.compare.length === 0 && req.success.every((o) => o.type === 'get')) ranges.count++;
      return inner.txn(req);
    },
    watch: async (opts) => {
      if (watches.failNextFor === opts.prefix) {
        watches.failNextFor = undefined;
        throw new TarcilError('UNAVAILABLE', 'watch refused');
      }
      const h = await inner.watch(opts);
      watches.made++;
      watches.open++;
      let closed = false;
      const handle: WatchHandle = {
        close: async () => {
          if (!closed) watches.open--;
          closed = true;
          await h.close();
        },
      };
      if (watches.endAtOnce > 0) {
        // Ends before the caller even has the handle (a server that cancels a fresh watch).
        watches.endAtOnce--;
        live.push({ opts, handle });
        await handle.close();
        opts.onError(new TarcilError('CANCELLED', 'watch cancelled by the server'));
        return handle;
      }
      live.push({ opts, handle });
      return handle;
    },
  });
  const endAll = (which: (prefix: string) => boolean = () => true): void => {
    const ending = live.filter((w) => which(w.opts.prefix));
    live.splice(0, live.length, ...live.filter((w) => !ending.includes(w)));
    for (const w of ending) {
      void w.handle.close();
      w.opts.onError(new TarcilError('CANCELLED', 'watch cancelled by the server'));
    }
  };
  return { store, inner, ranges, watches, endAll };
}

function follow(store: ClusterStore, clock: ManualClock, prefix: string | string[], rng = { next: () => 0.5 }) {
  const seen = { snapshots: [] as string[][], events: [] as string[] };
  const f = new Follower({
    store,
    clock,
    rng,
    log,
    prefix,
    onSnapshot: (kvs: KeyValue[]) => seen.snapshots.push(kvs.map((kv) => kv.key)),
    onEvent: (kv, deleted) => seen.events.push(`${deleted ? '-' : '+'}${kv.key}`),
  });
  return { f, seen };
}

describe('relistBackoffMs', () => {
  it('doubles from the first pause up to the longest, each drawn in its upper half', () => {
    const b = { first: 50, max: 2000 };
    expect(relistBackoffMs(b, 1, () => 0)).toBe(25);
    expect(relistBackoffMs(b, 1, () => 1)).toBe(50);
    expect(relistBackoffMs(b, 2, () => 0)).toBe(50);
    expect(relistBackoffMs(b, 2, () => 1)).toBe(100);
    expect(relistBackoffMs(b, 6, () => 0.5)).toBe(1200); // c = 1600
    for (const failures of [7, 20, 1000]) {
      expect(relistBackoffMs(b, failures, () => 0)).toBe(1000);
      expect(relistBackoffMs(b, failures, () => 1)).toBe(2000);
    }
  });
});

describe('Follower', () => {
  it('re-lists at once when its watch ends, backs off with jitter while listing fails, and misses nothing', async () => {
    const { store, inner, ranges, watches, endAll } = faultyStore();
    const clock = new RecordingClock();
    await inner.put('/p/a', '1');
    const { f, seen } = follow(store, clock, '/p/');
    await f.start();
    expect(seen.snapshots).toEqual([['/p/a']]);
    await inner.put('/p/b', '1');
    await until('the event of /p/b', () => seen.events.includes('+/p/b'));

    ranges.failNext = 3;
    const listsBefore = ranges.count;
    endAll();
    await inner.put('/p/c', '1'); // written while nothing watches
    // The first re-list comes at once and fails; then 25–50, 50–100, 100–200 ms (the middle here).
    for (const pause of [38, 75, 150]) {
      await until(`a pause of ${pause} ms`, () => clock.sleeps.length > 0 && clock.sleeps.at(-1) === pause && clock.pendingTimers() === 1);
      clock.advance(pause - 1);
      expect(clock.pendingTimers()).toBe(1);
      clock.advance(1);
    }
    await until('the re-list', () => f.relists === 1);
    expect(ranges.count - listsBefore).toBe(4);
    expect(clock.sleeps).toEqual([38, 75, 150]);
    expect(seen.snapshots.at(-1)).toEqual(['/p/a', '/p/b', '/p/c']);
    expect(watches.open).toBe(1);

    await inner.put('/p/d', '1');
    await until('the event of /p/d', () => seen.events.includes('+/p/d'));
    await f.close();
    expect(watches.open).toBe(0);
  });

  it('draws its pauses from the rng it is given', async () => {
    const { store, ranges, endAll } = faultyStore();
    const clock = new RecordingClock();
    const draws = [0, 1, 0.25];
    const { f } = follow(store, clock, '/p/', { next: () => draws.shift() ?? 0 });
    await f.start();
    ranges.failNext = 3;
    endAll();
    for (const pause of [25, 100, 125]) {
      await until(`a pause of ${pause} ms`, () => clock.pendingTimers() === 1 && clock.sleeps.at(-1) === pause);
      clock.advance(pause);
    }
    await until('the re-list', () => f.relists === 1);
    expect(clock.sleeps).toEqual([25, 100, 125]);
    await f.close();
  });

  it('re-lists once when the watches of several prefixes end together', async () => {
    const { store, inner, ranges, watches, endAll } = faultyStore();
    const clock = new RecordingClock();
    const { f, seen } = follow(store, clock, ['/p/', '/q/']);
    await f.start();
    expect(watches.open).toBe(2);
    const listsBefore = ranges.count;
    endAll();
    await until('the re-list', () => f.relists === 1);
    await inner.put('/q/x', '1');
    await until('the event of /q/x', () => seen.events.includes('+/q/x'));
    expect(f.relists).toBe(1);
    expect(ranges.count - listsBefore).toBe(1);
    expect(watches.open).toBe(2);
    expect(clock.sleeps).toEqual([]);
    await f.close();
  });

  it('lists again when a watch ends while a re-list is under way, instead of going deaf', async () => {
    const { store, inner, watches, endAll } = faultyStore();
    const clock = new RecordingClock();
    const { f, seen } = follow(store, clock, '/p/');
    await f.start();
    watches.endAtOnce = 1; // the watch the re-list makes ends before the re-list is over
    endAll();
    await until('two re-lists', () => f.relists === 2);
    expect(watches.open).toBe(1);
    await inner.put('/p/late', '1');
    await until('the event of /p/late', () => seen.events.includes('+/p/late'));
    await f.close();
  });

  it('closes the watches it made when another could not be made, then tries again after a pause', async () => {
    const { store, inner, watches, endAll } = faultyStore();
    const clock = new RecordingClock();
    const { f, seen } = follow(store, clock, ['/p/', '/q/']);
    await f.start();
    watches.failNextFor = '/q/';
    const madeBefore = watches.made;
    endAll();
    await until('a pause', () => clock.pendingTimers() === 1);
    expect(watches.open).toBe(0); // the /p/ watch of the failed attempt is not left behind
    clock.advance(clock.sleeps.at(-1)!);
    await until('the re-list', () => f.relists === 1);
    expect(watches.open).toBe(2);
    expect(watches.made - madeBefore).toBe(3);
    await inner.put('/p/x', '1');
    await until('the event of /p/x', () => seen.events.includes('+/p/x'));
    await f.close();
  });

  it('with onRelistPrefix, lists only the prefix whose watch ended, retrying with a pause; the other watch goes on', async () => {
    const { store, inner, ranges, watches, endAll } = faultyStore();
    const clock = new RecordingClock();
    const events: string[] = [];
    const relisted: [number, string[], number][] = [];
    await inner.put('/q/a', '1');
    const f = new Follower({
      store,
      clock,
      rng: { next: () => 0.5 },
      log,
      prefix: ['/p/', '/q/'],
      onSnapshot: () => undefined,
      onEvent: (kv, deleted) => events.push(`${deleted ? '-' : '+'}${kv.key}`),
      onRelistPrefix: (i, kvs, rev) => relisted.push([i, kvs.map((kv) => kv.key), rev]),
    });
    await f.start();
    const madeBefore = watches.made;
    ranges.failNext = 1;
    endAll((p) => p === '/q/');
    await until('a pause', () => clock.pendingTimers() === 1);
    // Meanwhile /p/ is still watched, and /q/ changes unseen.
    await inner.put('/p/x', '1');
    await inner.put('/q/b', '1');
    await until('the event of /p/x', () => events.includes('+/p/x'));
    clock.advance(clock.sleeps.at(-1)!);
    await until('/q/ listed again', () => f.prefixRelists === 1);
    expect(clock.sleeps).toEqual([38]); // 25–50 ms, drawn at 0.5
    expect(relisted).toEqual([[1, ['/q/a', '/q/b'], await inner.revision()]]);
    expect(f.relists).toBe(0);
    expect(watches.made - madeBefore).toBe(1);
    expect(watches.open).toBe(2);
    await inner.put('/q/c', '1');
    await until('the event of /q/c', () => events.includes('+/q/c'));
    expect(events).toEqual(['+/p/x', '+/q/c']);
    await f.close();
    expect(watches.open).toBe(0);
  });

  it('with onRelistPrefix, a watch that ends as it is made is listed again on its own, and no watch is left open after close', async () => {
    const { store, inner, watches } = faultyStore();
    const clock = new RecordingClock();
    const events: string[] = [];
    const relisted: number[] = [];
    watches.endAtOnce = 1; // the first watch made, /p/'s, ends before its handle is returned
    const f = new Follower({
      store,
      clock,
      log,
      prefix: ['/p/', '/q/'],
      onSnapshot: () => undefined,
      onEvent: (kv) => events.push(kv.key),
      onRelistPrefix: (i) => relisted.push(i),
    });
    await f.start();
    await until('/p/ listed again', () => f.prefixRelists === 1);
    expect(relisted).toEqual([0]);
    await inner.put('/p/x', '1');
    await inner.put('/q/y', '1');
    await until('both events', () => events.includes('/p/x') && events.includes('/q/y'));
    expect(watches.open).toBe(2);
    await f.close();
    expect(watches.open).toBe(0);
  });

  it('stops retrying once closed', async () => {
    const { store, ranges, watches, endAll } = faultyStore();
    const clock = new RecordingClock();
    const { f } = follow(store, clock, '/p/');
    await f.start();
    ranges.failNext = 100;
    endAll();
    await until('a pause', () => clock.pendingTimers() === 1);
    await f.close();
    const lists = ranges.count;
    clock.advance(10_000);
    await new Promise((r) => setTimeout(r, 20));
    expect(ranges.count).toBe(lists);
    expect(clock.pendingTimers()).toBe(0);
    expect(f.relists).toBe(0);
    expect(watches.open).toBe(0);
  });

  it('waits out a store that cannot answer its first list, then follows it; other errors fail the start', async () => {
    const { store, inner, ranges } = faultyStore();
    const clock = new RecordingClock();
    await inner.put('/p/a', '1');
    ranges.failNext = 3;
    const { f, seen } = follow(store, clock, '/p/');
    let started = false;
    const starting = f.start().then(() => (started = true));
    for (let i = 1; i <= 3; i++) {
      await until(`pause ${i}`, () => clock.sleeps.length === i && clock.pendingTimers() === 1);
      expect(started).toBe(false);
      clock.advance(clock.sleeps.at(-1)!);
    }
    await starting;
    expect(ranges.count).toBe(4);
    expect(seen.snapshots.at(-1)).toEqual(['/p/a']);
    await inner.put('/p/b', '2');
    await until('the event of /p/b', () => seen.events.includes('+/p/b'));
    await f.close();

    const bad = wrapStore(new MemoryStore(), { range: () => Promise.reject(new TarcilError('INVALID_ARGUMENT', 'bad prefix')) });
    const { f: g } = follow(bad, new RecordingClock(), '/p/');
    await expect(g.start()).rejects.toThrow('bad prefix');
  });
});
