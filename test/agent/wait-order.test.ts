/**
 * The order of jobs waiting for a freed RU (agent/wait-order.ts) and the live waiters that keep
 * it (agent/freed-waiters.ts): response ratio by default, arrival as an option, priority first
 * either way; the run times per class that the ratio reads; the same order in the live waiters'
 * queues and in the simulator's scan.
 */
import { describe, expect, it } from 'vitest';
import { FreedWaiters, type WaitClass } from '../../src/agent/freed-waiters.ts';
import {
  firstAcross,
  keysBefore,
  ratioOf,
  responseRatio,
  RunTimes,
  waiterBefore,
  type Expected,
  type OrderedWaiter,
  type WaitOrder,
} from '../../src/agent/wait-order.ts';
import { agentConfig } from '../../src/agent/config.ts';
import { RuIndex, type ServerState } from '../../src/sampling/ru-index.ts';
import { SeededRng } from '../../src/util/rng.ts';

const ANY: WaitClass = { key: 'any', canUse: () => true };

function server(): ServerState {
  return new RuIndex().upsertServer({ id: 's0', platform: 'p', rack: 'r0', rus: 4, speed: 1, attributes: {} });
}

describe('run times per class', () => {
  it('are the mean of the ends seen, per class; a class with none takes the mean of all; none at all: undefined', () => {
    const rt = new RunTimes();
    expect(rt.expected('spark')).toBeUndefined();
    rt.observe('spark', 2000);
    rt.observe('spark', 4000);
    rt.observe('memcached', 60_000);
    expect(rt.expected('spark')).toBe(3000);
    expect(rt.expected('memcached')).toBe(60_000);
    expect(rt.expected('hadoop')).toBe(22_000);
    // Not a run time: ignored.
    rt.observe('spark', Number.NaN);
    rt.observe('spark', -5);
    expect(rt.expected('spark')).toBe(3000);
  });

  it('follow a class whose tasks change: a moving mean over the last `window` ends', () => {
    const rt = new RunTimes(10);
    for (let i = 0; i < 10; i++) rt.observe('c', 1000);
    for (let i = 0; i < 30; i++) rt.observe('c', 9000);
    // A cumulative mean would be 7,000; the moving one is within 5% of the new run time.
    expect(rt.expected('c') as number).toBeGreaterThan(8550);
  });
});

describe('the wait order', () => {
  const run = new Map([
    ['long', 60_000],
    ['short', 1000],
  ]);
  const expected = (c: string): number | undefined => run.get(c);
  const long = { priority: 100, seq: 1, since: 0, runClass: 'long' };
  const short = { priority: 100, seq: 2, since: 5000, runClass: 'short' };

  it('ratio: (waited + expected) / expected; 1 with nothing expected', () => {
    expect(responseRatio(0, 60_000, 30_000)).toBe(1.5);
    expect(responseRatio(5000, 1000, 7000)).toBe(3);
    expect(responseRatio(0, undefined, 7000)).toBe(1);
  });

  it('by arrival, the earlier first; by ratio, the higher ratio first, so the short job passes the long one', () => {
    expect(waiterBefore(long, short, 'arrival', 7000, expected)).toBe(true);
    expect(waiterBefore(short, long, 'ratio', 7000, expected)).toBe(true);
    // Priority goes first either way.
    expect(waiterBefore({ ...long, priority: 200 }, short, 'ratio', 7000, expected)).toBe(true);
    // A long job that has waited long comes before short jobs that arrive then: it is not passed over for ever.
    expect(waiterBefore(long, { ...short, since: 199_000 }, 'ratio', 200_000, expected)).toBe(true);
    // Equal ratios: arrival.
    expect(waiterBefore({ ...short, seq: 3 }, short, 'ratio', 7000, expected)).toBe(false);
    // No run time known for either class: arrival.
    expect(waiterBefore(short, long, 'ratio', 7000, () => undefined)).toBe(false);
  });

  it('is an agent option, ratio by default, refused otherwise naming the field', () => {
    expect(agentConfig().waitOrder).toBe('ratio');
    expect(agentConfig({ waitOrder: 'arrival' }).waitOrder).toBe('arrival');
    expect(() => agentConfig({ waitOrder: 'shortest' as never })).toThrow(/agent\.waitOrder.*arrival or ratio/);
  });
});

describe('live waiters for a freed RU', () => {
  /** A long job waits from 0; two short ones from `shortSince`; RUs free at `now`. */
  function wake(order: 'arrival' | 'ratio' | undefined, now: number, shortSince = 5000): string[] {
    let t = 0;
    const rt = new RunTimes();
    rt.observe('long', 60_000);
    rt.observe('short', 1000);
    const w = new FreedWaiters(undefined, { ...(order ? { order } : {}), now: () => t, expected: (c) => rt.expected(c) });
    const woken: string[] = [];
    w.add(ANY, { priority: 100, seq: w.nextSeq(), since: 0, runClass: 'long', wake: () => woken.push('long') });
    w.add(ANY, { priority: 100, seq: w.nextSeq(), since: shortSince, runClass: 'short', wake: () => woken.push('short') });
    w.add(ANY, { priority: 100, seq: w.nextSeq(), since: shortSince, runClass: 'short', wake: () => woken.push('short, later') });
    t = now;
    const s = server();
    for (let i = 0; i < 3; i++) w.freed(s, 0);
    return woken;
  }

  it('wake in arrival order with the arrival order', () => {
    expect(wake('arrival', 7000)).toEqual(['long', 'short', 'short, later']);
  });

  it('wake by response ratio by default; the short jobs keep their arrival order among themselves', () => {
    expect(wake(undefined, 7000)).toEqual(['short', 'short, later', 'long']);
    // A long job that has waited 5 minutes (ratio 6) goes before short ones that waited a second (ratio 2).
    expect(wake('ratio', 300_000, 299_000)).toEqual(['long', 'short', 'short, later']);
  });
});

/** The reference: the first of `items` in the order that `fits`, by a scan of every one; -1 if none fits. */
function firstInOrder<T extends OrderedWaiter>(items: readonly T[], fits: (t: T) => boolean, order: WaitOrder, now: number, expected: Expected): number {
  let best = -1;
  for (let i = 0; i < items.length; i++) {
    const w = items[i] as T;
    if (!fits(w)) continue;
    const b = items[best];
    if (!b || keysBefore(w.priority, ratioOf(w, order, expected, now), w.seq, b.priority, ratioOf(b, order, expected, now), b.seq)) best = i;
  }
  return best;
}

/**
 * The live agents keep their waiters in queues per class and compare the heads (FreedWaiters); the
 * simulator keeps lists per workload class and compares the first that fits of each (firstAcross).
 * Both must wake, for every freed RU, the waiter that a scan of every waiter in the order finds
 * (firstInOrder), whatever the mix of priorities, classes, arrival times and run times learned
 * while they wait.
 */
describe('one order in both drivers', () => {
  const CLASSES: WaitClass[] = [
    { key: 'any', canUse: () => true },
    { key: 'even', canUse: (s) => Number(s.id.slice(1)) % 2 === 0 },
    { key: 'low', canUse: (s) => Number(s.id.slice(1)) < 2 },
  ];
  const RUN_CLASSES = ['spark', 'memcached', 'hadoop', 'new'];
  const index = new RuIndex();
  const servers = Array.from({ length: 4 }, (_, i) => index.upsertServer({ id: `s${i}`, platform: 'p', rack: 'r0', rus: 2, speed: 1, attributes: {} }));

  for (const order of ['ratio', 'arrival'] as const) {
    it(`${order}: the live queues and the simulator's lists wake what a scan of every waiter finds, for 40 random mixes`, () => {
      for (let seed = 1; seed <= 40; seed++) {
        const rng = new SeededRng(seed);
        let t = 0;
        const rt = new RunTimes(5);
        const expected = (c: string): number | undefined => rt.expected(c);
        const live = new FreedWaiters(undefined, { order, now: () => t, expected });
        interface Entry extends OrderedWaiter {
          id: number;
          cls: WaitClass;
        }
        const all: Entry[] = [];
        const livewoken: number[] = [];
        const scanwoken: number[] = [];
        for (let step = 0; step < 60; step++) {
          t += rng.int(3000);
          const roll = rng.next();
          if (roll < 0.45) {
            const e: Entry = {
              id: step,
              priority: [100, 100, 200][rng.int(3)] as number,
              seq: live.nextSeq(),
              since: t,
              runClass: RUN_CLASSES[rng.int(4)],
              cls: CLASSES[rng.int(3)] as WaitClass,
            };
            all.push(e);
            live.add(e.cls, { ...e, wake: () => livewoken.push(e.id) });
          } else if (roll < 0.65) {
            // A task ends: the run times move while jobs wait.
            rt.observe(RUN_CLASSES[rng.int(3)] as string, 500 + rng.int(60_000));
          } else {
            const srv = servers[rng.int(servers.length)] as ServerState;
            const fits = (e: Entry): boolean => e.cls.canUse(srv, 0);
            const k = firstInOrder(all, fits, order, t, expected);
            // The simulator's lists: one per workload class under the ratio order, each in priority then arrival order.
            const lists = new Map<string, { list: Entry[] }>();
            for (const e of [...all].sort((a, b) => b.priority - a.priority || a.seq - b.seq)) {
              const key = order === 'ratio' ? (e.runClass as string) : '';
              const l = lists.get(key) ?? { list: [] };
              lists.set(key, l);
              l.list.push(e);
            }
            const across = firstAcross(lists.values(), (e) => e, fits, order, t, expected);
            expect(across ? across.of.list[across.k] : undefined).toBe(k >= 0 ? all[k] : undefined);
            if (k >= 0) scanwoken.push((all.splice(k, 1)[0] as Entry).id);
            live.freed(srv, 0);
          }
        }
        expect({ seed, woken: livewoken }).toEqual({ seed, woken: scanwoken });
        expect(live.size).toBe(all.length);
      }
    });
  }
});

describe("the simulator's lists with fair share", () => {
  it('go to the list of the lowest usage that has a waiter that fits, then by the order', () => {
    const expected = (c: string): number | undefined => ({ short: 1000, long: 60_000 })[c];
    const w = (seq: number, runClass: string, since = 0): OrderedWaiter => ({ priority: 100, seq, since, runClass });
    const lists = [
      { ns: 'big', list: [w(1, 'short')] },
      { ns: 'small', list: [w(2, 'long'), w(3, 'long')] },
      { ns: 'small', list: [w(4, 'short', 5000)] },
    ];
    const usage = new Map([
      ['big', 2],
      ['small', 1],
    ]);
    const pick = (fits: (x: OrderedWaiter) => boolean): number | undefined => {
      const f = firstAcross(
        lists,
        (x) => x,
        fits,
        'ratio',
        7000,
        expected,
        (l) => usage.get(l.ns) as number,
      );
      return f ? f.of.list[f.k]?.seq : undefined;
    };
    // The small namespace first; in it the short job (ratio 3) before the long ones (about 1.1).
    expect(pick(() => true)).toBe(4);
    // Its short job cannot use the RU: its first long job that can.
    expect(pick((x) => x.seq !== 4 && x.seq !== 2)).toBe(3);
    // None of the small namespace can: the big one's.
    expect(pick((x) => x.seq === 1)).toBe(1);
    expect(pick(() => false)).toBeUndefined();
  });
});
