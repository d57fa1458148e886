import { describe, expect, it } from 'vitest';
import { BlockState, MoveBudget, moveGainMs, moveWorthIt, nextBlocked, runtimeLoopConfig } from '../../src/monitor/runtime-loop.ts';

describe('the run-time loop rules', () => {
  const c = runtimeLoopConfig({ slowBelow: 0.5, recoverAbove: 0.6, movePauseMs: 1000, minGain: 0.2, movesPerSecond: 2 });

  it('blocks below the slow share and unblocks only at the recovery share', () => {
    expect(nextBlocked(false, 0.55, c)).toBe(false);
    expect(nextBlocked(false, 0.49, c)).toBe(true);
    expect(nextBlocked(true, 0.55, c)).toBe(true);
    expect(nextBlocked(true, 0.6, c)).toBe(false);
    expect(nextBlocked(true, 1, c)).toBe(false);
  });

  it('moves a task only when a restart elsewhere finishes it sooner by the minimum gain', () => {
    // 60 s of work left at half speed = 120 s; a restart of 100 s of work at full speed + 1 s = 101 s.
    expect(moveGainMs({ remaining: 60_000, rateNow: 0.5, work: 100_000, rateAfter: 1, pauseMs: 1000 })).toBe(19_000);
    // Saves 19 s of 120: less than a fifth, so not worth it.
    expect(moveWorthIt({ remaining: 60_000, rateNow: 0.5, work: 100_000, rateAfter: 1 }, c)).toBe(false);
    // Early on (90 s left at a quarter speed = 360 s) it is.
    expect(moveWorthIt({ remaining: 90_000, rateNow: 0.25, work: 100_000, rateAfter: 1 }, c)).toBe(true);
    // Almost done: never.
    expect(moveWorthIt({ remaining: 1000, rateNow: 0.25, work: 100_000, rateAfter: 1 }, c)).toBe(false);
    // A task that never ends (resident load) is not moved.
    expect(moveWorthIt({ remaining: Infinity, rateNow: 0.25, work: Infinity, rateAfter: 1 }, c)).toBe(false);
  });

  it('spends a cell-wide budget of moves per second, refilled over time', () => {
    const b = new MoveBudget(c, 0);
    expect(b.take(0)).toBe(true);
    expect(b.take(0)).toBe(true);
    expect(b.take(0)).toBe(false);
    expect(b.take(400)).toBe(false);
    expect(b.take(500)).toBe(true);
    // Never more than one second's worth saved up.
    expect([b.take(60_000), b.take(60_000), b.take(60_000)]).toEqual([true, true, false]);
  });

  it('lifts a block after its time limit; the same slow task does not block again, a new one does', () => {
    const b = new BlockState<string>({ slowBelow: 0.5, recoverAbove: 0.6, maxBlockMs: 1000 });
    expect(b.update(0, [['a', 0.3]])).toBe(true);
    expect(b.deadline()).toBe(1000);
    expect(b.update(500, [['a', 0.3]])).toBe(true);
    // Time is up: placements come back although `a` is still slow, and `a` alone does not block.
    expect(b.update(1000, [['a', 0.3]])).toBe(false);
    expect(b.deadline()).toBe(Infinity);
    expect(b.update(5000, [['a', 0.2]])).toBe(false);
    // Another task turning slow blocks again.
    expect(
      b.update(6000, [
        ['a', 0.2],
        ['b', 0.4],
      ]),
    ).toBe(true);
    expect(b.update(7000, [['a', 0.2]])).toBe(false);
    // Once `a` recovers (absent from the tasks below the recovery share), it may block again later.
    expect(b.update(8000, [])).toBe(false);
    expect(b.update(9000, [['a', 0.3]])).toBe(true);
  });

  it('refuses a bad configuration naming the field and the rule', () => {
    expect(() => runtimeLoopConfig({ slowBelow: 0 })).toThrow(/runtime.slowBelow.*\(0, 1\]/);
    expect(() => runtimeLoopConfig({ slowBelow: 0.7, recoverAbove: 0.6 })).toThrow(/runtime.recoverAbove.*at least slowBelow/);
    expect(() => runtimeLoopConfig({ movesPerSecond: -1 })).toThrow(/runtime.movesPerSecond/);
    expect(() => runtimeLoopConfig({ minGain: 1 })).toThrow(/runtime.minGain/);
  });
});
