/**
 * The short-task reserve (agent/short-reserve.ts): which jobs it holds back and when, the freed-RU
 * waiters that pass over a held job for a short one, the step sequence's wait and its reason, and
 * the option's rule.
 */
import { describe, expect, it } from 'vitest';
import { Attempt } from '../../src/agent/attempt.ts';
import { AttemptSteps } from '../../src/agent/attempt-steps.ts';
import { agentConfig, DEFAULT_AGENT_CONFIG } from '../../src/agent/config.ts';
import { FreedWaiters, type WaitClass } from '../../src/agent/freed-waiters.ts';
import { isLongClass, RESERVE_WHY, reserveHolds, type ReserveConfig } from '../../src/agent/short-reserve.ts';
import { RunTimes, type OrderedWaiter } from '../../src/agent/wait-order.ts';
import { RuIndex } from '../../src/sampling/ru-index.ts';
import { SeededRng } from '../../src/util/rng.ts';

const CFG: ReserveConfig = { shortReserve: 0.1, longFactor: 1, bypassAbove: 100 };

function runTimes(): RunTimes {
  const rt = new RunTimes();
  // Mean over every task: (4 × 1 s + 60 s) / 5 = 12.8 s.
  for (let i = 0; i < 4; i++) rt.observe('spark', 1000);
  rt.observe('memcached', 60_000);
  return rt;
}

describe('the short-task reserve', () => {
  it('a class is long when its expected run time is above longFactor × the mean over every task', () => {
    const rt = runTimes();
    expect(isLongClass(rt, 'memcached', 1)).toBe(true);
    expect(isLongClass(rt, 'spark', 1)).toBe(false);
    // 60 s is not above 5 × 12.8 s.
    expect(isLongClass(rt, 'memcached', 5)).toBe(false);
    // An unseen class takes the mean of all: not above it.
    expect(isLongClass(rt, 'hadoop', 1)).toBe(false);
    expect(isLongClass(new RunTimes(), 'memcached', 1)).toBe(false);
    // One class alone is never long, whatever the rounding of its means or its latest ends.
    const one = new RunTimes(3);
    for (const ms of [301.7, 305.3, 2500.9, 2600.1, 2700.3]) one.observe('spark', ms);
    expect(one.expected('spark')).toBeGreaterThan(one.overall() as number);
    expect(isLongClass(one, 'spark', 1)).toBe(false);
  });

  it('holds a long job while the free RUs are at or below the share, never a short one, a bypassing one, or with nothing free', () => {
    const rt = runTimes();
    const cell = (available: number) => ({ available, total: 100 });
    expect(reserveHolds(CFG, rt, cell(10), 'memcached', 50)).toBe(true);
    expect(reserveHolds(CFG, rt, cell(1), 'memcached', 50)).toBe(true);
    expect(reserveHolds(CFG, rt, cell(11), 'memcached', 50)).toBe(false);
    expect(reserveHolds(CFG, rt, cell(0), 'memcached', 50)).toBe(false);
    expect(reserveHolds(CFG, rt, cell(5), 'spark', 50)).toBe(false);
    expect(reserveHolds(CFG, rt, cell(5), 'memcached', 101)).toBe(false);
    expect(reserveHolds(CFG, rt, cell(5), undefined, 50)).toBe(false);
    expect(reserveHolds({ ...CFG, shortReserve: 0 }, rt, cell(5), 'memcached', 50)).toBe(false);
  });

  it('a freed RU passes over a held waiter for a short one behind it, and wakes nobody when only held ones wait', () => {
    const server = new RuIndex().upsertServer({ id: 's0', platform: 'p', rack: 'r0', rus: 4, speed: 1, attributes: {} });
    const ANY: WaitClass = { key: 'any', canUse: () => true };
    let held = true;
    const w = new FreedWaiters(undefined, { order: 'arrival', holds: (x: OrderedWaiter) => held && x.runClass === 'memcached' });
    const woken: string[] = [];
    const add = (name: string, runClass: string) => w.add(ANY, { priority: 50, seq: w.nextSeq(), runClass, wake: () => woken.push(name) });
    add('long', 'memcached');
    w.freed(server, 0);
    expect(woken).toEqual([]);
    add('short', 'spark');
    w.freed(server, 1);
    // By arrival the long job is first; the reserve gives the RU to the short one.
    expect(woken).toEqual(['short']);
    held = false;
    w.freed(server, 2);
    expect(woken).toEqual(['short', 'long']);
  });

  it('under the ratio order, a freed RU goes past a held class to a short one, without looking behind the held head', () => {
    const server = new RuIndex().upsertServer({ id: 's0', platform: 'p', rack: 'r0', rus: 4, speed: 1, attributes: {} });
    const ANY: WaitClass = { key: 'any', canUse: () => true };
    let asked = 0;
    const w = new FreedWaiters(undefined, {
      order: 'ratio',
      holds: (x: OrderedWaiter) => {
        asked++;
        return x.runClass === 'memcached';
      },
    });
    const woken: string[] = [];
    const add = (name: string, runClass: string) => w.add(ANY, { priority: 50, seq: w.nextSeq(), since: 0, runClass, wake: () => woken.push(name) });
    for (let i = 0; i < 50; i++) add(`long-${i}`, 'memcached');
    add('short', 'spark');
    w.freed(server, 0);
    expect(woken).toEqual(['short']);
    // The long queue's head and the short one's: not the 49 behind the head.
    expect(asked).toBeLessThanOrEqual(3);
    w.freed(server, 1);
    expect(woken).toEqual(['short']);
  });

  it('a held request waits for capacity with the reserve as its reason, then goes on to admission and a decision', () => {
    const steps = new AttemptSteps(new Attempt(DEFAULT_AGENT_CONFIG, new SeededRng(1), 10_000), { tasks: 2, perTxn: 42, gang: false });
    expect(steps.start()).toMatchObject({ kind: 'fair' });
    const wait = steps.next({ kind: 'fair', yield: true, reserve: true });
    expect(wait).toMatchObject({ kind: 'wait', for: 'fair', why: RESERVE_WHY, need: 2 });
    expect(steps.next({ kind: 'waited', woken: false })).toMatchObject({ kind: 'fair' });
    expect(steps.next({ kind: 'fair', yield: false })).toMatchObject({ kind: 'admit' });
  });

  it('is on by default, the same option live and in the simulator, and refuses a share outside [0, 1)', () => {
    expect(DEFAULT_AGENT_CONFIG.shortReserve).toBeGreaterThan(0);
    expect(agentConfig({ shortReserve: 0 }).shortReserve).toBe(0);
    expect(() => agentConfig({ shortReserve: 1 })).toThrow(/agent\.shortReserve.*\[0, 1\)/);
    expect(() => agentConfig({ longFactor: 0 })).toThrow(/agent\.longFactor/);
  });
});
