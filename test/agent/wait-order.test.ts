/**
 * The order of jobs waiting for a freed RU (agent/wait-order.ts) and the live waiters that keep
 * it (agent/freed-waiters.ts): arrival by default, response ratio as an option, priority first
 * either way; the run times per class that the ratio reads.
 */
import { describe, expect, it } from 'vitest';
import { FreedWaiters, type WaitClass } from '../../src/agent/freed-waiters.ts';
import { responseRatio, RunTimes, waiterBefore } from '../../src/agent/wait-order.ts';
import { agentConfig } from '../../src/agent/config.ts';
import { RuIndex, type ServerState } from '../../src/sampling/ru-index.ts';

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
  const long = { priority: 100, seq: 1, since: 0, expectedMs: 60_000 };
  const short = { priority: 100, seq: 2, since: 5000, expectedMs: 1000 };

  it('ratio: (waited + expected) / expected; 1 with nothing expected', () => {
    expect(responseRatio(long, 30_000)).toBe(1.5);
    expect(responseRatio(short, 7000)).toBe(3);
    expect(responseRatio({ since: 0 }, 7000)).toBe(1);
  });

  it('by arrival, the earlier first; by ratio, the higher ratio first, so the short job passes the long one', () => {
    expect(waiterBefore(long, short, 'arrival', 7000)).toBe(true);
    expect(waiterBefore(short, long, 'ratio', 7000)).toBe(true);
    // Priority goes first either way.
    expect(waiterBefore({ ...long, priority: 200 }, short, 'ratio', 7000)).toBe(true);
    // A long job that has waited long comes before short jobs that arrive then: it is not passed over for ever.
    expect(waiterBefore(long, { ...short, since: 199_000 }, 'ratio', 200_000)).toBe(true);
    // Equal ratios: arrival.
    expect(waiterBefore({ ...short, seq: 3 }, short, 'ratio', 7000)).toBe(false);
  });

  it('is an agent option, arrival by default, refused otherwise naming the field', () => {
    expect(agentConfig().waitOrder).toBe('arrival');
    expect(agentConfig({ waitOrder: 'ratio' }).waitOrder).toBe('ratio');
    expect(() => agentConfig({ waitOrder: 'shortest' as never })).toThrow(/agent\.waitOrder.*arrival or ratio/);
  });
});

describe('live waiters for a freed RU', () => {
  /** A long job waits from 0; two short ones from `shortSince`; RUs free at `now`. */
  function wake(order: 'arrival' | 'ratio' | undefined, now: number, shortSince = 5000): string[] {
    let t = 0;
    const w = new FreedWaiters(undefined, { ...(order ? { order } : {}), now: () => t });
    const woken: string[] = [];
    w.add(ANY, { priority: 100, seq: w.nextSeq(), since: 0, expectedMs: 60_000, runClass: 'long', wake: () => woken.push('long') });
    w.add(ANY, { priority: 100, seq: w.nextSeq(), since: shortSince, expectedMs: 1000, runClass: 'short', wake: () => woken.push('short') });
    w.add(ANY, { priority: 100, seq: w.nextSeq(), since: shortSince, expectedMs: 1000, runClass: 'short', wake: () => woken.push('short, later') });
    t = now;
    const s = server();
    for (let i = 0; i < 3; i++) w.freed(s, 0);
    return woken;
  }

  it('wake in arrival order by default', () => {
    expect(wake(undefined, 7000)).toEqual(['long', 'short', 'short, later']);
  });

  it('wake by response ratio with the ratio order; the short jobs keep their arrival order among themselves', () => {
    expect(wake('ratio', 7000)).toEqual(['short', 'short, later', 'long']);
    // A long job that has waited 5 minutes (ratio 6) goes before short ones that waited a second (ratio 2).
    expect(wake('ratio', 300_000, 299_000)).toEqual(['long', 'short', 'short, later']);
  });
});
