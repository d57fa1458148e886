import { describe, expect, it } from 'vitest';
import { NodeLoad, type NodeLoadHost } from '../../src/monitor/node-load.ts';
import type { Run } from '../../src/monitor/run.ts';
import { Keys } from '../../src/state/keys.ts';
import type { PlacedRuRecord } from '../../src/state/records.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { ManualClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';

/** A node of 4 RUs; the slowdown model counts how often it is asked. */
function setup(
  rate = 1,
  block?: boolean,
): { load: NodeLoad; rus: Map<number, { rec: PlacedRuRecord | undefined; rev: number }>; running: Map<number, Run>; asked: () => number; slowdowns: number[] } {
  let asked = 0;
  const slowdowns: number[] = [];
  const host: NodeLoadHost = {
    store: {} as ClusterStore,
    keys: new Keys('/t/'),
    clock: new ManualClock(0),
    executor: { measuresRate: true } as NodeLoadHost['executor'],
    loadThreshold: 0.5,
    slowdown: (_own, sum) => {
      asked++;
      return 1 + (sum[0] as number) / 100;
    },
    usableLeaseId: () => undefined,
    track: () => undefined,
    ...(block !== undefined ? { block } : {}),
  };
  const log = createLogger('test', 'silent');
  const load = new NodeLoad(host, { id: 's1', rus: 4 }, () => log);
  const rus = new Map<number, { rec: PlacedRuRecord | undefined; rev: number }>();
  for (let i = 0; i < 4; i++) rus.set(i, { rec: undefined, rev: 0 });
  const running = new Map<number, Run>();
  const place = (i: number, rev: number, started: boolean): void => {
    const rec = {
      state: 'busy',
      job: 'j',
      task: i,
      caused: [10 * (i + 1), 0, 0, 0, 0, 0, 0, 0, 0, 0],
      priority: 0,
      commitId: `c${rev}`,
    } as unknown as PlacedRuRecord;
    rus.set(i, { rec, rev });
    running.set(i, {
      job: 'j',
      task: i,
      commitId: rec.commitId,
      ruIndex: i,
      rec,
      placedRevision: rev,
      rev,
      startedAt: 0,
      handle: started ? { rate: () => rate, setSlowdown: (s: number) => void slowdowns.push(s), kill: () => Promise.resolve() } : undefined,
      stopped: false,
      reported: false,
      obs: undefined,
    });
  };
  place(0, 5, true);
  place(1, 6, true);
  return { load, rus, running, asked: () => asked, slowdowns };
}

describe("a node's load check", () => {
  it('skips a look whose occupants and runs are those of the last one', () => {
    const t = setup();
    t.load.check(t.rus.values(), t.running);
    expect(t.asked()).toBe(2);
    expect(t.slowdowns).toEqual([1.3, 1.3]);
    t.load.check(t.rus.values(), t.running);
    expect(t.asked()).toBe(2);
  });

  const changes: [string, (t: ReturnType<typeof setup>) => void, number][] = [
    ['an RU taken by a new task (a new revision)', (t) => t.rus.set(2, { rec: { ...(t.rus.get(1)?.rec as PlacedRuRecord), task: 2 }, rev: 9 }), 2],
    ['an RU freed', (t) => t.rus.set(1, { rec: undefined, rev: 10 }), 2],
    ['a run ended', (t) => t.running.delete(1), 1],
    [
      'a run started (its handle arrived)',
      (t) => {
        const r = t.running.get(1) as Run;
        t.running.set(1, { ...r, handle: { rate: () => 1, setSlowdown: () => undefined, kill: () => Promise.resolve() } });
        t.running.set(0, { ...(t.running.get(0) as Run), handle: undefined });
      },
      1,
    ],
  ];
  it.each(changes)('looks again after %s', (_name, change, asks) => {
    const t = setup();
    t.load.check(t.rus.values(), t.running);
    change(t);
    t.load.check(t.rus.values(), t.running);
    expect(t.asked()).toBe(2 + asks);
  });

  it("looks when forced (a real monitor's periodic look) and while the server is blocked", () => {
    const t = setup();
    t.load.check(t.rus.values(), t.running);
    t.load.check(t.rus.values(), t.running, true);
    expect(t.asked()).toBe(4);
    const slow = setup(0.2, true);
    expect(slow.load.check(slow.rus.values(), slow.running)).toBe(true);
    expect(slow.load.blocked).toBe(true);
    slow.load.check(slow.rus.values(), slow.running);
    expect(slow.asked()).toBe(4);
  });

  it('with blocks off, reports the slow tasks as with them on but never blocks the server', () => {
    const on = setup(0.2, true);
    const off = setup(0.2, false);
    for (const t of [on, off]) {
      for (let i = 0; i < 3; i++) t.load.check(t.rus.values(), t.running, true);
      // Each task runs at 1/1.3 of its rate amid its neighbour here, and the executor says 0.2: slow.
      expect([...t.running.values()].map((r) => r.reported)).toEqual([true, true]);
    }
    expect(on.load.blocked).toBe(true);
    expect(off.load.blocked).toBe(false);
  });
});
